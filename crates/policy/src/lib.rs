//! The LLM policy: the embedded default model, GGUF loading, the tokenizer, the chat template,
//! a differentiable Llama forward pass (only ops with a backward), per-token log-probs, LoRA
//! adapters over a frozen base (PEFT layout), the optimizer and checkpoints.
//!
//! Layers, lowest first: [`ops`] (the kernels: each fused op with its own backward beside its
//! plain reference, since candle's fast ops have no backward and silently drop gradients),
//! [`model`] (the shape, the training decoder, the inference copy with its KV cache), then
//! what uses the model: [`lora`], [`logprobs`], [`sample`], [`optim`], [`ppo`], and the file
//! formats ([`hf`], [`checkpoint`], [`gguf`], [`scratch`]).

pub mod assets;
pub mod chat;
pub mod checkpoint;
pub mod device;
pub mod error;
pub mod gguf;
pub mod hf;
pub mod logprobs;
pub mod lora;
pub mod malloc;
pub mod model;
pub mod ops;
pub mod optim;
pub mod ppo;
pub mod sample;
pub mod scratch;
pub mod tokenizer;

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
