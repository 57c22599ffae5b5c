//! `rlvmr eval` as a library function, and the policy a `--policy` name means (the binary
//! only parses arguments). The other commands' library functions live with what they run:
//! [`crate::coldstart::run`], [`crate::sft::run`], [`crate::rl::train`].

use std::path::{Path, PathBuf};

use crate::agent::Policy;
use crate::envs::Detours;
use crate::config::RunConfig;
use crate::envs::EnvProvider;
use crate::error::{Result, TrainerError};
use crate::eval::{eval_tasks, evaluate, Evaluation};
use crate::policies::{ModelPolicy, RandomPolicy};
use crate::served::ServedPolicy;
use crate::rundir::RunDir;
use crate::checkpoints::{load_model, saved_run_config};

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
/// (`rlvmr.toml`); `None` for the expert, a hub model or a GGUF file. Only `env.protocol` is
/// read (absent: the default), so a folder saved by another version of rlvmr, whose other
/// keys this one does not know, still evaluates.
fn model_protocol(policy: &str) -> Result<Option<crate::envs::Protocol>> {
    let Some(saved) = saved_run_config(policy) else {
        return Ok(None);
    };
    let text = std::fs::read_to_string(&saved).map_err(|e| TrainerError::io(&saved, e))?;
    let bad = |message: String| TrainerError::Config { path: saved.display().to_string(), message };
    let table: toml::Table = text.parse().map_err(|e: toml::de::Error| bad(e.to_string()))?;
    match table.get("env").and_then(|env| env.get("protocol")) {
        None => Ok(Some(crate::envs::Protocol::default())),
        Some(value) => value
            .clone()
            .try_into()
            .map(Some)
            .map_err(|e: toml::de::Error| bad(format!("env.protocol: {e}"))),
    }
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
    // Read before the games are played: a folder whose saved config is broken fails now.
    let protocol = model_protocol(policy_name)?;
    let dir = RunDir::create(out, config)?;
    let tasks = eval_tasks(provider.as_ref(), config.eval.episodes, config.eval_draw_seed());
    let mut evaluation = evaluate(
        provider.as_ref(),
        policy.as_mut(),
        &tasks,
        &config.env.split,
        &config.collector_options(),
        config.run.seed,
    )?;
    evaluation.summary.protocol = protocol;
    dir.write_jsonl("trajectories.jsonl", &evaluation.episodes)?;
    dir.write_json("summary.json", &evaluation.summary)?;
    Ok(evaluation)
}

/// The default run directory of an SFT run: `<run.out_dir>/<run.name>/sft`.
pub fn default_sft_dir(config: &RunConfig) -> PathBuf {
    config.run.out_dir.join(&config.run.name).join("sft")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkpoints::RUN_CONFIG_FILE;
    use crate::envs::Protocol;

    fn model_folder(name: &str, saved: Option<&str>) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("rlvmr-model-protocol-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        if let Some(text) = saved {
            std::fs::write(dir.join(RUN_CONFIG_FILE), text).unwrap();
        }
        dir
    }

    #[test]
    fn a_model_folder_gives_its_protocol_whatever_else_its_config_holds() {
        let protocol = |dir: &Path| model_protocol(dir.to_str().unwrap());
        // Keys this version does not know (a folder saved by another version) are not read.
        let strict = model_folder("strict", Some("[env]\nprotocol = \"strict\"\n[prompt]\nno_such_key = 1\n"));
        assert_eq!(protocol(&strict).unwrap(), Some(Protocol::Strict));
        let unsaid = model_folder("unsaid", Some("[prompt]\nroom = true\n"));
        assert_eq!(protocol(&unsaid).unwrap(), Some(Protocol::default()));
        assert_eq!(protocol(&model_folder("none", None)).unwrap(), None);
        let bad = model_folder("bad", Some("[env]\nprotocol = \"loose\"\n"));
        let e = protocol(&bad).unwrap_err().to_string();
        assert!(e.contains("env.protocol") && e.contains("loose") && e.contains(RUN_CONFIG_FILE), "{e}");
        let broken = model_folder("broken", Some("[env\n"));
        assert!(protocol(&broken).unwrap_err().to_string().contains(RUN_CONFIG_FILE));
    }
}
