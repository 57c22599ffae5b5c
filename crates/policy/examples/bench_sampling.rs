//! The rollouts' two phases apart, on the CPU preset's model shape (configs/cpu-l2.toml's
//! model made from nothing, random weights): the packed prefill of a batch of prompts, and
//! the decode steps after it (one token per row against the KV cache, rows leaving the batch
//! one by one as in a rollout, where replies end at different lengths). A benchmark, not a
//! test: median of REPEATS runs.
//!
//!   cargo build --release --workspace --example bench_sampling
//!   target/release/examples/bench_sampling [PROMPT_TOKENS] [REPEATS] [ROWS] [STEPS]
//!
//! PROMPT_TOKENS: the longest prompt; the others spread down to a third of it (defaults: 460
//! tokens, 5 repeats, 32 rows, 40 decode steps, the row count falling to half by the end).

mod common;
use candle_core::{DType, Device};
use policy::model::{swap_remove_order, Llama};
use std::time::Instant;

fn main() {
    common::run_as_the_binary();
    let mut args = std::env::args().skip(1);
    let mut arg = |default: usize, name: &str| args.next().map_or(default, |a| a.parse().expect(name));
    let (tokens, repeats, rows, steps) = (arg(460, "PROMPT_TOKENS"), arg(5, "REPEATS"), arg(32, "ROWS"), arg(40, "STEPS"));
    let cfg = common::model_config();
    let model = Llama::random(cfg, DType::F32, &Device::Cpu, 0).expect("model").inference().expect("inference");
    let prompts: Vec<Vec<u32>> = (0..rows)
        .map(|i| {
            let len = tokens - i * 2 * tokens / 3 / rows;
            (0..len).map(|j| ((j * 7 + i) % 2000) as u32 + 1).collect()
        })
        .collect();
    let prompt_tokens: usize = prompts.iter().map(Vec::len).sum();
    let prefill = common::median(repeats, || {
        let start = Instant::now();
        model.prefill_reserving(&prompts, steps).expect("prefill");
        start.elapsed().as_secs_f64()
    });
    // Row `i` ends after `steps - i * steps / (2 * rows)` tokens: half the rows are left at the end.
    let ends: Vec<usize> = (0..rows).map(|i| steps - i * steps / (2 * rows)).collect();
    let mut decoded_rows = 0;
    let decode = common::median(repeats, || {
        let (_, mut cache) = model.prefill_reserving(&prompts, steps).expect("prefill");
        let mut active: Vec<usize> = (0..rows).collect();
        let start = Instant::now();
        decoded_rows = 0;
        for step in 0..steps {
            let keep = swap_remove_order(active.len(), |s| ends[active[s]] <= step);
            if keep.len() < active.len() {
                cache.retain(&keep).expect("retain");
                active = keep.iter().map(|&s| active[s]).collect();
            }
            let next: Vec<u32> = active.iter().map(|&r| ((r * 31 + step) % 2000) as u32 + 1).collect();
            model.decode_step(&next, &mut cache).expect("decode").to_vec2::<f32>().expect("logits");
            decoded_rows += active.len();
        }
        start.elapsed().as_secs_f64()
    });
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("model name")).map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string()))
        .unwrap_or_default();
    println!("CPU: {cpu}; {rows} prompts of {}-{tokens} tokens ({prompt_tokens} in all), {steps} decode steps", prompts[rows - 1].len());
    println!("| phase | ms | per unit |");
    println!("|---|---:|---:|");
    println!("| prefill | {:.1} | {:.0} prompt tokens/s |", prefill * 1e3, prompt_tokens as f64 / prefill);
    println!("| decode, {steps} steps ({decoded_rows} row-steps) | {:.1} | {:.3} ms/step |", decode * 1e3, decode * 1e3 / steps as f64);
}
