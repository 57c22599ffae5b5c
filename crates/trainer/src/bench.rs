//! The policy benchmark of `rlvmr bench-policy`: the policy's heavy phases on one device, timed,
//! as one JSON object, through the code the trainer runs:
//!
//! - **update**: PPO over one mini-batch of RL step samples (`trainer::rl::update::ppo_update`:
//!   forward, the PPO-clip loss with the k3 KL and entropy terms, backward, gradient clipping
//!   and AdamW); **parts**: the same mini-batch split into its forward, backward and optimizer
//!   parts, and the training ops (attention, norms, rope, SwiGLU, the head's log-softmax) apart;
//! - **logprobs**: the same samples' reply log-probs without a graph (`reply_logprobs`, as the
//!   old and reference log-probs are taken);
//! - **sample**: KV-cache sampling of a batch of prompts (`policy::sample::sample_batch`), every
//!   reply run to its full length (no stop token), with the prefill timed apart;
//! - **check** (not timed): the device's reply log-probs, gradients and greedy replies against
//!   the CPU's on the same weights, and a padded batch's log-probs against each sample's alone.
//!
//! The weights and the token ids are written first (`--weights DIR`: `config.json`,
//! `model.safetensors` unless `--config-only`, and `bench_inputs.json`), so that
//! tools/cuda/bench_torch.py times PyTorch on the same weights and the same inputs;
//! tools/cuda/bench.sh runs both on a GPU machine and prints the ratios.

use std::path::{Path, PathBuf};
use std::time::Instant;

use candle_core::{DType, Device};
use policy::logprobs::{reply_token_scores, ResponseBatch};
use policy::model::LlamaConfig;
use policy::optim::{AdamW, AdamWConfig};
use policy::ppo::PpoLossConfig;
use policy::sample::{sample_batch, SampleOptions};
use policy::{Llama, Tokenizer};
use serde_json::{json, Value};

use crate::error::{Result, TrainerError};
use crate::rl::update::{by_length, ppo_update, reply_logprobs, Sample, UpdateOptions};

/// The phases, in the order they may be asked for.
pub const PHASES: [&str; 5] = ["update", "parts", "logprobs", "sample", "check"];

/// What to time (the options of `rlvmr bench-policy`, which documents each).
pub struct BenchOptions {
    pub device: Device,
    pub shape: String,
    pub weights: PathBuf,
    pub config_only: bool,
    pub samples: usize,
    pub prompt_tokens: usize,
    pub reply_tokens: usize,
    pub micro_batch: usize,
    pub prompts: usize,
    pub sample_prompt_tokens: usize,
    pub new_tokens: usize,
    pub phases: Vec<String>,
    pub repeats: usize,
}

fn invalid(message: String) -> TrainerError {
    TrainerError::Invalid(message)
}

fn shape(name: &str) -> Result<LlamaConfig> {
    match name {
        "smollm2" => Ok(LlamaConfig::smollm2_135m()),
        "qwen2.5-1.5b" => Ok(LlamaConfig::qwen2_5_1_5b()),
        "tiny" => Ok(LlamaConfig::tiny()),
        other => Err(invalid(format!("unknown --shape {other:?}: expected smollm2, qwen2.5-1.5b or tiny"))),
    }
}

/// `n` deterministic token ids of row `row` (below the vocabulary, never the pad id 0).
fn ids(row: usize, n: usize, vocab: usize) -> Vec<u32> {
    (0..n).map(|j| ((row * 7919 + j * 104_729 + 13) % (vocab - 1) + 1) as u32).collect()
}

/// A length around `mean`, varying with the row by up to ±50 (a quarter of `mean` when less).
fn length(mean: usize, row: usize, salt: usize) -> usize {
    let spread = (mean / 4).min(50);
    (mean - spread + (row * salt) % (2 * spread + 1)).max(1)
}

/// The update's step samples and the sampled prompts, as written to bench_inputs.json.
struct Inputs {
    pairs: Vec<(Vec<u32>, Vec<u32>)>,
    prompts: Vec<Vec<u32>>,
}

fn inputs(a: &BenchOptions, vocab: usize) -> Inputs {
    let pairs = (0..a.samples)
        .map(|i| {
            let p = ids(i, length(a.prompt_tokens, i, 37), vocab);
            let r = ids(i + 100_000, length(a.reply_tokens, i, 53), vocab);
            (p, r)
        })
        .collect();
    let prompts = (0..a.prompts)
        .map(|i| ids(i + 200_000, length(a.sample_prompt_tokens, i, 29), vocab))
        .collect();
    Inputs { pairs, prompts }
}

/// The pairs' tokens (prompts and replies) and their reply tokens.
fn token_counts(pairs: &[(Vec<u32>, Vec<u32>)]) -> (usize, usize) {
    let tokens = pairs.iter().map(|(p, r)| p.len() + r.len()).sum();
    (tokens, pairs.iter().map(|(_, r)| r.len()).sum())
}

fn write_json(path: &Path, value: &Value) -> Result<()> {
    std::fs::write(path, value.to_string()).map_err(|e| TrainerError::io(path, e))
}

fn sync(device: &Device) -> Result<()> {
    device.synchronize().map_err(|e| TrainerError::context("synchronizing the device", e))
}

/// Seconds of `f`, the device synchronized before and after.
fn timed(device: &Device, f: impl FnOnce() -> Result<()>) -> Result<f64> {
    sync(device)?;
    let start = Instant::now();
    f()?;
    sync(device)?;
    Ok(start.elapsed().as_secs_f64())
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

/// `repeats` timed runs of `f` (median), after one untimed `warm_up`.
fn median_of(device: &Device, repeats: usize, warm_up: impl FnOnce() -> Result<()>, mut f: impl FnMut() -> Result<()>) -> Result<(f64, Vec<f64>)> {
    warm_up()?;
    let mut all = Vec::new();
    for _ in 0..repeats.max(1) {
        all.push(timed(device, &mut f)?);
    }
    Ok((median(all.clone()), all))
}

fn samples_of(pairs: &[(Vec<u32>, Vec<u32>)]) -> Vec<Sample> {
    pairs
        .iter()
        .enumerate()
        .map(|(i, (p, r))| Sample {
            prompt: p.clone(),
            response: r.clone(),
            // Advantages of both signs, as a group's steps have.
            advantage: if i % 2 == 0 { 1.0 } else { -0.5 },
            sampled: vec![0.0; r.len()],
            old: Vec::new(),
            reference: Vec::new(),
        })
        .collect()
}

fn optimizer(model: &Llama) -> Result<AdamW> {
    Ok(AdamW::for_model(model, AdamWConfig { lr: 1e-6, weight_decay: 0.01, ..AdamWConfig::default() })?)
}

fn update_options<'a>(loss: &'a PpoLossConfig, samples: usize, micro_batch: usize) -> UpdateOptions<'a> {
    UpdateOptions {
        loss,
        epochs: 1,
        mini_batch: samples,
        micro_batch,
        gradient_checkpointing: false,
        max_grad_norm: 1.0,
        pad: 0,
        temperature: 1.0,
        seed: 0,
        bad_streak: 0,
        max_bad_updates: usize::MAX,
    }
}

/// The update's phase: `ppo_update` over the mini-batch (old and reference log-probs filled
/// first, untimed), one optimizer step.
fn bench_update(model: &Llama, a: &BenchOptions, pairs: &[(Vec<u32>, Vec<u32>)]) -> Result<Value> {
    let device = model.device();
    let mut samples = samples_of(pairs);
    let old = reply_logprobs(model, &samples, a.micro_batch, 0, 1.0)?;
    for (s, lp) in samples.iter_mut().zip(old) {
        s.reference = lp.clone();
        s.old = lp;
    }
    let loss = PpoLossConfig::default();
    let mut opt = optimizer(model)?;
    let warm = a.micro_batch.min(samples.len());
    let (update_s, all) = median_of(
        device,
        a.repeats,
        || {
            ppo_update(model, &mut optimizer(model)?, &samples[..warm], &update_options(&loss, warm, a.micro_batch))?
                .map_err(|bad| invalid(format!("the warm-up update failed: {}", bad.last)))?;
            Ok(())
        },
        || {
            let stats = ppo_update(model, &mut opt, &samples, &update_options(&loss, samples.len(), a.micro_batch))?
                .map_err(|bad| invalid(format!("the update failed: {}", bad.last)))?;
            if stats.updates != 1 {
                return Err(invalid(format!("expected one optimizer step, took {}", stats.updates)));
            }
            Ok(())
        },
    )?;
    let (tokens, reply) = token_counts(pairs);
    Ok(json!({
        "samples": pairs.len(), "micro_batch": a.micro_batch, "tokens": tokens, "reply_tokens": reply,
        "seconds": update_s, "seconds_all": all, "tokens_per_s": tokens as f64 / update_s,
    }))
}

/// The update's parts, one pass over the same micro-batches (grouped by length, as the update
/// groups them): the forward with its graph (a loss of the reply log-probs), the backward, and
/// clipping with AdamW; and the training ops apart ([`op_seconds`]).
fn bench_parts(model: &Llama, a: &BenchOptions, pairs: &[(Vec<u32>, Vec<u32>)]) -> Result<Value> {
    let device = model.device();
    let mut opt = optimizer(model)?;
    let all: Vec<usize> = (0..pairs.len()).collect();
    let (mut forward_s, mut backward_s) = (0.0, 0.0);
    let mut grads = policy::optim::Accumulator::new(&opt.vars());
    for rows in by_length(&samples_of(pairs), &all, a.micro_batch) {
        let rows: Vec<_> = rows.iter().map(|&i| pairs[i].clone()).collect();
        let batch = ResponseBatch::new(&rows, 0, model.config().max_position, model.dtype(), device)?;
        let mut loss = None;
        forward_s += timed(device, || {
            loss = Some(reply_token_scores(model, &batch)?.logprobs.sum_all()?);
            Ok(())
        })?;
        let mut step = None;
        backward_s += timed(device, || {
            step = Some(loss.take().expect("a loss").backward()?);
            Ok(())
        })?;
        grads.add(step.expect("gradients"))?;
    }
    let mut grads = grads.take();
    let optimizer_s = timed(device, || {
        opt.clip_grad_norm(&mut grads, 1.0)?;
        opt.step(&grads)?;
        Ok(())
    })?;
    let (tokens, reply) = token_counts(pairs);
    let micro_batches = pairs.len().div_ceil(a.micro_batch);
    let rows = a.micro_batch.min(pairs.len());
    Ok(json!({
        "samples": pairs.len(), "micro_batch": a.micro_batch, "tokens": tokens, "reply_tokens": reply,
        "forward_s": forward_s, "backward_s": backward_s, "optimizer_s": optimizer_s,
        "ops_fwd_bwd_s": op_seconds(model, rows, tokens / pairs.len(), reply / micro_batches, micro_batches)?,
    }))
}

/// The training ops apart, each forward and backward on the shape one micro-batch of `rows`
/// sequences of `t` tokens (`reply` of them scored) gives it, the median of three after a
/// warm-up, times how often the update runs it (`micro_batches` times per layer, or once per
/// micro-batch): where the update's time goes beside the matrix products.
fn op_seconds(model: &Llama, rows: usize, t: usize, reply: usize, micro_batches: usize) -> Result<Value> {
    use candle_core::{Tensor, Var};
    use policy::ops::fused;
    let cfg = model.config();
    let (h, nh, kv, hd, layers) = (cfg.hidden_size, cfg.num_heads, cfg.num_kv_heads, cfg.head_dim, cfg.num_layers);
    let device = model.device();
    let var = |shape: &[usize]| -> Result<Var> { Ok(Var::from_tensor(&Tensor::randn(0f32, 1.0, shape, device)?)?) };
    let time = |f: &dyn Fn() -> Result<Tensor>| -> Result<f64> {
        Ok(median_of(device, 3, || Ok(()), || {
            f()?.sum_all()?.backward()?;
            Ok(())
        })?
        .0)
    };
    let n = rows * t;
    let (q, k, v) = (var(&[rows, kv, nh / kv * t, hd])?, var(&[rows, kv, t, hd])?, var(&[rows, kv, t, hd])?);
    let scale = 1.0 / (hd as f64).sqrt();
    let attention = time(&|| Ok(fused::causal_attention(q.as_tensor(), k.as_tensor(), v.as_tensor(), scale)?))?;
    let (x, w) = (var(&[n, h])?, var(&[h])?);
    let rms_norm = time(&|| Ok(fused::rms_norm(x.as_tensor(), w.as_tensor(), cfg.rms_norm_eps)?))?;
    let (tables, projected) = (Tensor::randn(0f32, 1.0, (t, hd), device)?, var(&[n, nh * hd])?);
    let rope_heads = time(&|| Ok(fused::split_heads(projected.as_tensor(), rows, nh, kv, Some((&tables, &tables)))?))?;
    let (gate, up) = (var(&[n, cfg.intermediate_size])?, var(&[n, cfg.intermediate_size])?);
    let swiglu = time(&|| Ok(fused::swiglu(gate.as_tensor(), up.as_tensor())?))?;
    let (hidden, head) = (var(&[reply, h])?, var(&[cfg.vocab_size, h])?);
    let targets = Tensor::arange(0u32, reply as u32, device)?;
    let head_scores = time(&|| Ok(fused::head_token_scores(hidden.as_tensor(), head.as_tensor(), &targets)?))?;
    let per_layer = (micro_batches * layers) as f64;
    Ok(json!({
        "attention": attention * per_layer,
        "rms_norms": rms_norm * per_layer * 2.0,
        "rope_and_heads_q_k": rope_heads * per_layer * 2.0,
        "swiglu": swiglu * per_layer,
        "head_log_softmax": head_scores * micro_batches as f64,
    }))
}

fn bench_logprobs(model: &Llama, a: &BenchOptions, pairs: &[(Vec<u32>, Vec<u32>)]) -> Result<Value> {
    let samples = samples_of(pairs);
    let warm = a.micro_batch.min(samples.len());
    let mut sum = 0.0;
    let (seconds, all) = median_of(
        model.device(),
        a.repeats,
        || reply_logprobs(model, &samples[..warm], a.micro_batch, 0, 1.0).map(drop),
        || {
            let logprobs = reply_logprobs(model, &samples, a.micro_batch, 0, 1.0)?;
            sum = logprobs.iter().flatten().map(|&x| x as f64).sum();
            Ok(())
        },
    )?;
    let (tokens, _) = token_counts(pairs);
    Ok(json!({
        "samples": pairs.len(), "micro_batch": a.micro_batch, "tokens": tokens,
        "seconds": seconds, "seconds_all": all, "tokens_per_s": tokens as f64 / seconds,
        // The same weights and inputs give the same sum on both sides (a check, not a time).
        "logprob_sum": sum,
    }))
}

fn bench_sample(model: &Llama, tok: &Tokenizer, a: &BenchOptions, prompts: &[Vec<u32>]) -> Result<Value> {
    let device = model.device();
    let opts = |new_tokens| SampleOptions {
        max_new_tokens: new_tokens,
        temperature: 0.7,
        seed: 0,
        ..SampleOptions::default()
    };
    let (seconds, all) = median_of(
        device,
        a.repeats,
        || sample_batch(model, tok, &prompts[..prompts.len().min(4)], &opts(4)).map(drop).map_err(TrainerError::from),
        || {
            let out = sample_batch(model, tok, prompts, &opts(a.new_tokens))?;
            let short = out.iter().filter(|s| s.ids.len() != a.new_tokens).count();
            if short > 0 {
                return Err(invalid(format!("{short} replies stopped before {} tokens", a.new_tokens)));
            }
            Ok(())
        },
    )?;
    let inference = model.inference()?;
    let prefill_s = timed(device, || inference.prefill_reserving(prompts, a.new_tokens).map(drop).map_err(TrainerError::from))?;
    let prompt_tokens: usize = prompts.iter().map(Vec::len).sum();
    let new = prompts.len() * a.new_tokens;
    Ok(json!({
        "prompts": prompts.len(), "prompt_tokens": prompt_tokens, "new_tokens": a.new_tokens,
        "temperature": 0.7, "seconds": seconds, "seconds_all": all,
        "new_tokens_per_s": new as f64 / seconds, "prefill_s": prefill_s,
        "decode_tokens_per_s": new as f64 / (seconds - prefill_s),
    }))
}

/// Reply log-probs (flattened in row order) and the gradient of their sum for every variable
/// (by name, flattened), on the CPU.
fn scores_and_gradients(model: &Llama, pairs: &[(Vec<u32>, Vec<u32>)]) -> Result<(Vec<f32>, Vec<(String, Vec<f32>)>)> {
    let batch = ResponseBatch::new(pairs, 0, model.config().max_position, model.dtype(), model.device())?;
    let logprobs = reply_token_scores(model, &batch)?.logprobs;
    let grads = logprobs.sum_all()?.backward()?;
    let mut out = Vec::new();
    for (name, var) in model.named_vars() {
        let grad = grads.get(var.as_tensor()).ok_or_else(|| invalid(format!("no gradient for {name}")))?;
        out.push((name, grad.flatten_all()?.to_device(&Device::Cpu)?.to_vec1::<f32>()?));
    }
    Ok((logprobs.flatten_all()?.to_device(&Device::Cpu)?.to_vec1::<f32>()?, out))
}

/// `most`, or a `1 / share` of the model's context when that is less.
fn cfg_len(model: &Llama, share: usize, most: usize) -> usize {
    (model.config().max_position / share).min(most)
}

fn max_abs_diff(a: &[f32], b: &[f32]) -> f64 {
    a.iter().zip(b).map(|(x, y)| (x - y).abs() as f64).fold(0.0, f64::max)
}

/// `|a - b| / |b|` (L2 norms).
fn relative_error(a: &[f32], b: &[f32]) -> f64 {
    let diff: f64 = a.iter().zip(b).map(|(x, y)| ((x - y) as f64).powi(2)).sum();
    let size: f64 = b.iter().map(|y| (*y as f64).powi(2)).sum();
    (diff / size.max(f64::MIN_POSITIVE)).sqrt()
}

/// The device against the CPU on the same weights (4 samples of ~300 + ~50 tokens): the
/// largest difference of a reply log-prob, and the largest relative error of a variable's
/// gradient; and on the device, a padded batch of 4 against each sample alone.
fn check(model: &Llama) -> Result<Value> {
    let cfg = model.config().clone();
    let vocab = cfg.vocab_size;
    let cpu = Llama::random(cfg, DType::F32, &Device::Cpu, 0)?;
    let (prompt, reply) = (cfg_len(model, 4, 300), cfg_len(model, 8, 50));
    let pairs: Vec<_> = (0..4).map(|i| (ids(i, length(prompt, i, 37), vocab), ids(i + 100_000, length(reply, i, 53), vocab))).collect();
    let (lp_device, grads_device) = scores_and_gradients(model, &pairs)?;
    let (lp_cpu, grads_cpu) = scores_and_gradients(&cpu, &pairs)?;
    let mut worst = (String::new(), 0.0);
    for ((name, g), (_, want)) in grads_device.iter().zip(&grads_cpu) {
        let err = relative_error(g, want);
        if err > worst.1 || err.is_nan() {
            worst = (name.clone(), err);
        }
    }
    let samples = samples_of(&pairs);
    let alone = reply_logprobs(model, &samples, 1, 0, 1.0)?.concat();
    let together = reply_logprobs(model, &samples, 4, 0, 1.0)?.concat();
    // Greedy replies of prompts of several lengths (a left-padded prefill, then decode steps
    // against the cache): the sampling path's attention on both devices.
    let tok = policy::tokenizer::word_level(vocab as u32)?;
    let prompts: Vec<Vec<u32>> = pairs.iter().map(|(p, _)| p.clone()).collect();
    let greedy = SampleOptions { max_new_tokens: 8, temperature: 0.0, ..SampleOptions::default() };
    let on_device = sample_batch(model, &tok, &prompts, &greedy)?;
    let on_cpu = sample_batch(&cpu, &tok, &prompts, &greedy)?;
    let same = on_device.iter().zip(&on_cpu).map(|(a, b)| a.ids.iter().zip(&b.ids).filter(|(x, y)| x == y).count()).sum::<usize>();
    Ok(json!({
        "greedy_tokens_equal_to_cpu": format!("{same} of {}", prompts.len() * 8),
        "logprob_max_abs_diff_vs_cpu": max_abs_diff(&lp_device, &lp_cpu),
        "gradient_worst_relative_error_vs_cpu": worst.1, "gradient_worst_variable": worst.0,
        "padded_batch_vs_alone_max_abs_diff": max_abs_diff(&together, &alone),
    }))
}

/// The model: random weights of the shape (seed 0) on the device, written to `--weights`
/// (unless `--config-only`) with the inputs.
fn model_and_inputs(a: &BenchOptions, device: &Device) -> Result<(Llama, Tokenizer, Inputs)> {
    let cfg = shape(&a.shape)?;
    let vocab = cfg.vocab_size;
    let model = Llama::random(cfg, DType::F32, device, 0)?;
    let tok = policy::tokenizer::word_level(vocab as u32)?;
    let dir = &a.weights;
    std::fs::create_dir_all(dir).map_err(|e| TrainerError::io(dir, e))?;
    if a.config_only {
        let cfg = policy::checkpoint::hf_config_json(model.config(), DType::F32);
        write_json(&dir.join("config.json"), &cfg)?;
    } else {
        policy::checkpoint::save_model(&model, &tok, dir)?;
    }
    let inputs = inputs(a, vocab);
    write_json(
        &dir.join("bench_inputs.json"),
        &json!({ "pairs": inputs.pairs, "prompts": inputs.prompts, "micro_batch": a.micro_batch,
                 "new_tokens": a.new_tokens }),
    )?;
    Ok((model, tok, inputs))
}

/// Runs the phases asked for, in that order, and returns the report: the device, the shape and
/// each phase's figures. Progress goes to stderr, one line per phase.
pub fn run(a: &BenchOptions) -> Result<Value> {
    if let Some(p) = a.phases.iter().find(|p| !PHASES.contains(&p.as_str())) {
        return Err(invalid(format!("unknown phase {p:?} in --phases: expected one of {}", PHASES.join(", "))));
    }
    if a.samples == 0 || a.prompts == 0 || a.new_tokens == 0 || a.micro_batch == 0 {
        return Err(invalid("--samples, --prompts, --new-tokens and --micro-batch must be at least 1".into()));
    }
    let (model, tok, inputs) = model_and_inputs(a, &a.device)?;
    let mut report = json!({ "impl": "rlvmr", "device": format!("{:?}", a.device), "shape": a.shape, "dtype": "f32" });
    for phase in &a.phases {
        let started = Instant::now();
        let figures = match phase.as_str() {
            "update" => bench_update(&model, a, &inputs.pairs)?,
            "parts" => bench_parts(&model, a, &inputs.pairs)?,
            "logprobs" => bench_logprobs(&model, a, &inputs.pairs)?,
            "sample" => bench_sample(&model, &tok, a, &inputs.prompts)?,
            _ => check(&model)?,
        };
        eprintln!("{phase}: {figures} ({:.0} s)", started.elapsed().as_secs_f64());
        report[phase.as_str()] = figures;
    }
    Ok(report)
}
