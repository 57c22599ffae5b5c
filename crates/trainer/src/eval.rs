//! Evaluation: play test tasks with a policy through the collector and report the spec's
//! §7 metrics (success overall and per task type, invalid, inadmissible and repetitive
//! rates, average actions, tag mix), defined in `rlvmr_core::metrics`.

use std::collections::BTreeMap;

use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rlvmr_core::metrics::{self, EpisodeMetricsInput, Metrics, StepMetricsInput};
use rlvmr_core::{compute_rewards, RewardConfig};
use serde::Serialize;

use crate::agent::Policy;
use crate::collector::{collect, grouped_specs, CollectorOptions, Throughput};
use crate::envs::{EnvProvider, Protocol};
use crate::error::Result;
use crate::record::{EpisodeRecord, TaskRef};
use crate::usage::RequestStats;

/// The tasks of an evaluation: every test task once (`None`), or `n` drawn in seeded,
/// shuffled passes over the test tasks.
pub fn eval_tasks(provider: &dyn EnvProvider, episodes: Option<usize>, seed: u64) -> Vec<TaskRef> {
    let all = provider.test_tasks();
    let Some(n) = episodes else { return all };
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut out = Vec::with_capacity(n);
    while out.len() < n && !all.is_empty() {
        let mut pass = all.clone();
        pass.shuffle(&mut rng);
        out.extend(pass.into_iter().take(n - out.len()));
    }
    out
}

/// The metrics of one group of episodes.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Rates {
    pub episodes: usize,
    pub success_rate: f64,
    pub invalid_rate: f64,
    pub inadmissible_rate: f64,
    pub repetitive_rate: f64,
    pub avg_actions: f64,
    pub tag_mix: BTreeMap<String, f64>,
}

impl From<&Metrics> for Rates {
    fn from(m: &Metrics) -> Rates {
        Rates {
            episodes: m.episodes,
            success_rate: m.success_rate,
            invalid_rate: m.invalid_rate,
            inadmissible_rate: m.inadmissible_rate,
            repetitive_rate: m.repetitive_rate,
            avg_actions: m.avg_actions,
            tag_mix: m.tag_mix.clone(),
        }
    }
}

/// What `summary.json` holds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    pub env: String,
    pub split: String,
    pub policy: String,
    /// How the evaluated model was trained (ALFWorld): which games its cold start saw.
    /// `None` for a policy without a training run (the expert, a hub model).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub protocol: Option<Protocol>,
    #[serde(flatten)]
    pub overall: Rates,
    /// Episodes that ended on an environment or policy error.
    pub failed_episodes: usize,
    pub per_type: BTreeMap<String, Rates>,
    /// Count, mean and std of the meta-reasoning reward per tag (default reward rules).
    pub tag_rewards: BTreeMap<String, metrics::TagRewardStats>,
    pub throughput: Throughput,
    /// A served model's requests: sent, retried, failed, tokens.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requests: Option<RequestStats>,
}

/// Meta-reasoning rewards of each step under the default (reference) rules.
fn mr_rewards(episode: &EpisodeRecord) -> Vec<f64> {
    compute_rewards(&RewardConfig::default(), &episode.facts())
        .steps
        .iter()
        .map(|r| r.mr_reward)
        .collect()
}

/// The §7 metrics of `episodes`.
pub fn metrics_of(episodes: &[&EpisodeRecord]) -> Metrics {
    let rewards: Vec<Vec<f64>> = episodes.iter().map(|e| mr_rewards(e)).collect();
    let inputs: Vec<EpisodeMetricsInput> = episodes
        .iter()
        .zip(&rewards)
        .map(|(e, mr)| EpisodeMetricsInput {
            won: e.won,
            task_type: Some(&e.task_type),
            split: None,
            steps: e
                .steps
                .iter()
                .zip(mr)
                .map(|(s, &mr_reward)| StepMetricsInput {
                    observation: &s.observation,
                    action: &s.action,
                    format_valid: s.format_valid,
                    tag: s.tag,
                    admissible: s.admissible,
                    mr_reward,
                })
                .collect(),
        })
        .collect();
    metrics::compute(&inputs)
}

/// Summarises finished episodes.
pub fn summarize(
    env: &str,
    split: &str,
    policy: &str,
    episodes: &[EpisodeRecord],
    throughput: Throughput,
) -> Summary {
    let all: Vec<&EpisodeRecord> = episodes.iter().collect();
    let overall = metrics_of(&all);
    let mut by_type: BTreeMap<String, Vec<&EpisodeRecord>> = BTreeMap::new();
    for e in episodes {
        by_type.entry(e.task_type.clone()).or_default().push(e);
    }
    Summary {
        env: env.into(),
        split: split.into(),
        policy: policy.into(),
        protocol: None,
        overall: Rates::from(&overall),
        failed_episodes: episodes.iter().filter(|e| e.error.is_some()).count(),
        per_type: by_type
            .into_iter()
            .map(|(t, eps)| (t, Rates::from(&metrics_of(&eps))))
            .collect(),
        tag_rewards: overall.tag_rewards,
        throughput,
        requests: None,
    }
}

/// The header of a Markdown table of [`rates_row`]s.
pub const RATES_HEADER: &str = "| type | episodes | success % | invalid % | inadmissible % | repetitive % | avg actions |\n|---|---:|---:|---:|---:|---:|---:|\n";

/// One row of the §7 table: `name`, episodes, success, invalid, inadmissible and
/// repetitive rates (%), average actions.
pub fn rates_row(name: &str, r: &Rates) -> String {
    format!(
        "| {name} | {} | {:.1} | {:.1} | {:.1} | {:.1} | {:.2} |\n",
        r.episodes,
        100.0 * r.success_rate,
        100.0 * r.invalid_rate,
        100.0 * r.inadmissible_rate,
        100.0 * r.repetitive_rate,
        r.avg_actions
    )
}

/// The §7 table as markdown, then the tag mix and the collector's speed.
pub fn table(summary: &Summary) -> String {
    let mut out = format!(
        "{} {} · policy {}\n",
        summary.env, summary.split, summary.policy
    );
    if let Some(protocol) = summary.protocol {
        out.push_str(protocol.describe(&summary.env));
        out.push('\n');
    }
    out.push('\n');
    out.push_str(RATES_HEADER);
    for (t, r) in &summary.per_type {
        out.push_str(&rates_row(t, r));
    }
    out.push_str(&rates_row("all", &summary.overall));
    let mix: Vec<String> = ["planning", "explore", "reflection", "monitor", "none"]
        .iter()
        .map(|t| {
            format!(
                "{t} {:.1}%",
                100.0 * summary.overall.tag_mix.get(*t).copied().unwrap_or(0.0)
            )
        })
        .collect();
    out.push_str(&format!("\ntag mix: {}\n", mix.join(", ")));
    if summary.failed_episodes > 0 {
        out.push_str(&format!(
            "failed episodes (environment or policy error): {}\n",
            summary.failed_episodes
        ));
    }
    if let Some(r) = &summary.requests {
        out.push_str(&format!(
            "requests: {} sent, {} retries, {} failed; tokens counted by the server: {} prompt, {} completion\n",
            r.requests, r.retries, r.failed, r.prompt_tokens, r.completion_tokens
        ));
    }
    let t = &summary.throughput;
    out.push_str(&format!(
        "throughput: {} steps in {:.2} s ({:.1} steps/s), {} tokens ({:.1} tokens/s); environment {:.2} s, policy {:.2} s\n",
        t.env_steps, t.wall_s, t.env_steps_per_s, t.generated_tokens, t.tokens_per_s, t.env_s, t.policy_s
    ));
    out
}

/// An evaluation's episodes and summary.
#[derive(Debug, Clone)]
pub struct Evaluation {
    pub episodes: Vec<EpisodeRecord>,
    pub summary: Summary,
}

/// Plays `tasks` once each with `policy` and summarises.
pub fn evaluate(
    provider: &dyn EnvProvider,
    policy: &mut dyn Policy,
    tasks: &[TaskRef],
    split: &str,
    options: &CollectorOptions,
    seed: u64,
) -> Result<Evaluation> {
    let specs = grouped_specs(tasks, 1, seed);
    let collection = collect(provider, policy, &specs, options)?;
    let mut summary = summarize(
        provider.name(),
        split,
        &policy.name(),
        &collection.episodes,
        collection.throughput,
    );
    summary.requests = policy.request_stats();
    Ok(Evaluation {
        episodes: collection.episodes,
        summary,
    })
}
