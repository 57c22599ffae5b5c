//! Save a model as a Hugging Face folder with `checkpoint::save_model`, and our logits for a few
//! fixed prompts beside it, for `tools/check_hf_export.py` to compare with transformers.
//!
//! `cargo run --release -p policy --example export_hf -- MODEL OUT_DIR`
//!
//! MODEL is anything `--model` takes (the embedded default's name, a GGUF file, an HF folder).
//! Writes OUT_DIR/model/ (the saved folder), OUT_DIR/prompts.json (the prompt texts, our token
//! ids, and the ChatML rendering of `chat_messages`) and OUT_DIR/logits.safetensors
//! (`logits_{i}`: `[tokens, vocab]` f32 logits of prompt `i`, or of its first tokens when it is
//! longer than the model's context, computed on the model reloaded from the saved folder, so
//! the comparison covers the round trip).

use candle_core::{DType, Device, Tensor};
use policy::chat::{apply_chatml, ChatMessage};
use std::collections::HashMap;
use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [model_arg, out] = args.as_slice() else {
        return Err("usage: export_hf MODEL OUT_DIR".into());
    };
    let out = PathBuf::from(out);
    let folder = out.join("model");
    let (model, tok) = policy::load_model(model_arg, DType::F32, &Device::Cpu)?;
    policy::checkpoint::save_model(&model, &tok, &folder)?;
    let (model, tok) = policy::load_model(
        folder.to_str().ok_or("non-UTF-8 path")?,
        DType::F32,
        &Device::Cpu,
    )?;

    let messages = [
        ChatMessage::system("You are a household robot."),
        ChatMessage::user("Put a clean mug in the coffee machine."),
    ];
    let chat_text = apply_chatml(&messages, true);
    let prompts = [
        chat_text.clone(),
        "The quick brown fox jumps over 13 lazy dogs.\n\tTabs, émojis 🙂 and  spaces.".to_string(),
    ];
    let mut ids_out = Vec::new();
    let mut logits = HashMap::new();
    for (i, text) in prompts.iter().enumerate() {
        let ids = tok.encode(text)?;
        // Small test models have short contexts: score the prefix that fits.
        let fits = &ids[..ids.len().min(model.config().max_position)];
        let input = Tensor::new(fits, &Device::Cpu)?.unsqueeze(0)?;
        logits.insert(format!("logits_{i}"), model.forward(&input)?.squeeze(0)?);
        ids_out.push(ids);
    }
    candle_core::safetensors::save(&logits, out.join("logits.safetensors"))?;
    let meta = serde_json::json!({
        "prompts": prompts,
        "ids": ids_out,
        "chat_messages": messages,
        "chat_text": chat_text,
    });
    std::fs::write(
        out.join("prompts.json"),
        serde_json::to_string_pretty(&meta)?,
    )?;
    println!(
        "saved {} and our logits in {}",
        folder.display(),
        out.display()
    );
    Ok(())
}
