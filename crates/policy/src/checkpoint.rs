//! Checkpoints: the model as a Hugging Face folder (`config.json` naming `LlamaForCausalLM` or
//! `Qwen2ForCausalLM`, `model.safetensors` with HF names, half-split rope layout as in the
//! model, tied head saved without `lm_head.weight`, `tokenizer.json` and a
//! `tokenizer_config.json` carrying the ChatML template), which transformers and this crate's
//! [`crate::load_model`] both load, and the AdamW state (`optimizer.safetensors` +
//! `optimizer.json`) for an exact resume.
//!
//! Keep the optimizer state out of the model folder ([`save_training_state`] puts it in an
//! `optimizer/` subfolder): loaders that glob `*.safetensors` would otherwise pick it up.

use crate::error::{PolicyError, Result};
use crate::model::{Family, Llama, LlamaConfig};
use crate::optim::{AdamW, AdamWConfig};
use crate::tokenizer::Tokenizer;
use candle_core::{DType, Device, Tensor};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::path::Path;

pub use crate::hf::{load_model, load_weights_into, CONFIG_FILE, INDEX_FILE, MODEL_FILE, OPTIMIZER_FILE};
use crate::hf::read_json;

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

/// `config.json` contents of a `LlamaForCausalLM` or `Qwen2ForCausalLM` (by `cfg.family`) with
/// this configuration.
pub fn hf_config_json(cfg: &LlamaConfig, dtype: DType) -> Value {
    let mut v = json!({
        "architectures": [cfg.family.hf_architecture()],
        "model_type": cfg.family.hf_model_type(),
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
        "attention_dropout": 0.0,
        "tie_word_embeddings": cfg.tie_word_embeddings,
        "torch_dtype": torch_dtype(dtype),
        "use_cache": true,
    });
    let family_keys = match cfg.family {
        Family::Llama => json!({"attention_bias": false, "mlp_bias": false, "pretraining_tp": 1}),
        // Full attention in every layer, as this crate computes it.
        Family::Qwen2 => json!({
            "use_sliding_window": false,
            "sliding_window": null,
            "max_window_layers": cfg.num_layers,
        }),
    };
    if let (Some(all), Value::Object(extra)) = (v.as_object_mut(), family_keys) {
        all.extend(extra);
    }
    v
}

/// Parse a Hugging Face `config.json` of the Llama or Qwen2 family (see [`crate::hf`]).
pub fn llama_config_from_hf(v: &Value) -> Result<LlamaConfig> {
    crate::hf::config_from_json(v)
}

fn write_file(path: &Path, bytes: &[u8]) -> Result<()> {
    std::fs::write(path, bytes).map_err(|e| PolicyError::io(path, e))
}

/// `tokenizer_config.json` for transformers: the ChatML template of [`crate::chat`] and
/// `<|im_end|>` as the end of a turn when the tokenizer has it.
fn tokenizer_config_json(tok: &Tokenizer, max_position: usize) -> Value {
    let has = |t: &'static str| tok.token_to_id(t).map(|_| t);
    json!({
        "tokenizer_class": "PreTrainedTokenizerFast",
        "chat_template": crate::chat::CHATML_JINJA,
        "bos_token": null,
        "eos_token": has(crate::chat::IM_END),
        "pad_token": has("<|endoftext|>"),
        "clean_up_tokenization_spaces": false,
        "model_max_length": max_position,
    })
}

/// Save the model as a Hugging Face folder in `dir` (created if needed): its weights in its
/// dtype (`model.safetensors`), `config.json`, `tokenizer.json` and `tokenizer_config.json`.
/// A `model.safetensors.index.json` left in `dir` by an earlier sharded model is removed (it
/// would otherwise take precedence over the new weights when loading). A model with a LoRA
/// adapter is saved merged ([`Llama::merged`]): the checkpoint computes what the model computes.
pub fn save_model(model: &Llama, tokenizer: &Tokenizer, dir: &Path) -> Result<()> {
    if model.lora().is_some() {
        return save_model(&model.merged()?, tokenizer, dir);
    }
    std::fs::create_dir_all(dir).map_err(|e| PolicyError::io(dir, e))?;
    let stale_index = dir.join(INDEX_FILE);
    if stale_index.exists() {
        std::fs::remove_file(&stale_index).map_err(|e| PolicyError::io(&stale_index, e))?;
    }
    let tensors: HashMap<String, Tensor> = model
        .named_vars()
        .into_iter()
        .map(|(name, var)| (name, var.as_tensor().detach()))
        .collect();
    let path = dir.join(MODEL_FILE);
    candle_core::safetensors::save(&tensors, &path)?;
    let cfg = hf_config_json(model.config(), model.dtype());
    let text = serde_json::to_string_pretty(&cfg).expect("json");
    write_file(&dir.join(CONFIG_FILE), text.as_bytes())?;
    let tok_path = dir.join(crate::hf::TOKENIZER_FILE);
    tokenizer
        .inner()
        .save(&tok_path, true)
        .map_err(|e| PolicyError::context(format!("writing the tokenizer {}", tok_path.display()), e))?;
    let tok_cfg = tokenizer_config_json(tokenizer, model.config().max_position);
    let text = serde_json::to_string_pretty(&tok_cfg).expect("json");
    write_file(&dir.join(crate::hf::TOKENIZER_CONFIG_FILE), text.as_bytes())
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
pub fn save_training_state(
    model: &Llama,
    tokenizer: &Tokenizer,
    opt: &AdamW,
    dir: &Path,
) -> Result<()> {
    match model.lora() {
        Some(lora) => lora.save(dir)?,
        None => save_model(model, tokenizer, dir)?,
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
