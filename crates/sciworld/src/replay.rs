//! Replaying command lists: the records `rlvmr sciworld replay` reads and writes, and the
//! transcripts recorded with the official Python client (`tools/record_sciworld.py`) use.

use serde::{Deserialize, Serialize};

use crate::env::SciWorldEnv;
use crate::error::Result;
use crate::tasks::resolve_task;

/// One game to replay: `{"task": name or index, "variation": int, "commands": [..]}`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplayRequest {
    pub task: TaskKey,
    pub variation: usize,
    pub commands: Vec<String>,
}

/// A task given by name ("boil") or index (0).
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(untagged)]
pub enum TaskKey {
    Index(usize),
    Name(String),
}

impl TaskKey {
    /// The text [`resolve_task`] takes.
    pub fn as_text(&self) -> String {
        match self {
            TaskKey::Index(i) => i.to_string(),
            TaskKey::Name(n) => n.clone(),
        }
    }
}

/// One step of a replay; `command` is null for the reset.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct StepRecord {
    pub command: Option<String>,
    pub observation: String,
    /// The official 0-100 score.
    pub score: i64,
    pub done: bool,
}

/// A replayed game: the reset record, then one step per command.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ReplayRecord {
    /// The task's name (an index in the request is resolved).
    pub task: String,
    pub variation: usize,
    pub task_description: String,
    pub steps: Vec<StepRecord>,
}

/// Reset to the request's game and play every command, even after `done` (as the official
/// client lets one).
pub fn replay(env: &mut SciWorldEnv, request: &ReplayRequest) -> Result<ReplayRecord> {
    let task = resolve_task(&request.task.as_text())?;
    let first = env.reset_to(task.name, request.variation)?;
    let mut steps = Vec::with_capacity(request.commands.len() + 1);
    steps.push(StepRecord {
        command: None,
        observation: first.observation,
        score: first.score,
        done: first.done,
    });
    for command in &request.commands {
        let step = env.step_command(command)?;
        steps.push(StepRecord {
            command: Some(command.clone()),
            observation: step.observation,
            score: step.score,
            done: step.done,
        });
    }
    Ok(ReplayRecord {
        task: task.name.to_string(),
        variation: request.variation,
        task_description: env.task_description().unwrap_or_default().to_string(),
        steps,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_take_a_name_or_an_index_and_reject_unknown_keys() {
        let r: ReplayRequest = serde_json::from_str(
            r#"{"task": "boil", "variation": 3, "commands": ["look around"]}"#,
        )
        .unwrap();
        assert_eq!(r.task, TaskKey::Name("boil".into()));
        let r: ReplayRequest =
            serde_json::from_str(r#"{"task": 4, "variation": 0, "commands": []}"#).unwrap();
        assert_eq!(r.task.as_text(), "4");
        let err = serde_json::from_str::<ReplayRequest>(
            r#"{"task": "boil", "variation": 0, "commands": [], "seed": 1}"#,
        )
        .unwrap_err();
        assert!(err.to_string().contains("seed"), "{err}");
        assert!(serde_json::from_str::<ReplayRequest>(
            r#"{"task": "boil", "variation": -1, "commands": []}"#
        )
        .is_err());
    }
}
