//! Checkpoints: the model as a Hugging Face Llama folder (`config.json` + `model.safetensors`,
//! HF names, half-split rope layout as in the model, tied head saved without `lm_head.weight`)
//! and the AdamW state (`optimizer.safetensors` + `optimizer.json`) for an exact resume.
//!
//! Keep the optimizer state out of the model folder ([`save_training_state`] puts it in an
//! `optimizer/` subfolder): loaders that glob `*.safetensors` would otherwise pick it up.

use crate::error::{PolicyError, Result};
use crate::model::{Llama, LlamaConfig};
use crate::optim::{AdamW, AdamWConfig};
use candle_core::{DType, Device, Tensor};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::path::Path;

pub const MODEL_FILE: &str = "model.safetensors";
pub const CONFIG_FILE: &str = "config.json";
pub const OPTIMIZER_FILE: &str = "optimizer.safetensors";
pub const OPTIMIZER_JSON: &str = "optimizer.json";
/// Subfolder used by [`save_training_state`] for the optimizer files.
pub const OPTIMIZER_DIR: &str = "optimizer";

fn torch_dtype(dtype: DType) -> &'static str {
    match dtype {
        DType::F16 => "float16",
        DType::BF16 => "bfloat16",
        DType::F64 => "float64",
        _ => "float32",
    }
}

/// `config.json` contents of a `LlamaForCausalLM` with this configuration.
pub fn hf_config_json(cfg: &LlamaConfig, dtype: DType) -> Value {
    json!({
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": cfg.vocab_size,
        "hidden_size": cfg.hidden_size,
        "intermediate_size": cfg.intermediate_size,
        "num_hidden_layers": cfg.num_layers,
        "num_attention_heads": cfg.num_heads,
        "num_key_value_heads": cfg.num_kv_heads,
        "head_dim": cfg.head_dim,
        "hidden_act": "silu",
        "max_position_embeddings": cfg.max_position,
        "rms_norm_eps": cfg.rms_norm_eps,
        "rope_theta": cfg.rope_theta,
        "rope_scaling": null,
        "attention_bias": false,
        "attention_dropout": 0.0,
        "mlp_bias": false,
        "pretraining_tp": 1,
        "tie_word_embeddings": cfg.tie_word_embeddings,
        "torch_dtype": torch_dtype(dtype),
        "use_cache": true,
    })
}

/// Parse a Hugging Face Llama `config.json`.
pub fn llama_config_from_hf(v: &Value) -> Result<LlamaConfig> {
    let arch_ok = v.get("model_type").and_then(Value::as_str) == Some("llama")
        || v.get("architectures")
            .and_then(Value::as_array)
            .is_some_and(|a| a.iter().any(|x| x.as_str() == Some("LlamaForCausalLM")));
    if !arch_ok {
        return Err(PolicyError::Config(format!(
            "unsupported architecture (model_type {}, architectures {}); expected llama",
            v.get("model_type").unwrap_or(&Value::Null),
            v.get("architectures").unwrap_or(&Value::Null)
        )));
    }
    let usize_of = |k: &str| -> Result<usize> {
        v.get(k)
            .and_then(Value::as_u64)
            .map(|x| x as usize)
            .ok_or_else(|| PolicyError::Config(format!("config.json: missing or bad {k}")))
    };
    let hidden_size = usize_of("hidden_size")?;
    let num_heads = usize_of("num_attention_heads")?;
    let num_kv_heads = v
        .get("num_key_value_heads")
        .and_then(Value::as_u64)
        .map(|x| x as usize)
        .unwrap_or(num_heads);
    let head_dim = match v.get("head_dim").and_then(Value::as_u64) {
        Some(d) => d as usize,
        None if num_heads > 0 => hidden_size / num_heads,
        None => 0,
    };
    if let Some(s) = v.get("rope_scaling") {
        if !s.is_null() {
            return Err(PolicyError::Config(format!(
                "rope_scaling {s} is not supported"
            )));
        }
    }
    let cfg = LlamaConfig {
        vocab_size: usize_of("vocab_size")?,
        hidden_size,
        intermediate_size: usize_of("intermediate_size")?,
        num_layers: usize_of("num_hidden_layers")?,
        num_heads,
        num_kv_heads,
        head_dim,
        rope_theta: v
            .get("rope_theta")
            .and_then(Value::as_f64)
            .unwrap_or(10_000.0),
        rms_norm_eps: v
            .get("rms_norm_eps")
            .and_then(Value::as_f64)
            .unwrap_or(1e-6),
        max_position: usize_of("max_position_embeddings")?,
        tie_word_embeddings: v
            .get("tie_word_embeddings")
            .and_then(Value::as_bool)
            .unwrap_or(false),
    };
    cfg.validate()?;
    Ok(cfg)
}

fn write_file(path: &Path, bytes: &[u8]) -> Result<()> {
    std::fs::write(path, bytes).map_err(|e| PolicyError::io(path, e))
}

fn read_json(path: &Path) -> Result<Value> {
    let text = std::fs::read_to_string(path).map_err(|e| PolicyError::io(path, e))?;
    serde_json::from_str(&text).map_err(|e| PolicyError::Config(format!("{}: {e}", path.display())))
}

/// Save the model's weights (in its dtype) and `config.json` into `dir` (created if needed).
/// A model with a LoRA adapter is saved merged ([`Llama::merged`]): the checkpoint computes
/// what the model computes.
pub fn save_model(model: &Llama, dir: &Path) -> Result<()> {
    if model.lora().is_some() {
        return save_model(&model.merged()?, dir);
    }
    std::fs::create_dir_all(dir).map_err(|e| PolicyError::io(dir, e))?;
    let tensors: HashMap<String, Tensor> = model
        .named_vars()
        .into_iter()
        .map(|(name, var)| (name, var.as_tensor().detach()))
        .collect();
    let path = dir.join(MODEL_FILE);
    candle_core::safetensors::save(&tensors, &path)?;
    let cfg = hf_config_json(model.config(), model.dtype());
    let text = serde_json::to_string_pretty(&cfg).expect("json");
    write_file(&dir.join(CONFIG_FILE), text.as_bytes())
}

/// The weight files of an HF folder: those named by `model.safetensors.index.json` if present,
/// else `model.safetensors`, else every `*.safetensors` but the optimizer's.
fn weight_files(dir: &Path) -> Result<Vec<std::path::PathBuf>> {
    let index = dir.join("model.safetensors.index.json");
    if index.exists() {
        let v = read_json(&index)?;
        let map = v
            .get("weight_map")
            .and_then(Value::as_object)
            .ok_or_else(|| PolicyError::Config(format!("{}: no weight_map", index.display())))?;
        let mut files: Vec<String> = map
            .values()
            .filter_map(|f| f.as_str().map(str::to_string))
            .collect();
        files.sort();
        files.dedup();
        return Ok(files.into_iter().map(|f| dir.join(f)).collect());
    }
    let single = dir.join(MODEL_FILE);
    if single.exists() {
        return Ok(vec![single]);
    }
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| PolicyError::io(dir, e))? {
        let path = entry.map_err(|e| PolicyError::io(dir, e))?.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if name.ends_with(".safetensors") && name != OPTIMIZER_FILE {
            files.push(path);
        }
    }
    files.sort();
    if files.is_empty() {
        return Err(PolicyError::Config(format!(
            "{}: no *.safetensors weight files",
            dir.display()
        )));
    }
    Ok(files)
}

fn load_tensors(dir: &Path) -> Result<HashMap<String, Tensor>> {
    let mut all = HashMap::new();
    for f in weight_files(dir)? {
        if !f.exists() {
            return Err(PolicyError::io(
                &f,
                std::io::Error::new(std::io::ErrorKind::NotFound, "weight file missing"),
            ));
        }
        let t = candle_core::safetensors::load(&f, &Device::Cpu).map_err(|e| {
            PolicyError::Config(format!("{}: cannot read safetensors: {e}", f.display()))
        })?;
        all.extend(t);
    }
    Ok(all)
}

/// Load a Hugging Face Llama folder (`config.json` + safetensors) as a trainable model.
pub fn load_model(dir: &Path, dtype: DType, device: &Device) -> Result<Llama> {
    let cfg = llama_config_from_hf(&read_json(&dir.join(CONFIG_FILE))?)?;
    let mut tensors = load_tensors(dir)?;
    Llama::from_weights(cfg, dtype, device, |name, _| {
        tensors
            .remove(name)
            .ok_or_else(|| PolicyError::Config(format!("{}: no weight {name}", dir.display())))
    })
}

/// Overwrite `model`'s weights with those saved in `dir` (same configuration required).
pub fn load_weights_into(model: &Llama, dir: &Path) -> Result<()> {
    let cfg = llama_config_from_hf(&read_json(&dir.join(CONFIG_FILE))?)?;
    if &cfg != model.config() {
        return Err(PolicyError::Config(format!(
            "{}: configuration {cfg:?} differs from the model's {:?}",
            dir.display(),
            model.config()
        )));
    }
    let tensors = load_tensors(dir)?;
    for (name, var) in model.named_vars() {
        let t = tensors
            .get(&name)
            .ok_or_else(|| PolicyError::Config(format!("{}: no weight {name}", dir.display())))?;
        if t.dims() != var.dims() {
            return Err(PolicyError::Config(format!(
                "weight {name} has shape {:?}, expected {:?}",
                t.dims(),
                var.dims()
            )));
        }
        var.set(&t.to_dtype(var.dtype())?.to_device(var.device())?)?;
    }
    Ok(())
}

/// Save the optimizer state: `optimizer.safetensors` (`{name}.exp_avg`, `{name}.exp_avg_sq`
/// for each parameter updated at least once) and `optimizer.json` (hyper-parameters, step
/// counts, parameter names in order).
pub fn save_optimizer(opt: &AdamW, dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| PolicyError::io(dir, e))?;
    let mut tensors = HashMap::new();
    let mut params = Vec::new();
    for p in &opt.params {
        if let (Some(m), Some(v)) = (&p.m, &p.v) {
            tensors.insert(format!("{}.exp_avg", p.name), m.clone());
            tensors.insert(format!("{}.exp_avg_sq", p.name), v.clone());
        }
        params.push(json!({"name": p.name, "step": p.step}));
    }
    candle_core::safetensors::save(&tensors, dir.join(OPTIMIZER_FILE))?;
    let meta = json!({
        "format": "rlvmr-adamw-1",
        "steps": opt.steps,
        "config": opt.config(),
        "params": params,
    });
    let text = serde_json::to_string_pretty(&meta).expect("json");
    write_file(&dir.join(OPTIMIZER_JSON), text.as_bytes())
}

/// Restore the state saved by [`save_optimizer`] into `opt` (same parameter names required);
/// the hyper-parameters are restored too.
pub fn load_optimizer_into(opt: &mut AdamW, dir: &Path) -> Result<()> {
    let meta_path = dir.join(OPTIMIZER_JSON);
    let meta = read_json(&meta_path)?;
    let bad = |m: &str| PolicyError::Config(format!("{}: {m}", meta_path.display()));
    let cfg: AdamWConfig = serde_json::from_value(meta.get("config").cloned().unwrap_or_default())
        .map_err(|e| bad(&format!("config: {e}")))?;
    let steps = meta
        .get("steps")
        .and_then(Value::as_u64)
        .ok_or_else(|| bad("missing steps"))?;
    let params = meta
        .get("params")
        .and_then(Value::as_array)
        .ok_or_else(|| bad("missing params"))?;
    let mut saved: HashMap<String, u64> = HashMap::new();
    for p in params {
        let name = p
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| bad("param name"))?;
        let step = p
            .get("step")
            .and_then(Value::as_u64)
            .ok_or_else(|| bad("param step"))?;
        saved.insert(name.to_string(), step);
    }
    if saved.len() != opt.params.len() || opt.params.iter().any(|p| !saved.contains_key(&p.name)) {
        return Err(bad("parameter names differ from the optimizer's"));
    }
    let path = dir.join(OPTIMIZER_FILE);
    let mut tensors = candle_core::safetensors::load(&path, &Device::Cpu).map_err(|e| {
        PolicyError::Config(format!("{}: cannot read safetensors: {e}", path.display()))
    })?;
    let mut restored = Vec::with_capacity(opt.params.len());
    for p in &opt.params {
        let step = saved[&p.name];
        let (dtype, device) = (p.var.dtype(), p.var.device().clone());
        let mut take = |suffix: &str| -> Result<Option<Tensor>> {
            match tensors.remove(&format!("{}.{suffix}", p.name)) {
                None if step == 0 => Ok(None),
                None => Err(bad(&format!("no {suffix} for {}", p.name))),
                Some(t) if t.dims() != p.var.dims() => Err(bad(&format!(
                    "{}.{suffix} has shape {:?}",
                    p.name,
                    t.dims()
                ))),
                Some(t) => Ok(Some(t.to_dtype(dtype)?.to_device(&device)?)),
            }
        };
        let m = take("exp_avg")?;
        let v = take("exp_avg_sq")?;
        restored.push((step, m, v));
    }
    for (p, (step, m, v)) in opt.params.iter_mut().zip(restored) {
        p.step = step;
        p.m = m;
        p.v = v;
    }
    opt.steps = steps;
    *opt.config_mut() = cfg;
    Ok(())
}

/// Save what training changes into `dir`: the model (HF folder) or, with a LoRA adapter
/// attached, only the adapter (PEFT folder; the base is unchanged by training); and the
/// optimizer into `dir/optimizer/`.
pub fn save_training_state(model: &Llama, opt: &AdamW, dir: &Path) -> Result<()> {
    match model.lora() {
        Some(lora) => lora.save(dir)?,
        None => save_model(model, dir)?,
    }
    save_optimizer(opt, &dir.join(OPTIMIZER_DIR))
}

/// Restore what [`save_training_state`] wrote into an existing model (with the same kind of
/// adapter attached, if one was) and optimizer.
pub fn load_training_state(model: &Llama, opt: &mut AdamW, dir: &Path) -> Result<()> {
    match model.lora() {
        Some(lora) => lora.load_weights_into(dir)?,
        None => load_weights_into(model, dir)?,
    }
    load_optimizer_into(opt, &dir.join(OPTIMIZER_DIR))
}
