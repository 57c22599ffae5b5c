//! `rlvmr eval` as a library function, and the policy a `--policy` name means (the binary
//! only parses arguments). The other commands' library functions live with what they run:
//! [`crate::coldstart::run`], [`crate::sft::run`], [`crate::rl::train`].

use std::path::{Path, PathBuf};

use crate::agent::Policy;
use crate::envs::Detours;
use crate::config::RunConfig;
use crate::envs::EnvProvider;
use crate::error::Result;
use crate::eval::{eval_tasks, evaluate, Evaluation};
use crate::policies::{ModelPolicy, RandomPolicy};
use crate::served::ServedPolicy;
use crate::rundir::RunDir;
use crate::checkpoints::{load_model, RUN_CONFIG_FILE};

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
        EXPERT => provider.expert(Detours::default(), style),
        RANDOM => Ok(Box::new(RandomPolicy::new())),
        served if served.starts_with(SERVED_PREFIX) => Ok(Box::new(ServedPolicy::connect(
            config.model.server.options(),
            config.served_sampling(temperature),
        )?)),
        model => {
            let (llama, tokenizer) = load_model(model, &config.model.device()?)?;
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

/// The protocol a model folder was trained under, from the config saved beside its weights
/// (`rlvmr.toml`); `None` for the expert, a hub model or a GGUF file.
fn model_protocol(policy: &str) -> Result<Option<crate::envs::Protocol>> {
    let saved = Path::new(policy).join(RUN_CONFIG_FILE);
    if !saved.is_file() {
        return Ok(None);
    }
    Ok(Some(RunConfig::from_file(&saved)?.env.protocol))
}

/// `rlvmr eval`: plays the level's test tasks (all once, or `eval.episodes` drawn) with
/// `policy` at `eval.temperature`; writes config.toml, trajectories.jsonl, summary.json.
pub fn run_eval(config: &RunConfig, policy_name: &str, out: &Path) -> Result<Evaluation> {
    config.validate()?;
    let provider = config.open_env()?;
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

/// The default run directory of an SFT run: `<run.out_dir>/<run.name>/sft`.
pub fn default_sft_dir(config: &RunConfig) -> PathBuf {
    config.run.out_dir.join(&config.run.name).join("sft")
}
