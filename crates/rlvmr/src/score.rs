//! `rlvmr score`: JSON lines in, the same episodes with scores out.

use std::io::{self, Write};
use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result};
use rlvmr_core::{EpisodeIn, ScoreConfig};
use serde_json::{Map, Value};

pub fn load_config(path: Option<&Path>, algo: Option<&str>) -> Result<ScoreConfig> {
    let mut config: ScoreConfig = match path {
        Some(p) => {
            let text = std::fs::read_to_string(p).with_context(|| format!("cannot read config {}", p.display()))?;
            toml::from_str(&text).with_context(|| format!("bad config {}", p.display()))?
        }
        None => ScoreConfig::default(),
    };
    if let Some(a) = algo {
        config.advantage.algo = serde_json::from_value(Value::String(a.to_string()))
            .map_err(|_| anyhow::anyhow!("unknown --algo '{a}': use grpo_mr, grpo, gigpo or rloo"))?;
    }
    config.validate().map_err(|e| anyhow::anyhow!("bad config: {e}"))?;
    Ok(config)
}

enum Line {
    Episode(Map<String, Value>, EpisodeIn),
    Failed(String),
}

fn read_line(text: &str) -> Line {
    let value: Value = match serde_json::from_str(text) {
        Ok(v) => v,
        Err(e) => return Line::Failed(format!("malformed JSON: {e}")),
    };
    let Value::Object(map) = value else { return Line::Failed("expected a JSON object".into()) };
    match serde_json::from_value::<EpisodeIn>(Value::Object(map.clone())) {
        Ok(e) => Line::Episode(map, e),
        Err(e) => Line::Failed(format!("not an episode: {e}")),
    }
}

/// Writes each input episode back with its scores merged in.
fn merge(mut original: Map<String, Value>, scored: &rlvmr_core::EpisodeScore) -> Result<Value> {
    if let Some(Value::Array(steps)) = original.get_mut("steps") {
        for (step, score) in steps.iter_mut().zip(&scored.steps) {
            if let (Value::Object(step), Value::Object(add)) = (step, serde_json::to_value(score)?) {
                step.extend(add);
            }
        }
    }
    original.insert("metrics".into(), serde_json::to_value(&scored.metrics)?);
    Ok(Value::Object(original))
}

pub fn run(algo: Option<&str>, config: Option<&Path>) -> Result<ExitCode> {
    let config = load_config(config, algo)?;
    let mut lines: Vec<(usize, Line)> = Vec::new();
    crate::jsonl::for_each_line(io::stdin().lock(), |n, line| {
        lines.push((n, line.map_or_else(Line::Failed, read_line)));
        Ok(())
    })?;
    let episodes: Vec<EpisodeIn> = lines.iter().filter_map(|(_, l)| if let Line::Episode(_, e) = l { Some(e.clone()) } else { None }).collect();
    let scored = rlvmr_core::score(&config, &episodes).map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut scored = scored.into_iter();
    let mut out = io::BufWriter::new(io::stdout().lock());
    let mut failed = 0;
    for (n, line) in lines {
        let value = match line {
            Line::Episode(original, _) => merge(original, &scored.next().context("internal: fewer scores than episodes")?)?,
            Line::Failed(error) => {
                failed += 1;
                eprintln!("line {n}: {error}");
                serde_json::json!({"line": n, "error": error})
            }
        };
        serde_json::to_writer(&mut out, &value)?;
        out.write_all(b"\n")?;
    }
    out.flush()?;
    if failed > 0 {
        eprintln!("{failed} lines could not be scored");
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}
