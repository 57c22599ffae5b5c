//! Scoring an iteration's episodes: the core's verifiable rewards and the chosen advantage
//! over groups of episodes that share a uid, the step samples the update trains on, and the
//! scored episodes in `rlvmr score`'s output schema.

use rlvmr_core::{compute_advantage_terms, compute_rewards, EpisodeRewards, StepScore, Tag};
use serde_json::{Map, Value};

use crate::config::RunConfig;
use crate::error::{Result, TrainerError};
use crate::eval::metrics_of;
use crate::record::EpisodeRecord;

/// One step's scores, and why it does not train (if it does not).
#[derive(Debug, Clone, PartialEq)]
pub struct ScoredStep {
    pub score: StepScore,
    /// The environment's reward part: `success_reward` on a won episode's last step.
    pub outcome: f64,
    /// The format penalty this step paid (0 or `-format_penalty`).
    pub format: f64,
}

/// Rewards and advantages of every step of `episodes`, in order. Episodes that ended on an
/// error are left out of every group (their steps score 0 and do not train): their end says
/// nothing about the policy.
pub fn score_episodes(config: &RunConfig, episodes: &[EpisodeRecord]) -> Result<Vec<Vec<ScoredStep>>> {
    let facts: Vec<_> = episodes.iter().map(EpisodeRecord::facts).collect();
    let rewards: Vec<EpisodeRewards> = facts
        .iter()
        .zip(episodes)
        .map(|(f, e)| {
            let mut r = compute_rewards(&config.reward, f);
            if e.error.is_some() {
                r.steps.clear();
            }
            r
        })
        .collect();
    let terms = compute_advantage_terms(&config.advantage, &rewards)
        .map_err(|e| TrainerError::context("advantages", e))?;
    Ok(episodes
        .iter()
        .zip(&rewards)
        .zip(&terms)
        .map(|((episode, rewards), terms)| {
            episode
                .steps
                .iter()
                .enumerate()
                .map(|(i, step)| {
                    let (reward, advantage) = match (rewards.steps.get(i), terms.get(i)) {
                        (Some(r), Some(t)) => (Some(r), t.advantage),
                        _ => (None, 0.0),
                    };
                    ScoredStep {
                        score: StepScore {
                            format_valid: step.format_valid,
                            tag: step.tag.map_or("none", Tag::name).to_string(),
                            action: step.action.clone(),
                            admissible: step.admissible.unwrap_or(true),
                            reward: reward.map_or(0.0, |r| r.outcome_reward),
                            mr_reward: reward.map_or(0.0, |r| r.mr_reward),
                            advantage,
                            invalid_reasons: step.invalid_reasons.clone(),
                        },
                        outcome: reward.map_or(0.0, |r| r.env_reward),
                        format: reward.map_or(0.0, |r| -r.format_penalty),
                    }
                })
                .collect()
        })
        .collect())
}

/// An episode as `rlvmr score` writes it: the record with each step's scores merged in and
/// the episode's metrics.
pub fn scored_line(episode: &EpisodeRecord, scores: &[ScoredStep]) -> Result<Value> {
    let json = |e: serde_json::Error| TrainerError::Invalid(format!("rollout record: {e}"));
    let mut value = serde_json::to_value(episode).map_err(json)?;
    if let Some(Value::Array(steps)) = value.get_mut("steps") {
        for (step, scored) in steps.iter_mut().zip(scores) {
            if let (Value::Object(step), Value::Object(add)) =
                (step, serde_json::to_value(&scored.score).map_err(json)?)
            {
                step.extend(add);
            }
        }
    }
    if let Value::Object(map) = &mut value {
        let metrics: Map<String, Value> = match serde_json::to_value(metrics_of(&[episode])) {
            Ok(Value::Object(m)) => m,
            _ => Map::new(),
        };
        map.insert("metrics".into(), Value::Object(metrics));
    }
    Ok(value)
}
