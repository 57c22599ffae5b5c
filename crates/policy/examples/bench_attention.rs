//! The sampling attention: the fused kernels (`policy::ops::attention`) against the matmul path
//! they replaced (`matmul_attention`: two batched matmuls around the padded causal softmax),
//! on the shapes of the CPU preset's rollouts (32 prompts, 2 KV heads of 2 query heads, head
//! size 32). Prefill: the prompts packed without padding (`packed_causal_attention`) against
//! the left-padded batch; decode: one new query per row against the cache
//! (`cached_attention`). A benchmark, not a test.
//!
//!   cargo run --release -p policy --example bench_attention -- [PROMPT_TOKENS] [REPEATS]
//!
//! PROMPT_TOKENS: the longest prompt; the others spread down to a third of it.

use candle_core::{Device, Tensor};
use policy::ops::attention::{cached_attention, matmul_attention, packed_causal_attention};
use std::time::Instant;

fn tensor(shape: &[usize], seed: u64) -> Tensor {
    let n: usize = shape.iter().product();
    let mut x = seed | 1;
    let data: Vec<f32> = (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 40) as f32 / (1u64 << 24) as f32 - 0.5
        })
        .collect();
    Tensor::from_vec(data, shape, &Device::Cpu).expect("tensor")
}

/// Median seconds of `repeats` calls of `f`.
fn time(repeats: usize, mut f: impl FnMut()) -> f64 {
    let mut secs: Vec<f64> = (0..repeats)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed().as_secs_f64()
        })
        .collect();
    secs.sort_by(f64::total_cmp);
    secs[repeats / 2]
}

fn row(name: &str, matmul: f64, fused: f64) {
    println!("| {name} | {:.2} | {:.2} | {:.2}x |", matmul * 1e3, fused * 1e3, matmul / fused);
}

fn main() {
    let mut args = std::env::args().skip(1);
    let tokens: usize = args.next().map_or(460, |a| a.parse().expect("PROMPT_TOKENS"));
    let repeats: usize = args.next().map_or(5, |a| a.parse().expect("REPEATS"));
    let (b, g, r, d) = (32, 2, 2, 32);
    let pads: Vec<usize> = (0..b).map(|i| i * 2 * tokens / 3 / b).collect();
    let lens: Vec<usize> = pads.iter().map(|p| tokens - p).collect();
    let n: usize = lens.iter().sum();
    let scale = 1.0 / (d as f64).sqrt();
    println!("| one layer's attention | matmul path ms | fused ms | speed-up |");
    println!("|---|---:|---:|---:|");

    // Prefill: the padded batch through the matmul path, the same prompts packed.
    let q = tensor(&[b, g, r * tokens, d], 1);
    let k = tensor(&[b, g, tokens, d], 2);
    let v = tensor(&[b, g, tokens, d], 3);
    let matmul = time(repeats, || {
        matmul_attention(&q, &k, &v, scale, tokens, &pads).expect("matmul path");
    });
    let q = tensor(&[1, g * r, n, d], 4);
    let k_t = tensor(&[1, g, d, n], 5);
    let v = tensor(&[1, g, n, d], 6);
    let fused = time(repeats, || {
        packed_causal_attention(&q, &k_t, &v, scale, &lens).expect("packed");
    });
    row(&format!("prefill, {b} prompts of {}-{tokens} tokens ({n} in all)", lens[b - 1]), matmul, fused);

    // Decode: one query per head against the cache.
    let total = tokens + 20;
    let q = tensor(&[b, g, r, d], 7);
    let k = tensor(&[b, g, total, d], 8);
    let v = tensor(&[b, g, total, d], 9);
    let matmul = time(repeats, || {
        matmul_attention(&q, &k, &v, scale, 1, &pads).expect("matmul path");
    });
    let fused = time(repeats, || {
        cached_attention(&q, &k, &v, scale, 1, &pads).expect("fused");
    });
    row(&format!("decode step, {b} rows, cache of {total} columns"), matmul, fused);
}
