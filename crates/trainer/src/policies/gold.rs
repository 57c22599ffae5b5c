//! ScienceWorld's expert: the simulator's gold action sequence of the variation (from a
//! gold-path JVM of its own; door openings left out, see [`without_door_openings`]), one
//! action per turn, tagged like a demonstration: a plan
//! naming the first steps at the start, then monitoring the plan step by step. When the
//! gold path runs out before the episode ends, it looks around.

use std::collections::HashMap;

use rlvmr_core::Tag;
use sciworld::{EnvConfig, GoldOracle};

use crate::agent::{Policy, Reply, Turn};
use crate::error::{Result, TrainerError};
use crate::record::EpisodeSpec;
use crate::sciworld_env::parse_game;

use super::tagged_reply;

/// Plays gold paths.
pub struct GoldPolicy {
    oracle: GoldOracle,
    /// Per slot: the gold actions of its episode.
    paths: HashMap<usize, Vec<String>>,
}

impl GoldPolicy {
    /// Starts the gold-path JVM (the cached jar, "easy" simplifications).
    pub fn new() -> Result<GoldPolicy> {
        let config =
            EnvConfig::from_default_jar().map_err(|e| TrainerError::Invalid(e.to_string()))?;
        let oracle = GoldOracle::new(&config).map_err(|e| TrainerError::Invalid(e.to_string()))?;
        Ok(GoldPolicy {
            oracle,
            paths: HashMap::new(),
        })
    }
}

/// The gold paths open every door on the way, but under the "easy" simplifications (the
/// default) every door is already open and those steps only answer "The door is already
/// open.": leaving them out keeps more gold paths inside the 30-step episodes.
fn without_door_openings(path: Vec<String>) -> Vec<String> {
    path.into_iter()
        .filter(|a| !a.starts_with("open door to "))
        .collect()
}

/// The reason of the first step: the plan, naming its first actions.
fn plan_reason(path: &[String]) -> String {
    let first: Vec<&str> = path.iter().take(3).map(String::as_str).collect();
    format!(
        "The task takes about {} actions; I start with {}.",
        path.len(),
        first.join(", then ")
    )
}

fn reply_for(path: &[String], step: usize) -> String {
    match path.get(step) {
        Some(action) if step == 0 => tagged_reply(Tag::Planning, &plan_reason(path), action),
        Some(action) => {
            let left = path.len() - step - 1;
            let reason = format!("Following the plan, I {action} next; {left} actions remain after it.");
            tagged_reply(Tag::Monitor, &reason, action)
        }
        None => tagged_reply(
            Tag::Explore,
            "The planned actions are done, so I look around for what is still missing.",
            "look around",
        ),
    }
}

impl Policy for GoldPolicy {
    fn name(&self) -> String {
        "expert (gold paths)".into()
    }

    fn start_episode(&mut self, slot: usize, spec: &EpisodeSpec) -> Result<()> {
        let (task, variation) =
            parse_game(&spec.task.game).map_err(|e| TrainerError::Invalid(e.to_string()))?;
        let path = self
            .oracle
            .gold_actions(&task, variation)
            .map_err(|e| TrainerError::Invalid(format!("gold path of {task} {variation}: {e}")))?;
        self.paths.insert(slot, without_door_openings(path));
        Ok(())
    }

    fn act(&mut self, turns: &[Turn]) -> Result<Vec<Result<Reply, String>>> {
        Ok(turns
            .iter()
            .map(|turn| match self.paths.get(&turn.slot) {
                Some(path) => Ok(Reply::text(reply_for(path, turn.step))),
                None => Err(format!("no gold path for slot {}", turn.slot)),
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn door_openings_are_left_out() {
        let path = ["open door to kitchen", "go to kitchen", "open fridge"].map(String::from);
        assert_eq!(without_door_openings(path.to_vec()), ["go to kitchen", "open fridge"]);
    }

    #[test]
    fn replies_plan_then_monitor_then_look() {
        let path: Vec<String> = ["open door to kitchen", "go to kitchen", "focus on water"]
            .map(String::from)
            .to_vec();
        let first = reply_for(&path, 0);
        assert!(first.starts_with("<planning>") && first.contains("3 actions"), "{first}");
        assert!(first.ends_with("<action>open door to kitchen</action>"), "{first}");
        let second = reply_for(&path, 1);
        assert!(second.starts_with("<monitor>") && second.contains("1 actions remain"), "{second}");
        assert!(reply_for(&path, 3).ends_with("<action>look around</action>"));
    }
}
