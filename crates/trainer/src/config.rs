//! Run configs: TOML deserialised into typed sections. Unknown keys are rejected (the
//! message names the key and its line) and impossible values are refused by
//! [`RunConfig::validate`] (the message names the key as `section.key`). Every key has a
//! default, so a file only says what differs; a run writes the resolved config (every key)
//! as `config.toml` in its run directory.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use policy::scratch::ScratchConfig;
use rlvmr_core::{AdvantageConfig, RewardConfig, PromptConfig, Validity};
use serde::{Deserialize, Serialize};

use crate::collector::{AdmissibleLists, CollectorOptions, DEFAULT_MAX_STEPS};
use crate::envs::{open_env_with, EnvProvider, Protocol, SciworldOptions};
use crate::error::{Result, TrainerError};
use crate::policies::ModelPolicyOptions;
use crate::served::policy::ServedSampling;
use crate::served::client::ServedOptions;

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
    /// Reinforcement learning (`rlvmr train`).
    pub rl: RlSection,
    /// The verifiable rewards (`rlvmr_core::RewardConfig`; the same section `rlvmr score` reads).
    pub reward: RewardConfig,
    /// The advantage estimator (`rlvmr_core::AdvantageConfig`; `rlvmr train --algo` sets `algo`).
    pub advantage: AdvantageConfig,
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
    /// Which games the cold start draws from: `published` (all six ALFWorld task types, as
    /// the authors' code) or `strict` (the level's training games only). RL trains on the
    /// level's training games under both.
    pub protocol: Protocol,
    /// ScienceWorld only: the conductivity tasks' tested object shown as `tested object`,
    /// the name the commands use too (`SciworldProvider::alias_tested_object`).
    pub tested_object_alias: bool,
    /// ScienceWorld only: the conductivity tasks' three wires shown as `left wire`, `middle
    /// wire`, `right wire` in the order the table lists them, the names the commands use too
    /// (`SciworldProvider::alias_wires`).
    pub wire_alias: bool,
}

impl Default for EnvSection {
    fn default() -> Self {
        EnvSection {
            name: "alfworld".into(),
            split: "L0".into(),
            max_steps: DEFAULT_MAX_STEPS,
            data: None,
            validity: Validity::Strict,
            protocol: Protocol::Published,
            tested_object_alias: false,
            wire_alias: false,
        }
    }
}

/// `model.path` naming a model made from nothing (see [`ScratchConfig`]).
pub const SCRATCH_MODEL: &str = "scratch";

/// The generalisation levels a run can train on or be evaluated at.
pub const LEVELS: [&str; 3] = ["L0", "L1", "L2"];

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ModelSection {
    /// `local` (the model is loaded into this process) or `openai`: a model behind an
    /// OpenAI-compatible server (`[model.server]`), which evaluates and annotates but
    /// cannot be trained.
    pub backend: String,
    /// A GGUF file, a checkpoint folder, the embedded default's name, or `scratch`: a new
    /// model of the `[scratch]` shape (only `rlvmr sft` makes one).
    pub path: String,
    /// Decode with a Q8_0 copy of the weights (CPU speed; log-probs are the copy's).
    pub quantized_decode: bool,
    /// Where the model lives while it samples and trains: `cpu`, `cuda` (GPU 0), `cuda:N`, or
    /// `auto` (the first GPU of a `cuda` build when there is one, else the CPU).
    pub device: String,
    /// Matrix products of f32 weights on a GPU: `f32` or `tf32` (faster, PyTorch's
    /// `allow_tf32`); no effect on the CPU.
    pub matmul: String,
    /// Where the model is served (backend `openai`).
    pub server: ServerSection,
}

/// The precisions `[model] matmul` names.
pub const MATMULS: [&str; 2] = ["f32", "tf32"];

/// The backends `[model] backend` names.
pub const BACKENDS: [&str; 2] = ["local", "openai"];

impl Default for ModelSection {
    fn default() -> Self {
        ModelSection {
            backend: "local".into(),
            path: policy::assets::DEFAULT_MODEL_NAME.into(),
            quantized_decode: false,
            device: "cpu".into(),
            matmul: "f32".into(),
            server: ServerSection::default(),
        }
    }
}

impl ModelSection {
    /// A model behind an OpenAI-compatible server.
    pub fn is_served(&self) -> bool {
        self.backend == "openai"
    }

    fn validate(&self) -> Result<()> {
        if !BACKENDS.contains(&self.backend.as_str()) {
            return Err(TrainerError::value(
                "model.backend",
                format!("must be local or openai, got {:?}", self.backend),
            ));
        }
        if self.is_served() {
            return self.server.validate("model.server");
        }
        if self.path.trim().is_empty() {
            return Err(TrainerError::value("model.path", "must name a model"));
        }
        if !MATMULS.contains(&self.matmul.as_str()) {
            return Err(TrainerError::value(
                "model.matmul",
                format!("must be f32 or tf32, got {:?}", self.matmul),
            ));
        }
        policy::device::check(&self.device).map_err(|e| TrainerError::value("model.device", e.to_string()))
    }

    /// Opens `device` and sets its matrix-product precision (`matmul`); the error names the key.
    pub fn device(&self) -> Result<candle_core::Device> {
        policy::device::set_tf32(self.matmul == "tf32");
        policy::device::parse(&self.device).map_err(|e| TrainerError::value("model.device", e.to_string()))
    }

    /// Refuses a served model where weights are needed (`what`: the command).
    fn require_local(&self, what: &str) -> Result<()> {
        if self.is_served() {
            return Err(TrainerError::value(
                "model.backend",
                format!(
                    "{what} needs the model's weights; backend \"openai\" only evaluates and annotates"
                ),
            ));
        }
        Ok(())
    }
}

/// An OpenAI-compatible server (vLLM, SGLang, llama.cpp, a hosted API): `[model.server]`
/// for a served policy, `[coldstart.teacher]` for the cold-start annotator.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerSection {
    /// The API's root, e.g. `http://127.0.0.1:8000/v1`.
    pub base_url: String,
    /// The `model` every request names.
    pub model_name: String,
    /// The environment variable holding the API key; the key is never written anywhere.
    pub api_key_env: String,
    /// Requests in flight at once.
    pub max_in_flight: usize,
    /// One request's time limit, seconds (a reply that never ends is cut there).
    pub timeout_s: f64,
    /// Attempts after the first on 429, 5xx, a dropped connection, a timeout or bad JSON.
    pub retries: usize,
    /// The first retry's wait, seconds; it doubles with every attempt.
    pub backoff_s: f64,
    /// Ask the server for the sampled tokens' log-probs.
    pub logprobs: bool,
    /// More request fields, sent as they are (e.g. `{ top_k = 20 }` for vLLM,
    /// `{ repeat_penalty = 1.0 }` for llama.cpp's server, whose default is 1.1).
    pub request: toml::Table,
}

impl Default for ServerSection {
    fn default() -> Self {
        ServerSection {
            base_url: String::new(),
            model_name: String::new(),
            api_key_env: "OPENAI_API_KEY".into(),
            max_in_flight: 16,
            timeout_s: 120.0,
            retries: 4,
            backoff_s: 1.0,
            logprobs: true,
            request: toml::Table::new(),
        }
    }
}

impl ServerSection {
    /// Refuses what cannot reach a server, naming the key under `section`.
    fn validate(&self, section: &str) -> Result<()> {
        let key = |k: &str| format!("{section}.{k}");
        let url = self.base_url.trim();
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(TrainerError::value(
                &key("base_url"),
                format!("needs an http:// or https:// URL, got {url:?}"),
            ));
        }
        if self.model_name.trim().is_empty() {
            return Err(TrainerError::value(
                &key("model_name"),
                "needs the served model's name (--model-name)",
            ));
        }
        if self.api_key_env.trim().is_empty() {
            return Err(TrainerError::value(&key("api_key_env"), "must name an environment variable"));
        }
        positive(&key("max_in_flight"), self.max_in_flight)?;
        positive_number(&key("timeout_s"), self.timeout_s)?;
        non_negative(&key("backoff_s"), self.backoff_s)?;
        Ok(())
    }

    /// How to reach the server.
    pub fn options(&self) -> ServedOptions {
        let extra = self
            .request
            .iter()
            .filter_map(|(k, v)| Some((k.clone(), serde_json::to_value(v).ok()?)))
            .collect();
        ServedOptions {
            base_url: self.base_url.trim().to_string(),
            model: self.model_name.clone(),
            api_key_env: self.api_key_env.clone(),
            max_in_flight: self.max_in_flight,
            timeout: std::time::Duration::from_secs_f64(self.timeout_s),
            retries: self.retries,
            backoff: std::time::Duration::from_secs_f64(self.backoff_s),
            logprobs: self.logprobs,
            extra,
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
    /// Seed of the draw of `episodes` test games; absent: the run's seed. Set, every seed of
    /// a job plays the same games, so seeds differ by their training alone.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub draw_seed: Option<u64>,
}

impl Default for EvalSection {
    fn default() -> Self {
        EvalSection {
            episodes: None,
            temperature: 0.4,
            draw_seed: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ColdstartSection {
    /// Expert demonstrations to keep (the spec: about 200).
    pub episodes: usize,
    /// Demonstrations of the opening of tasks whose expert path is too long to win in the
    /// step limit (ScienceWorld's inclined planes, genetics, ...): its first `max_steps`
    /// actions, not won, beside the `episodes` won ones. 0 (the default, as published):
    /// none.
    pub openings: usize,
    /// Share of demonstrations (seeded) with one recoverable mistake.
    pub mistake_fraction: f64,
    /// Share of ALFWorld demonstrations (seeded) whose expert searches for the heat, cool
    /// or clean appliance instead of going straight to it (`ExpertPolicy::searching_appliance`).
    pub appliance_search: f64,
    /// Share of demonstrations (seeded) whose SFT samples call objects by other names
    /// (`EnvProvider::demo_renamings`; ScienceWorld: a conductivity task's tested object gets
    /// a made-up name, a find task's species are permuted), so the model learns to copy the
    /// name the task or the room gives. trajectories.jsonl keeps the played names.
    pub rename_fraction: f64,
    /// How many more times each renamed demonstration's `focus on` steps are written, each
    /// under names drawn again (ScienceWorld: another permutation of a find task's species;
    /// 0, the default: none). Needs `rename_fraction` > 0.
    pub focus_copies: usize,
    /// The steps each focus copy holds from the focus step on (1, the default: the focus
    /// step alone; 2: with the step after it, where the demonstration picks the object up).
    pub focus_copy_steps: usize,
    /// ScienceWorld only: the expert plays the committed recording of the training
    /// variations' gold paths (`sciworld::GoldPaths::recorded_train`) instead of generating
    /// each in a gold-path JVM (false, the default). Each variation's path is then the same
    /// whatever was generated before it; a conductivity task's wires may be taken up in
    /// another order than a cold start's JVM would take them.
    pub recorded_gold_paths: bool,
    /// Who writes each step's tag and reason: `builtin` (rule-based) or `openai`: a served
    /// teacher (`[coldstart.teacher]`) with the actions fixed, as published; its rejected
    /// steps keep the built-in annotation.
    pub annotator: String,
    /// The teacher's server (annotator `openai`).
    pub teacher: ServerSection,
    /// The teacher's sampling temperature.
    pub teacher_temperature: f64,
    /// The longest annotation of one trajectory, in tokens.
    pub teacher_max_tokens: usize,
}

/// The most copies of a renamed demonstration's focus steps (`[coldstart] focus_copies`).
pub const MAX_FOCUS_COPIES: usize = 16;
/// The most steps a focus copy holds (`[coldstart] focus_copy_steps`).
pub const MAX_FOCUS_COPY_STEPS: usize = 8;

/// The annotators `[coldstart] annotator` names.
pub const ANNOTATORS: [&str; 2] = ["builtin", "openai"];

impl Default for ColdstartSection {
    fn default() -> Self {
        ColdstartSection {
            episodes: 200,
            openings: 0,
            mistake_fraction: 0.25,
            appliance_search: 0.0,
            rename_fraction: 0.0,
            focus_copies: 0,
            focus_copy_steps: 1,
            recorded_gold_paths: false,
            annotator: "builtin".into(),
            teacher: ServerSection {
                logprobs: false,
                ..ServerSection::default()
            },
            teacher_temperature: 0.0,
            teacher_max_tokens: 4096,
        }
    }
}

impl ColdstartSection {
    /// A served teacher annotates.
    pub fn has_teacher(&self) -> bool {
        self.annotator == "openai"
    }

    fn validate(&self) -> Result<()> {
        positive("coldstart.episodes", self.episodes)?;
        in_range("coldstart.mistake_fraction", self.mistake_fraction, 0.0, 1.0)?;
        in_range("coldstart.appliance_search", self.appliance_search, 0.0, 1.0)?;
        in_range("coldstart.rename_fraction", self.rename_fraction, 0.0, 1.0)?;
        if self.focus_copies > MAX_FOCUS_COPIES {
            return Err(TrainerError::value(
                "coldstart.focus_copies",
                format!("must be at most {MAX_FOCUS_COPIES}, got {}", self.focus_copies),
            ));
        }
        if !(1..=MAX_FOCUS_COPY_STEPS).contains(&self.focus_copy_steps) {
            return Err(TrainerError::value(
                "coldstart.focus_copy_steps",
                format!("must be 1 to {MAX_FOCUS_COPY_STEPS}, got {}", self.focus_copy_steps),
            ));
        }
        if self.focus_copies > 0 && self.rename_fraction == 0.0 {
            return Err(TrainerError::value(
                "coldstart.focus_copies",
                "copies the renamed demonstrations' focus steps: set rename_fraction above 0",
            ));
        }
        if !ANNOTATORS.contains(&self.annotator.as_str()) {
            return Err(TrainerError::value(
                "coldstart.annotator",
                format!("must be builtin or openai, got {:?}", self.annotator),
            ));
        }
        if self.has_teacher() {
            self.teacher.validate("coldstart.teacher")?;
            non_negative("coldstart.teacher_temperature", self.teacher_temperature)?;
            positive("coldstart.teacher_max_tokens", self.teacher_max_tokens)?;
        }
        Ok(())
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
    /// Recompute each layer's activations in the backward instead of keeping the whole
    /// forward pass's (activation checkpointing): the memory of one layer's activations at a
    /// time, for about one more forward pass of compute. The gradients are the same.
    pub gradient_checkpointing: bool,
    /// LoRA rank; 0 trains every weight (as published). A pretrained `model.path` only: a
    /// model made from nothing has no base worth keeping. `final/` holds the merged model.
    pub lora_rank: usize,
    pub lora_alpha: f64,
    /// The projections LoRA adapts (as `rl.lora_targets`).
    pub lora_targets: Vec<String>,
}

impl SftSection {
    /// The LoRA adapter to train, or `None` for a full fine-tune.
    pub fn lora_config(&self) -> Result<Option<policy::LoraConfig>> {
        lora_config("sft", self.lora_rank, self.lora_alpha, &self.lora_targets)
    }
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
            gradient_checkpointing: false,
            lora_rank: 0,
            lora_alpha: 32.0,
            lora_targets: default_lora_targets(),
        }
    }
}

/// The learning-rate schedule of `rlvmr train`, stepped once per iteration (as verl's actor
/// scheduler is).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LrSchedule {
    /// Warmup, then the peak for the rest of the run (the published runs).
    #[default]
    Constant,
    /// Warmup, then cosine decay to 0 at the last iteration.
    Cosine,
}

/// Where PPO's old log-probs (the ratio's denominator) come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OldLogprobs {
    /// The sampler's own log-probs of the tokens it drew: the same weights at the same
    /// temperature, equal to a recomputation up to float rounding (docs/training-speed.md),
    /// without its forward pass. Recomputed anyway where they are not the training model's:
    /// a Q8_0 decode copy (`model.quantized_decode`) or greedy rollouts (temperature 0).
    #[default]
    Sampler,
    /// A forward pass of the training weights over every step sample (verl's way).
    Recompute,
}

/// Which training games RL draws its groups from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RlGames {
    /// Every training game of the level, as the authors' code draws them.
    #[default]
    All,
    /// Only the training games whose expert may win inside `env.max_steps`
    /// ([`crate::envs::EnvProvider::expert_may_fit`]: ScienceWorld's recorded gold-path
    /// lengths; every ALFWorld game fits). A game no rollout can win in time gives its group
    /// no outcome advantage, so its update comes from the process rewards alone.
    Fitting,
}

/// `rl.init` naming the whole pipeline: cold start and SFT first, then RL from SFT's model.
pub const COLDSTART_INIT: &str = "coldstart";

/// Reinforcement learning: the loop, the PPO objective, the optimizer. Defaults are the
/// published runs' (spec §4) where they apply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RlSection {
    /// Where the run starts: empty for `model.path`, a checkpoint or Hugging Face folder, a
    /// GGUF file, the embedded default's name, or `coldstart` (cold start and SFT first).
    pub init: String,
    /// Iterations (one rollout collection and one update each).
    pub iterations: usize,
    /// Training games per iteration; each is played `rollout.group_size` times.
    pub tasks_per_iter: usize,
    /// The training games the iterations draw from: `all` or `fitting`.
    pub games: RlGames,
    /// Passes over an iteration's step samples.
    pub ppo_epochs: usize,
    /// Step samples per optimizer step (the loss is the token mean over them).
    pub mini_batch: usize,
    /// Rows per forward/backward pass (gradients accumulate over a mini-batch).
    pub micro_batch: usize,
    /// Recompute each layer's activations in the update's backward (as `sft.gradient_checkpointing`).
    pub gradient_checkpointing: bool,
    /// The ratio is clipped to `[1 - clip_low, 1 + clip_high]`.
    pub clip_low: f64,
    pub clip_high: f64,
    /// Dual clip for negative advantages (verl's `clip_ratio_c`, > 1); 0 turns it off.
    pub clip_ratio_c: f64,
    /// Weight of the k3 KL to the frozen starting model (0: no reference pass).
    pub kl_coef: f64,
    /// The k3 estimate is clamped to `[-kl_clamp, kl_clamp]`.
    pub kl_clamp: f64,
    pub entropy_coef: f64,
    /// Peak learning rate.
    pub lr: f64,
    /// Share of the iterations spent warming up linearly.
    pub warmup_ratio: f64,
    pub schedule: LrSchedule,
    pub weight_decay: f64,
    /// Global gradient-norm clip (0: none).
    pub max_grad_norm: f64,
    /// LoRA rank; 0 trains every weight.
    pub lora_rank: usize,
    pub lora_alpha: f64,
    /// The projections LoRA adapts (`q_proj`, `k_proj`, `v_proj`, `o_proj`, `gate_proj`,
    /// `up_proj`, `down_proj`).
    pub lora_targets: Vec<String>,
    /// PPO's old log-probs: `sampler` (the rollouts' own) or `recompute`.
    pub old_logprobs: OldLogprobs,
    /// Evaluate on the test games every this many iterations (0: never).
    pub eval_every: usize,
    /// The levels (`L0`, `L1`, `L2`) those evaluations play, each on the same seeded draw of
    /// its test games every time (empty: the run's level).
    pub eval_levels: Vec<String>,
    /// Episodes of each of those evaluations (absent: every test game once).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub eval_episodes: Option<usize>,
    /// Save a checkpoint every this many iterations (0: only at the end).
    pub save_every: usize,
    /// Updates in a row with a non-finite loss or gradient before the run stops.
    pub max_bad_updates: usize,
    /// Levels (`L0`, `L1`, `L2`) whose every test game the final model plays at the end of
    /// the run, at `eval.temperature` (empty: none).
    pub final_eval: Vec<String>,
    /// One RL run per training set of the `final_eval` levels, each level played by the
    /// model trained on its own training games, as the authors' code runs one training per
    /// level (L0 and L1 share theirs); the cold start and SFT are shared when every level's
    /// cold start draws the same games (`published`). See [`crate::rl::levels`].
    pub per_level: bool,
    /// Under `per_level`, the iterations of a level's run in place of `iterations`, by the
    /// level that names the run (`{ L0 = 5 }`: the L0 run, which L1 shares, runs 5; the
    /// others `iterations`). Runs of different levels learn at different rates from one SFT
    /// model, so one count need not suit both.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub level_iterations: BTreeMap<String, usize>,
}

impl Default for RlSection {
    fn default() -> Self {
        RlSection {
            init: String::new(),
            iterations: 100,
            tasks_per_iter: 16,
            games: RlGames::All,
            ppo_epochs: 1,
            mini_batch: 256,
            micro_batch: 8,
            gradient_checkpointing: false,
            clip_low: 0.2,
            clip_high: 0.2,
            clip_ratio_c: 3.0,
            kl_coef: 0.01,
            kl_clamp: 10.0,
            entropy_coef: 0.001,
            lr: 1e-6,
            warmup_ratio: 0.0,
            schedule: LrSchedule::Constant,
            weight_decay: 0.01,
            max_grad_norm: 1.0,
            lora_rank: 0,
            lora_alpha: 32.0,
            lora_targets: default_lora_targets(),
            old_logprobs: OldLogprobs::Sampler,
            eval_every: 10,
            eval_levels: Vec::new(),
            eval_episodes: None,
            save_every: 10,
            max_bad_updates: 3,
            final_eval: Vec::new(),
            per_level: false,
            level_iterations: BTreeMap::new(),
        }
    }
}

impl RlSection {
    /// The PPO objective's settings.
    pub fn loss_config(&self) -> policy::ppo::PpoLossConfig {
        policy::ppo::PpoLossConfig {
            clip_low: self.clip_low,
            clip_high: self.clip_high,
            clip_ratio_c: (self.clip_ratio_c > 0.0).then_some(self.clip_ratio_c),
            kl_coef: self.kl_coef,
            kl_clamp: self.kl_clamp,
            entropy_coef: self.entropy_coef,
        }
    }

    /// The LoRA adapter to train, or `None` for a full fine-tune.
    pub fn lora_config(&self) -> Result<Option<policy::LoraConfig>> {
        lora_config("rl", self.lora_rank, self.lora_alpha, &self.lora_targets)
    }

    /// The learning rate of 0-based iteration `iteration`.
    pub fn learning_rate(&self, iteration: usize) -> f64 {
        let warmup = (self.warmup_ratio * self.iterations as f64).ceil() as usize;
        match self.schedule {
            LrSchedule::Cosine => learning_rate(iteration, self.iterations, warmup, self.lr),
            LrSchedule::Constant if iteration < warmup => self.lr * (iteration + 1) as f64 / warmup as f64,
            LrSchedule::Constant => self.lr,
        }
    }

    fn validate(&self) -> Result<()> {
        positive("rl.iterations", self.iterations)?;
        positive("rl.tasks_per_iter", self.tasks_per_iter)?;
        positive("rl.ppo_epochs", self.ppo_epochs)?;
        positive("rl.mini_batch", self.mini_batch)?;
        positive("rl.micro_batch", self.micro_batch)?;
        in_range("rl.clip_low", self.clip_low, 0.0, 1.0)?;
        non_negative("rl.clip_high", self.clip_high)?;
        if self.clip_ratio_c != 0.0 && !(self.clip_ratio_c.is_finite() && self.clip_ratio_c > 1.0) {
            return Err(TrainerError::value(
                "rl.clip_ratio_c",
                format!("must be 0 (off) or a finite number > 1, got {}", self.clip_ratio_c),
            ));
        }
        non_negative("rl.kl_coef", self.kl_coef)?;
        positive_number("rl.kl_clamp", self.kl_clamp)?;
        non_negative("rl.entropy_coef", self.entropy_coef)?;
        positive_number("rl.lr", self.lr)?;
        in_range("rl.warmup_ratio", self.warmup_ratio, 0.0, 1.0)?;
        non_negative("rl.weight_decay", self.weight_decay)?;
        non_negative("rl.max_grad_norm", self.max_grad_norm)?;
        self.lora_config()?;
        if let Some(n) = self.eval_episodes {
            positive("rl.eval_episodes", n)?;
        }
        positive("rl.max_bad_updates", self.max_bad_updates)?;
        for (key, levels) in [("rl.final_eval", &self.final_eval), ("rl.eval_levels", &self.eval_levels)] {
            if let Some(bad) = levels.iter().find(|l| !LEVELS.contains(&l.as_str())) {
                return Err(TrainerError::value(key, format!("levels must be L0, L1 or L2, got {bad:?}")));
            }
        }
        if self.per_level && self.final_eval.is_empty() {
            return Err(TrainerError::value(
                "rl.per_level",
                "true needs the levels to train for in rl.final_eval, which is empty",
            ));
        }
        self.validate_level_iterations()
    }

    /// Each `level_iterations` entry names a level of a per-level job's `final_eval` and a
    /// positive count. Whether the level names its run (L1 trains in L0's) is checked where
    /// the runs are planned ([`crate::rl::levels::train_levels`]).
    fn validate_level_iterations(&self) -> Result<()> {
        const KEY: &str = "rl.level_iterations";
        if !self.level_iterations.is_empty() && !self.per_level {
            return Err(TrainerError::value(KEY, "sets the iterations of per-level runs, so it needs rl.per_level = true"));
        }
        for (level, &iterations) in &self.level_iterations {
            if !self.final_eval.contains(level) {
                return Err(TrainerError::value(
                    KEY,
                    format!("{level:?} is not one of the levels rl.final_eval trains for ({})", self.final_eval.join(", ")),
                ));
            }
            positive(&format!("{KEY}.{level}"), iterations)?;
        }
        Ok(())
    }
}

/// Every projection of a layer, the targets of the published LoRA runs.
fn default_lora_targets() -> Vec<String> {
    ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
        .map(String::from)
        .to_vec()
}

/// The LoRA adapter `section`'s keys describe (`None` for rank 0), or an error naming the key.
fn lora_config(section: &str, rank: usize, alpha: f64, targets: &[String]) -> Result<Option<policy::LoraConfig>> {
    if rank == 0 {
        return Ok(None);
    }
    non_negative(&format!("{section}.lora_alpha"), alpha)?;
    let targets = targets
        .iter()
        .map(|name| {
            policy::TargetModule::ALL
                .into_iter()
                .find(|t| t.hf_name() == name)
                .ok_or_else(|| {
                    TrainerError::value(
                        &format!("{section}.lora_targets"),
                        format!("unknown projection {name:?} (q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj)"),
                    )
                })
        })
        .collect::<Result<Vec<_>>>()?;
    let cfg = policy::LoraConfig::new(rank, alpha, targets);
    cfg.validate()
        .map_err(|e| TrainerError::value(&format!("{section}.lora_rank"), e.to_string()))?;
    Ok(Some(cfg))
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

fn positive_number(key: &str, value: f64) -> Result<()> {
    if !(value.is_finite() && value > 0.0) {
        return Err(TrainerError::value(
            key,
            format!("must be a finite number > 0, got {value}"),
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
    /// Opens the configured environment at the configured level.
    pub fn open_env(&self) -> Result<Box<dyn EnvProvider>> {
        self.open_level(&self.env.split)
    }

    /// Opens the configured environment (its data included) at `level`.
    pub fn open_level(&self, level: &str) -> Result<Box<dyn EnvProvider>> {
        let env = &self.env;
        let sciworld = SciworldOptions {
            alias_tested_object: env.tested_object_alias,
            alias_wires: env.wire_alias,
            recorded_gold_paths: self.coldstart.recorded_gold_paths,
        };
        open_env_with(&env.name, level, env.data.as_deref(), sciworld)
    }

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
        toml::to_string(self).map_err(not_toml)
    }

    /// The first key (dotted, in the order of TOML's tables) whose value differs between
    /// `self` and `other`, with both values as TOML: what keeps a run from landing in a
    /// folder made by another.
    pub fn first_difference(&self, other: &RunConfig) -> Result<Option<(String, String, String)>> {
        let table = |config: &RunConfig| toml::Value::try_from(config).map_err(not_toml);
        Ok(first_difference_in("", &table(self)?, &table(other)?))
    }

    /// Writes every key as TOML to `path` (a run's `config.toml`, a checkpoint's `rlvmr.toml`).
    pub fn save(&self, path: &Path) -> Result<()> {
        std::fs::write(path, self.to_toml()?).map_err(|e| TrainerError::io(path, e))
    }

    /// Whether the rollouts' own log-probs serve as PPO's old log-probs: asked for, and the
    /// sampler's distribution is the training model's (full-precision weights, positive
    /// temperature).
    pub fn old_logprobs_from_sampler(&self) -> bool {
        self.rl.old_logprobs == OldLogprobs::Sampler && !self.model.quantized_decode && self.rollout.temperature > 0.0
    }

    /// [`validate`](Self::validate), then refuses a served model: the checks of a command
    /// (`what`) that trains the weights, in the order their errors are named.
    pub fn validate_for_training(&self, what: &str) -> Result<()> {
        self.validate()?;
        self.model.require_local(what)
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
        if !LEVELS.contains(&self.env.split.as_str()) {
            return Err(TrainerError::value(
                "env.split",
                format!("must be L0, L1 or L2, got {:?}", self.env.split),
            ));
        }
        positive("env.max_steps", self.env.max_steps)?;
        if self.env.tested_object_alias && self.env.name != "sciworld" {
            return Err(TrainerError::value(
                "env.tested_object_alias",
                format!("names ScienceWorld's conductivity tasks' tested object; env.name is {:?}", self.env.name),
            ));
        }
        if self.coldstart.recorded_gold_paths && self.env.name != "sciworld" {
            return Err(TrainerError::value(
                "coldstart.recorded_gold_paths",
                format!("plays ScienceWorld's recorded gold paths; env.name is {:?}", self.env.name),
            ));
        }
        if self.env.wire_alias && self.env.name != "sciworld" {
            return Err(TrainerError::value(
                "env.wire_alias",
                format!("names ScienceWorld's conductivity tasks' wires; env.name is {:?}", self.env.name),
            ));
        }
        if self.prompt.task_line != rlvmr_core::TaskLine::First && !self.prompt.compact {
            return Err(TrainerError::value(
                "prompt.task_line",
                "moves the task line of compact prompts; set prompt.compact = true".to_string(),
            ));
        }
        if self.prompt.box_line != rlvmr_core::BoxLine::None && !(self.prompt.compact && self.env.name == "sciworld") {
            return Err(TrainerError::value(
                "prompt.box_line",
                format!(
                    "repeats a ScienceWorld task's boxes in compact prompts; needs prompt.compact = true and env.name = \"sciworld\" (compact {}, env.name {:?})",
                    self.prompt.compact, self.env.name
                ),
            ));
        }
        self.model.validate()?;
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
        self.coldstart.validate()?;
        let s = &self.sft;
        positive("sft.epochs", s.epochs)?;
        positive_number("sft.lr", s.lr)?;
        in_range("sft.warmup_ratio", s.warmup_ratio, 0.0, 1.0)?;
        positive("sft.batch_size", s.batch_size)?;
        positive("sft.grad_accum", s.grad_accum)?;
        non_negative("sft.max_grad_norm", s.max_grad_norm)?;
        non_negative("sft.weight_decay", s.weight_decay)?;
        positive("sft.max_seq_len", s.max_seq_len)?;
        positive("sft.log_every", s.log_every)?;
        non_negative("sft.prompt_loss_weight", s.prompt_loss_weight)?;
        if s.lora_config()?.is_some() && self.model.path == SCRATCH_MODEL {
            return Err(TrainerError::value(
                "sft.lora_rank",
                "a model made from nothing (model.path = \"scratch\") has no pretrained weights for an adapter to keep; set 0 to train every weight",
            ));
        }
        self.rl.validate()?;
        self.reward
            .validate()
            .map_err(|e| TrainerError::value(&format!("reward.{}", e.key), e.to_string()))?;
        self.advantage
            .validate()
            .map_err(|e| TrainerError::value("advantage", e.to_string()))?;
        Ok(())
    }

    /// The seed of the draw of test games: `eval.draw_seed`, else the run's seed.
    pub fn eval_draw_seed(&self) -> u64 {
        self.eval.draw_seed.unwrap_or(self.run.seed)
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
            admissible: AdmissibleLists::Every,
        }
    }

    /// How a served model samples at `temperature`.
    pub fn served_sampling(&self, temperature: f64) -> ServedSampling {
        ServedSampling {
            max_tokens: self.rollout.max_new_tokens,
            temperature,
            top_p: self.rollout.top_p,
            seed: self.run.seed,
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

/// The learning rate of 0-based optimizer step `step` of `total`: linear warmup over the
/// first `warmup` steps (reaching `peak` at step `warmup - 1`), then cosine decay from
/// `peak` towards 0 at the end.
pub fn learning_rate(step: usize, total: usize, warmup: usize, peak: f64) -> f64 {
    if step < warmup {
        return peak * (step + 1) as f64 / warmup as f64;
    }
    let span = total.saturating_sub(warmup).max(1) as f64;
    let progress = ((step - warmup) as f64 / span).min(1.0);
    peak * 0.5 * (1.0 + (std::f64::consts::PI * progress).cos())
}

/// A config that serde cannot write as TOML.
fn not_toml(e: toml::ser::Error) -> TrainerError {
    TrainerError::context("cannot write the config as TOML", e)
}

/// [`RunConfig::first_difference`] below the key `prefix`: tables key by key, anything else
/// by value (a key one side lacks shows as `(none)`).
fn first_difference_in(prefix: &str, a: &toml::Value, b: &toml::Value) -> Option<(String, String, String)> {
    if let (toml::Value::Table(a), toml::Value::Table(b)) = (a, b) {
        let shown = |side: Option<&toml::Value>| side.map_or("(none)".to_string(), |v| v.to_string());
        let mut keys = a.keys().chain(b.keys().filter(|key| !a.contains_key(*key)));
        return keys.find_map(|key| {
            let path = if prefix.is_empty() { key.clone() } else { format!("{prefix}.{key}") };
            match (a.get(key), b.get(key)) {
                (Some(x), Some(y)) => first_difference_in(&path, x, y),
                (x, y) => Some((path, shown(x), shown(y))),
            }
        });
    }
    (a != b).then(|| (prefix.to_string(), a.to_string(), b.to_string()))
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
    fn the_first_difference_names_the_dotted_key_and_both_values() {
        let config = RunConfig::default();
        assert_eq!(config.first_difference(&config.clone()).unwrap(), None);
        let mut other = config.clone();
        other.run.seed = 7;
        let (key, mine, theirs) = config.first_difference(&other).unwrap().unwrap();
        assert_eq!((key.as_str(), theirs.as_str()), ("run.seed", "7"));
        assert_eq!(mine, config.run.seed.to_string());
        other.run.seed = config.run.seed;
        other.rl.lr = 0.5;
        assert_eq!(config.first_difference(&other).unwrap().unwrap().0, "rl.lr");
        // Read back from its own TOML, a config has no difference (floats included).
        let reread = RunConfig::from_toml(&other.to_toml().unwrap()).unwrap();
        assert_eq!(other.first_difference(&reread).unwrap(), None);
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
                draw_seed: Some(5),
            },
            ..RunConfig::default()
        };
        assert_eq!(
            RunConfig::from_toml(&with_options.to_toml().unwrap()).unwrap(),
            with_options
        );
    }

    #[test]
    fn the_test_draw_follows_the_run_seed_unless_fixed() {
        let mut config = RunConfig::from_toml("[run]\nseed = 3\n").unwrap();
        assert_eq!(config.eval_draw_seed(), 3);
        config = RunConfig::from_toml("[run]\nseed = 3\n[eval]\ndraw_seed = 0\n").unwrap();
        assert_eq!(config.eval_draw_seed(), 0);
        assert!(err("[eval]\ndraw_seed = -1\n").contains("draw_seed"));
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
        assert!(err("[rl]\neval_levels = [\"L0\", \"L3\"]\n").contains("rl.eval_levels"));
        assert!(err("[rl]\nper_level = true\n").contains("rl.per_level"));
        let per_level = "[rl]\nper_level = true\nfinal_eval = [\"L0\", \"L1\", \"L2\"]\n";
        assert!(err("[rl]\nlevel_iterations = { L0 = 5 }\n").contains("rl.per_level = true"));
        let unknown = err(&format!("{per_level}level_iterations = {{ L3 = 5 }}\n"));
        assert!(unknown.contains("rl.level_iterations") && unknown.contains("L3"), "{unknown}");
        let zero = err(&format!("{per_level}level_iterations = {{ L0 = 0 }}\n"));
        assert!(zero.contains("rl.level_iterations.L0") && zero.contains("at least 1, got 0"), "{zero}");
        let five = RunConfig::from_toml(&format!("{per_level}level_iterations = {{ L0 = 5 }}\n")).unwrap();
        assert_eq!(five.rl.level_iterations.get("L0"), Some(&5));
        let games = err("[rl]\ngames = \"winnable\"\n");
        assert!(games.contains("games") && games.contains("winnable") && games.contains("line 2"), "{games}");
        assert_eq!(RunConfig::from_toml("[rl]\ngames = \"fitting\"\n").unwrap().rl.games, RlGames::Fitting);
        let protocol = err("[env]\nprotocol = \"loose\"\n");
        assert!(protocol.contains("protocol") && protocol.contains("loose") && protocol.contains("line 2"), "{protocol}");
        assert!(err("[env]\nname = \"nethack\"\n").contains("env.name"));
        let task_line = err("[prompt]\ntask_line = \"last\"\n");
        assert!(task_line.contains("prompt.task_line") && task_line.contains("compact"), "{task_line}");
        assert_eq!(err("[prompt]\ncompact = true\ntask_line = \"before_now\"\n"), "");
        assert!(err("[prompt]\ntask_line = \"middle\"\n").contains("middle"));
        let box_line = err("[prompt]\ncompact = true\nbox_line = \"choice\"\n");
        assert!(box_line.contains("prompt.box_line") && box_line.contains("sciworld"), "{box_line}");
        assert!(err("[env]\ntested_object_alias = true\n").contains("env.tested_object_alias"));
        assert!(err("[coldstart]\nrecorded_gold_paths = true\n").contains("coldstart.recorded_gold_paths"));
        let c = RunConfig::from_toml("[env]\nname = \"sciworld\"\n[coldstart]\nrecorded_gold_paths = true\n").unwrap();
        assert!(c.coldstart.recorded_gold_paths);
        assert!(err("[env]\nwire_alias = true\n").contains("env.wire_alias"));
        assert!(RunConfig::from_toml("[env]\nname = \"sciworld\"\nwire_alias = true\n").unwrap().env.wire_alias);
        RunConfig::from_toml("[env]\nname = \"sciworld\"\ntested_object_alias = true\n").unwrap();
        assert!(err("[sft]\nlr = 0.0\n").contains("sft.lr"));
        assert!(err("[sft]\nwarmup_ratio = 2.0\n").contains("sft.warmup_ratio"));
        assert!(
            err("[coldstart]\nmistake_fraction = -0.1\n").contains("coldstart.mistake_fraction")
        );
        assert!(
            err("[coldstart]\nappliance_search = 1.5\n").contains("coldstart.appliance_search")
                && err("[coldstart]\nrename_fraction = -0.1\n").contains("coldstart.rename_fraction")
        );
        let e = err("[coldstart]\nrename_fraction = 1.0\nfocus_copies = 17\n");
        assert!(e.contains("coldstart.focus_copies") && e.contains("17"), "{e}");
        assert!(err("[coldstart]\nfocus_copies = 2\n").contains("rename_fraction"));
        RunConfig::from_toml("[coldstart]\nrename_fraction = 1.0\nfocus_copies = 2\n").unwrap();
        for steps in [0, 9] {
            let e = err(&format!("[coldstart]\nrename_fraction = 1.0\nfocus_copies = 2\nfocus_copy_steps = {steps}\n"));
            assert!(e.contains("coldstart.focus_copy_steps") && e.contains(&steps.to_string()), "{e}");
        }
        let c = RunConfig::from_toml("[coldstart]\nrename_fraction = 1.0\nfocus_copies = 2\nfocus_copy_steps = 2\n").unwrap();
        assert_eq!((c.coldstart.focus_copies, c.coldstart.focus_copy_steps), (2, 2));
        assert!(err("[run]\nname = \"a/b\"\n").contains("run.name"));
        let e = err("[model]\npath = \"scratch\"\n[sft]\nlora_rank = 4\n");
        assert!(e.contains("sft.lora_rank") && e.contains("scratch"), "{e}");
        let e = err("[sft]\nlora_rank = 4\nlora_targets = [\"qkv\"]\n");
        assert!(e.contains("sft.lora_targets") && e.contains("qkv"), "{e}");
        assert!(err("[rl]\nlora_rank = 4\nlora_alpha = -1.0\n").contains("rl.lora_alpha"));
        let e = err("[rollout]\ngroup_size = \"eight\"\n");
        assert!(e.contains("group_size") || e.contains("line 2"), "{e}");
    }

    #[test]
    fn the_reply_layout_and_the_tag_lift_are_read_and_checked() {
        let config = RunConfig::from_toml("[prompt]\nlayout = \"lines\"\n[advantage]\ntag_lift = \"won_only\"\n").unwrap();
        assert_eq!(config.prompt.layout, rlvmr_core::ReplyLayout::Lines);
        assert_eq!(config.advantage.tag_lift, rlvmr_core::advantage::TagLift::WonOnly);
        let defaults = RunConfig::from_toml("").unwrap();
        assert_eq!((defaults.prompt.layout, defaults.advantage.tag_lift), (rlvmr_core::ReplyLayout::Inline, rlvmr_core::advantage::TagLift::Always));
        let e = err("[prompt]\nlayout = \"wavy\"\n");
        assert!(e.contains("wavy") && e.contains("line 2"), "{e}");
        let e = err("[advantage]\ntag_lift = \"lost_only\"\n");
        assert!(e.contains("lost_only") && e.contains("won_only"), "{e}");
    }

    #[test]
    fn the_device_is_checked_when_the_config_is_read() {
        let e = err("[model]\ndevice = \"tpu\"\n");
        assert!(e.contains("model.device") && e.contains("\"tpu\""), "{e}");
        let cpu = RunConfig::from_toml("[model]\ndevice = \"cpu\"\n").unwrap();
        assert!(cpu.model.device().unwrap().is_cpu());
        assert_eq!(cpu.model.matmul, "f32");
        assert_eq!(RunConfig::from_toml("[model]\nmatmul = \"tf32\"\n").unwrap().model.matmul, "tf32");
        let e = err("[model]\nmatmul = \"bf16\"\n");
        assert!(e.contains("model.matmul") && e.contains("\"bf16\""), "{e}");
        // A GPU preset read by a build without CUDA says how to get one.
        match RunConfig::from_toml("[model]\ndevice = \"cuda:0\"\n") {
            Ok(_) => assert!(policy::device::check("cuda").is_ok(), "a build with CUDA"),
            Err(e) => {
                let e = e.to_string();
                assert!(e.contains("model.device") && e.contains("--features cuda"), "{e}");
            }
        }
    }
}
