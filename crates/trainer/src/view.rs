//! `rlvmr view`: one self-contained HTML page of episodes from any episodes file the project
//! writes (evaluation and cold-start `trajectories.jsonl`, `rlvmr train`'s `eval/*.jsonl` and
//! `rollouts/*.jsonl.gz`, `rlvmr score` input or output). Episodes are reduced to what the
//! page shows (token ids and log-probs are dropped), fields a file lacks are derived where
//! the core can (tag, action and validity from the raw output), and the data is embedded as
//! JSON that cannot close its script element. The page's script renders the list a page at
//! a time and an episode when it is opened, and puts every text from an episode into the DOM
//! as text, never as markup.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use rlvmr_core::metrics::repeated_pairs;
use rlvmr_core::{parse_output, OutputStyle, Validity};
use serde::Serialize;
use serde_json::Value;

use crate::error::{Result, TrainerError};

/// One step as the page shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ViewStep {
    pub prompt: Option<String>,
    pub output: String,
    pub tag: Option<String>,
    pub valid: bool,
    pub action: String,
    pub admissible: Option<bool>,
    pub observation: String,
    /// What the last step's action led to (earlier ones show as the next step's observation).
    pub next_observation: Option<String>,
    pub reward: Option<f64>,
    pub mr_reward: Option<f64>,
    pub advantage: Option<f64>,
    pub mistake: bool,
}

/// One episode as the page shows it, with what the filters read.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ViewEpisode {
    pub uid: String,
    pub game: String,
    pub task: String,
    pub task_type: String,
    pub won: bool,
    pub error: Option<String>,
    pub steps: Vec<ViewStep>,
    /// Steps per tag name (`none` for a step without a valid tag).
    pub tags: std::collections::BTreeMap<String, usize>,
    pub invalid_steps: usize,
    pub inadmissible_steps: usize,
    /// Steps whose (observation, action) pair came before (the §7 repetitive rate's count).
    pub repeated_steps: usize,
}

/// The episodes of one file.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ViewSource {
    pub name: String,
    pub episodes: Vec<ViewEpisode>,
}

/// Files in a run directory that hold episodes: JSON lines except metrics and SFT samples.
fn episode_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut found = Vec::new();
    let mut stack = vec![(dir.to_path_buf(), 0)];
    while let Some((folder, depth)) = stack.pop() {
        let entries = std::fs::read_dir(&folder).map_err(|e| TrainerError::io(&folder, e))?;
        for entry in entries {
            let path = entry.map_err(|e| TrainerError::io(&folder, e))?.path();
            let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            if path.is_dir() {
                // checkpoints/ and final/ hold models, plots/ pictures.
                if depth < 2 && !["checkpoints", "final", "plots"].contains(&name.as_str()) {
                    stack.push((path, depth + 1));
                }
            } else if (name.ends_with(".jsonl") || name.ends_with(".jsonl.gz"))
                && !name.starts_with("metrics")
                && !name.starts_with("sft")
            {
                found.push(path);
            }
        }
    }
    found.sort();
    Ok(found)
}

/// Every episodes file named by `paths` (files as they are, run directories searched).
pub fn sources_of(paths: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for path in paths {
        if path.is_dir() {
            let found = episode_files(path)?;
            if found.is_empty() {
                return Err(TrainerError::Invalid(format!(
                    "{}: no episodes file (trajectories.jsonl, eval/*.jsonl, rollouts/*.jsonl.gz) in this folder",
                    path.display()
                )));
            }
            files.extend(found);
        } else if path.is_file() {
            files.push(path.clone());
        } else {
            return Err(TrainerError::Invalid(format!("{}: no such file or folder", path.display())));
        }
    }
    Ok(files)
}

/// Reads one episodes file (`.gz` decompressed). A line that is not an episode is an error
/// naming the file and line; `with_prompts = false` leaves the prompts out (smaller pages).
pub fn read_source(path: &Path, with_prompts: bool) -> Result<ViewSource> {
    let file = std::fs::File::open(path).map_err(|e| TrainerError::io(path, e))?;
    let reader: Box<dyn Read> = if path.extension().is_some_and(|e| e == "gz") {
        Box::new(flate2::read::MultiGzDecoder::new(file))
    } else {
        Box::new(file)
    };
    let mut episodes = Vec::new();
    for (i, line) in BufReader::new(reader).lines().enumerate() {
        let bad = |message: String| TrainerError::Line {
            path: path.to_path_buf(),
            line: i + 1,
            message,
        };
        let line = line.map_err(|e| bad(format!("cannot read: {e}")))?;
        if line.trim().is_empty() {
            continue;
        }
        let value: Value = serde_json::from_str(&line).map_err(|e| bad(format!("not JSON: {e}")))?;
        episodes.push(episode_of(&value, with_prompts).map_err(bad)?);
    }
    Ok(ViewSource {
        name: path.display().to_string(),
        episodes,
    })
}

fn text(value: &Value, key: &str) -> Option<String> {
    value.get(key).and_then(Value::as_str).map(str::to_string)
}

fn number(value: &Value, key: &str) -> Option<f64> {
    value.get(key).and_then(Value::as_f64)
}

/// An episode line of any of the project's schemas.
pub fn episode_of(value: &Value, with_prompts: bool) -> std::result::Result<ViewEpisode, String> {
    let Some(steps) = value.get("steps").and_then(Value::as_array) else {
        return Err(match value.get("error") {
            Some(e) => format!("an error line, not an episode: {e}"),
            None => "not an episode: no \"steps\" list".into(),
        });
    };
    let mut steps = steps
        .iter()
        .enumerate()
        .map(|(i, s)| step_of(s, with_prompts).map_err(|e| format!("step {i}: {e}")))
        .collect::<std::result::Result<Vec<_>, _>>()?;
    // A step's next observation is the next step's observation: only the last one is kept.
    let last = steps.len().saturating_sub(1);
    for step in &mut steps[..last] {
        step.next_observation = None;
    }
    let mut tags = std::collections::BTreeMap::new();
    for s in &steps {
        *tags.entry(s.tag.clone().unwrap_or_else(|| "none".into())).or_insert(0) += 1;
    }
    let repeated_steps = repeated_pairs(steps.iter().map(|s| (s.observation.as_str(), s.action.as_str())));
    Ok(ViewEpisode {
        uid: text(value, "uid").unwrap_or_default(),
        game: text(value, "game").unwrap_or_default(),
        task: text(value, "task").unwrap_or_default(),
        task_type: text(value, "task_type").unwrap_or_else(|| "unknown".into()),
        won: value.get("won").and_then(Value::as_bool).unwrap_or(false),
        error: text(value, "error"),
        invalid_steps: steps.iter().filter(|s| !s.valid).count(),
        inadmissible_steps: steps.iter().filter(|s| s.admissible == Some(false)).count(),
        repeated_steps,
        tags,
        steps,
    })
}

fn step_of(step: &Value, with_prompts: bool) -> std::result::Result<ViewStep, String> {
    if !step.is_object() {
        return Err("not an object".into());
    }
    let output = text(step, "output").unwrap_or_default();
    // Files without the collector's fields (`rlvmr score` input): read the reply as the
    // collector would, in the tagged format.
    let parsed = parse_output(&output, OutputStyle::Tagged, Validity::Strict);
    let action = text(step, "action").unwrap_or_else(|| parsed.action.clone());
    let admissible = step.get("admissible").and_then(Value::as_bool).or_else(|| {
        let list = step.get("admissible_actions")?.as_array()?;
        Some(list.iter().any(|a| a.as_str() == Some(action.as_str())))
    });
    let tag = match step.get("tag") {
        Some(Value::String(t)) => Some(t.clone()),
        Some(_) => None,
        None => parsed.step_tag().map(|t| t.name().to_string()),
    };
    Ok(ViewStep {
        prompt: with_prompts.then(|| text(step, "prompt")).flatten(),
        valid: step
            .get("format_valid")
            .and_then(Value::as_bool)
            .unwrap_or_else(|| parsed.format_valid()),
        tag,
        action,
        admissible,
        observation: text(step, "observation").unwrap_or_default(),
        next_observation: text(step, "next_observation"),
        reward: number(step, "reward"),
        mr_reward: number(step, "mr_reward"),
        advantage: number(step, "advantage"),
        mistake: step.get("mistake").and_then(Value::as_bool).unwrap_or(false),
        output,
    })
}

/// JSON that is safe inside `<script type="application/json">`: no `<`, `>` or `&` (they
/// are escaped as `\u003c` and so on, which JSON reads back the same), and no line
/// separators that older parsers choke on.
pub fn script_safe_json(value: &impl Serialize) -> Result<String> {
    let json = serde_json::to_string(value).map_err(|e| TrainerError::context("cannot encode the episodes", e))?;
    let mut out = String::with_capacity(json.len() + json.len() / 50);
    for c in json.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    Ok(out)
}

const PAGE: &str = include_str!("view.html");
const DATA_MARK: &str = "/*EPISODES*/";

/// The whole page for `sources`.
pub fn page(sources: &[ViewSource]) -> Result<String> {
    let data = script_safe_json(&serde_json::json!({ "sources": sources }))?;
    Ok(PAGE.replacen(DATA_MARK, &data, 1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn script_safe_json_cannot_close_its_script_and_reads_back_the_same() {
        let value = json!({"o": "</script><script>alert(1)</script> & \u{2028}"});
        let safe = script_safe_json(&value).unwrap();
        assert!(!safe.contains('<') && !safe.contains('>') && !safe.contains('&'));
        assert_eq!(serde_json::from_str::<Value>(&safe).unwrap(), value);
    }

    #[test]
    fn score_input_lines_get_tags_actions_and_admissibility_from_the_output() {
        let line = json!({"uid": "g", "won": false, "steps": [
            {"observation": "o", "admissible_actions": ["look"], "output": "<explore>where?</explore>\n<action>look</action>"},
            {"observation": "o", "admissible_actions": ["look"], "output": "<action>jump</action>"},
            {"observation": "o", "admissible_actions": ["look"], "output": "<explore>again</explore><action>look</action>", "advantage": 0.5}
        ]});
        let e = episode_of(&line, true).unwrap();
        assert_eq!(e.steps[0].tag.as_deref(), Some("explore"));
        assert_eq!(e.steps[0].action, "look");
        assert_eq!(e.steps[0].admissible, Some(true));
        assert_eq!((e.steps[1].valid, e.steps[1].admissible), (false, Some(false)));
        assert_eq!(e.steps[2].advantage, Some(0.5));
        assert_eq!((e.invalid_steps, e.inadmissible_steps, e.repeated_steps), (1, 1, 1));
        assert_eq!(e.tags["explore"], 2);
        assert_eq!(e.tags["none"], 1);
        assert_eq!(e.task_type, "unknown");
    }

    #[test]
    fn lines_that_are_not_episodes_say_so() {
        assert!(episode_of(&json!({"line": 3, "error": "bad"}), true).unwrap_err().contains("error line"));
        assert!(episode_of(&json!({"uid": "x"}), true).unwrap_err().contains("no \"steps\""));
        assert!(episode_of(&json!({"steps": [3]}), true).unwrap_err().contains("step 0"));
        let dir = std::env::temp_dir().join(format!("rlvmr-view-bad-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("t.jsonl");
        std::fs::write(&file, "{\"steps\": []}\n\n{oops\n").unwrap();
        let err = read_source(&file, true).unwrap_err().to_string();
        assert!(err.contains("t.jsonl") && err.contains("line 3") && err.contains("not JSON"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn prompts_can_be_left_out() {
        let line = json!({"steps": [{"prompt": "long prompt", "output": "", "observation": ""}]});
        assert_eq!(episode_of(&line, true).unwrap().steps[0].prompt.as_deref(), Some("long prompt"));
        assert_eq!(episode_of(&line, false).unwrap().steps[0].prompt, None);
    }
}
