//! `rlvmr score`: JSON lines in, the same episodes with scores out.

use std::io::{self, Write};
use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result};
use rlvmr_core::ScoreConfig;
use serde_json::Value;

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

pub fn run(algo: Option<&str>, config: Option<&Path>) -> Result<ExitCode> {
    let config = load_config(config, algo)?;
    // (line number, the episode, or why the line is not one)
    let mut lines: Vec<(usize, Result<Value, String>)> = Vec::new();
    crate::jsonl::for_each_line(io::stdin().lock(), |n, line| {
        let value = line.and_then(|text| serde_json::from_str::<Value>(text).map_err(|e| format!("malformed JSON: {e}")));
        lines.push((n, value));
        Ok(())
    })?;
    let values: Vec<Value> = lines.iter().filter_map(|(_, v)| v.as_ref().ok().cloned()).collect();
    let mut scored = rlvmr_core::score_json(&config, values).map_err(|e| anyhow::anyhow!("{e}"))?.into_iter();
    let mut out = io::BufWriter::new(io::stdout().lock());
    let mut failed = 0;
    for (n, line) in lines {
        let result = match line {
            Ok(_) => scored.next().context("internal: fewer scores than episodes")?,
            Err(error) => Err(error),
        };
        let value = result.unwrap_or_else(|error| {
            failed += 1;
            eprintln!("line {n}: {error}");
            serde_json::json!({"line": n, "error": error})
        });
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
