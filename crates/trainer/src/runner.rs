//! Whole commands as library functions (the binary only parses arguments): build the
//! environment and the policy from a resolved config, run, and write the run directory.

use std::path::{Path, PathBuf};

use crate::agent::Policy;
use crate::coldstart::{coldstart, Coldstart, Detours};
use crate::config::RunConfig;
use crate::envs::{open_env, EnvProvider};
use crate::error::Result;
use crate::eval::{eval_tasks, evaluate, Evaluation, Summary};
use crate::policies::{ExpertPolicy, GoldPolicy, ModelPolicy, RandomPolicy, ServedPolicy};
use crate::rundir::RunDir;
use crate::sft::{self, SftReport};
use crate::teacher::Teacher;

/// The policies `--policy` names besides a model.
pub const EXPERT: &str = "expert";
pub const RANDOM: &str = "random";
/// `--policy openai:BASE_URL`: a model behind an OpenAI-compatible server.
pub const SERVED_PREFIX: &str = "openai:";

/// The policy a config names when `--policy` does not: its served model, else its model.
pub fn config_policy(config: &RunConfig) -> String {
    if config.model.is_served() {
        format!("{SERVED_PREFIX}{}", config.model.server.base_url)
    } else {
        config.model.path.clone()
    }
}

/// `config` with `policy` applied: `openai:BASE_URL` selects the served backend at that URL.
pub fn with_policy(mut config: RunConfig, policy: &str) -> RunConfig {
    if let Some(url) = policy.strip_prefix(SERVED_PREFIX) {
        config.model.backend = "openai".into();
        config.model.server.base_url = url.to_string();
    }
    config
}

/// `expert`, `random`, `openai:BASE_URL` (the config's served model, see [`with_policy`]), or
/// a model (a checkpoint folder, a GGUF file or the embedded default's name) sampling at
/// `temperature`.
pub fn make_policy(
    name: &str,
    provider: &dyn EnvProvider,
    config: &RunConfig,
    temperature: f64,
) -> Result<Box<dyn Policy>> {
    let style = crate::collector::output_style(&config.prompt);
    match name {
        EXPERT if provider.name() == "sciworld" => Ok(Box::new(GoldPolicy::new(0.0)?.replying(style))),
        EXPERT => Ok(Box::new(ExpertPolicy::new(0.0).replying(style))),
        RANDOM => Ok(Box::new(RandomPolicy::new())),
        served if served.starts_with(SERVED_PREFIX) => Ok(Box::new(ServedPolicy::connect(
            config.model.server.options(),
            config.served_sampling(temperature),
        )?)),
        model => {
            let (llama, tokenizer) = sft::load_model(model, &config.model.device()?)?;
            Ok(Box::new(ModelPolicy::new(
                model,
                llama,
                tokenizer,
                config.model_options(temperature),
            )?))
        }
    }
}

/// A name safe as a folder name: `../m.gguf` → `m.gguf`.
fn folder_name(name: &str) -> String {
    let base = Path::new(name)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| name.to_string());
    base.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The default run directory of an evaluation (a served model's is named after the model).
pub fn default_eval_dir(config: &RunConfig, policy: &str) -> PathBuf {
    let name = match policy.starts_with(SERVED_PREFIX) {
        true => format!("openai-{}", folder_name(&config.model.server.model_name)),
        false => folder_name(policy),
    };
    config
        .run
        .out_dir
        .join(format!("eval-{}-{}-{name}", config.env.name, config.env.split))
}

fn open(config: &RunConfig) -> Result<Box<dyn EnvProvider>> {
    open_env(
        &config.env.name,
        &config.env.split,
        config.env.data.as_deref(),
    )
}

/// The protocol a model folder was trained under, from the config saved beside its weights
/// (`rlvmr.toml`); `None` for the expert, a hub model or a GGUF file.
fn model_protocol(policy: &str) -> Result<Option<crate::envs::Protocol>> {
    let saved = Path::new(policy).join(crate::sft::RUN_CONFIG_FILE);
    if !saved.is_file() {
        return Ok(None);
    }
    Ok(RunConfig::from_file(&saved)?.trained_protocol())
}

/// `rlvmr eval`: plays the level's test tasks (all once, or `eval.episodes` drawn) with
/// `policy` at `eval.temperature`; writes config.toml, trajectories.jsonl, summary.json.
pub fn run_eval(config: &RunConfig, policy_name: &str, out: &Path) -> Result<Evaluation> {
    config.validate()?;
    let provider = open(config)?;
    let mut policy = make_policy(
        policy_name,
        provider.as_ref(),
        config,
        config.eval.temperature,
    )?;
    let dir = RunDir::create(out, config)?;
    let tasks = eval_tasks(provider.as_ref(), config.eval.episodes, config.run.seed);
    let mut evaluation = evaluate(
        provider.as_ref(),
        policy.as_mut(),
        &tasks,
        &config.env.split,
        &config.collector_options(),
        config.run.seed,
    )?;
    evaluation.summary.protocol = model_protocol(policy_name)?;
    dir.write_jsonl("trajectories.jsonl", &evaluation.episodes)?;
    dir.write_json("summary.json", &evaluation.summary)?;
    Ok(evaluation)
}

/// `rlvmr coldstart`: expert demonstrations of the level's training tasks, annotated by the
/// built-in annotator or a served teacher; writes config.toml, trajectories.jsonl, sft.jsonl
/// (and with a teacher, annotation.json).
pub fn run_coldstart(config: &RunConfig, out: &Path) -> Result<Coldstart> {
    config.validate()?;
    let provider = open(config)?;
    let c = &config.coldstart;
    let teacher = match c.has_teacher() {
        true => Some(Teacher::connect(c.teacher.options(), c.teacher_temperature, c.teacher_max_tokens)?),
        false => None,
    };
    let dir = RunDir::create(out, config)?;
    let result = coldstart(
        provider.as_ref(),
        c.episodes,
        Detours { mistake_fraction: c.mistake_fraction, appliance_search: c.appliance_search },
        config.env.protocol,
        config.run.seed,
        &config.collector_options(),
        teacher.as_ref(),
    )?;
    dir.write_jsonl("trajectories.jsonl", &result.episodes)?;
    dir.write_jsonl("sft.jsonl", &result.samples)?;
    if let Some(report) = &result.teacher {
        dir.write_json("annotation.json", report)?;
    }
    Ok(result)
}

/// The default run directory of an SFT run: `<run.out_dir>/<run.name>/sft`.
pub fn default_sft_dir(config: &RunConfig) -> PathBuf {
    config.run.out_dir.join(&config.run.name).join("sft")
}

/// `rlvmr sft`: trains `model.path` on `sft.data`; writes config.toml, metrics.jsonl,
/// checkpoints/ and final/, then (when `sft.eval_episodes` > 0) evaluates the final model
/// on that many test episodes into `eval/`.
pub fn run_sft(
    config: &RunConfig,
    out: &Path,
    resume: Option<&Path>,
) -> Result<(SftReport, Option<Summary>)> {
    config.validate()?;
    config.model.require_local("rlvmr sft")?;
    let samples = sft::read_samples(&config.sft.data)?;
    let provider = open(config)?;
    let (model, tokenizer) = sft::initial_model(config, &samples, resume)?;
    let dir = RunDir::create(out, config)?;
    let report = sft::train(config, &model, &tokenizer, &samples, &dir, resume)?;
    if config.sft.eval_episodes == 0 {
        return Ok((report, None));
    }
    let name = report.final_dir.display().to_string();
    let mut policy = ModelPolicy::new(
        name,
        model,
        tokenizer,
        config.model_options(config.eval.temperature),
    )?;
    let eval_dir = RunDir::create(&dir.file("eval"), config)?;
    let tasks = eval_tasks(
        provider.as_ref(),
        Some(config.sft.eval_episodes),
        config.run.seed,
    );
    let mut evaluation = evaluate(
        provider.as_ref(),
        &mut policy,
        &tasks,
        &config.env.split,
        &config.collector_options(),
        config.run.seed,
    )?;
    evaluation.summary.protocol = config.trained_protocol();
    eval_dir.write_jsonl("trajectories.jsonl", &evaluation.episodes)?;
    eval_dir.write_json("summary.json", &evaluation.summary)?;
    Ok((report, Some(evaluation.summary)))
}
