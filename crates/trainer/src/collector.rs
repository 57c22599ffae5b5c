//! The rollout collector, shared by evaluation, the cold start and RL.
//!
//! Many episodes run at once. Each turn: the core's prompt builder renders every running
//! episode's prompt (task, step count, history window, recent replies, carried plan,
//! observation, admissible actions); the policy answers all of them in one batched call
//! (finished episodes are not asked, so they cost nothing); each reply is parsed (tag,
//! validity, action) and its action stepped in its environment, the environments spread over
//! worker threads. Every step is recorded in full ([`StepRecord`]).
//!
//! Failures stay local: a reply that is garbage (any bytes, any length, no tags) is an
//! invalid step and the episode goes on; an environment that returns an error or panics, or
//! a policy error for one turn, ends that episode as failed (its `error` says why) and the
//! rest of the batch continues.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::{Duration, Instant};

use rlvmr_core::prompt::carried_plan;
use rlvmr_core::{
    parse_output, Env, HistoryEntry, OutputStyle, PromptConfig, PromptInput, PromptStyle,
    StepResult, Validity,
};
use serde::Serialize;

use crate::agent::{Policy, Reply, Turn};
use crate::envs::EnvProvider;
use crate::error::{Result, TrainerError};
use crate::record::{EpisodeRecord, EpisodeSpec, StepRecord, TaskRef};

/// The spec's episode limit (§4: max 30 steps per episode).
pub const DEFAULT_MAX_STEPS: usize = 30;

/// How episodes are played.
#[derive(Debug, Clone, PartialEq)]
pub struct CollectorOptions {
    /// Steps per episode before it ends unwon.
    pub max_steps: usize,
    pub prompt: PromptConfig,
    pub validity: Validity,
    /// Past raw outputs longer than this many characters are cut in later prompts (the
    /// record keeps them whole), so one runaway reply cannot flood every later prompt.
    pub history_output_chars: usize,
    /// Worker threads that step the environments.
    pub threads: usize,
    /// Print a progress line to stderr at most every [`PROGRESS_EVERY`] (long model runs).
    pub progress: bool,
    /// Which turns get the environment's admissible actions.
    pub admissible: AdmissibleLists,
}

/// Which turns the collector asks the environment's admissible actions for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdmissibleLists {
    /// Every turn: the rewards and the inadmissible rate read them.
    Every,
    /// The first turn and those the policy reads them at ([`Policy::reads_admissible`]):
    /// a scripted player's demonstrations, whose records need no inadmissible rate, where
    /// ScienceWorld's list costs 3-5x its step.
    WhereRead,
}

/// The least time between two progress lines.
pub const PROGRESS_EVERY: Duration = Duration::from_secs(10);

impl Default for CollectorOptions {
    fn default() -> Self {
        CollectorOptions {
            max_steps: DEFAULT_MAX_STEPS,
            prompt: PromptConfig::default(),
            validity: Validity::Strict,
            history_output_chars: 2000,
            threads: 2,
            progress: false,
            admissible: AdmissibleLists::Every,
        }
    }
}

/// The collector's own speed figures.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Throughput {
    pub episodes: usize,
    pub env_steps: usize,
    pub generated_tokens: usize,
    pub wall_s: f64,
    /// Wall time spent resetting and stepping environments.
    pub env_s: f64,
    /// Wall time spent in the policy.
    pub policy_s: f64,
    pub env_steps_per_s: f64,
    pub tokens_per_s: f64,
}

/// Finished episodes, in the order of their specs, and how fast they were played.
#[derive(Debug, Clone)]
pub struct Collection {
    pub episodes: Vec<EpisodeRecord>,
    pub throughput: Throughput,
}

/// `group_size` rollouts of every task: rollouts of one task share its uid and env seed;
/// each rollout has its own seed. Deterministic in `seed`.
pub fn grouped_specs(tasks: &[TaskRef], group_size: usize, seed: u64) -> Vec<EpisodeSpec> {
    let mut specs = Vec::with_capacity(tasks.len() * group_size);
    for (i, task) in tasks.iter().enumerate() {
        let env_seed = mix(seed, i as u64);
        for g in 0..group_size {
            specs.push(EpisodeSpec {
                task: task.clone(),
                uid: format!("{i}:{}", task.game),
                env_seed,
                rollout_seed: mix(env_seed, g as u64 + 1),
            });
        }
    }
    specs
}

/// A well-spread 64-bit seed from two numbers (SplitMix64's finaliser).
pub fn mix(a: u64, b: u64) -> u64 {
    let mut z = a
        .wrapping_add(b.wrapping_mul(0x9E37_79B9_7F4A_7C15))
        .wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Each slot's sampling stream: a policy's seed mixed with the episode's rollout seed when
/// it starts, then with the step, so a reply's draw depends on neither its batch nor its
/// neighbours.
#[derive(Debug, Clone, Default)]
pub struct StepSeeds {
    by_slot: Vec<u64>,
}

impl StepSeeds {
    /// The episode of `spec` starts in `slot`.
    pub fn start(&mut self, slot: usize, policy_seed: u64, spec: &EpisodeSpec) {
        if self.by_slot.len() <= slot {
            self.by_slot.resize(slot + 1, 0);
        }
        self.by_slot[slot] = mix(policy_seed, spec.rollout_seed);
    }

    /// The seed of a turn's reply.
    pub fn of(&self, turn: &Turn) -> u64 {
        mix(self.by_slot.get(turn.slot).copied().unwrap_or(0), turn.step as u64)
    }
}

/// One episode while it runs.
struct Running {
    spec: EpisodeSpec,
    env: Option<Box<dyn Env + Send>>,
    task: String,
    current: StepResult,
    /// What the environment shows beside the observation in the current prompt.
    view: View,
    plan: Option<String>,
    steps: Vec<StepRecord>,
    won: bool,
    done: bool,
    error: Option<String>,
}

impl Running {
    fn failed(spec: EpisodeSpec, error: String) -> Running {
        Running {
            spec,
            env: None,
            task: String::new(),
            current: StepResult {
                observation: String::new(),
                admissible_actions: None,
                won: false,
                done: true,
                score: 0.0,
            },
            view: View::default(),
            plan: None,
            steps: Vec::new(),
            won: false,
            done: true,
            error: Some(error),
        }
    }

    fn into_record(self) -> EpisodeRecord {
        EpisodeRecord {
            uid: self.spec.uid,
            game: self.spec.task.game,
            task_type: self.spec.task.task_type,
            env_seed: self.spec.env_seed,
            rollout_seed: self.spec.rollout_seed,
            task: self.task,
            won: self.won,
            error: self.error,
            steps: self.steps,
        }
    }
}

/// Runs `f`, turning a panic into an error message.
fn guarded<T>(
    what: &str,
    f: impl FnOnce() -> Result<T, rlvmr_core::EnvError>,
) -> Result<T, String> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(format!("environment {what} failed: {e}")),
        Err(panic) => {
            let msg = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            Err(format!("environment {what} panicked: {msg}"))
        }
    }
}

/// ScienceWorld's extras for the prompt, read from the environment after every step:
/// the action templates and objects, or with `prompt.room` the room and inventory.
/// Other environments leave them empty.
#[derive(Default)]
struct View {
    templates: Vec<String>,
    objects: Vec<String>,
    room: String,
    inventory: String,
}

impl View {
    fn read(env: &mut (dyn Env + Send), prompt: &PromptConfig) -> Result<View, String> {
        if prompt.room {
            let (room, inventory) = guarded("room", || env.room_and_inventory())?;
            Ok(View { room, inventory, ..View::default() })
        } else {
            let (templates, objects) = guarded("templates", || env.templates_and_objects())?;
            Ok(View { templates, objects, ..View::default() })
        }
    }
}

fn start(provider: &dyn EnvProvider, spec: &EpisodeSpec, opts: &CollectorOptions) -> Running {
    let mut env = match provider.make(&spec.task, spec.env_seed, opts.max_steps) {
        Ok(env) => env,
        Err(e) => {
            return Running::failed(spec.clone(), format!("environment could not be made: {e}"))
        }
    };
    let reset = guarded("reset", || env.reset())
        .and_then(|first| Ok((first, View::read(env.as_mut(), &opts.prompt)?)));
    match reset {
        Ok((first, view)) => Running {
            spec: spec.clone(),
            task: env.task().to_string(),
            done: first.done,
            won: first.won,
            env: Some(env),
            current: first,
            view,
            plan: None,
            steps: Vec::new(),
            error: None,
        },
        Err(e) => Running::failed(spec.clone(), e),
    }
}

/// [`start`] for every spec, spread over `opts.threads` threads (a ScienceWorld reset loads
/// the world: a tenth of a second or more).
fn start_all(provider: &dyn EnvProvider, specs: &[EpisodeSpec], opts: &CollectorOptions) -> Vec<Running> {
    let threads = opts.threads.max(1).min(specs.len().max(1));
    if threads == 1 {
        return specs.iter().map(|s| start(provider, s, opts)).collect();
    }
    let chunk = specs.len().div_ceil(threads);
    std::thread::scope(|scope| {
        let parts: Vec<_> = specs
            .chunks(chunk)
            .map(|part| (part, scope.spawn(move || part.iter().map(|s| start(provider, s, opts)).collect::<Vec<_>>())))
            .collect();
        parts
            .into_iter()
            .flat_map(|(part, handle)| {
                handle.join().unwrap_or_else(|_| {
                    part.iter().map(|s| Running::failed(s.clone(), "environment start panicked".into())).collect()
                })
            })
            .collect()
    })
}

/// The first `max_chars` characters of `text`.
fn clip(text: &str, max_chars: usize) -> &str {
    match text.char_indices().nth(max_chars) {
        Some((at, _)) => &text[..at],
        None => text,
    }
}

fn render(run: &Running, opts: &CollectorOptions) -> String {
    let history: Vec<HistoryEntry> = run
        .steps
        .iter()
        .map(|s| HistoryEntry {
            observation: &s.observation,
            action: &s.action,
            output: clip(&s.output, opts.history_output_chars),
        })
        .collect();
    let input = PromptInput {
        task: &run.task,
        step: run.steps.len(),
        history: &history,
        observation: &run.current.observation,
        admissible: run.current.admissible_actions.as_deref().unwrap_or(&[]),
        plan: run.plan.as_deref(),
        templates: &run.view.templates,
        objects: &run.view.objects,
        room: &run.view.room,
        inventory: &run.view.inventory,
    };
    rlvmr_core::render_prompt(&opts.prompt, &input)
}

/// The reply format a prompt asks for.
pub fn output_style(prompt: &PromptConfig) -> OutputStyle {
    match prompt.style {
        PromptStyle::Tagged => OutputStyle::Tagged,
        PromptStyle::Think => OutputStyle::Think,
    }
}

/// Parses a reply, steps its action and records the step (or the episode's failure).
fn advance(
    run: &mut Running,
    prompt: String,
    reply: Result<Reply, String>,
    opts: &CollectorOptions,
    admissible_next: bool,
) {
    let reply = match reply {
        Ok(r) => r,
        Err(msg) => {
            run.error = Some(format!("policy failed at step {}: {msg}", run.steps.len()));
            run.done = true;
            return;
        }
    };
    let Some(env) = run.env.as_mut() else {
        run.done = true;
        return;
    };
    let output = String::from_utf8_lossy(&reply.output).into_owned();
    let parsed = parse_output(&output, output_style(&opts.prompt), opts.validity);
    let admissible = run
        .current
        .admissible_actions
        .as_ref()
        .map(|list| list.iter().any(|a| a == &parsed.action));
    env.fetch_admissible(admissible_next);
    let result = match guarded("step", || env.step(&parsed.action)) {
        Ok(r) => r,
        Err(e) => {
            run.error = Some(format!("{e} (step {})", run.steps.len()));
            run.won = false;
            run.done = true;
            return;
        }
    };
    run.plan = carried_plan(run.plan.as_deref(), &output);
    let step = run.steps.len();
    let done = result.done || result.won || step + 1 >= opts.max_steps;

    run.steps.push(StepRecord {
        step,
        observation: std::mem::take(&mut run.current.observation),
        admissible_actions: run.current.admissible_actions.take(),
        prompt,
        prompt_ids: reply.prompt_ids,
        response_ids: reply.response_ids,
        logprobs: reply.logprobs,
        tag: parsed.step_tag(),
        format_valid: parsed.format_valid(),
        invalid_reasons: parsed.invalid.iter().map(|r| r.to_string()).collect(),
        action: parsed.action,
        admissible,
        next_observation: result.observation.clone(),
        anchor: env.anchor(),
        won: result.won,
        done,
        mistake: reply.mistake,
        usage: reply.usage,
        output,
    });
    run.won = result.won;
    run.done = done;
    run.current = result;
    if !done {
        match View::read(env.as_mut(), &opts.prompt) {
            Ok(view) => run.view = view,
            Err(e) => {
                run.error = Some(format!("{e} (step {})", step + 1));
                run.won = false;
                run.done = true;
            }
        }
    }
}

/// Plays every spec to the end with `policy`. Episodes come back in the order of `specs`.
/// Providers whose environments are heavy ([`EnvProvider::max_parallel`]: a JVM each) play
/// the specs in waves of at most that many episodes.
pub fn collect(
    provider: &dyn EnvProvider,
    policy: &mut dyn Policy,
    specs: &[EpisodeSpec],
    opts: &CollectorOptions,
) -> Result<Collection> {
    if opts.max_steps == 0 {
        return Err(TrainerError::value("max_steps", "must be at least 1"));
    }
    let wave = provider.max_parallel().unwrap_or(specs.len()).max(1);
    if specs.len() <= wave {
        return collect_wave(provider, policy, specs, opts);
    }
    let wall = Instant::now();
    let mut episodes = Vec::with_capacity(specs.len());
    let (mut env_s, mut policy_s) = (0.0, 0.0);
    for chunk in specs.chunks(wave) {
        let part = collect_wave(provider, policy, chunk, opts)?;
        env_s += part.throughput.env_s;
        policy_s += part.throughput.policy_s;
        episodes.extend(part.episodes);
    }
    let throughput = throughput(&episodes, wall.elapsed().as_secs_f64(), env_s, policy_s);
    Ok(Collection {
        episodes,
        throughput,
    })
}

/// Totals and rates of `episodes` played in `wall_s` seconds.
fn throughput(episodes: &[EpisodeRecord], wall_s: f64, env_s: f64, policy_s: f64) -> Throughput {
    let env_steps = episodes.iter().map(|e| e.steps.len()).sum();
    let generated_tokens = episodes.iter().map(EpisodeRecord::generated_tokens).sum();
    let per_s = |n: usize| if wall_s > 0.0 { n as f64 / wall_s } else { 0.0 };
    Throughput {
        episodes: episodes.len(),
        env_steps,
        generated_tokens,
        wall_s,
        env_s,
        policy_s,
        env_steps_per_s: per_s(env_steps),
        tokens_per_s: per_s(generated_tokens),
    }
}

/// [`collect`] with every spec's environment open at once.
fn collect_wave(
    provider: &dyn EnvProvider,
    policy: &mut dyn Policy,
    specs: &[EpisodeSpec],
    opts: &CollectorOptions,
) -> Result<Collection> {
    // The prompt describes the environment actually played, whatever the config says.
    let opts = &CollectorOptions {
        prompt: PromptConfig { env: provider.prompt_env(), ..opts.prompt.clone() },
        ..opts.clone()
    };
    let wall = Instant::now();
    let mut env_time = Duration::ZERO;
    let mut policy_time = Duration::ZERO;

    let t = Instant::now();
    let mut runs = start_all(provider, specs, opts);
    env_time += t.elapsed();
    let starting: Vec<usize> = (0..runs.len()).filter(|&i| !runs[i].done).collect();
    let specs_starting: Vec<(usize, &EpisodeSpec)> = starting.iter().map(|&i| (i, &runs[i].spec)).collect();
    let started = policy.start_episodes(&specs_starting);
    drop(specs_starting);
    for (slot, result) in starting.into_iter().zip(started) {
        // A policy that cannot start one episode (no gold path for it) fails that one.
        if let Err(e) = result {
            runs[slot].error = Some(format!("the policy could not start the episode: {e}"));
            runs[slot].done = true;
        }
    }

    let mut last_report = Instant::now();
    loop {
        let active: Vec<usize> = (0..runs.len()).filter(|&i| !runs[i].done).collect();
        if active.is_empty() {
            break;
        }
        if opts.progress && last_report.elapsed() >= PROGRESS_EVERY {
            last_report = Instant::now();
            report_progress(&runs, active.len(), wall.elapsed());
        }
        let prompts: Vec<String> = active.iter().map(|&i| render(&runs[i], opts)).collect();
        let turns: Vec<Turn> = active
            .iter()
            .zip(&prompts)
            .map(|(&i, prompt)| Turn {
                slot: i,
                step: runs[i].steps.len(),
                prompt,
                task: &runs[i].task,
                observation: &runs[i].current.observation,
                admissible: runs[i].current.admissible_actions.as_deref(),
            })
            .collect();
        let t = Instant::now();
        let replies = policy.act(&turns)?;
        policy_time += t.elapsed();
        if replies.len() != turns.len() {
            return Err(TrainerError::Invalid(format!(
                "policy {} answered {} of {} turns",
                policy.name(),
                replies.len(),
                turns.len()
            )));
        }
        drop(turns);

        let t = Instant::now();
        let mut work: Vec<Work> = Vec::with_capacity(active.len());
        let mut replies = replies.into_iter();
        let mut prompts = prompts.into_iter();
        for (i, run) in runs.iter_mut().enumerate() {
            if active.binary_search(&i).is_ok() {
                if let (Some(prompt), Some(reply)) = (prompts.next(), replies.next()) {
                    let admissible_next = match opts.admissible {
                        AdmissibleLists::Every => true,
                        AdmissibleLists::WhereRead => policy.reads_admissible(i, run.steps.len() + 1),
                    };
                    work.push((run, prompt, reply, admissible_next));
                }
            }
        }
        step_all(work, opts);
        env_time += t.elapsed();
    }

    let episodes: Vec<EpisodeRecord> = runs.into_iter().map(Running::into_record).collect();
    let throughput = throughput(
        &episodes,
        wall.elapsed().as_secs_f64(),
        env_time.as_secs_f64(),
        policy_time.as_secs_f64(),
    );
    Ok(Collection {
        episodes,
        throughput,
    })
}

fn report_progress(runs: &[Running], running: usize, elapsed: Duration) {
    let steps: usize = runs.iter().map(|r| r.steps.len()).sum();
    let tokens: usize = runs
        .iter()
        .flat_map(|r| &r.steps)
        .map(StepRecord::generated_tokens)
        .sum();
    let won = runs.iter().filter(|r| r.won).count();
    eprintln!(
        "[{:.0} s] {} of {} episodes finished ({won} won), {running} running; {steps} steps, {tokens} tokens",
        elapsed.as_secs_f64(),
        runs.len() - running,
        runs.len()
    );
}

/// One episode's share of a turn: the episode, its prompt, the policy's reply and whether
/// the next turn gets the admissible actions.
type Work<'a> = (&'a mut Running, String, Result<Reply, String>, bool);

/// Steps every episode of `work`, spread over `opts.threads` threads.
fn step_all(mut work: Vec<Work>, opts: &CollectorOptions) {
    let threads = opts.threads.max(1).min(work.len().max(1));
    if threads == 1 {
        for (run, prompt, reply, admissible_next) in work.drain(..) {
            advance(run, prompt, reply, opts, admissible_next);
        }
        return;
    }
    let chunk = work.len().div_ceil(threads);
    let mut chunks: Vec<Vec<Work>> = Vec::new();
    while !work.is_empty() {
        let rest = work.split_off(chunk.min(work.len()));
        chunks.push(std::mem::replace(&mut work, rest));
    }
    std::thread::scope(|scope| {
        for chunk in chunks {
            scope.spawn(move || {
                for (run, prompt, reply, admissible_next) in chunk {
                    advance(run, prompt, reply, opts, admissible_next);
                }
            });
        }
    });
}
