//! Run configs: TOML deserialised into typed sections. Unknown keys are rejected (the
//! message names the key and its line) and impossible values are refused by
//! [`RunConfig::validate`] (the message names the key as `section.key`). Every key has a
//! default, so a file only says what differs; a run writes the resolved config (every key)
//! as `config.toml` in its run directory.

use std::path::{Path, PathBuf};

use policy::scratch::ScratchConfig;
use rlvmr_core::{PromptConfig, Validity};
use serde::{Deserialize, Serialize};

use crate::collector::{CollectorOptions, DEFAULT_MAX_STEPS};
use crate::error::{Result, TrainerError};
use crate::policies::ModelPolicyOptions;

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RunConfig {
    pub run: RunSection,
    pub env: EnvSection,
    pub model: ModelSection,
    /// The prompt builder's settings (`rlvmr_core::PromptConfig`).
    pub prompt: PromptConfig,
    pub rollout: RolloutSection,
    pub eval: EvalSection,
    pub coldstart: ColdstartSection,
    pub sft: SftSection,
    /// The shape of a from-scratch model (`model.path = "scratch"`): `rlvmr sft` trains its
    /// tokenizer on the SFT texts and initialises it randomly.
    pub scratch: ScratchConfig,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RunSection {
    /// The run's name: its directory is `out_dir/name` unless a command says otherwise.
    pub name: String,
    pub out_dir: PathBuf,
    /// The seed every random choice of the run derives from.
    pub seed: u64,
}

impl Default for RunSection {
    fn default() -> Self {
        RunSection {
            name: "run".into(),
            out_dir: PathBuf::from("runs"),
            seed: 0,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EnvSection {
    /// `alfworld` or `sciworld`.
    pub name: String,
    /// The generalisation level: `L0`, `L1` or `L2`.
    pub split: String,
    /// Agent steps per episode (the spec: 30).
    pub max_steps: usize,
    /// Where the ALFWorld data is (default: `$ALFWORLD_DATA`, `~/.cache/alfworld`, then
    /// `../shared/alfworld/json_2.1.1.zip`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data: Option<PathBuf>,
    /// The format rule: `strict` (the reference code for ALFWorld) or `lenient`.
    pub validity: Validity,
}

impl Default for EnvSection {
    fn default() -> Self {
        EnvSection {
            name: "alfworld".into(),
            split: "L0".into(),
            max_steps: DEFAULT_MAX_STEPS,
            data: None,
            validity: Validity::Strict,
        }
    }
}

/// `model.path` naming a model made from nothing (see [`ScratchConfig`]).
pub const SCRATCH_MODEL: &str = "scratch";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ModelSection {
    /// A GGUF file, a checkpoint folder, the embedded default's name, or `scratch`: a new
    /// model of the `[scratch]` shape (only `rlvmr sft` makes one).
    pub path: String,
    /// Decode with a Q8_0 copy of the weights (CPU speed; log-probs are the copy's).
    pub quantized_decode: bool,
}

impl Default for ModelSection {
    fn default() -> Self {
        ModelSection {
            path: policy::assets::DEFAULT_MODEL_NAME.into(),
            quantized_decode: false,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RolloutSection {
    /// Rollouts per task (G); they share the task's game and seed.
    pub group_size: usize,
    /// Sampling temperature in training (the spec: 1.0).
    pub temperature: f64,
    /// 0: no top-k limit.
    pub top_k: usize,
    /// 1: no nucleus limit.
    pub top_p: f64,
    /// Longest reply in tokens (the spec: 1024).
    pub max_new_tokens: usize,
    /// Most rows sampled in one batch.
    pub max_batch: usize,
    /// Threads that step the environments.
    pub threads: usize,
    /// Past replies are cut to this many characters in later prompts.
    pub history_output_chars: usize,
}

impl Default for RolloutSection {
    fn default() -> Self {
        RolloutSection {
            group_size: 8,
            temperature: 1.0,
            top_k: 0,
            top_p: 1.0,
            max_new_tokens: 256,
            max_batch: 16,
            threads: 2,
            history_output_chars: 2000,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EvalSection {
    /// Episodes to play (seeded draw of test games); absent: every test game once.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub episodes: Option<usize>,
    /// Sampling temperature in evaluation (the spec: 0.4).
    pub temperature: f64,
}

impl Default for EvalSection {
    fn default() -> Self {
        EvalSection {
            episodes: None,
            temperature: 0.4,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ColdstartSection {
    /// Expert demonstrations to keep (the spec: about 200).
    pub episodes: usize,
    /// Share of demonstrations (seeded) with one recoverable mistake.
    pub mistake_fraction: f64,
}

impl Default for ColdstartSection {
    fn default() -> Self {
        ColdstartSection {
            episodes: 200,
            mistake_fraction: 0.25,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SftSection {
    /// The `sft.jsonl` a cold start wrote.
    pub data: PathBuf,
    pub epochs: usize,
    /// Peak learning rate (the spec: 1e-5).
    pub lr: f64,
    /// Share of the optimizer steps spent warming up linearly (the spec: 0.1).
    pub warmup_ratio: f64,
    /// Samples per micro-batch.
    pub batch_size: usize,
    /// Micro-batches per optimizer step.
    pub grad_accum: usize,
    /// Global gradient-norm clip (0: none).
    pub max_grad_norm: f64,
    pub weight_decay: f64,
    /// Samples longer than this many tokens (prompt + response) are left out, with a count.
    pub max_seq_len: usize,
    /// Log the loss every this many optimizer steps.
    pub log_every: usize,
    /// Save a checkpoint every this many optimizer steps (0: only at the end).
    pub save_every: usize,
    /// Episodes of the final evaluation (0: none).
    pub eval_episodes: usize,
    /// Weight of the next-token loss on prompt tokens, beside the response's (0: response
    /// tokens only, as published). A model made from nothing learns to read its prompt (to
    /// copy names from the observation and the action list) far sooner when it also models
    /// the prompt text.
    pub prompt_loss_weight: f64,
}

impl Default for SftSection {
    fn default() -> Self {
        SftSection {
            data: PathBuf::from("runs/coldstart/sft.jsonl"),
            epochs: 5,
            lr: 1e-5,
            warmup_ratio: 0.1,
            batch_size: 4,
            grad_accum: 4,
            max_grad_norm: 1.0,
            weight_decay: 0.0,
            max_seq_len: 2048,
            log_every: 10,
            save_every: 0,
            eval_episodes: 20,
            prompt_loss_weight: 0.0,
        }
    }
}

fn positive(key: &str, value: usize) -> Result<()> {
    if value == 0 {
        return Err(TrainerError::value(key, "must be at least 1, got 0"));
    }
    Ok(())
}

fn in_range(key: &str, value: f64, low: f64, high: f64) -> Result<()> {
    if !(value.is_finite() && value >= low && value <= high) {
        return Err(TrainerError::value(
            key,
            format!("must be in [{low}, {high}], got {value}"),
        ));
    }
    Ok(())
}

fn non_negative(key: &str, value: f64) -> Result<()> {
    if !(value.is_finite() && value >= 0.0) {
        return Err(TrainerError::value(
            key,
            format!("must be a finite number >= 0, got {value}"),
        ));
    }
    Ok(())
}

impl RunConfig {
    /// Reads, parses and validates a config file.
    pub fn from_file(path: &Path) -> Result<RunConfig> {
        let text = std::fs::read_to_string(path).map_err(|e| TrainerError::io(path, e))?;
        let config = Self::from_toml(&text).map_err(|e| match e {
            TrainerError::Config { message, .. } => TrainerError::Config {
                path: path.display().to_string(),
                message,
            },
            other => other,
        })?;
        Ok(config)
    }

    /// Parses and validates config text.
    pub fn from_toml(text: &str) -> Result<RunConfig> {
        let config: RunConfig = toml::from_str(text).map_err(|e| TrainerError::Config {
            path: "<text>".into(),
            message: e.to_string(),
        })?;
        config.validate()?;
        Ok(config)
    }

    /// Every key with its value, as TOML (what a run writes as `config.toml`).
    pub fn to_toml(&self) -> Result<String> {
        toml::to_string(self)
            .map_err(|e| TrainerError::Invalid(format!("cannot write the config as TOML: {e}")))
    }

    /// Writes every key as TOML to `path` (a run's `config.toml`, a checkpoint's `rlvmr.toml`).
    pub fn save(&self, path: &Path) -> Result<()> {
        std::fs::write(path, self.to_toml()?).map_err(|e| TrainerError::io(path, e))
    }

    /// Refuses impossible values, naming the key.
    pub fn validate(&self) -> Result<()> {
        if self.run.name.trim().is_empty() || self.run.name.contains(['/', '\\']) {
            return Err(TrainerError::value(
                "run.name",
                format!("must be a plain non-empty name, got {:?}", self.run.name),
            ));
        }
        if !crate::envs::ENV_NAMES.contains(&self.env.name.as_str()) {
            return Err(TrainerError::value(
                "env.name",
                format!("must be alfworld or sciworld, got {:?}", self.env.name),
            ));
        }
        if !["L0", "L1", "L2"].contains(&self.env.split.as_str()) {
            return Err(TrainerError::value(
                "env.split",
                format!("must be L0, L1 or L2, got {:?}", self.env.split),
            ));
        }
        positive("env.max_steps", self.env.max_steps)?;
        if self.model.path.trim().is_empty() {
            return Err(TrainerError::value("model.path", "must name a model"));
        }
        if self.model.path == SCRATCH_MODEL {
            self.scratch
                .validate()
                .map_err(|e| TrainerError::value("scratch", e.to_string()))?;
        }
        let r = &self.rollout;
        positive("rollout.group_size", r.group_size)?;
        non_negative("rollout.temperature", r.temperature)?;
        if !(r.top_p > 0.0 && r.top_p <= 1.0) {
            return Err(TrainerError::value(
                "rollout.top_p",
                format!("must be in (0, 1], got {}", r.top_p),
            ));
        }
        positive("rollout.max_new_tokens", r.max_new_tokens)?;
        positive("rollout.max_batch", r.max_batch)?;
        positive("rollout.threads", r.threads)?;
        positive("rollout.history_output_chars", r.history_output_chars)?;
        if let Some(n) = self.eval.episodes {
            positive("eval.episodes", n)?;
        }
        non_negative("eval.temperature", self.eval.temperature)?;
        positive("coldstart.episodes", self.coldstart.episodes)?;
        in_range(
            "coldstart.mistake_fraction",
            self.coldstart.mistake_fraction,
            0.0,
            1.0,
        )?;
        let s = &self.sft;
        positive("sft.epochs", s.epochs)?;
        if !(s.lr.is_finite() && s.lr > 0.0) {
            return Err(TrainerError::value(
                "sft.lr",
                format!("must be a finite number > 0, got {}", s.lr),
            ));
        }
        in_range("sft.warmup_ratio", s.warmup_ratio, 0.0, 1.0)?;
        positive("sft.batch_size", s.batch_size)?;
        positive("sft.grad_accum", s.grad_accum)?;
        non_negative("sft.max_grad_norm", s.max_grad_norm)?;
        non_negative("sft.weight_decay", s.weight_decay)?;
        positive("sft.max_seq_len", s.max_seq_len)?;
        positive("sft.log_every", s.log_every)?;
        non_negative("sft.prompt_loss_weight", s.prompt_loss_weight)?;
        Ok(())
    }

    /// How the collector plays episodes under this config.
    pub fn collector_options(&self) -> CollectorOptions {
        CollectorOptions {
            max_steps: self.env.max_steps,
            prompt: self.prompt.clone(),
            validity: self.env.validity,
            history_output_chars: self.rollout.history_output_chars,
            threads: self.rollout.threads,
            progress: true,
        }
    }

    /// How a model samples at `temperature`.
    pub fn model_options(&self, temperature: f64) -> ModelPolicyOptions {
        ModelPolicyOptions {
            max_new_tokens: self.rollout.max_new_tokens,
            temperature,
            top_k: self.rollout.top_k,
            top_p: self.rollout.top_p,
            seed: self.run.seed,
            max_batch: self.rollout.max_batch,
            quantized_decode: self.model.quantized_decode,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> String {
        RunConfig::from_toml(text)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    }

    #[test]
    fn defaults_round_trip_through_toml() {
        let config = RunConfig::default();
        config.validate().unwrap();
        let text = config.to_toml().unwrap();
        assert_eq!(RunConfig::from_toml(&text).unwrap(), config);
        let with_options = RunConfig {
            eval: EvalSection {
                episodes: Some(3),
                temperature: 0.0,
            },
            ..RunConfig::default()
        };
        assert_eq!(
            RunConfig::from_toml(&with_options.to_toml().unwrap()).unwrap(),
            with_options
        );
    }

    #[test]
    fn unknown_keys_are_named() {
        let e = err("[rollout]\ngroup_sise = 8\n");
        assert!(e.contains("group_sise"), "{e}");
        assert!(e.contains("line 2"), "{e}");
        let e = err("[rolout]\n");
        assert!(e.contains("rolout"), "{e}");
        let e = err("[prompt]\nhistori = 3\n");
        assert!(e.contains("histori"), "{e}");
    }

    #[test]
    fn impossible_values_are_named() {
        assert!(err("[rollout]\ngroup_size = 0\n").contains("rollout.group_size"));
        assert!(err("[rollout]\ntop_p = 1.5\n").contains("rollout.top_p"));
        assert!(err("[rollout]\ntemperature = -1.0\n").contains("rollout.temperature"));
        assert!(err("[env]\nsplit = \"L9\"\n").contains("env.split"));
        assert!(err("[env]\nname = \"nethack\"\n").contains("env.name"));
        assert!(err("[sft]\nlr = 0.0\n").contains("sft.lr"));
        assert!(err("[sft]\nwarmup_ratio = 2.0\n").contains("sft.warmup_ratio"));
        assert!(
            err("[coldstart]\nmistake_fraction = -0.1\n").contains("coldstart.mistake_fraction")
        );
        assert!(err("[run]\nname = \"a/b\"\n").contains("run.name"));
        let e = err("[rollout]\ngroup_size = \"eight\"\n");
        assert!(e.contains("group_size") || e.contains("line 2"), "{e}");
    }
}
