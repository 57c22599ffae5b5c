//! Writes what `tools/peft_check.py` compares against PEFT: a base model as an HF folder, a
//! LoRA adapter on it in PEFT's layout (B made non-zero, as after training), the merged
//! checkpoint, and our logits with the adapter for a few token sequences.
//!
//! `cargo run --release -p policy --example lora_peft_export -- OUT [--model tiny|smollm2]
//! [--rank 8] [--alpha 16] [--seed 0]`
//!
//! `OUT/base/` (`config.json` + `model.safetensors`), `OUT/adapter/` (`adapter_config.json` +
//! `adapter_model.safetensors`), `OUT/merged/`, and `OUT/expected.safetensors` with `ids`
//! (`[batch, seq]`, i64) and `logits` (`[batch, seq, vocab]`, f32). `tiny`: a random
//! 2-layer Llama (untied head); `smollm2`: the embedded SmolLM2-135M (tied head), dequantized.

use candle_core::{DType, Device, Tensor};
use policy::lora::{LoraAdapters, LoraConfig, TargetModule};
use policy::model::{Llama, LlamaConfig};
use policy::Tokenizer;
use rand::{Rng, SeedableRng};
use std::collections::HashMap;
use std::path::PathBuf;

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .cloned()
}

/// The base model and its tokenizer: a tiny random model with a word-level tokenizer of its
/// vocabulary size, or the embedded SmolLM2 with its own.
fn base_model(which: &str, dev: &Device) -> policy::Result<(Llama, Tokenizer)> {
    match which {
        "tiny" => {
            let cfg = LlamaConfig {
                tie_word_embeddings: false,
                ..LlamaConfig::tiny()
            };
            let tok = policy::tokenizer::word_level(cfg.vocab_size as u32)?;
            Ok((Llama::random(cfg, DType::F32, dev, 1)?, tok))
        }
        "smollm2" => {
            let path = policy::assets::default_model_path()?;
            policy::gguf::load(&path, DType::F32, dev)
        }
        other => Err(policy::PolicyError::Input(format!(
            "--model {other}: expected tiny or smollm2"
        ))),
    }
}

/// Fill every B with uniform values of `scale` (a fresh adapter's B is zero, which would test
/// nothing).
fn randomize_b(model: &Llama, scale: f64, seed: u64) -> policy::Result<()> {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    for (name, var) in model.trainable_vars() {
        if name.contains("lora_B") {
            let data: Vec<f32> = (0..var.elem_count())
                .map(|_| rng.gen_range(-scale..scale) as f32)
                .collect();
            var.set(&Tensor::from_vec(data, var.shape(), var.device())?)?;
        }
    }
    Ok(())
}

fn main() -> policy::Result<()> {
    let out = PathBuf::from(std::env::args().nth(1).ok_or_else(|| {
        policy::PolicyError::Input("usage: lora_peft_export OUT [--model tiny|smollm2]".into())
    })?);
    let which = arg("--model").unwrap_or_else(|| "tiny".into());
    let rank: usize = arg("--rank").and_then(|v| v.parse().ok()).unwrap_or(8);
    let alpha: f64 = arg("--alpha").and_then(|v| v.parse().ok()).unwrap_or(16.0);
    let seed: u64 = arg("--seed").and_then(|v| v.parse().ok()).unwrap_or(0);
    let dev = Device::Cpu;

    let (mut model, tok) = base_model(&which, &dev)?;
    policy::checkpoint::save_model(&model, &tok, &out.join("base"))?;
    let mut cfg = LoraConfig::new(rank, alpha, TargetModule::ALL.to_vec());
    cfg.base_model = Some(out.join("base").display().to_string());
    let adapters = LoraAdapters::new(model.config(), cfg, DType::F32, &dev, seed)?;
    model.attach_lora(adapters)?;
    // Large enough that the adapter moves the logits well beyond float noise.
    randomize_b(&model, if which == "tiny" { 0.2 } else { 0.02 }, seed + 1)?;
    model
        .lora()
        .expect("attached above")
        .save(&out.join("adapter"))?;
    policy::checkpoint::save_model(&model, &tok, &out.join("merged"))?;

    let vocab = model.config().vocab_size as u32;
    let (batch, seq) = (2usize, 12usize);
    let ids: Vec<u32> = (0..batch * seq)
        .map(|i| (i as u32 * 7919 + 13) % vocab)
        .collect();
    let ids = Tensor::from_vec(ids, (batch, seq), &dev)?;
    let logits = model.forward(&ids)?;
    let tensors = HashMap::from([
        ("ids".to_string(), ids.to_dtype(DType::I64)?),
        ("logits".to_string(), logits),
    ]);
    candle_core::safetensors::save(&tensors, out.join("expected.safetensors"))?;
    println!(
        "wrote {} ({which}, rank {rank}, alpha {alpha})",
        out.display()
    );
    Ok(())
}
