//! What a rollout records: the task an episode plays, every step, the episode.
//!
//! An [`EpisodeRecord`] serialises to one JSON line that `rlvmr score` reads as is
//! (`uid`, `won`, `steps[].observation`, `steps[].admissible_actions`, `steps[].output`).

use rlvmr_core::{EpisodeFacts, StepFacts, Tag};
use serde::{Deserialize, Serialize};

use crate::usage::TokenUsage;

/// One task of an environment: a game (ALFWorld: its path in the data) and its type label.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskRef {
    /// The game: ALFWorld's `json_2.1.1/<split>/<task>/<trial>/game.tw-pddl`.
    pub game: String,
    /// The task type label used in per-type results (`pick`, `cool`, ...).
    pub task_type: String,
}

/// One episode to play: a task, its group and its seed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EpisodeSpec {
    pub task: TaskRef,
    /// The group: the G rollouts of one task share it (same game, same seed).
    pub uid: String,
    /// The environment seed (shared by the group).
    pub env_seed: u64,
    /// This rollout's own seed (sampling, mistakes, random actions); differs inside a group.
    pub rollout_seed: u64,
}

/// One environment step: what the agent saw, what it produced, what happened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepRecord {
    /// 0-based step number.
    pub step: usize,
    /// The observation the agent acted on.
    pub observation: String,
    /// The admissible actions at that observation (absent when the environment has none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admissible_actions: Option<Vec<String>>,
    /// The prompt text (the user message, before any chat template).
    pub prompt: String,
    /// Token ids of the prompt as the model saw it (chat template applied); empty for
    /// policies without a tokenizer.
    pub prompt_ids: Vec<u32>,
    pub response_ids: Vec<u32>,
    /// Log-prob of each response token under the distribution it was sampled from.
    pub logprobs: Vec<f32>,
    /// The raw output (invalid UTF-8 replaced by U+FFFD).
    pub output: String,
    /// The output's reasoning tag when the format is valid.
    pub tag: Option<Tag>,
    pub format_valid: bool,
    pub invalid_reasons: Vec<String>,
    /// The command sent to the environment.
    pub action: String,
    /// The action is in the admissible list (absent when the environment has none).
    pub admissible: Option<bool>,
    /// What the environment answered.
    pub next_observation: String,
    /// The environment's anchor state after the step (GiGPO's grouping key).
    pub anchor: String,
    pub won: bool,
    pub done: bool,
    /// A deliberate mistake of a cold-start demonstration (never an SFT sample).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub mistake: bool,
    /// Tokens as a served model's server counted them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<TokenUsage>,
}

impl StepRecord {
    /// Tokens the policy generated: its token ids, or what a server counted.
    pub fn generated_tokens(&self) -> usize {
        let served = self.usage.map_or(0, |u| u.completion_tokens);
        self.response_ids.len().max(served)
    }
}

/// One finished episode.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EpisodeRecord {
    pub uid: String,
    pub game: String,
    pub task_type: String,
    pub env_seed: u64,
    pub rollout_seed: u64,
    /// The task sentence.
    pub task: String,
    pub won: bool,
    /// Why the episode stopped early: the environment or the policy failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub steps: Vec<StepRecord>,
}

impl EpisodeRecord {
    /// Tokens the policy generated in this episode.
    pub fn generated_tokens(&self) -> usize {
        self.steps.iter().map(StepRecord::generated_tokens).sum()
    }

    /// What the reward rules read. A step of an environment without an admissible list
    /// counts as admissible.
    pub fn facts(&self) -> EpisodeFacts<'_> {
        EpisodeFacts {
            uid: &self.uid,
            won: self.won,
            steps: self
                .steps
                .iter()
                .map(|s| StepFacts {
                    format_valid: s.format_valid,
                    tag: s.tag,
                    action: &s.action,
                    admissible: s.admissible.unwrap_or(true),
                    observation: &s.observation,
                    output: &s.output,
                })
                .collect(),
        }
    }
}
