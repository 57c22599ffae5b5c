//! What the update and sampling benchmarks share: the CPU preset's model shape
//! (configs/cpu-l2.toml's `[scratch]`), the process settings the `rlvmr` binary runs with,
//! and the timing.

// Each example that includes this module uses a part of it.
#![allow(dead_code)]

use policy::model::{Family, LlamaConfig};
use std::time::Instant;

/// configs/cpu-l2.toml's model made from nothing (1.3M parameters).
pub fn model_config() -> LlamaConfig {
    LlamaConfig {
        family: Family::Llama,
        vocab_size: 2048,
        hidden_size: 128,
        intermediate_size: 384,
        num_layers: 6,
        num_heads: 4,
        num_kv_heads: 2,
        head_dim: 32,
        rope_theta: 10_000.0,
        rms_norm_eps: 1e-5,
        max_position: 2048,
        tie_word_embeddings: true,
    }
}

/// SmolLM2-135M's shape (the embedded model's), for benchmarks with random weights.
pub fn smollm2_config() -> LlamaConfig {
    LlamaConfig::smollm2_135m()
}

/// As the rlvmr binary runs: freed memory kept for reuse, and the thread count set once.
pub fn run_as_the_binary() {
    policy::malloc::keep_freed_memory();
    if std::env::var_os("RAYON_NUM_THREADS").is_none() {
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        std::env::set_var("RAYON_NUM_THREADS", threads.to_string());
    }
}

/// The median of `repeats` values of `f` (seconds it measured itself), after one warm-up call.
pub fn median(repeats: usize, mut f: impl FnMut() -> f64) -> f64 {
    f();
    let mut secs: Vec<f64> = (0..repeats).map(|_| f()).collect();
    secs.sort_by(f64::total_cmp);
    secs[repeats / 2]
}

/// The median seconds of `repeats` calls of `f`, after one warm-up call.
pub fn time(repeats: usize, mut f: impl FnMut()) -> f64 {
    median(repeats, || {
        let start = Instant::now();
        f();
        start.elapsed().as_secs_f64()
    })
}
