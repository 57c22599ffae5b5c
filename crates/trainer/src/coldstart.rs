//! Cold-start demonstrations: expert episodes on the level's training games only (an L2
//! run never sees cool or pick_two games), each step tagged and reasoned by the annotator,
//! a seeded fraction with one recoverable mistake. Only won episodes shorter than the step
//! limit are kept. Every step except the planted mistakes becomes one SFT sample: the
//! prompt the collector built (the same builder as RL) and the reply (tag block + action
//! block, or with `prompt.style = "think"` a `<think>` block + action block). A mistake stays in the trajectory and shows in the next prompt's history, so the
//! reflection that follows is learned from a real failure, but the mistake itself is never
//! a training target. ScienceWorld's demonstrations are its gold paths, annotated and
//! given mistakes the same way by [`GoldPolicy`].

use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use crate::collector::{collect, grouped_specs, mix, output_style, CollectorOptions, Throughput};
use crate::envs::{EnvProvider, Protocol};
use crate::error::{Result, TrainerError};
use crate::policies::{ExpertPolicy, GoldPolicy};
use crate::record::EpisodeRecord;
use crate::teacher::{reannotate, Teacher, TeacherReport};

/// One SFT sample: the prompt (user message, no chat template) and the reply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SftSample {
    pub prompt: String,
    pub response: String,
}

/// What a cold start produced.
#[derive(Debug, Clone)]
pub struct Coldstart {
    /// The kept demonstrations.
    pub episodes: Vec<EpisodeRecord>,
    pub samples: Vec<SftSample>,
    /// Episodes played, kept or not.
    pub played: usize,
    pub throughput: Throughput,
    /// What a served teacher's annotation did (when one annotated).
    pub teacher: Option<TeacherReport>,
}

/// How demonstrations leave the expert's straight path, each a seeded share of them.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Detours {
    /// One recoverable mistake.
    pub mistake_fraction: f64,
    /// ALFWorld only: the expert searches for its appliance (heat, cool, clean tasks).
    pub appliance_search: f64,
}

impl Detours {
    /// Mistakes only.
    pub fn mistakes(fraction: f64) -> Detours {
        Detours { mistake_fraction: fraction, appliance_search: 0.0 }
    }
}

/// Plays expert episodes on the shuffled tasks `protocol` gives the cold start
/// ([`EnvProvider::coldstart_tasks`]) until `n` are kept (won, fewer steps than
/// `options.max_steps`) or the tasks run out.
pub fn coldstart(
    provider: &dyn EnvProvider,
    n: usize,
    detours: Detours,
    protocol: Protocol,
    seed: u64,
    options: &CollectorOptions,
    teacher: Option<&Teacher>,
) -> Result<Coldstart> {
    let mut tasks = provider.coldstart_tasks(protocol);
    if tasks.is_empty() {
        return Err(TrainerError::Invalid(format!(
            "{} has no training tasks at this level",
            provider.name()
        )));
    }
    tasks.shuffle(&mut ChaCha8Rng::seed_from_u64(seed));
    // ScienceWorld's demonstrations are its gold paths (one gold-path JVM for the run).
    // The demonstrations answer in the format the prompts ask for (`<think>` for the
    // published baselines).
    let style = output_style(&options.prompt);
    let mut gold = match provider.name() {
        "sciworld" => Some(GoldPolicy::new(detours.mistake_fraction)?.replying(style)),
        _ => None,
    };
    let mut kept = Vec::new();
    let mut played = 0;
    let mut throughput = Throughput::default();
    let mut next = 0;
    while kept.len() < n && next < tasks.len() {
        // A few spare episodes per round: some may fail or run long.
        let want = (n - kept.len()) + (n - kept.len()).div_ceil(10);
        let batch = &tasks[next..(next + want).min(tasks.len())];
        let specs = grouped_specs(batch, 1, mix(seed, next as u64));
        let collection = match gold.as_mut() {
            Some(gold) => collect(provider, gold, &specs, options)?,
            None => {
                let mut expert = ExpertPolicy::new(detours.mistake_fraction)
                    .searching_appliance(detours.appliance_search)
                    .replying(style);
                collect(provider, &mut expert, &specs, options)?
            }
        };
        next += batch.len();
        played += collection.episodes.len();
        add_throughput(&mut throughput, &collection.throughput);
        kept.extend(
            collection
                .episodes
                .into_iter()
                .filter(|e| e.won && e.error.is_none() && e.steps.len() < options.max_steps),
        );
    }
    kept.truncate(n);
    let mut teacher_report = None;
    if let Some(teacher) = teacher {
        let (annotated, report) = reannotate(provider, teacher, kept, style, options)?;
        kept = annotated;
        teacher_report = Some(report);
    }
    let samples = kept
        .iter()
        .flat_map(|e| e.steps.iter().filter(|s| !s.mistake))
        .map(|s| SftSample {
            prompt: s.prompt.clone(),
            response: s.output.clone(),
        })
        .collect();
    Ok(Coldstart {
        episodes: kept,
        samples,
        played,
        throughput,
        teacher: teacher_report,
    })
}

fn add_throughput(total: &mut Throughput, part: &Throughput) {
    total.episodes += part.episodes;
    total.env_steps += part.env_steps;
    total.generated_tokens += part.generated_tokens;
    total.wall_s += part.wall_s;
    total.env_s += part.env_s;
    total.policy_s += part.policy_s;
    total.env_steps_per_s = if total.wall_s > 0.0 {
        total.env_steps as f64 / total.wall_s
    } else {
        0.0
    };
    total.tokens_per_s = if total.wall_s > 0.0 {
        total.generated_tokens as f64 / total.wall_s
    } else {
        0.0
    };
}
