//! Reinforcement learning: GRPO-MR (RLVMR) and its baselines (GRPO, GiGPO, RLOO).
//!
//! One iteration: draw `rl.tasks_per_iter` training games (seeded epochs over the level's
//! training tasks), play `rollout.group_size` rollouts of each (one uid per game, every
//! rollout its own sampling stream) with the current weights, score them with the core
//! (rewards, the configured advantage), take the old log-probs from the sampler (or, with
//! `rl.old_logprobs = "recompute"`, recompute them with the training weights) and the
//! reference log-probs with the frozen starting model (with LoRA: the same
//! model with its adapter taken off), then PPO epochs over the step samples
//! ([`update::ppo_update`]). The sampler is rebuilt from the trained weights every iteration.
//!
//! Every random choice derives from `run.seed` and the iteration number, so a run resumed
//! from a checkpoint continues exactly as the uninterrupted run: the checkpoint holds the
//! weights, the optimizer, the iteration and the bad-update streak; the task sampler's,
//! the rollouts' and the shuffles' states are functions of the iteration.
//!
//! ```text
//! DIR/config.toml                 the resolved config
//! DIR/metrics.jsonl               one line per iteration; evaluations as lines with "eval"
//! DIR/rollouts/NNNN.jsonl.gz      iteration NNNN's scored episodes (`rlvmr score` schema)
//! DIR/checkpoints/iter-NNNN/      weights (or adapter), optimizer, rl_state.json, rlvmr.toml
//! DIR/final/                      the trained model (merged), loadable by `rlvmr eval`
//! DIR/coldstart/, DIR/sft/        with `rl.init = "coldstart"`
//! ```

pub mod levels;
pub mod metrics;
pub mod score;
pub mod update;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use policy::{AdamW, AdamWConfig, Llama, LoraAdapters, Tokenizer};
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use crate::checkpoints::{load_model, read_state, save_checkpoint, saved_run_config, RL_STATE_FILE, RUN_CONFIG_FILE};
use crate::collector::{collect, grouped_specs, mix};
use crate::config::{RlGames, RunConfig, COLDSTART_INIT};
use crate::envs::EnvProvider;
use crate::error::{Result, TrainerError};
use crate::eval::{eval_tasks, evaluate, Evaluation};
use crate::policies::ModelPolicy;
use crate::record::{EpisodeRecord, TaskRef};
use crate::rundir::{write_file_atomically, RunDir};
use crate::seeds;
pub use metrics::RlReport;
use metrics::{EvalLine, IterationLine, Seconds};
use score::{score_episodes, scored_line, ScoredStep};
use update::{ppo_update, reply_logprobs, Sample, UpdateOptions};

/// Where checkpoints go inside the run directory.
const CHECKPOINTS: &str = "checkpoints";

/// Where a checkpoint left off.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RlState {
    /// Iterations done.
    pub iteration: usize,
    /// The model the run started from (the reference model, and the LoRA base).
    pub init: String,
    /// Updates skipped in a row at the end of this iteration.
    pub bad_streak: usize,
}

/// `position..position + count` of the draw sequence: seeded, shuffled passes over `tasks`
/// (pass `e` shuffled with `mix(seed, e)`), so any stretch of it is known without drawing
/// what came before.
pub fn draw_tasks(tasks: &[TaskRef], seed: u64, position: usize, count: usize) -> Vec<TaskRef> {
    let n = tasks.len();
    if n == 0 {
        return Vec::new();
    }
    let mut out = Vec::with_capacity(count);
    let mut pass: Option<(usize, Vec<usize>)> = None;
    for k in position..position + count {
        let epoch = k / n;
        if pass.as_ref().is_none_or(|(e, _)| *e != epoch) {
            let mut order: Vec<usize> = (0..n).collect();
            order.shuffle(&mut ChaCha8Rng::seed_from_u64(mix(seed, epoch as u64)));
            pass = Some((epoch, order));
        }
        if let Some((_, order)) = &pass {
            out.push(tasks[order[k % n]].clone());
        }
    }
    out
}

/// The training games the iterations draw from (`rl.games`), in the provider's order.
pub fn training_tasks(provider: &dyn EnvProvider, config: &RunConfig) -> Vec<TaskRef> {
    let tasks = provider.train_tasks();
    match config.rl.games {
        RlGames::All => tasks,
        RlGames::Fitting => tasks.into_iter().filter(|task| provider.expert_may_fit(task, config.env.max_steps)).collect(),
    }
}

/// The checkpoint folder of iteration `n`.
fn checkpoint_dir(dir: &Path, n: usize) -> PathBuf {
    dir.join(CHECKPOINTS).join(format!("iter-{n:04}"))
}

/// The newest complete checkpoint of a run directory (a folder holding its state file; a
/// save cut short leaves only a temporary folder).
pub fn latest_checkpoint(dir: &Path) -> Result<Option<(PathBuf, RlState)>> {
    let root = dir.join(CHECKPOINTS);
    let Ok(entries) = std::fs::read_dir(&root) else {
        return Ok(None);
    };
    let mut best: Option<(usize, PathBuf)> = None;
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(n) = name.strip_prefix("iter-").and_then(|n| n.parse::<usize>().ok()) else {
            continue;
        };
        if entry.path().join(RL_STATE_FILE).is_file() && best.as_ref().is_none_or(|(b, _)| n > *b) {
            best = Some((n, entry.path()));
        }
    }
    let Some((_, path)) = best else { return Ok(None) };
    let state: RlState = read_state(&path.join(RL_STATE_FILE))?;
    Ok(Some((path, state)))
}

/// Fails now, before any rollout, when the run directory cannot hold a checkpoint: writes
/// and removes a file of that size.
fn probe_space(dir: &Path, bytes: usize) -> Result<()> {
    let path = dir.join(".space-probe");
    let result = (|| {
        let mut file = std::fs::File::create(&path)?;
        let block = vec![0u8; 1 << 20];
        let mut left = bytes;
        while left > 0 {
            let n = left.min(block.len());
            file.write_all(&block[..n])?;
            left -= n;
        }
        file.sync_all()
    })();
    let _ = std::fs::remove_file(&path);
    result.map_err(|e| {
        TrainerError::Invalid(format!(
            "the run directory {} cannot hold a checkpoint ({} MB): {e}",
            dir.display(),
            bytes >> 20
        ))
    })
}

/// The model to start from: `rl.init`, else `model.path`; `coldstart` runs the cold start
/// and SFT into the run directory first (once: a finished SFT is reused on resume).
fn resolve_init(config: &RunConfig, dir: &RunDir) -> Result<String> {
    let init = if config.rl.init.is_empty() { &config.model.path } else { &config.rl.init };
    if init != COLDSTART_INIT {
        return Ok(init.clone());
    }
    let sft_dir = dir.file("sft");
    let final_dir = sft_dir.join("final");
    if final_dir.join(RUN_CONFIG_FILE).is_file() {
        eprintln!("reusing the finished SFT model {}", final_dir.display());
        return Ok(final_dir.display().to_string());
    }
    if config.model.path != crate::config::SCRATCH_MODEL {
        // A model that cannot load fails now, not after the demonstrations are played.
        policy::assets::resolve_model(&config.model.path)?;
    }
    let coldstart_dir = dir.file("coldstart");
    eprintln!("cold start: {} expert demonstrations into {}", config.coldstart.episodes, coldstart_dir.display());
    let coldstart = crate::coldstart::run(config, &coldstart_dir)?;
    eprintln!("cold start: {}", coldstart.summary());
    let mut sft_config = config.clone();
    sft_config.sft.data = coldstart_dir.join("sft.jsonl");
    eprintln!("SFT of {} into {}", config.model.path, sft_dir.display());
    let (report, _) = crate::sft::run(&sft_config, &sft_dir, None)?;
    Ok(report.final_dir.display().to_string())
}

/// `config` with the prompt settings saved beside the starting model (`rlvmr.toml`, written
/// by `rlvmr sft` and `rlvmr train`), so the run shows the model the prompts it learned from.
fn with_saved_prompt(config: &RunConfig, init: &str) -> Result<RunConfig> {
    let mut config = config.clone();
    if let Some(saved) = saved_run_config(init) {
        let prompt = RunConfig::from_file(&saved)?.prompt;
        if prompt != config.prompt {
            eprintln!("prompt settings carried over from {}", saved.display());
            config.prompt = prompt;
        }
    }
    Ok(config)
}

/// The model being trained (with its LoRA adapter when configured) and the frozen reference
/// (a second copy for a full fine-tune with a KL term; none otherwise).
struct Models {
    model: Llama,
    tokenizer: Tokenizer,
    reference: Option<Llama>,
}

fn load_models(config: &RunConfig, init: &str) -> Result<Models> {
    let device = config.model.device()?;
    let (mut model, tokenizer) = load_model(init, &device)?;
    let lora = config.rl.lora_config()?;
    if let Some(lora) = lora.clone() {
        let adapters = LoraAdapters::new(
            model.config(),
            lora,
            model.dtype(),
            model.device(),
            mix(config.run.seed, seeds::RL_LORA),
        )?;
        model.attach_lora(adapters)?;
    }
    let reference = if config.rl.kl_coef > 0.0 && lora.is_none() {
        Some(load_model(init, &device)?.0)
    } else {
        None
    };
    Ok(Models { model, tokenizer, reference })
}

/// Bytes a checkpoint of `model` takes (weights or adapter, and two Adam moments).
fn checkpoint_bytes(model: &Llama) -> usize {
    let trainable: usize = model.trainable_vars().iter().map(|(_, v)| v.elem_count()).sum();
    let weights: usize = model.named_vars().iter().map(|(_, v)| v.elem_count()).sum();
    let dtype = model.dtype().size_in_bytes();
    let saved = if model.lora().is_some() { trainable } else { weights };
    (saved + 2 * trainable) * dtype
}

/// The step samples of an iteration: every step of an episode that did not end on an error,
/// with its reply tokens, whose prompt and reply fit the context.
fn samples_of(episodes: &[EpisodeRecord], scores: &[Vec<ScoredStep>], context: usize) -> (Vec<Sample>, usize) {
    let mut samples = Vec::new();
    let mut too_long = 0;
    for (episode, scored) in episodes.iter().zip(scores) {
        if episode.error.is_some() {
            continue;
        }
        for (step, s) in episode.steps.iter().zip(scored) {
            if step.response_ids.is_empty() || step.prompt_ids.is_empty() {
                continue;
            }
            if step.prompt_ids.len() + step.response_ids.len() > context {
                too_long += 1;
                continue;
            }
            samples.push(Sample {
                prompt: step.prompt_ids.clone(),
                response: step.response_ids.clone(),
                advantage: s.score.advantage as f32,
                sampled: step.logprobs.clone(),
                old: Vec::new(),
                reference: Vec::new(),
            });
        }
    }
    (samples, too_long)
}

/// The temperature the update scores replies at: the rollouts' (verl divides the actor's
/// logits by it), or 1 for greedy rollouts (temperature 0), whose replies have no tempered
/// distribution.
fn scoring_temperature(config: &RunConfig) -> f64 {
    match config.rollout.temperature {
        t if t > 0.0 => t,
        _ => 1.0,
    }
}

/// Mean and max of `|sampled - old|` over every reply token.
fn logprob_gap(samples: &[Sample]) -> (f64, f64) {
    let (mut sum, mut max, mut n) = (0.0f64, 0.0f64, 0usize);
    for s in samples {
        for (a, b) in s.sampled.iter().zip(&s.old) {
            let d = (*a as f64 - *b as f64).abs();
            sum += d;
            max = max.max(d);
            n += 1;
        }
    }
    (if n > 0 { sum / n as f64 } else { 0.0 }, max)
}

/// Appends lines to `metrics.jsonl` (kept up to date after every iteration).
fn append_line(dir: &RunDir, value: &impl Serialize) -> Result<()> {
    let path = dir.file("metrics.jsonl");
    let line = serde_json::to_string(value).map_err(|e| TrainerError::context("metrics", e))?;
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .map_err(|e| TrainerError::io(&path, e))?;
    writeln!(file, "{line}").map_err(|e| TrainerError::io(&path, e))
}

/// Keeps the metrics lines of the first `iterations` iterations (a resumed run writes the
/// later ones again); a line cut short by a kill is dropped.
fn truncate_metrics(dir: &RunDir, iterations: usize) -> Result<()> {
    let path = dir.file("metrics.jsonl");
    let Ok(text) = std::fs::read_to_string(&path) else { return Ok(()) };
    let kept: String = text
        .lines()
        .filter(|line| {
            serde_json::from_str::<serde_json::Value>(line)
                .ok()
                .and_then(|v| v.get("iteration").and_then(|i| i.as_u64()))
                .is_some_and(|i| (i as usize) <= iterations)
        })
        .map(|line| format!("{line}\n"))
        .collect();
    write_file_atomically(&path, kept.as_bytes())
}

/// The folder of a run's scored episodes, one file per iteration ([`rollouts_file`]).
pub fn rollouts_folder(run: &Path) -> PathBuf {
    run.join("rollouts")
}

/// Iteration `iteration`'s scored episodes in [`rollouts_folder`], gzipped JSON lines.
pub fn rollouts_file(folder: &Path, iteration: usize) -> PathBuf {
    folder.join(format!("{iteration:04}.jsonl.gz"))
}

/// Writes an iteration's scored episodes, gzipped.
fn write_rollouts(dir: &RunDir, iteration: usize, episodes: &[EpisodeRecord], scores: &[Vec<ScoredStep>]) -> Result<()> {
    let folder = rollouts_folder(dir.path());
    std::fs::create_dir_all(&folder).map_err(|e| TrainerError::io(&folder, e))?;
    let path = rollouts_file(&folder, iteration);
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    for (episode, scored) in episodes.iter().zip(scores) {
        let line = serde_json::to_string(&scored_line(episode, scored)?)
            .map_err(|e| TrainerError::context("rollouts", e))?;
        writeln!(gz, "{line}").map_err(|e| TrainerError::io(&path, e))?;
    }
    let bytes = gz.finish().map_err(|e| TrainerError::io(&path, e))?;
    write_file_atomically(&path, &bytes)
}

fn save_iteration(dir: &RunDir, config: &RunConfig, models: &Models, opt: &AdamW, state: &RlState) -> Result<PathBuf> {
    let path = checkpoint_dir(dir.path(), state.iteration);
    save_checkpoint(&path, config, &models.model, &models.tokenizer, Some((opt, RL_STATE_FILE, state)))?;
    Ok(path)
}

/// The environments of the evaluations during training (`rl.eval_levels`, else the run's
/// level), each with its level; the run's own level uses the run's provider.
fn eval_providers<'a>(config: &RunConfig, run: &'a dyn EnvProvider) -> Result<Vec<(String, EvalProvider<'a>)>> {
    let levels = match config.rl.eval_levels.is_empty() {
        true => vec![config.env.split.clone()],
        false => config.rl.eval_levels.clone(),
    };
    levels
        .into_iter()
        .map(|level| {
            let provider = match level == config.env.split {
                true => EvalProvider::Run(run),
                false => EvalProvider::Opened(config.open_level(&level)?),
            };
            Ok((level, provider))
        })
        .collect()
}

/// The run's own environment, or one opened for another level.
enum EvalProvider<'a> {
    Run(&'a dyn EnvProvider),
    Opened(Box<dyn EnvProvider>),
}

impl EvalProvider<'_> {
    fn get(&self) -> &dyn EnvProvider {
        match self {
            EvalProvider::Run(p) => *p,
            EvalProvider::Opened(p) => p.as_ref(),
        }
    }
}

/// Evaluates the current weights at `eval.temperature` on each evaluation level's seeded
/// draw of test games (the same draw every time): one line per level.
fn evaluate_now(
    config: &RunConfig,
    providers: &[(String, EvalProvider<'_>)],
    models: &Models,
    iteration: usize,
) -> Result<Vec<EvalLine>> {
    let mut lines = Vec::new();
    for (level, provider) in providers {
        let started = Instant::now();
        let name = format!("iteration {iteration}");
        let evaluation = evaluate_model(config, provider.get(), models, name, level, config.rl.eval_episodes, false)?;
        lines.push(EvalLine::new(iteration, &evaluation.summary, started.elapsed().as_secs_f64()));
    }
    Ok(lines)
}

/// The current weights on `episodes` test games of `provider` (all: `None`) at
/// `eval.temperature`.
fn evaluate_model(
    config: &RunConfig,
    provider: &dyn EnvProvider,
    models: &Models,
    name: String,
    level: &str,
    episodes: Option<usize>,
    progress: bool,
) -> Result<Evaluation> {
    let mut policy = ModelPolicy::sampling(
        name,
        &models.model,
        models.tokenizer.clone(),
        config.model_options(config.eval.temperature),
    )?;
    let tasks = eval_tasks(provider, episodes, config.eval_draw_seed());
    let mut options = config.collector_options();
    options.progress = progress;
    let mut evaluation = evaluate(provider, &mut policy, &tasks, level, &options, config.run.seed)?;
    evaluation.summary.protocol = Some(config.env.protocol);
    Ok(evaluation)
}

/// Runs (or with `resume`, continues) `rlvmr train` into `out` on the config's environment.
pub fn train(config: &RunConfig, out: &Path, resume: bool) -> Result<RlReport> {
    config.validate_for_training("rlvmr train")?;
    let provider = config.open_env()?;
    train_on(config, provider.as_ref(), out, resume)
}

/// [`train`] on a given environment provider.
pub fn train_on(config: &RunConfig, provider: &dyn EnvProvider, out: &Path, resume: bool) -> Result<RlReport> {
    config.validate_for_training("rlvmr train")?;
    let dir = RunDir::create(out, config)?;
    let checkpoint = if resume { latest_checkpoint(out)? } else { None };
    if resume && checkpoint.is_none() {
        eprintln!("no complete checkpoint in {}: starting from the beginning", out.display());
    }
    let init = match &checkpoint {
        Some((_, state)) => state.init.clone(),
        None => resolve_init(config, &dir)?,
    };
    let carried = with_saved_prompt(config, &init)?;
    if carried != *config {
        carried.save(&dir.file("config.toml"))?;
    }
    let config = &carried;
    let mut models = load_models(config, &init)
        .map_err(|e| TrainerError::context(format!("cannot load the starting model {init}"), e))?;
    probe_space(out, checkpoint_bytes(&models.model))?;
    let rl = &config.rl;
    let mut opt = AdamW::for_model(
        &models.model,
        AdamWConfig { lr: rl.lr, weight_decay: rl.weight_decay, ..AdamWConfig::default() },
    )?;
    let (mut start, mut bad_streak) = (0, 0);
    match &checkpoint {
        Some((path, state)) => {
            if state.iteration > rl.iterations {
                return Err(TrainerError::value(
                    "rl.iterations",
                    format!("{} is fewer than the {} iterations {} has done", rl.iterations, state.iteration, out.display()),
                ));
            }
            policy::checkpoint::load_training_state(&models.model, &mut opt, path)?;
            (start, bad_streak) = (state.iteration, state.bad_streak);
            truncate_metrics(&dir, start)?;
            eprintln!("resuming after iteration {start} from {}", path.display());
        }
        None => {
            let metrics = dir.file("metrics.jsonl");
            if metrics.exists() {
                std::fs::remove_file(&metrics).map_err(|e| TrainerError::io(&metrics, e))?;
            }
        }
    }

    let train_tasks = training_tasks(provider, config);
    if train_tasks.is_empty() {
        let which = if config.rl.games == RlGames::Fitting { " that fit in env.max_steps (rl.games = \"fitting\")" } else { "" };
        return Err(TrainerError::Invalid(format!("{} {} has no training tasks{which}", config.env.name, config.env.split)));
    }
    let eval_envs = eval_providers(config, provider)?;
    let from_sampler = config.old_logprobs_from_sampler();
    let pad = crate::sft::pad_id(&models.tokenizer);
    let loss = rl.loss_config();
    let mut collector = config.collector_options();
    collector.progress = false;
    let progress = metrics::Progress::new(rl.iterations, start);
    let (mut lines, mut evals) = (Vec::new(), Vec::new());
    for iteration in start..rl.iterations {
        let number = iteration + 1;
        let seed = mix(config.run.seed, number as u64);
        let lr = rl.learning_rate(iteration);
        opt.set_lr(lr);
        let mut seconds = Seconds::default();

        let t = Instant::now();
        let tasks = draw_tasks(&train_tasks, config.run.seed, iteration * rl.tasks_per_iter, rl.tasks_per_iter);
        let specs = grouped_specs(&tasks, config.rollout.group_size, mix(seed, seeds::RL_ROLLOUT));
        let mut options = config.model_options(config.rollout.temperature);
        options.seed = mix(seed, seeds::RL_ROLLOUT);
        let mut policy = ModelPolicy::sampling("rl", &models.model, models.tokenizer.clone(), options)?;
        let collection = collect(provider, &mut policy, &specs, &collector)?;
        drop(policy);
        seconds.rollout = t.elapsed().as_secs_f64();
        // Where an iteration takes minutes (a large model, a GPU), say how far it got.
        eprintln!(
            "iteration {number}: {} episodes played in {:.0} s; scoring and update next",
            collection.episodes.len(),
            seconds.rollout
        );

        let t = Instant::now();
        let scores = score_episodes(config, &collection.episodes)?;
        let context = models.model.config().max_position;
        let (mut samples, too_long) = samples_of(&collection.episodes, &scores, context);
        seconds.scoring = t.elapsed().as_secs_f64();

        let t = Instant::now();
        let temperature = scoring_temperature(config);
        let mut gap = None;
        if !samples.is_empty() {
            if from_sampler && samples.iter().all(|s| s.sampled.len() == s.response.len()) {
                for s in samples.iter_mut() {
                    s.old = s.sampled.clone();
                }
            } else {
                let old = reply_logprobs(&models.model, &samples, rl.micro_batch, pad, temperature)?;
                for (s, lp) in samples.iter_mut().zip(old) {
                    s.old = lp;
                }
                gap = Some(logprob_gap(&samples));
            }
            if loss.kl_coef != 0.0 {
                let reference = reference_logprobs(&mut models, &samples, rl.micro_batch, pad, temperature)?;
                for (s, lp) in samples.iter_mut().zip(reference) {
                    s.reference = lp;
                }
            }
        }
        seconds.logprobs = t.elapsed().as_secs_f64();

        let t = Instant::now();
        let update = ppo_update(
            &models.model,
            &mut opt,
            &samples,
            &UpdateOptions {
                loss: &loss,
                epochs: rl.ppo_epochs,
                mini_batch: rl.mini_batch,
                micro_batch: rl.micro_batch,
                gradient_checkpointing: rl.gradient_checkpointing,
                max_grad_norm: rl.max_grad_norm,
                pad,
                temperature,
                seed: mix(seed, seeds::RL_SHUFFLE),
                bad_streak,
                max_bad_updates: rl.max_bad_updates,
            },
        )?;
        let update = update.map_err(|bad| {
            TrainerError::Invalid(format!(
                "iteration {number}: {} updates in a row had a non-finite loss or gradient (last: {}); \
                 stopped without saving (the last checkpoint is untouched)",
                bad.streak, bad.last
            ))
        })?;
        bad_streak = update.bad_streak;
        seconds.update = t.elapsed().as_secs_f64();

        write_rollouts(&dir, number, &collection.episodes, &scores)?;
        let line = IterationLine::new(
            number,
            config,
            &collection,
            &scores,
            metrics::SampleFacts { samples: &samples, too_long, gap },
            &update,
            lr,
            seconds.clone(),
        );
        append_line(&dir, &line)?;
        progress.iteration(&line);
        lines.push(line);

        let last = number == rl.iterations;
        if rl.eval_every > 0 && (number % rl.eval_every == 0 || last) {
            for eval in evaluate_now(config, &eval_envs, &models, number)? {
                append_line(&dir, &eval)?;
                progress.eval(&eval);
                evals.push(eval);
            }
        }
        if last || (rl.save_every > 0 && number % rl.save_every == 0) {
            let state = RlState { iteration: number, init: init.clone(), bad_streak };
            save_iteration(&dir, config, &models, &opt, &state)?;
        }
    }
    progress.finish();
    let final_dir = dir.file("final");
    save_checkpoint::<()>(&final_dir, config, &models.model, &models.tokenizer, None)?;
    let final_evals = final_evaluations(config, &dir, &models)?;
    Ok(RlReport {
        dir: out.to_path_buf(),
        iterations: rl.iterations,
        lines,
        evals,
        final_dir,
        protocol: Some(config.env.protocol),
        env: config.env.name.clone(),
        final_evals,
    })
}

/// The trained model on every test game of each `rl.final_eval` level (or on `eval.episodes`
/// seeded draws of them, when set: ScienceWorld's levels have hundreds), at
/// `eval.temperature`; each summary goes to `DIR/eval/<level>.json` and each level's
/// episodes to `DIR/eval/<level>.jsonl`.
fn final_evaluations(config: &RunConfig, dir: &RunDir, models: &Models) -> Result<Vec<crate::eval::Summary>> {
    let mut summaries = Vec::new();
    if !config.rl.final_eval.is_empty() {
        let folder = dir.file("eval");
        std::fs::create_dir_all(&folder).map_err(|e| TrainerError::io(&folder, e))?;
    }
    for level in &config.rl.final_eval {
        let provider = config.open_level(level)?;
        match config.eval.episodes {
            Some(n) => eprintln!("final evaluation: {n} seeded draws of {level}'s test games"),
            None => eprintln!("final evaluation: every test game of {level}"),
        }
        let evaluation = evaluate_model(config, provider.as_ref(), models, "final".into(), level, config.eval.episodes, true)?;
        dir.write_jsonl(&format!("eval/{level}.jsonl"), &evaluation.episodes)?;
        let path = dir.file(&format!("eval/{level}.json"));
        let text = serde_json::to_string_pretty(&evaluation.summary).map_err(|e| TrainerError::context("evaluation summary", e))?;
        write_file_atomically(&path, text.as_bytes())?;
        summaries.push(evaluation.summary);
    }
    Ok(summaries)
}

/// Reply log-probs under the reference: the frozen copy, or with LoRA the base with its
/// adapter taken off for the pass.
fn reference_logprobs(models: &mut Models, samples: &[Sample], rows: usize, pad: u32, temperature: f64) -> Result<Vec<Vec<f32>>> {
    if let Some(reference) = &models.reference {
        return reply_logprobs(reference, samples, rows, pad, temperature);
    }
    let adapters = models.model.take_lora();
    let result = reply_logprobs(&models.model, samples, rows, pad, temperature);
    if let Some(adapters) = adapters {
        models.model.attach_lora(adapters)?;
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tasks(n: usize) -> Vec<TaskRef> {
        (0..n).map(|i| TaskRef { game: format!("g{i}"), task_type: "pick".into() }).collect()
    }

    #[test]
    fn draws_are_seeded_epochs_and_any_stretch_is_known_alone() {
        let all = tasks(5);
        let first = draw_tasks(&all, 3, 0, 12);
        for epoch in first.chunks(5).take(2) {
            let mut games: Vec<_> = epoch.iter().map(|t| t.game.clone()).collect();
            games.sort();
            assert_eq!(games, ["g0", "g1", "g2", "g3", "g4"]);
        }
        assert_eq!(draw_tasks(&all, 3, 7, 5), first[7..12].to_vec());
        assert_ne!(draw_tasks(&all, 4, 0, 12), first);
        assert!(draw_tasks(&[], 3, 0, 4).is_empty());
    }
}
