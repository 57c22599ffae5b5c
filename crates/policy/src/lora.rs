//! LoRA (low-rank adapters) on the seven projections of every decoder layer, in PEFT's layout.
//!
//! A targeted projection computes `x W^T + (alpha / r) (x A^T) B^T` with `A: [r, in]` and
//! `B: [out, r]`. `A` starts as PEFT's default (kaiming-uniform with `a = sqrt(5)`, i.e.
//! `U(-1/sqrt(in), 1/sqrt(in))`), drawn from a seed; `B` starts at zero, so a fresh adapter
//! leaves the model's outputs unchanged.
//!
//! While an adapter is attached ([`Llama::attach_lora`]) the base model is frozen: its
//! projections go through [`frozen_linear`] (no weight gradient is ever computed) and its other
//! tensors (embeddings, norms, output head) enter the graph detached, so `backward` fills the
//! gradients of the adapter's `A` and `B` only, and [`Llama::trainable_vars`] (what
//! [`crate::AdamW::for_model`] optimizes) lists only them.
//!
//! Files: `adapter_config.json` + `adapter_model.safetensors` with PEFT's tensor names
//! (`base_model.model.model.layers.{i}.self_attn.q_proj.lora_A.weight`), loadable by
//! `peft.PeftModel.from_pretrained` onto the same base model (checked by
//! `tools/peft_check.sh`). [`Llama::merged`] folds the adapter into the base weights; a model
//! with an adapter is saved merged by [`crate::checkpoint::save_model`].

use crate::error::{PolicyError, Result};
use crate::ops::frozen::frozen_linear;
use crate::model::config::LlamaConfig;
use crate::ops::reference::linear;
use candle_core::{DType, Device, Tensor, Var};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::path::Path;

pub const ADAPTER_CONFIG_FILE: &str = "adapter_config.json";
pub const ADAPTER_MODEL_FILE: &str = "adapter_model.safetensors";

/// A projection LoRA can adapt, named as in Hugging Face's Llama/Qwen2 modules.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TargetModule {
    QProj,
    KProj,
    VProj,
    OProj,
    GateProj,
    UpProj,
    DownProj,
}

impl TargetModule {
    pub const ALL: [TargetModule; 7] = [
        TargetModule::QProj,
        TargetModule::KProj,
        TargetModule::VProj,
        TargetModule::OProj,
        TargetModule::GateProj,
        TargetModule::UpProj,
        TargetModule::DownProj,
    ];

    /// The module's name (`q_proj`), as in PEFT's `target_modules`.
    pub fn hf_name(self) -> &'static str {
        match self {
            TargetModule::QProj => "q_proj",
            TargetModule::KProj => "k_proj",
            TargetModule::VProj => "v_proj",
            TargetModule::OProj => "o_proj",
            TargetModule::GateProj => "gate_proj",
            TargetModule::UpProj => "up_proj",
            TargetModule::DownProj => "down_proj",
        }
    }

    /// The module's path inside a decoder layer (`self_attn.q_proj`).
    pub fn module_path(self) -> &'static str {
        match self {
            TargetModule::QProj => "self_attn.q_proj",
            TargetModule::KProj => "self_attn.k_proj",
            TargetModule::VProj => "self_attn.v_proj",
            TargetModule::OProj => "self_attn.o_proj",
            TargetModule::GateProj => "mlp.gate_proj",
            TargetModule::UpProj => "mlp.up_proj",
            TargetModule::DownProj => "mlp.down_proj",
        }
    }

    /// `(out, in)`: the shape of this projection's weight.
    pub fn weight_shape(self, cfg: &LlamaConfig) -> (usize, usize) {
        let (h, i) = (cfg.hidden_size, cfg.intermediate_size);
        let q = cfg.num_heads * cfg.head_dim;
        let kv = cfg.num_kv_heads * cfg.head_dim;
        match self {
            TargetModule::QProj => (q, h),
            TargetModule::KProj | TargetModule::VProj => (kv, h),
            TargetModule::OProj => (h, q),
            TargetModule::GateProj | TargetModule::UpProj => (i, h),
            TargetModule::DownProj => (h, i),
        }
    }

    /// The base weight's name in an HF checkpoint (`model.layers.3.self_attn.q_proj.weight`).
    pub fn weight_name(self, layer: usize) -> String {
        format!("model.layers.{layer}.{}.weight", self.module_path())
    }

    /// The name PEFT gives adapter matrix `which` (`"lora_A"` or `"lora_B"`) of this module.
    fn peft_name(self, layer: usize, which: &str) -> String {
        format!(
            "base_model.model.model.layers.{layer}.{}.{which}.weight",
            self.module_path()
        )
    }

    fn index(self) -> usize {
        self as usize
    }
}

impl std::str::FromStr for TargetModule {
    type Err = PolicyError;
    fn from_str(s: &str) -> Result<Self> {
        TargetModule::ALL
            .into_iter()
            .find(|t| t.hf_name() == s)
            .ok_or_else(|| {
                let known: Vec<&str> = TargetModule::ALL.iter().map(|t| t.hf_name()).collect();
                PolicyError::Config(format!(
                    "unknown LoRA target module `{s}` (expected one of {})",
                    known.join(", ")
                ))
            })
    }
}

impl std::fmt::Display for TargetModule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.hf_name())
    }
}

/// LoRA hyper-parameters (PEFT's `LoraConfig` subset that this crate implements).
#[derive(Debug, Clone, PartialEq)]
pub struct LoraConfig {
    /// `r`, the rank of the update.
    pub rank: usize,
    /// `lora_alpha`: the update is scaled by `alpha / rank`.
    pub alpha: f64,
    /// `lora_dropout`. Only 0 is implemented; anything else is refused by
    /// [`LoraConfig::validate`].
    pub dropout: f64,
    pub target_modules: Vec<TargetModule>,
    /// `base_model_name_or_path` written into `adapter_config.json`.
    pub base_model: Option<String>,
}

impl LoraConfig {
    /// Rank `rank`, scale `alpha / rank`, no dropout, no base-model name.
    pub fn new(rank: usize, alpha: f64, target_modules: Vec<TargetModule>) -> Self {
        Self {
            rank,
            alpha,
            dropout: 0.0,
            target_modules,
            base_model: None,
        }
    }

    /// `alpha / rank`.
    pub fn scaling(&self) -> f64 {
        self.alpha / self.rank as f64
    }

    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(PolicyError::Config(format!("LoRA config: {m}")));
        if self.rank == 0 {
            return bad("r must be positive".into());
        }
        if !self.alpha.is_finite() || self.alpha <= 0.0 {
            return bad(format!("lora_alpha must be positive, got {}", self.alpha));
        }
        if self.dropout != 0.0 {
            return bad(format!(
                "lora_dropout {} is not supported (only 0 is implemented)",
                self.dropout
            ));
        }
        if self.target_modules.is_empty() {
            return bad("target_modules is empty".into());
        }
        for (i, t) in self.target_modules.iter().enumerate() {
            if self.target_modules[..i].contains(t) {
                return bad(format!("target module {t} given twice"));
            }
        }
        Ok(())
    }

    /// The `adapter_config.json` PEFT writes for this configuration.
    pub fn to_peft_json(&self) -> Value {
        // PEFT types lora_alpha as an int; keep whole numbers integral.
        let alpha = if self.alpha.fract() == 0.0 && self.alpha.abs() < 1e15 {
            json!(self.alpha as i64)
        } else {
            json!(self.alpha)
        };
        let targets: Vec<&str> = self.target_modules.iter().map(|t| t.hf_name()).collect();
        json!({
            "peft_type": "LORA",
            "task_type": "CAUSAL_LM",
            "base_model_name_or_path": self.base_model,
            "r": self.rank,
            "lora_alpha": alpha,
            "lora_dropout": self.dropout,
            "target_modules": targets,
            "bias": "none",
            "fan_in_fan_out": false,
            "inference_mode": true,
            "init_lora_weights": true,
            "use_rslora": false,
            "use_dora": false,
            "modules_to_save": null,
            "layers_to_transform": null,
            "layers_pattern": null,
            "rank_pattern": {},
            "alpha_pattern": {},
            "revision": null,
        })
    }

    /// Parse an `adapter_config.json` (`what` names the file in errors). Options this crate
    /// does not implement (DoRA, rsLoRA, biases, per-module ranks, layer subsets, regex
    /// targets, extra trained modules) are refused rather than ignored.
    pub fn from_peft_json(v: &Value, what: &str) -> Result<Self> {
        let bad = |key: &str, msg: String| PolicyError::Config(format!("{what}: `{key}` {msg}"));
        let get = |key: &str| v.get(key).filter(|x| !x.is_null());
        match get("peft_type").and_then(Value::as_str) {
            Some("LORA") => {}
            _ => {
                return Err(bad(
                    "peft_type",
                    format!(
                        "must be \"LORA\", got {}",
                        v.get("peft_type").unwrap_or(&Value::Null)
                    ),
                ))
            }
        }
        if let Some(t) = get("task_type") {
            if t.as_str() != Some("CAUSAL_LM") {
                return Err(bad("task_type", format!("must be \"CAUSAL_LM\", got {t}")));
            }
        }
        let rank = get("r")
            .and_then(Value::as_u64)
            .ok_or_else(|| bad("r", "is missing or not a positive integer".into()))?
            as usize;
        let alpha = get("lora_alpha")
            .and_then(Value::as_f64)
            .ok_or_else(|| bad("lora_alpha", "is missing or not a number".into()))?;
        let dropout = match get("lora_dropout") {
            None => 0.0,
            Some(d) => d
                .as_f64()
                .ok_or_else(|| bad("lora_dropout", format!("is not a number: {d}")))?,
        };
        let target_modules = match get("target_modules") {
            Some(Value::Array(items)) => items
                .iter()
                .map(|t| {
                    t.as_str()
                        .ok_or_else(|| bad("target_modules", format!("holds a non-string {t}")))?
                        .parse::<TargetModule>()
                        .map_err(|e| bad("target_modules", e.to_string()))
                })
                .collect::<Result<Vec<_>>>()?,
            Some(other) => {
                return Err(bad(
                    "target_modules",
                    format!(
                        "must be a list of module names (a regex is not supported), got {other}"
                    ),
                ))
            }
            None => return Err(bad("target_modules", "is missing".into())),
        };
        Self::refuse_unsupported(v, &bad)?;
        let cfg = Self {
            rank,
            alpha,
            dropout,
            target_modules,
            base_model: get("base_model_name_or_path")
                .and_then(Value::as_str)
                .map(str::to_string),
        };
        cfg.validate()
            .map_err(|e| PolicyError::Config(format!("{what}: {e}")))?;
        Ok(cfg)
    }

    /// Errors for PEFT options set to something other than their plain-LoRA default.
    fn refuse_unsupported(v: &Value, bad: &dyn Fn(&str, String) -> PolicyError) -> Result<()> {
        let set = |key: &str| v.get(key).filter(|x| !x.is_null());
        if let Some(b) = set("bias") {
            if b.as_str() != Some("none") {
                return Err(bad("bias", format!("{b} is not supported (only \"none\")")));
            }
        }
        for key in ["use_dora", "use_rslora", "fan_in_fan_out"] {
            if let Some(x) = set(key) {
                if x.as_bool() != Some(false) {
                    return Err(bad(key, format!("{x} is not supported (only false)")));
                }
            }
        }
        for key in ["rank_pattern", "alpha_pattern"] {
            if let Some(x) = set(key) {
                if x.as_object().is_none_or(|m| !m.is_empty()) {
                    return Err(bad(key, format!("{x} is not supported (only {{}})")));
                }
            }
        }
        for key in ["layers_to_transform", "modules_to_save"] {
            if let Some(x) = set(key) {
                if x.as_array().is_none_or(|a| !a.is_empty()) {
                    return Err(bad(key, format!("{x} is not supported (only null)")));
                }
            }
        }
        Ok(())
    }
}

/// The two matrices of one adapted projection.
#[derive(Debug)]
struct LoraPair {
    /// `[r, in]`.
    a: Var,
    /// `[out, r]`.
    b: Var,
}

/// The adapters of a whole model: one optional `(A, B)` pair per layer and target module.
#[derive(Debug)]
pub struct LoraAdapters {
    cfg: LoraConfig,
    scaling: f64,
    /// Per layer, indexed by [`TargetModule::index`].
    layers: Vec<[Option<LoraPair>; 7]>,
}

impl LoraAdapters {
    /// Fresh adapters for a model of shape `model_cfg`: `A` drawn from `seed` (PEFT's
    /// kaiming-uniform bound `1/sqrt(in)`, layer by layer, in `target_modules` order), `B` zero.
    pub fn new(
        model_cfg: &LlamaConfig,
        cfg: LoraConfig,
        dtype: DType,
        device: &Device,
        seed: u64,
    ) -> Result<Self> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        Self::build(model_cfg, cfg, dtype, device, |_, shape, is_a| {
            let n = shape.0 * shape.1;
            let data: Vec<f64> = if is_a {
                let bound = 1.0 / (shape.1 as f64).sqrt();
                (0..n).map(|_| rng.gen_range(-bound..bound)).collect()
            } else {
                vec![0.0; n]
            };
            Ok(Tensor::from_vec(data, shape, &Device::Cpu)?)
        })
    }

    /// Build from `get(peft_name, (rows, cols), is_a)`, checking each tensor's shape.
    fn build(
        model_cfg: &LlamaConfig,
        cfg: LoraConfig,
        dtype: DType,
        device: &Device,
        mut get: impl FnMut(&str, (usize, usize), bool) -> Result<Tensor>,
    ) -> Result<Self> {
        cfg.validate()?;
        let mut layers = Vec::with_capacity(model_cfg.num_layers);
        for layer in 0..model_cfg.num_layers {
            let mut pairs: [Option<LoraPair>; 7] = Default::default();
            for &target in &cfg.target_modules {
                let (out, inp) = target.weight_shape(model_cfg);
                let mut var = |which: &str, shape: (usize, usize), is_a: bool| -> Result<Var> {
                    let name = target.peft_name(layer, which);
                    let t = get(&name, shape, is_a)?;
                    if t.dims() != [shape.0, shape.1] {
                        return Err(PolicyError::Config(format!(
                            "LoRA tensor {name} has shape {:?}, expected {:?}",
                            t.dims(),
                            [shape.0, shape.1]
                        )));
                    }
                    Ok(Var::from_tensor(&t.to_dtype(dtype)?.to_device(device)?)?)
                };
                let a = var("lora_A", (cfg.rank, inp), true)?;
                let b = var("lora_B", (out, cfg.rank), false)?;
                pairs[target.index()] = Some(LoraPair { a, b });
            }
            layers.push(pairs);
        }
        Ok(Self {
            scaling: cfg.scaling(),
            cfg,
            layers,
        })
    }

    pub fn config(&self) -> &LoraConfig {
        &self.cfg
    }

    pub fn num_layers(&self) -> usize {
        self.layers.len()
    }

    /// `(A, B)` of `target` in `layer`, if adapted.
    pub fn pair(&self, layer: usize, target: TargetModule) -> Option<(&Var, &Var)> {
        self.layers
            .get(layer)?
            .get(target.index())?
            .as_ref()
            .map(|p| (&p.a, &p.b))
    }

    /// Every adapter matrix under its PEFT name: layer by layer, modules in
    /// [`TargetModule::ALL`] order, `A` before `B`.
    pub fn named_vars(&self) -> Vec<(String, Var)> {
        let mut out = Vec::new();
        for (layer, pairs) in self.layers.iter().enumerate() {
            for target in TargetModule::ALL {
                if let Some(p) = &pairs[target.index()] {
                    out.push((target.peft_name(layer, "lora_A"), p.a.clone()));
                    out.push((target.peft_name(layer, "lora_B"), p.b.clone()));
                }
            }
        }
        out
    }

    /// The adapted projection `x W^T + s (x A^T) B^T` with `W` frozen (no gradient).
    pub(crate) fn project(
        &self,
        layer: usize,
        target: TargetModule,
        x: &Tensor,
        weight: &Tensor,
    ) -> Result<Tensor> {
        let base = frozen_linear(x, weight)?;
        match self.pair(layer, target) {
            None => Ok(base),
            Some((a, b)) => {
                // Scale the rank-r intermediate: cheaper than scaling the output.
                let down = (linear(x, a.as_tensor())? * self.scaling)?;
                Ok((base + linear(&down, b.as_tensor())?)?)
            }
        }
    }

    /// `s * B @ A`, `[out, in]`: what merging adds to the base weight (detached).
    pub fn delta_weight(&self, layer: usize, target: TargetModule) -> Result<Option<Tensor>> {
        match self.pair(layer, target) {
            None => Ok(None),
            Some((a, b)) => {
                let d = b.as_tensor().detach().matmul(&a.as_tensor().detach())?;
                Ok(Some((d * self.scaling)?))
            }
        }
    }

    /// Whether these adapters fit a model of shape `cfg`, dtype `dtype` on `device`.
    pub(crate) fn check_fits(&self, cfg: &LlamaConfig, dtype: DType, device: &Device) -> Result<()> {
        if self.layers.len() != cfg.num_layers {
            return Err(PolicyError::Config(format!(
                "LoRA adapter has {} layers, the model {}",
                self.layers.len(),
                cfg.num_layers
            )));
        }
        for (name, var) in self.named_vars() {
            if var.dtype() != dtype || !var.device().same_device(device) {
                return Err(PolicyError::Config(format!(
                    "LoRA tensor {name} is {:?} on {:?}, the model {dtype:?} on {device:?}",
                    var.dtype(),
                    var.device()
                )));
            }
        }
        for layer in 0..cfg.num_layers {
            for target in TargetModule::ALL {
                if let Some((a, b)) = self.pair(layer, target) {
                    let (out, inp) = target.weight_shape(cfg);
                    let r = self.cfg.rank;
                    if a.dims() != [r, inp] || b.dims() != [out, r] {
                        return Err(PolicyError::Config(format!(
                            "LoRA {target} of layer {layer}: A {:?} and B {:?} do not fit a \
                             [{out}, {inp}] weight at rank {r}",
                            a.dims(),
                            b.dims()
                        )));
                    }
                }
            }
        }
        Ok(())
    }

    /// Write `adapter_config.json` and `adapter_model.safetensors` (PEFT layout) into `dir`.
    pub fn save(&self, dir: &Path) -> Result<()> {
        std::fs::create_dir_all(dir).map_err(|e| PolicyError::io(dir, e))?;
        let tensors: HashMap<String, Tensor> = self
            .named_vars()
            .into_iter()
            .map(|(name, var)| (name, var.as_tensor().detach()))
            .collect();
        candle_core::safetensors::save(&tensors, dir.join(ADAPTER_MODEL_FILE))?;
        let text = serde_json::to_string_pretty(&self.cfg.to_peft_json())
            .map_err(|e| PolicyError::context("adapter config", e))?;
        let path = dir.join(ADAPTER_CONFIG_FILE);
        std::fs::write(&path, text).map_err(|e| PolicyError::io(&path, e))
    }

    /// Load a PEFT adapter folder for a model of shape `model_cfg`. Every expected tensor must
    /// be there with its shape, and no other.
    pub fn load(
        dir: &Path,
        model_cfg: &LlamaConfig,
        dtype: DType,
        device: &Device,
    ) -> Result<Self> {
        let cfg = read_adapter_config(dir)?;
        let path = dir.join(ADAPTER_MODEL_FILE);
        let mut tensors = read_adapter_tensors(&path)?;
        let adapters = Self::build(model_cfg, cfg, dtype, device, |name, _, _| {
            tensors
                .remove(name)
                .ok_or_else(|| PolicyError::Config(format!("{}: no tensor {name}", path.display())))
        })?;
        refuse_leftovers(&path, tensors)?;
        Ok(adapters)
    }

    /// Overwrite these adapters' matrices in place with those saved in `dir` (same
    /// configuration required), e.g. to resume training with an optimizer that holds them.
    pub fn load_weights_into(&self, dir: &Path) -> Result<()> {
        let cfg = read_adapter_config(dir)?;
        if cfg.rank != self.cfg.rank
            || cfg.alpha != self.cfg.alpha
            || cfg.target_modules != self.cfg.target_modules
        {
            return Err(PolicyError::Config(format!(
                "{}: adapter (r {}, alpha {}, targets {:?}) differs from the model's (r {}, alpha {}, targets {:?})",
                dir.join(ADAPTER_CONFIG_FILE).display(),
                cfg.rank,
                cfg.alpha,
                cfg.target_modules,
                self.cfg.rank,
                self.cfg.alpha,
                self.cfg.target_modules
            )));
        }
        let path = dir.join(ADAPTER_MODEL_FILE);
        let mut tensors = read_adapter_tensors(&path)?;
        // Check everything before changing anything.
        let mut updates = Vec::new();
        for (name, var) in self.named_vars() {
            let t = tensors.remove(&name).ok_or_else(|| {
                PolicyError::Config(format!("{}: no tensor {name}", path.display()))
            })?;
            if t.dims() != var.dims() {
                return Err(PolicyError::Config(format!(
                    "{}: tensor {name} has shape {:?}, expected {:?}",
                    path.display(),
                    t.dims(),
                    var.dims()
                )));
            }
            updates.push((var, t));
        }
        refuse_leftovers(&path, tensors)?;
        for (var, t) in updates {
            var.set(&t.to_dtype(var.dtype())?.to_device(var.device())?)?;
        }
        Ok(())
    }
}

fn read_adapter_config(dir: &Path) -> Result<LoraConfig> {
    let path = dir.join(ADAPTER_CONFIG_FILE);
    let text = std::fs::read_to_string(&path).map_err(|e| PolicyError::io(&path, e))?;
    let v: Value = serde_json::from_str(&text)
        .map_err(|e| PolicyError::context(path.display().to_string(), e))?;
    LoraConfig::from_peft_json(&v, &path.display().to_string())
}

fn read_adapter_tensors(path: &Path) -> Result<HashMap<String, Tensor>> {
    if !path.exists() {
        return Err(PolicyError::io(
            path,
            std::io::Error::new(std::io::ErrorKind::NotFound, "adapter weights missing"),
        ));
    }
    candle_core::safetensors::load(path, &Device::Cpu).map_err(|e| {
        PolicyError::Config(format!("{}: cannot read safetensors: {e}", path.display()))
    })
}

/// Tensors the configuration does not account for mean a different adapter: refuse them.
fn refuse_leftovers(path: &Path, rest: HashMap<String, Tensor>) -> Result<()> {
    if rest.is_empty() {
        return Ok(());
    }
    let mut names: Vec<String> = rest.into_keys().collect();
    names.sort();
    Err(PolicyError::Config(format!(
        "{}: unexpected tensors not covered by adapter_config.json: {}",
        path.display(),
        names.join(", ")
    )))
}


#[cfg(test)]
mod tests {
    use super::*;

    fn all_targets(rank: usize) -> LoraConfig {
        LoraConfig::new(rank, 2.0 * rank as f64, TargetModule::ALL.to_vec())
    }

    #[test]
    fn init_is_seeded_kaiming_uniform_a_and_zero_b() {
        let cfg = LlamaConfig::tiny();
        let dev = Device::Cpu;
        let make = |seed| LoraAdapters::new(&cfg, all_targets(3), DType::F64, &dev, seed).unwrap();
        let (x, y, z) = (make(1), make(1), make(2));
        assert_eq!(x.named_vars().len(), 2 * 7 * cfg.num_layers);
        let flat = |v: &Var| {
            v.as_tensor()
                .flatten_all()
                .unwrap()
                .to_vec1::<f64>()
                .unwrap()
        };
        for (((name, a), (_, b)), (_, c)) in x
            .named_vars()
            .iter()
            .zip(y.named_vars().iter())
            .zip(z.named_vars().iter())
        {
            assert_eq!(flat(a), flat(b), "{name}: same seed, different values");
            let values = flat(a);
            if name.contains("lora_B") {
                assert!(values.iter().all(|&v| v == 0.0), "{name} is not zero");
            } else {
                assert_ne!(values, flat(c), "{name}: another seed, same values");
                let bound = 1.0 / (a.dims()[1] as f64).sqrt();
                assert!(
                    values.iter().all(|v| v.abs() <= bound),
                    "{name} exceeds {bound}"
                );
                let spread = values.iter().fold(0f64, |m, v| m.max(v.abs()));
                assert!(
                    spread > 0.5 * bound,
                    "{name}: values {values:?} do not fill the range"
                );
            }
        }
        assert_eq!(
            x.named_vars()[0].0,
            "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight"
        );
        assert_eq!(
            x.pair(1, TargetModule::DownProj).unwrap().0.dims(),
            &[3, 24]
        );
        assert_eq!(
            x.pair(1, TargetModule::DownProj).unwrap().1.dims(),
            &[16, 3]
        );
        assert_eq!(x.pair(0, TargetModule::KProj).unwrap().1.dims(), &[8, 3]);
    }

    #[test]
    fn bad_configs_are_refused_with_the_key() {
        let ok = all_targets(4).to_peft_json();
        let cases: [(&str, Value, &str); 9] = [
            ("peft_type", json!("IA3"), "peft_type"),
            ("r", json!(0), "r must be positive"),
            ("r", json!("eight"), "`r`"),
            ("lora_alpha", json!(null), "lora_alpha"),
            ("lora_dropout", json!(0.05), "lora_dropout 0.05"),
            ("target_modules", json!(["q_proj", "qkv"]), "`qkv`"),
            ("target_modules", json!(".*proj"), "regex"),
            ("use_dora", json!(true), "use_dora"),
            ("bias", json!("all"), "bias"),
        ];
        for (key, value, want) in cases {
            let mut v = ok.clone();
            v[key] = value;
            let err = LoraConfig::from_peft_json(&v, "x/adapter_config.json")
                .unwrap_err()
                .to_string();
            assert!(err.contains(want), "{key}: {err}");
            assert!(err.contains("x/adapter_config.json"), "{key}: {err}");
        }
        let back = LoraConfig::from_peft_json(&ok, "x").unwrap();
        assert_eq!(back, all_targets(4));
        assert_eq!(ok["lora_alpha"], json!(8));
        assert_eq!(ok["target_modules"][4], json!("gate_proj"));
    }
}
