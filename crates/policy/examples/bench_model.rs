//! Policy benchmark: one full fine-tune step and KV-cache decoding of the embedded SmolLM2-135M,
//! the Rust side of the table "Policy benchmarks" (tools/bench_policy.sh runs it beside
//! tools/bench_torch.py on the same weights and prints the table).
//!
//! ```text
//! cargo run --release -p policy --example bench_model -- train  [--repeats 3] [--tokens 512]
//! cargo run --release -p policy --example bench_model -- decode [--repeats 3] [--q8]
//! cargo run --release -p policy --example bench_model -- save-hf DIR
//! ```
//!
//! `train`: forward + SFT loss over 512 tokens (batch 1), backward, global-norm clipping and one
//! AdamW step, in f32; one untimed warm-up step, then `--repeats` timed steps (median printed).
//! `decode`: prefill of 256 tokens (batch 1), then 64 greedy decode steps at batch 1 and 8.
//! `save-hf`: write the f32 weights as a Hugging Face folder, so PyTorch loads the same weights.
//! Each mode prints one JSON line; `peak_rss_mb` is the process's RSS high-water mark (VmHWM),
//! so run one mode per process. Threads: RAYON_NUM_THREADS (default: all cores).

use candle_core::quantized::GgmlDType;
use candle_core::{DType, Device};
use policy::logprobs::{response_scores, ResponseBatch};
use policy::optim::{AdamW, AdamWConfig, Objective};
use policy::{InferenceModel, Llama, Tokenizer};
use std::time::Instant;

fn flag_value(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The median (the mean of the middle two for an even count, as Python's statistics.median).
fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(|a, b| a.total_cmp(b));
    let n = xs.len();
    if n % 2 == 1 {
        xs[n / 2]
    } else {
        (xs[n / 2 - 1] + xs[n / 2]) / 2.0
    }
}

/// The process's RSS high-water mark in MiB, from /proc/self/status.
fn peak_rss_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

/// Deterministic token ids: the tokenized text repeated up to `n` tokens.
fn text_ids(tok: &Tokenizer, n: usize) -> policy::Result<Vec<u32>> {
    let text = "The quick brown fox jumps over the lazy dog. ".repeat(1 + n / 8);
    let ids = tok.encode(&text)?;
    Ok(ids[..n].to_vec())
}

fn bench_train(model: &Llama, tok: &Tokenizer) -> policy::Result<()> {
    let tokens = flag_value("--tokens", 512);
    let repeats = flag_value("--repeats", 3).max(1);
    let ids = text_ids(tok, tokens)?;
    // Half prompt, half response: the SFT loss covers the response tokens.
    let (prompt, response) = ids.split_at(tokens / 2);
    let batch = ResponseBatch::new(
        &[(prompt.to_vec(), response.to_vec())],
        0,
        model.config().max_position,
        model.dtype(),
        model.device(),
    )?;
    let mut opt = AdamW::for_model(
        model,
        AdamWConfig {
            lr: 1e-5,
            ..AdamWConfig::default()
        },
    )?;
    let (mut fwd, mut bwd, mut upd, mut total) = (vec![], vec![], vec![], vec![]);
    let mut losses = vec![];
    for step in 0..=repeats {
        let t0 = Instant::now();
        let scores = response_scores(model, &batch)?;
        let loss = Objective::Sft.loss(&scores, &batch.response_mask)?;
        losses.push(loss.to_scalar::<f32>()?);
        let t1 = Instant::now();
        let mut grads = loss.backward()?;
        drop((scores, loss));
        let t2 = Instant::now();
        opt.clip_grad_norm(&mut grads, 1.0)?;
        opt.step(&grads)?;
        drop(grads);
        let t3 = Instant::now();
        if step > 0 {
            fwd.push((t1 - t0).as_secs_f64());
            bwd.push((t2 - t1).as_secs_f64());
            upd.push((t3 - t2).as_secs_f64());
            total.push((t3 - t0).as_secs_f64());
        }
    }
    println!(
        "{}",
        serde_json::json!({
            "impl": "rust-candle",
            "mode": "train",
            "tokens": tokens,
            "repeats": repeats,
            "forward_s": median(fwd),
            "backward_s": median(bwd),
            "optimizer_s": median(upd),
            "step_s": median(total.clone()),
            "step_s_all": total,
            "losses": losses,
            "peak_rss_mb": peak_rss_mb(),
        })
    );
    Ok(())
}

/// Greedy decode `steps` tokens after `prompts`; returns decode tokens/s (total over the batch).
fn decode_rate(model: &InferenceModel, prompts: &[Vec<u32>], steps: usize) -> policy::Result<f64> {
    let (mut logits, mut cache) = model.prefill(prompts)?;
    let t0 = Instant::now();
    for _ in 0..steps {
        let rows: Vec<Vec<f32>> = logits.to_vec2()?;
        let next: Vec<u32> = rows
            .iter()
            .map(|r| {
                r.iter()
                    .enumerate()
                    .fold(0, |best, (i, &x)| if x > r[best] { i } else { best }) as u32
            })
            .collect();
        logits = model.decode_step(&next, &mut cache)?;
    }
    Ok((prompts.len() * steps) as f64 / t0.elapsed().as_secs_f64())
}

fn bench_decode(model: &Llama, tok: &Tokenizer) -> policy::Result<()> {
    let repeats = flag_value("--repeats", 3).max(1);
    let steps = flag_value("--steps", 64);
    let n_prefill = flag_value("--prefill", 256);
    let q8 = std::env::args().any(|a| a == "--q8");
    let infer = if q8 {
        model.quantized(GgmlDType::Q8_0)?
    } else {
        model.inference()?
    };
    let ids = text_ids(tok, n_prefill + 64)?;
    let prompt = ids[..n_prefill].to_vec();
    // Prompts of 16..=30 tokens, as the rollouts' first turns are short.
    let prompts8: Vec<Vec<u32>> = (0..8).map(|i| ids[i..i + 16 + 2 * i].to_vec()).collect();
    infer.prefill(std::slice::from_ref(&prompt))?; // warm-up
    let (mut prefill, mut b1, mut b8) = (vec![], vec![], vec![]);
    for _ in 0..repeats {
        let t0 = Instant::now();
        infer.prefill(std::slice::from_ref(&prompt))?;
        prefill.push(n_prefill as f64 / t0.elapsed().as_secs_f64());
        b1.push(decode_rate(&infer, &prompts8[..1], steps)?);
        b8.push(decode_rate(&infer, &prompts8, steps)?);
    }
    println!(
        "{}",
        serde_json::json!({
            "impl": "rust-candle",
            "mode": "decode",
            "weights": if q8 { "q8_0" } else { "f32" },
            "prefill_tokens": n_prefill,
            "decode_steps": steps,
            "prefill_tok_s": median(prefill),
            "decode_b1_tok_s": median(b1),
            "decode_b8_tok_s": median(b8),
            "peak_rss_mb": peak_rss_mb(),
        })
    );
    Ok(())
}

fn main() -> policy::Result<()> {
    // candle looks the CPU count up on every matmul unless this is set.
    if std::env::var_os("RAYON_NUM_THREADS").is_none() {
        let n = std::thread::available_parallelism().map_or(1, |n| n.get());
        std::env::set_var("RAYON_NUM_THREADS", n.to_string());
    }
    let mode = std::env::args().nth(1).unwrap_or_default();
    let path = policy::assets::default_model_path()?;
    let (model, tok) = policy::gguf::load(&path, DType::F32, &Device::Cpu)?;
    match mode.as_str() {
        "train" => bench_train(&model, &tok),
        "decode" => bench_decode(&model, &tok),
        "save-hf" => {
            let dir = std::env::args().nth(2).ok_or_else(|| {
                policy::PolicyError::Input("save-hf needs an output folder".into())
            })?;
            let dir = std::path::PathBuf::from(dir);
            policy::checkpoint::save_model(&model, &tok, &dir)?;
            // The token ids both benchmarks feed (PyTorch needs no tokenizer then).
            let ids = serde_json::json!({
                "train": text_ids(&tok, 512)?,
                "text": text_ids(&tok, 512 + 64)?,
            });
            let path = dir.join("bench_ids.json");
            std::fs::write(&path, ids.to_string()).map_err(|source| policy::PolicyError::Io {
                path: path.clone(),
                source,
            })?;
            println!("saved {}", dir.display());
            Ok(())
        }
        other => Err(policy::PolicyError::Input(format!(
            "unknown mode {other:?}: expected train, decode or save-hf"
        ))),
    }
}
