//! The update's forward and backward on the CPU preset's shapes (configs/cpu-l2.toml's model
//! made from nothing; micro-batches of 8 step samples of ~290 prompt and ~43 reply tokens),
//! whole (with the ordinary backward and with activation checkpointing) and the attention
//! alone. A benchmark, not a test. SHAPE `smollm2` takes SmolLM2-135M's shape instead (random
//! weights, vocabulary ids below 2000).
//!
//!   cargo build --release --workspace --example bench_update
//!   target/release/examples/bench_update [PROMPT_TOKENS] [REPEATS] [ROWS] [SHAPE]

mod common;
use candle_core::{DType, Device, Tensor};
use policy::logprobs::{reply_token_scores, reply_token_scores_of_hidden, ResponseBatch};
use policy::model::Llama;

fn main() {
    common::run_as_the_binary();
    let mut args = std::env::args().skip(1);
    let prompt: usize = args.next().map_or(290, |a| a.parse().expect("PROMPT_TOKENS"));
    let repeats: usize = args.next().map_or(5, |a| a.parse().expect("REPEATS"));
    let rows: usize = args.next().map_or(8, |a| a.parse().expect("ROWS"));
    let cfg = match args.next().as_deref() {
        None | Some("cpu") => common::model_config(),
        Some("smollm2") => common::smollm2_config(),
        Some(other) => panic!("SHAPE must be cpu or smollm2, got {other:?}"),
    };
    let (layers, kv_heads, head_dim) = (cfg.num_layers, cfg.num_kv_heads, cfg.head_dim);
    let rep = cfg.num_heads / kv_heads;
    let model = Llama::random(cfg, DType::F32, &Device::Cpu, 0).expect("model");
    let pairs: Vec<(Vec<u32>, Vec<u32>)> = (0..rows)
        .map(|i| {
            let p = prompt - 3 + i;
            let prompt_ids = (0..p).map(|j| ((j * 7 + i) % 2000) as u32 + 1).collect();
            let reply = (0..43).map(|j| ((j * 13 + i) % 2000) as u32 + 1).collect();
            (prompt_ids, reply)
        })
        .collect();
    let batch = ResponseBatch::new(&pairs, 0, 2048, DType::F32, &Device::Cpu).expect("batch");
    let tokens: usize = pairs.iter().map(|(p, r)| p.len() + r.len()).sum();
    let forward = common::time(repeats, || {
        reply_token_scores(&model, &batch).expect("forward");
    });
    let without_graph = common::time(repeats, || {
        let hidden = model.hidden_without_graph(&batch.input_ids).expect("forward");
        reply_token_scores_of_hidden(&model, &batch, &hidden).expect("scores");
    });
    let step = common::time(repeats, || {
        let scores = reply_token_scores(&model, &batch).expect("forward");
        let loss = scores.logprobs.sum_all().expect("sum");
        loss.backward().expect("backward");
    });
    let recomputed = common::time(repeats, || {
        model
            .backward_recomputed(&batch.input_ids, |hidden| {
                Ok(reply_token_scores_of_hidden(&model, &batch, hidden)?.logprobs.sum_all()?)
            })
            .expect("backward");
    });
    println!("{rows} rows, {tokens} tokens: forward {:.1} ms ({:.0} tokens/s; without a graph {:.1} ms), forward + backward {:.1} ms ({:.0} tokens/s), with checkpointing {:.1} ms ({:.2}x)",
        forward * 1e3, tokens as f64 / forward, without_graph * 1e3, step * 1e3, tokens as f64 / step, recomputed * 1e3, recomputed / step);
    // One layer's attention, forward and backward, on the same rows.
    let t = prompt + 43 + 4;
    let var = |shape: &[usize], seed: u64| {
        candle_core::Var::from_tensor(&Tensor::randn_like(&Tensor::zeros(shape, DType::F32, &Device::Cpu).unwrap(), 0.0, 1.0).unwrap().affine(1.0, seed as f64 * 0.0).unwrap()).unwrap()
    };
    let q = var(&[rows, kv_heads, rep * t, head_dim], 1);
    let k = var(&[rows, kv_heads, t, head_dim], 2);
    let v = var(&[rows, kv_heads, t, head_dim], 3);
    let attn = common::time(repeats, || {
        let out = policy::ops::fused::causal_attention(q.as_tensor(), k.as_tensor(), v.as_tensor(), 0.17).expect("attention");
        out.sum_all().unwrap().backward().unwrap();
    });
    println!("one layer's attention forward + backward: {:.1} ms (x{layers} layers = {:.0} ms)", attn * 1e3, attn * 1e3 * layers as f64);
    let rowwise = common::time(repeats, || {
        for i in 0..rows {
            let (q, k, v) = (q.narrow(0, i, 1).unwrap(), k.narrow(0, i, 1).unwrap(), v.narrow(0, i, 1).unwrap());
            let out = policy::ops::fused::causal_attention(&q, &k, &v, 0.17).expect("attention");
            out.sum_all().unwrap().backward().unwrap();
        }
    });
    println!("row by row: {:.1} ms", rowwise * 1e3);
}
