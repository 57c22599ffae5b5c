//! The LLM policy: the embedded default model, GGUF loading, the tokenizer, the chat template,
//! a differentiable Llama forward pass (only ops with a backward), per-token log-probs, LoRA
//! adapters over a frozen base (PEFT layout), the optimizer and checkpoints.
//!
//! The forward pass is written with plain candle ops on purpose: candle's fused ops
//! (`softmax_last_dim`, `rms_norm`, `rope`, `sdpa`, `QMatMul`) have no backward and silently drop
//! gradients (see `shared/spec/models.md`).

pub mod assets;
pub mod attention;
pub mod chat;
pub mod checkpoint;
pub mod device;
pub mod error;
pub mod frozen;
pub mod fused;
pub mod gguf;
pub mod hf;
pub mod logprobs;
pub mod lora;
pub mod malloc;
pub mod model;
pub mod optim;
pub mod ppo;
mod raw;
pub mod sample;
pub mod scratch;
mod simd;
pub mod skinny;
pub mod tokenizer;
mod triangle;
pub mod vexp;

pub use error::{PolicyError, Result};
pub use lora::{LoraAdapters, LoraConfig, TargetModule};
pub use model::{Family, InferenceModel, KvCache, Llama, LlamaConfig};
pub use optim::{AdamW, AdamWConfig};
pub use tokenizer::Tokenizer;

/// Load a model and its tokenizer from a `--model` argument: the embedded default's name
/// ([`assets::DEFAULT_MODEL_NAME`], fetched and cached on first use), a path to a GGUF file, or
/// a path to a Hugging Face folder (`config.json`, `tokenizer.json`, `*.safetensors`; Llama or
/// Qwen2, see [`hf`]).
pub fn load_model(
    model: &str,
    dtype: candle_core::DType,
    device: &candle_core::Device,
) -> Result<(Llama, Tokenizer)> {
    let path = assets::resolve_model(model)?;
    if path.is_dir() {
        return hf::load(&path, dtype, device);
    }
    if path
        .extension()
        .is_some_and(|e| e == "safetensors" || e == "json")
    {
        return Err(PolicyError::Input(format!(
            "{}: pass the Hugging Face model folder that holds this file, not the file",
            path.display()
        )));
    }
    gguf::load(&path, dtype, device)
}
