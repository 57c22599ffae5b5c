//! Decode and prefill speed of the KV-cache inference path on the embedded SmolLM2-135M (f32).
//!
//! `cargo run --release -p policy --example decode_speed [-- --tokens 64 --prefill 256 --context 16]`
//! Prints prefill tokens/s (batch 1), decode tokens/s at batch 1 and batch 8 (total over the
//! batch), and the same through `sample_batch` (sampling overhead included). `--quant q8_0|q4_0|
//! q4k` (`--q8` = `--quant q8_0`): the same on a quantized copy of the weights.

use candle_core::{DType, Device};
use policy::sample::{sample_batch_with, SampleOptions};
use std::time::Instant;

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() -> policy::Result<()> {
    // candle looks the CPU count up (from /proc) on every matmul unless this is set; that costs
    // 10-30% of a batch-1 decode step here.
    if std::env::var_os("RAYON_NUM_THREADS").is_none() {
        let n = std::thread::available_parallelism().map_or(1, |n| n.get());
        std::env::set_var("RAYON_NUM_THREADS", n.to_string());
    }
    let n_tokens = arg("--tokens", 64);
    let n_prefill = arg("--prefill", 256);
    let path = policy::assets::default_model_path()?;
    let (model, tok) = policy::gguf::load(&path, DType::F32, &Device::Cpu)?;
    // Decode after prompts of `--context` (+ 2 per row) tokens.
    let n_context = arg("--context", 16);
    let text = "The quick brown fox jumps over the lazy dog. ".repeat(64 + n_context / 8);
    let ids = tok.encode(&text)?;

    let args: Vec<String> = std::env::args().collect();
    let quant = match args.iter().position(|a| a == "--quant") {
        Some(i) => args.get(i + 1).cloned(),
        None if args.iter().any(|a| a == "--q8") => Some("q8_0".into()),
        None => None,
    };
    let model = match quant.as_deref() {
        None => {
            println!("weights: f32");
            model.inference()?
        }
        Some(name) => {
            let dtype = policy::model::quant_dtype(name)?;
            println!("weights: {dtype:?} copy");
            model.quantized(dtype)?
        }
    };
    // Prefill, batch 1.
    let prompt = ids[..n_prefill].to_vec();
    model.prefill(std::slice::from_ref(&prompt))?; // warm up
    let t0 = Instant::now();
    model.prefill(std::slice::from_ref(&prompt))?;
    let dt = t0.elapsed().as_secs_f64();
    println!(
        "prefill {n_prefill} tokens, batch 1: {:.0} tokens/s ({:.0} ms)",
        n_prefill as f64 / dt,
        dt * 1e3
    );

    for batch in [1usize, 8] {
        // Prompts of `n_context + 2 * row` tokens (16..=30 by default).
        let prompts: Vec<Vec<u32>> = (0..batch)
            .map(|i| ids[i..i + n_context + 2 * i].to_vec())
            .collect();
        let (_, mut cache) = model.prefill(&prompts)?;
        let mut next = vec![ids[0]; batch];
        let t0 = Instant::now();
        for step in 0..n_tokens {
            let logits = model.decode_step(&next, &mut cache)?;
            let v: Vec<Vec<f32>> = logits.to_vec2()?;
            next = v
                .iter()
                .map(|r| {
                    r.iter()
                        .enumerate()
                        .fold(0, |b, (i, &x)| if x > r[b] { i } else { b })
                        as u32
                })
                .collect();
            let _ = step;
        }
        let dt = t0.elapsed().as_secs_f64();
        println!(
            "decode batch {batch}: {:.1} tokens/s total ({:.1} ms per step, {n_tokens} steps)",
            (batch * n_tokens) as f64 / dt,
            dt * 1e3 / n_tokens as f64
        );
        let opts = SampleOptions {
            max_new_tokens: n_tokens,
            temperature: 1.0,
            top_p: 0.95,
            seed: 1,
            ..SampleOptions::default()
        };
        let t0 = Instant::now();
        let out = sample_batch_with(&model, &tok, &prompts, &opts)?;
        let dt = t0.elapsed().as_secs_f64();
        let total: usize = out.iter().map(|s| s.ids.len()).sum();
        println!(
            "sample_batch batch {batch}: {:.1} tokens/s total incl. prefill and sampling ({total} tokens)",
            total as f64 / dt
        );
    }
    Ok(())
}
