//! Cold-start demonstrations: expert episodes on the level's training games only (an L2
//! run never sees cool or pick_two games), each step tagged and reasoned by the annotator,
//! a seeded fraction with one recoverable mistake. Only won episodes shorter than the step
//! limit are kept, and with `[coldstart] openings` the first steps of tasks too long to win. Every step except the planted mistakes becomes one SFT sample: the
//! prompt the collector built (the same builder as RL) and the reply (tag block + action
//! block, or with `prompt.style = "think"` a `<think>` block + action block). A mistake stays in the trajectory and shows in the next prompt's history, so the
//! reflection that follows is learned from a real failure, but the mistake itself is never
//! a training target. ScienceWorld's demonstrations are its gold paths, annotated and
//! given mistakes the same way (`envs/sciworld/gold.rs`).

use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use std::path::Path;

use rlvmr_core::ReplyLayout;

use crate::agent::{Policy, Reply, Turn};
use crate::collector::{collect, grouped_specs, mix, output_style, AdmissibleLists, CollectorOptions, Throughput};
use crate::config::RunConfig;
use crate::envs::{EnvProvider, Protocol};
use crate::rundir::RunDir;
use crate::error::{Result, TrainerError};
use crate::record::{EpisodeRecord, EpisodeSpec, TaskRef};

pub mod teacher;

pub use crate::envs::Detours;
use crate::envs::text::rename_all;
use teacher::{reannotate, Teacher, TeacherReport};

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
    /// Of those, episodes that ended before their first step: the expert gave them up (a
    /// gold path too long for the step limit) or the environment failed to start.
    pub not_started: usize,
    pub throughput: Throughput,
    /// What a served teacher's annotation did (when one annotated).
    pub teacher: Option<TeacherReport>,
    /// Demonstrations whose samples call objects by other names
    /// ([`Coldstart::rename_objects`]).
    pub renamed: usize,
    /// Samples of `focus on` steps written again under other names
    /// ([`Coldstart::rename_objects`]).
    pub focus_copies: usize,
    /// Of the kept, the openings of tasks too long to win (the last ones); a few of them
    /// may have won on their last step.
    pub openings: usize,
}

/// An episode's SFT samples: every step but the planted mistakes.
fn samples_of(episode: &EpisodeRecord) -> impl Iterator<Item = SftSample> + '_ {
    episode.steps.iter().filter(|s| !s.mistake).map(|s| SftSample {
        prompt: s.prompt.clone(),
        response: s.output.clone(),
    })
}

/// The SFT samples of `episode`'s steps whose index passes `keep` (planted mistakes
/// never), with `renamings` written in prompt and reply.
fn renamed_samples<'a>(
    episode: &'a EpisodeRecord,
    renamings: &'a [(String, String)],
    keep: impl Fn(usize) -> bool + 'a,
) -> impl Iterator<Item = SftSample> + 'a {
    let kept = episode.steps.iter().enumerate().filter(move |&(i, s)| !s.mistake && keep(i));
    kept.map(move |(_, s)| SftSample {
        prompt: rename_all(&s.prompt, renamings),
        response: rename_all(&s.output, renamings),
    })
}

/// Which of `episode`'s steps a focus copy holds: each `focus on` step and the `steps - 1`
/// steps after it (planted mistakes neither held nor counted).
fn focus_window(episode: &EpisodeRecord, steps: usize) -> Vec<bool> {
    let trained: Vec<usize> = (0..episode.steps.len()).filter(|&i| !episode.steps[i].mistake).collect();
    let mut held = vec![false; episode.steps.len()];
    for (k, &i) in trained.iter().enumerate() {
        if episode.steps[i].action.starts_with("focus on ") {
            for &j in &trained[k..(k + steps).min(trained.len())] {
                held[j] = true;
            }
        }
    }
    held
}

/// How a renamed demonstration's focus steps are written again
/// ([`Coldstart::rename_objects`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FocusCopies {
    /// More copies of each renamed demonstration's focus steps, each under names drawn
    /// again (0: none).
    pub copies: usize,
    /// The steps a copy holds from each focus step on: 1 the focus step alone, 2 with the
    /// step after it (where the demonstration picks the focused object up), and so on.
    pub steps: usize,
}

impl FocusCopies {
    /// No copies.
    pub const NONE: FocusCopies = FocusCopies { copies: 0, steps: 1 };
}

/// Plays expert episodes on the shuffled tasks `protocol` gives the cold start
/// ([`EnvProvider::coldstart_tasks`]) until `n` are kept (won, fewer steps than
/// `options.max_steps`) or the tasks run out; then, with `openings` > 0, that many
/// demonstrations of the other tasks, those whose gold path is too long to win in
/// `options.max_steps` ([`EnvProvider::expert_may_fit`]): the first `options.max_steps`
/// actions of the path, not won. The published cold start keeps only won trajectories;
/// the openings let the model see those tasks' texts (ScienceWorld's inclined planes and
/// genetics are a third of its test games) before it plays them.
#[allow(clippy::too_many_arguments)]
pub fn coldstart(
    provider: &dyn EnvProvider,
    n: usize,
    openings: usize,
    detours: Detours,
    protocol: Protocol,
    seed: u64,
    options: &CollectorOptions,
    teacher: Option<&Teacher>,
) -> Result<Coldstart> {
    let (mut fitting, long): (Vec<TaskRef>, Vec<TaskRef>) = provider
        .coldstart_tasks(protocol)
        .into_iter()
        .partition(|task| provider.expert_may_fit(task, options.max_steps));
    if fitting.is_empty() {
        return Err(TrainerError::Invalid(format!(
            "{} has no training tasks at this level",
            provider.name()
        )));
    }
    fitting.shuffle(&mut ChaCha8Rng::seed_from_u64(seed));
    let long = match openings {
        0 => Vec::new(),
        _ => shuffled_openings(provider, long, seed)?,
    };
    // The demonstrations answer in the format the prompts ask for (`<think>` for the
    // published baselines). One scripted player for each part of the cold start
    // (ScienceWorld's holds a gold-path JVM); it keeps nothing from one episode to the next.
    let style = output_style(&options.prompt);
    let whole = Detours { give_up_at: Some(options.max_steps), ..detours };
    let mut expert = laid_out(provider.expert(whole, style)?, options.prompt.layout);
    let won_in_time = |e: &EpisodeRecord| e.won && e.error.is_none() && e.steps.len() < options.max_steps;
    let mut played = play_until(provider, expert.as_mut(), &fitting, n, seed, options, won_in_time)?;
    drop(expert);
    let mut opened_kept = 0;
    if openings > 0 {
        let cut = Detours { give_up_at: None, cut_at: Some(options.max_steps), ..detours };
        let mut expert = laid_out(provider.expert(cut, style)?, options.prompt.layout);
        let played_through = |e: &EpisodeRecord| e.error.is_none() && !e.steps.is_empty();
        let opened = play_until(provider, expert.as_mut(), &long, openings, mix(seed, OPENINGS_SEED), options, played_through)?;
        opened_kept = opened.kept.len();
        played.absorb(opened);
    }
    let Played { mut kept, played, not_started, throughput } = played;
    let mut teacher_report = None;
    if let Some(teacher) = teacher {
        let (annotated, report) = reannotate(provider, teacher, kept, style, options)?;
        kept = annotated;
        teacher_report = Some(report);
    }
    let samples = kept.iter().flat_map(samples_of).collect();
    Ok(Coldstart {
        episodes: kept,
        samples,
        renamed: 0,
        focus_copies: 0,
        openings: opened_kept,
        played,
        not_started,
        throughput,
        teacher: teacher_report,
    })
}

/// Mixed into the run's seed for the openings' draw and episodes.
const OPENINGS_SEED: u64 = 0x0BE4_1465;

/// The tasks too long to win, shuffled for the openings; an error if there are none.
fn shuffled_openings(provider: &dyn EnvProvider, mut long: Vec<TaskRef>, seed: u64) -> Result<Vec<TaskRef>> {
    if long.is_empty() {
        return Err(TrainerError::value(
            "coldstart.openings",
            format!("{} has no training task too long for the step limit at this level", provider.name()),
        ));
    }
    long.shuffle(&mut ChaCha8Rng::seed_from_u64(mix(seed, OPENINGS_SEED)));
    Ok(long)
}

/// What one part of the cold start played and kept.
#[derive(Default)]
struct Played {
    kept: Vec<EpisodeRecord>,
    played: usize,
    not_started: usize,
    throughput: Throughput,
}

impl Played {
    fn absorb(&mut self, other: Played) {
        self.kept.extend(other.kept);
        self.played += other.played;
        self.not_started += other.not_started;
        add_throughput(&mut self.throughput, &other.throughput);
    }
}

/// Plays `expert` on `tasks` in order, in rounds, until `n` episodes pass `keep` or the
/// tasks run out; the first `n` kept.
fn play_until(
    provider: &dyn EnvProvider,
    expert: &mut dyn Policy,
    tasks: &[TaskRef],
    n: usize,
    seed: u64,
    options: &CollectorOptions,
    keep: impl Fn(&EpisodeRecord) -> bool,
) -> Result<Played> {
    let mut result = Played::default();
    let mut next = 0;
    while result.kept.len() < n && next < tasks.len() {
        // A few spare episodes per round: some may fail or run long.
        let want = (n - result.kept.len()) + (n - result.kept.len()).div_ceil(10);
        let batch = &tasks[next..(next + want).min(tasks.len())];
        let specs = grouped_specs(batch, 1, mix(seed, next as u64));
        let collection = collect(provider, expert, &specs, options)?;
        next += batch.len();
        result.played += collection.episodes.len();
        result.not_started += collection.episodes.iter().filter(|e| e.steps.is_empty() && e.error.is_some()).count();
        add_throughput(&mut result.throughput, &collection.throughput);
        result.kept.extend(collection.episodes.into_iter().filter(|e| keep(e)));
    }
    result.kept.truncate(n);
    Ok(result)
}

impl Coldstart {
    /// Makes the samples again with, in a seeded `fraction` of the demonstrations, the names
    /// `provider` picks for the task's objects ([`EnvProvider::demo_renamings`]: a tested
    /// object's made-up name, a permutation of species) written for the played ones in every
    /// prompt and reply; each renamed demonstration's `focus on` steps (with the
    /// `focus.steps - 1` steps after each) are written `focus.copies` more times, each under
    /// names drawn again (another permutation of the species), so the step that first names
    /// the object is seen in more rooms than the demonstrations played. The episodes keep
    /// what was played.
    pub fn rename_objects(&mut self, provider: &dyn EnvProvider, fraction: f64, focus: FocusCopies, seed: u64) {
        use rand::Rng;
        self.renamed = 0;
        self.focus_copies = 0;
        self.samples.clear();
        for (i, episode) in self.episodes.iter().enumerate() {
            let mut rng = ChaCha8Rng::seed_from_u64(mix(seed, i as u64));
            let renamings = match fraction > 0.0 && rng.gen_bool(fraction.min(1.0)) {
                true => provider.demo_renamings(&episode.task, &mut rng),
                false => Vec::new(),
            };
            if renamings.is_empty() {
                self.samples.extend(samples_of(episode));
                continue;
            }
            self.renamed += 1;
            self.samples.extend(renamed_samples(episode, &renamings, |_| true));
            if focus.copies == 0 {
                continue;
            }
            let held = focus_window(episode, focus.steps);
            // Drawn after the demonstration's own names, which stay those of no copies.
            for _ in 0..focus.copies {
                let again = provider.demo_renamings(&episode.task, &mut rng);
                let before = self.samples.len();
                self.samples.extend(renamed_samples(episode, &again, |i| held[i]));
                self.focus_copies += self.samples.len() - before;
            }
        }
    }

    /// One line on what was kept: `kept K of N expert episodes (G ended before their first
    /// step, M with a planted mistake[, O openings of longer tasks]), S steps, X SFT samples`.
    pub fn summary(&self) -> String {
        let mistakes = self
            .episodes
            .iter()
            .filter(|e| e.steps.iter().any(|s| s.mistake))
            .count();
        let openings = match self.openings {
            0 => String::new(),
            n => format!(", {n} openings of longer tasks"),
        };
        let steps: usize = self.episodes.iter().map(|e| e.steps.len()).sum();
        let renamed = match (self.renamed, self.focus_copies) {
            (0, _) => String::new(),
            (n, 0) => format!(" ({n} demonstrations with renamed objects)"),
            (n, c) => format!(" ({n} demonstrations with renamed objects; {c} more samples of their focus steps under other names)"),
        };
        format!(
            "kept {} of {} expert episodes ({} ended before their first step, {} with a planted mistake{openings}), {} steps, {} SFT samples{renamed}",
            self.episodes.len(),
            self.played,
            self.not_started,
            mistakes,
            steps,
            self.samples.len()
        )
    }
}

/// `rlvmr coldstart`: expert demonstrations of the level's training tasks, annotated by the
/// built-in annotator or a served teacher; writes config.toml, trajectories.jsonl, sft.jsonl
/// (and with a teacher, annotation.json).
pub fn run(config: &RunConfig, out: &Path) -> Result<Coldstart> {
    config.validate()?;
    let provider = config.open_env()?;
    let c = &config.coldstart;
    let teacher = match c.has_teacher() {
        true => Some(Teacher::connect(c.teacher.options(), c.teacher_temperature, c.teacher_max_tokens)?),
        false => None,
    };
    let dir = RunDir::create(out, config)?;
    let mut result = coldstart(
        provider.as_ref(),
        c.episodes,
        c.openings,
        Detours {
            mistake_fraction: c.mistake_fraction,
            appliance_search: c.appliance_search,
            ..Detours::default()
        },
        config.env.protocol,
        config.run.seed,
        // The demonstrations' prompts show no admissible list (ScienceWorld's room view) or
        // the environment gives it for free (ALFWorld).
        &CollectorOptions { admissible: AdmissibleLists::WhereRead, ..config.collector_options() },
        teacher.as_ref(),
    )?;
    let focus = FocusCopies { copies: c.focus_copies, steps: c.focus_copy_steps };
    result.rename_objects(provider.as_ref(), c.rename_fraction, focus, config.run.seed);
    dir.write_jsonl("trajectories.jsonl", &result.episodes)?;
    dir.write_jsonl("sft.jsonl", &result.samples)?;
    if let Some(report) = &result.teacher {
        dir.write_json("annotation.json", report)?;
    }
    Ok(result)
}

/// `player` with its replies in `layout` (as the prompts ask): the collector records, and
/// later prompts show, the replies as laid out.
fn laid_out(player: Box<dyn Policy>, layout: ReplyLayout) -> Box<dyn Policy> {
    match layout {
        ReplyLayout::Inline => player,
        ReplyLayout::Lines => Box::new(InLines { player }),
    }
}

/// A scripted player whose replies are rewritten into [`ReplyLayout::Lines`].
struct InLines {
    player: Box<dyn Policy>,
}

impl Policy for InLines {
    fn name(&self) -> String {
        self.player.name()
    }

    fn start_episode(&mut self, slot: usize, spec: &EpisodeSpec) -> Result<()> {
        self.player.start_episode(slot, spec)
    }

    fn start_episodes(&mut self, starts: &[(usize, &EpisodeSpec)]) -> Vec<Result<()>> {
        self.player.start_episodes(starts)
    }

    fn reads_admissible(&self, slot: usize, step: usize) -> bool {
        self.player.reads_admissible(slot, step)
    }

    fn act(&mut self, turns: &[Turn]) -> Result<Vec<std::result::Result<Reply, String>>> {
        let replies = self.player.act(turns)?;
        Ok(replies
            .into_iter()
            .map(|reply| {
                reply.map(|r| {
                    let text = ReplyLayout::Lines.apply(&String::from_utf8_lossy(&r.output));
                    Reply { output: text.into_bytes(), ..r }
                })
            })
            .collect())
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn episode(actions: &[(&str, bool)]) -> EpisodeRecord {
        let steps: Vec<serde_json::Value> = actions
            .iter()
            .enumerate()
            .map(|(i, (action, mistake))| {
                serde_json::json!({
                    "step": i, "observation": "", "prompt": "", "prompt_ids": [], "response_ids": [],
                    "logprobs": [], "output": "", "tag": null, "format_valid": true,
                    "invalid_reasons": [], "action": action, "next_observation": "", "anchor": "",
                    "won": false, "done": false, "mistake": mistake,
                })
            })
            .collect();
        serde_json::from_value(serde_json::json!({
            "uid": "u", "game": "g", "task_type": "t", "env_seed": 0, "rollout_seed": 0,
            "task": "", "won": true, "steps": steps,
        }))
        .unwrap()
    }

    #[test]
    fn a_focus_window_holds_the_focus_and_the_trained_steps_after_it() {
        let e = episode(&[
            ("look around", false),
            ("focus on baby wolf", true),
            ("focus on dove egg", false),
            ("go to hallway", true),
            ("pick up dove egg", false),
            ("teleport to kitchen", false),
            ("move dove egg to red box", false),
        ]);
        let held = |steps| focus_window(&e, steps);
        assert_eq!(held(1), [false, false, true, false, false, false, false]);
        assert_eq!(held(2), [false, false, true, false, true, false, false]);
        assert_eq!(held(8), [false, false, true, false, true, true, true]);
        assert!(focus_window(&episode(&[("look around", false)]), 2).iter().all(|h| !h));
    }
}
