//! What the update and sampling benchmarks share: the CPU preset's model shape
//! (configs/cpu-l2.toml's `[scratch]`) and the process settings the `rlvmr` binary runs with.

use policy::model::{Family, LlamaConfig};

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

/// As the rlvmr binary runs: freed memory kept for reuse, and the thread count set once.
pub fn run_as_the_binary() {
    policy::malloc::keep_freed_memory();
    if std::env::var_os("RAYON_NUM_THREADS").is_none() {
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        std::env::set_var("RAYON_NUM_THREADS", threads.to_string());
    }
}
