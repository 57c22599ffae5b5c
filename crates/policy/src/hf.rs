//! Hugging Face model folders: `config.json` of the Llama and Qwen2 families, `tokenizer.json`,
//! and the weights in one or many `*.safetensors` files (stored in bf16, f16 or f32; with or
//! without `model.safetensors.index.json`), as [`crate::checkpoint::load_model`] reads them.
//!
//! `config.json` is read as both transformers 4 (`rope_theta` at the top level) and
//! transformers 5 (`rope_parameters: {rope_type, rope_theta}`) write it. Qwen2's
//! `sliding_window` / `use_sliding_window` / `max_window_layers` are ignored: the model attends
//! to its whole context (see [`crate::model`]). Anything the decoder cannot reproduce (another
//! architecture, rope scaling, another activation, Llama's `attention_bias` or `mlp_bias`) is
//! an error naming the key and its value, never a silently different model.

use crate::error::{PolicyError, Result};
use crate::model::{Family, Llama, LlamaConfig};
use crate::tokenizer::Tokenizer;
use candle_core::{DType, Device, Tensor};
use serde_json::Value;
use std::collections::HashMap;
use std::path::Path;

pub const MODEL_FILE: &str = "model.safetensors";
/// The index of a sharded model (tensor name -> shard file).
pub const INDEX_FILE: &str = "model.safetensors.index.json";
pub const CONFIG_FILE: &str = "config.json";
/// The optimizer's state in a checkpoint ([`crate::checkpoint`]), never a weight file.
pub const OPTIMIZER_FILE: &str = "optimizer.safetensors";
/// The tokenizer file of a folder.
pub const TOKENIZER_FILE: &str = "tokenizer.json";
/// The tokenizer settings transformers reads beside `tokenizer.json` (chat template, EOS).
pub const TOKENIZER_CONFIG_FILE: &str = "tokenizer_config.json";

const LLAMA_ARCH: &str = "LlamaForCausalLM";
const QWEN2_ARCH: &str = "Qwen2ForCausalLM";

impl Family {
    /// The `architectures` entry of `config.json`.
    pub fn hf_architecture(self) -> &'static str {
        match self {
            Family::Llama => LLAMA_ARCH,
            Family::Qwen2 => QWEN2_ARCH,
        }
    }

    /// The `model_type` of `config.json`.
    pub fn hf_model_type(self) -> &'static str {
        match self {
            Family::Llama => "llama",
            Family::Qwen2 => "qwen2",
        }
    }
}

fn config_err(msg: String) -> PolicyError {
    PolicyError::Config(msg)
}

/// The family named by `architectures` (its first entry, as transformers uses it), else by
/// `model_type`.
fn family_of(v: &Value) -> Result<Family> {
    if let Some(archs) = v.get("architectures") {
        return match archs.get(0).and_then(Value::as_str) {
            Some(LLAMA_ARCH) => Ok(Family::Llama),
            Some(QWEN2_ARCH) => Ok(Family::Qwen2),
            _ => Err(config_err(format!(
                "unsupported architecture: key `architectures` is {archs}; supported: \
                 {LLAMA_ARCH}, {QWEN2_ARCH}"
            ))),
        };
    }
    match v.get("model_type") {
        Some(t) if t.as_str() == Some("llama") => Ok(Family::Llama),
        Some(t) if t.as_str() == Some("qwen2") => Ok(Family::Qwen2),
        Some(t) => Err(config_err(format!(
            "unsupported architecture: key `model_type` is {t}; supported: llama, qwen2"
        ))),
        None => Err(config_err(
            "no `architectures` or `model_type` key: cannot tell the architecture".into(),
        )),
    }
}

/// A required non-negative integer.
fn usize_key(v: &Value, key: &str) -> Result<usize> {
    match v.get(key) {
        None | Some(Value::Null) => Err(config_err(format!("missing key `{key}`"))),
        Some(x) => x.as_u64().map(|n| n as usize).ok_or_else(|| {
            config_err(format!(
                "key `{key}` is {x}, expected a non-negative integer"
            ))
        }),
    }
}

/// An optional non-negative integer.
fn opt_usize_key(v: &Value, key: &str) -> Result<Option<usize>> {
    match v.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(_) => usize_key(v, key).map(Some),
    }
}

/// An optional positive number.
fn opt_f64_key(v: &Value, key: &str) -> Result<Option<f64>> {
    match v.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(x) => match x.as_f64() {
            Some(f) if f > 0.0 && f.is_finite() => Ok(Some(f)),
            _ => Err(config_err(format!(
                "key `{key}` is {x}, expected a positive number"
            ))),
        },
    }
}

/// An optional boolean.
fn opt_bool_key(v: &Value, key: &str) -> Result<Option<bool>> {
    match v.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(x) => x
            .as_bool()
            .map(Some)
            .ok_or_else(|| config_err(format!("key `{key}` is {x}, expected true or false"))),
    }
}

/// Plain (unscaled) rope is all the decoder does: `rope_scaling` must be absent or null, and a
/// transformers-5 `rope_parameters` must have `rope_type` "default". Returns the rope base.
fn rope_theta(v: &Value) -> Result<f64> {
    if let Some(s) = v.get("rope_scaling").filter(|s| !s.is_null()) {
        return Err(config_err(format!(
            "key `rope_scaling` is {s}: rope scaling is not supported"
        )));
    }
    if let Some(theta) = opt_f64_key(v, "rope_theta")? {
        return Ok(theta);
    }
    match v.get("rope_parameters").filter(|p| !p.is_null()) {
        None => Ok(10_000.0),
        Some(p) => {
            if let Some(kind) = p.get("rope_type").filter(|k| k.as_str() != Some("default")) {
                return Err(config_err(format!(
                    "key `rope_parameters.rope_type` is {kind}: only \"default\" rope is supported"
                )));
            }
            Ok(opt_f64_key(p, "rope_theta")
                .map_err(|e| config_err(format!("in `rope_parameters`: {e}")))?
                .unwrap_or(10_000.0))
        }
    }
}

/// Reject settings the decoder does not implement.
fn check_unsupported(v: &Value, family: Family) -> Result<()> {
    if let Some(act) = v.get("hidden_act").filter(|a| !a.is_null()) {
        if act.as_str() != Some("silu") {
            return Err(config_err(format!(
                "key `hidden_act` is {act}: only \"silu\" is supported"
            )));
        }
    }
    if family == Family::Llama {
        for key in ["attention_bias", "mlp_bias"] {
            if opt_bool_key(v, key)? == Some(true) {
                return Err(config_err(format!(
                    "key `{key}` is true: Llama models with biases are not supported"
                )));
            }
        }
    }
    Ok(())
}

/// Parse a `config.json` of the Llama or Qwen2 family. Errors name the key and its value.
pub fn config_from_json(v: &Value) -> Result<LlamaConfig> {
    let family = family_of(v)?;
    check_unsupported(v, family)?;
    let hidden_size = usize_key(v, "hidden_size")?;
    let num_heads = usize_key(v, "num_attention_heads")?;
    let num_kv_heads = opt_usize_key(v, "num_key_value_heads")?.unwrap_or(num_heads);
    let head_dim = match opt_usize_key(v, "head_dim")? {
        Some(d) => d,
        None if num_heads > 0 => hidden_size / num_heads,
        None => 0,
    };
    let cfg = LlamaConfig {
        family,
        vocab_size: usize_key(v, "vocab_size")?,
        hidden_size,
        intermediate_size: usize_key(v, "intermediate_size")?,
        num_layers: usize_key(v, "num_hidden_layers")?,
        num_heads,
        num_kv_heads,
        head_dim,
        rope_theta: rope_theta(v)?,
        rms_norm_eps: opt_f64_key(v, "rms_norm_eps")?.unwrap_or(1e-6),
        max_position: usize_key(v, "max_position_embeddings")?,
        tie_word_embeddings: opt_bool_key(v, "tie_word_embeddings")?.unwrap_or(false),
    };
    cfg.validate()?;
    Ok(cfg)
}

/// Read and parse `dir/config.json`; errors name the file.
pub fn read_config(dir: &Path) -> Result<LlamaConfig> {
    let path = dir.join(CONFIG_FILE);
    let text = std::fs::read_to_string(&path).map_err(|e| PolicyError::io(&path, e))?;
    let v: Value = serde_json::from_str(&text)
        .map_err(|e| config_err(format!("{}: not valid JSON: {e}", path.display())))?;
    config_from_json(&v).map_err(|e| match e {
        PolicyError::Config(msg) => config_err(format!("{}: {msg}", path.display())),
        other => other,
    })
}

/// The tokenizer must not produce ids beyond the embedding's rows (the embedding may have more
/// rows than the tokenizer has tokens, as Qwen2 models pad it).
pub fn check_tokenizer(tok: &Tokenizer, cfg: &LlamaConfig, source: &Path) -> Result<()> {
    let highest = tok.inner().get_vocab(true).into_values().max().unwrap_or(0) as usize;
    if highest >= cfg.vocab_size {
        return Err(PolicyError::Tokenizer(format!(
            "tokenizer mismatch: {} has token ids up to {highest} but the model's embedding has \
             {} rows",
            source.display(),
            cfg.vocab_size
        )));
    }
    Ok(())
}

/// Load a Hugging Face folder: the model (weights converted to `dtype`) and its tokenizer.
/// The configuration and tokenizer are checked before any weight is read.
pub fn load(dir: &Path, dtype: DType, device: &Device) -> Result<(Llama, Tokenizer)> {
    let cfg = read_config(dir)?;
    let tok_path = dir.join(TOKENIZER_FILE);
    if !tok_path.is_file() {
        return Err(PolicyError::io(
            &tok_path,
            std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "no tokenizer.json in the model folder",
            ),
        ));
    }
    let tok = Tokenizer::from_file(&tok_path)?;
    check_tokenizer(&tok, &cfg, &tok_path)?;
    let model = load_model(dir, dtype, device)?;
    Ok((model, tok))
}

/// Reads and parses a JSON file; errors name the file.
pub(crate) fn read_json(path: &Path) -> Result<Value> {
    let text = std::fs::read_to_string(path).map_err(|e| PolicyError::io(path, e))?;
    serde_json::from_str(&text).map_err(|e| PolicyError::context(path.display().to_string(), e))
}

/// The weight files of an HF folder: those named by `model.safetensors.index.json` if present,
/// else `model.safetensors`, else every `*.safetensors` but the optimizer's.
fn weight_files(dir: &Path) -> Result<Vec<std::path::PathBuf>> {
    let index = dir.join(INDEX_FILE);
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

/// Load the model of a Hugging Face folder (`config.json` of the Llama or Qwen2 family + one
/// or many safetensors, any float dtype) as a trainable model in `dtype`. See
/// [`load`] for the model with its tokenizer.
pub fn load_model(dir: &Path, dtype: DType, device: &Device) -> Result<Llama> {
    let cfg = crate::hf::read_config(dir)?;
    let mut tensors = load_tensors(dir)?;
    Llama::from_weights(cfg, dtype, device, |name, _| {
        tensors
            .remove(name)
            .ok_or_else(|| missing_tensor(dir, name))
    })
}

fn missing_tensor(dir: &Path, name: &str) -> PolicyError {
    PolicyError::Config(format!(
        "{}: tensor `{name}` is in none of the weight files",
        dir.display()
    ))
}

/// Overwrite `model`'s weights with those saved in `dir` (same configuration required).
pub fn load_weights_into(model: &Llama, dir: &Path) -> Result<()> {
    let cfg = crate::hf::read_config(dir)?;
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
            .ok_or_else(|| missing_tensor(dir, &name))?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn qwen2() -> Value {
        json!({
            "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2",
            "vocab_size": 50, "hidden_size": 16, "intermediate_size": 24,
            "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
            "max_position_embeddings": 32, "rms_norm_eps": 1e-5,
            "rope_parameters": {"rope_type": "default", "rope_theta": 5000.0},
            "sliding_window": 4096, "use_sliding_window": false,
        })
    }

    #[test]
    fn qwen2_config_with_transformers5_rope() {
        let cfg = config_from_json(&qwen2()).unwrap();
        assert_eq!(cfg.family, Family::Qwen2);
        assert_eq!(cfg.rope_theta, 5000.0);
        assert_eq!(cfg.head_dim, 4);
        assert!(!cfg.tie_word_embeddings);
    }

    #[test]
    fn top_level_rope_theta_wins_and_model_type_alone_is_enough() {
        let mut v = qwen2();
        v["rope_theta"] = json!(1e6);
        v.as_object_mut().unwrap().remove("architectures");
        let cfg = config_from_json(&v).unwrap();
        assert_eq!((cfg.family, cfg.rope_theta), (Family::Qwen2, 1e6));
    }

    #[test]
    fn unsupported_settings_name_key_and_value() {
        let cases = [
            (
                "rope_scaling",
                json!({"type": "linear", "factor": 2.0}),
                "`rope_scaling`",
            ),
            ("hidden_act", json!("gelu"), "\"gelu\""),
            (
                "hidden_size",
                json!("wide"),
                "key `hidden_size` is \"wide\"",
            ),
            ("rms_norm_eps", json!(-1.0), "key `rms_norm_eps` is -1.0"),
            (
                "architectures",
                json!(["MambaForCausalLM"]),
                "[\"MambaForCausalLM\"]",
            ),
        ];
        for (key, value, expected) in cases {
            let mut v = qwen2();
            v[key] = value;
            let err = config_from_json(&v).unwrap_err().to_string();
            assert!(err.contains(expected), "{key}: {err}");
        }
        let mut v = qwen2();
        v["rope_parameters"]["rope_type"] = json!("yarn");
        let err = config_from_json(&v).unwrap_err().to_string();
        assert!(
            err.contains("rope_parameters.rope_type") && err.contains("yarn"),
            "{err}"
        );
        let mut v = qwen2();
        v["architectures"] = json!(["LlamaForCausalLM"]);
        v["attention_bias"] = json!(true);
        let err = config_from_json(&v).unwrap_err().to_string();
        assert!(err.contains("attention_bias"), "{err}");
        let mut v = qwen2();
        v.as_object_mut().unwrap().remove("vocab_size");
        let err = config_from_json(&v).unwrap_err().to_string();
        assert!(err.contains("missing key `vocab_size`"), "{err}");
    }
}
