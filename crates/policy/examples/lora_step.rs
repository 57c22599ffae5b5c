//! One training step (forward + backward + AdamW) at 512 tokens on the embedded SmolLM2-135M
//! (f32): a LoRA step over the frozen base against a full fine-tune step, time and peak memory.
//!
//! `cargo run --release -p policy --example lora_step [-- --tokens 512 --steps 3 --rank 16
//! --alpha 32]`
//!
//! Each mode runs in its own child process (this program re-run with `--mode full|lora`), so
//! that each peak (the process's `VmHWM`) is its own. A child prints one JSON line: the median
//! seconds of forward (log-probs and SFT loss), backward, optimizer (clip + AdamW) and the whole
//! step over `--steps` steps after one warm-up step, the resident memory after loading and the
//! peak. The parent prints both and LoRA / full ratios, measured in the same run.

use candle_core::{DType, Device};
use policy::logprobs::{response_scores, ResponseBatch};
use policy::lora::{LoraAdapters, LoraConfig, TargetModule};
use policy::optim::{sft_loss, AdamW, AdamWConfig};
use serde_json::{json, Value};
use std::process::Command;
use std::time::Instant;

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .cloned()
}

fn num(name: &str, default: f64) -> f64 {
    arg(name).and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// `VmRSS` / `VmHWM` of this process in GiB (Linux), 0 where unavailable.
fn proc_status_gib(key: &str) -> f64 {
    let text = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    text.lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|rest| {
            rest.trim()
                .trim_end_matches("kB")
                .trim()
                .parse::<f64>()
                .ok()
        })
        .map_or(0.0, |kb| kb / (1024.0 * 1024.0))
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

/// Run `steps + 1` steps in one mode and print the JSON line.
fn child(mode: &str) -> policy::Result<()> {
    let tokens = num("--tokens", 512.0) as usize;
    let steps = num("--steps", 3.0).max(1.0) as usize;
    let dev = Device::Cpu;
    let path = policy::assets::default_model_path()?;
    let (mut model, tok) = policy::gguf::load(&path, DType::F32, &dev)?;
    if mode == "lora" {
        let rank = num("--rank", 16.0) as usize;
        let cfg = LoraConfig::new(rank, num("--alpha", 32.0), TargetModule::ALL.to_vec());
        let adapters = LoraAdapters::new(model.config(), cfg, DType::F32, &dev, 0)?;
        model.attach_lora(adapters)?;
    }
    let text = "The quick brown fox jumps over the lazy dog. ".repeat(tokens / 4);
    let ids = tok.encode(&text)?;
    if ids.len() < tokens {
        return Err(policy::PolicyError::Input(format!(
            "only {} tokens of text",
            ids.len()
        )));
    }
    // A 64-token prompt and the rest as the response (the loss covers the response).
    let prompt = 64.min(tokens / 2);
    let pairs = vec![(ids[..prompt].to_vec(), ids[prompt..tokens].to_vec())];
    let batch = ResponseBatch::new(&pairs, 0, tokens, DType::F32, &dev)?;
    let mut opt = AdamW::for_model(&model, AdamWConfig::default())?;
    let trainable: usize = model
        .trainable_vars()
        .iter()
        .map(|(_, v)| v.elem_count())
        .sum();
    let rss_loaded = proc_status_gib("VmRSS:");

    let (mut fwd, mut bwd, mut upd, mut total) = (vec![], vec![], vec![], vec![]);
    for step in 0..=steps {
        let t0 = Instant::now();
        let scores = response_scores(&model, &batch)?;
        let loss = sft_loss(&scores.logprobs, &batch.response_mask)?;
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
    let line = json!({
        "mode": mode,
        "tokens": tokens,
        "steps": steps,
        "trainable_params": trainable,
        "forward_s": median(fwd),
        "backward_s": median(bwd),
        "optimizer_s": median(upd),
        "step_s": median(total),
        "rss_after_load_gib": rss_loaded,
        "peak_gib": proc_status_gib("VmHWM:"),
    });
    println!("{line}");
    Ok(())
}

fn run_child(mode: &str) -> Result<Value, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    args.extend(["--mode".to_string(), mode.to_string()]);
    let out = Command::new(exe)
        .args(&args)
        .output()
        .map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(format!(
            "{mode} run failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let last = stdout.lines().last().unwrap_or("");
    serde_json::from_str(last).map_err(|e| format!("{mode} run printed {last:?}: {e}"))
}

fn main() -> Result<(), String> {
    if let Some(mode) = arg("--mode") {
        if mode != "full" && mode != "lora" {
            return Err(format!("--mode {mode}: expected full or lora"));
        }
        // See decode_speed: candle otherwise looks the CPU count up on every matmul.
        if std::env::var_os("RAYON_NUM_THREADS").is_none() {
            let n = std::thread::available_parallelism().map_or(1, |n| n.get());
            std::env::set_var("RAYON_NUM_THREADS", n.to_string());
        }
        return child(&mode).map_err(|e| e.to_string());
    }
    let full = run_child("full")?;
    let lora = run_child("lora")?;
    println!("{full}\n{lora}");
    println!(
        "{:<22} {:>10} {:>10} {:>12}",
        "", "full FT", "LoRA", "LoRA / full"
    );
    for key in [
        "forward_s",
        "backward_s",
        "optimizer_s",
        "step_s",
        "rss_after_load_gib",
        "peak_gib",
        "trainable_params",
    ] {
        let (f, l) = (
            full[key].as_f64().unwrap_or(f64::NAN),
            lora[key].as_f64().unwrap_or(f64::NAN),
        );
        println!("{key:<22} {f:>10.3} {l:>10.3} {:>12.3}", l / f);
    }
    Ok(())
}
