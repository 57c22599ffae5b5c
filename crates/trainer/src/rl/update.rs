//! The update of one iteration: the old and reference log-probs of every step sample (one
//! forward pass each, no backward), then PPO epochs over shuffled mini-batches with the
//! objective of `policy::ppo`, gradient accumulation over micro-batches, clipping and AdamW.

use candle_core::{DType, Tensor};
use policy::logprobs::{reply_token_scores_of_hidden, response_logprobs_at, ResponseBatch};
use policy::optim::Accumulator;
use policy::ppo::{ppo_loss, PpoInputs, PpoLossConfig, PpoStats};
use policy::{AdamW, Llama};
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use crate::collector::mix;
use crate::error::Result;

/// One turn to train on: its prompt and reply tokens, the advantage of its step, and the
/// log-probs of its reply tokens.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub prompt: Vec<u32>,
    pub response: Vec<u32>,
    pub advantage: f32,
    /// Under the sampler, as recorded in the rollout.
    pub sampled: Vec<f32>,
    /// Under the training weights before the update (filled by [`fill_logprobs`]).
    pub old: Vec<f32>,
    /// Under the frozen reference model (empty when the KL term is off).
    pub reference: Vec<f32>,
}

impl Sample {
    fn len(&self) -> usize {
        self.prompt.len() + self.response.len()
    }
}

/// Sample indices in groups of at most `rows`, neighbours in length together (padding costs
/// attention and matmul work on every padded position).
pub(crate) fn by_length(samples: &[Sample], indices: &[usize], rows: usize) -> Vec<Vec<usize>> {
    let mut sorted = indices.to_vec();
    sorted.sort_by_key(|&i| (samples[i].len(), i));
    sorted.chunks(rows.max(1)).map(<[usize]>::to_vec).collect()
}

fn pairs(samples: &[Sample], rows: &[usize]) -> Vec<(Vec<u32>, Vec<u32>)> {
    rows.iter()
        .map(|&i| (samples[i].prompt.clone(), samples[i].response.clone()))
        .collect()
}

/// The rows' prompts and replies as a batch scored at `temperature` (see [`UpdateOptions`]).
fn batch(model: &Llama, samples: &[Sample], rows: &[usize], pad: u32, temperature: f64) -> Result<ResponseBatch> {
    Ok(ResponseBatch::new(
        &pairs(samples, rows),
        pad,
        model.config().max_position,
        model.dtype(),
        model.device(),
    )?
    .at_temperature(temperature)?)
}

/// The reply log-probs of every sample under `model`, forward passes only, rows grouped by
/// length (the graph of each group is dropped before the next one).
pub fn reply_logprobs(model: &Llama, samples: &[Sample], rows: usize, pad: u32, temperature: f64) -> Result<Vec<Vec<f32>>> {
    let mut out = vec![Vec::new(); samples.len()];
    let all: Vec<usize> = (0..samples.len()).collect();
    for group in by_length(samples, &all, rows) {
        let scored = response_logprobs_at(model, &pairs(samples, &group), pad, temperature)?;
        for (&i, lp) in group.iter().zip(scored) {
            out[i] = lp;
        }
    }
    Ok(out)
}

/// `[1, n]` tensor of a per-reply-token value for the batch's reply tokens in row order
/// (aligned with [`reply_token_scores`]).
fn per_token(rows: &[usize], lens: &[usize], value: impl Fn(usize, usize) -> f32, model: &Llama) -> Result<Tensor> {
    let data: Vec<f32> = rows
        .iter()
        .zip(lens)
        .flat_map(|(&i, &len)| (0..len).map(move |k| (i, k)))
        .map(|(i, k)| value(i, k))
        .collect();
    let n = data.len();
    Ok(Tensor::from_vec(data, (1, n), model.device())?.to_dtype(model.dtype())?)
}

/// What the update did, summed over its optimizer steps.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct UpdateStats {
    /// Optimizer steps taken.
    pub updates: usize,
    /// Optimizer steps skipped for a non-finite loss or gradient.
    pub skipped: usize,
    /// Skipped in a row at the end of this update (continues the previous update's streak).
    pub bad_streak: usize,
    pub grad_norm_mean: f64,
    pub grad_norm_max: f64,
    #[serde(skip)]
    pub terms: PpoStats,
    /// Sum of the mini-batches' losses.
    pub loss_sum: f64,
}

/// How one update runs.
pub struct UpdateOptions<'a> {
    pub loss: &'a PpoLossConfig,
    pub epochs: usize,
    pub mini_batch: usize,
    pub micro_batch: usize,
    /// Recompute each layer's activations in the backward ([`Llama::backward_recomputed`]).
    pub gradient_checkpointing: bool,
    pub max_grad_norm: f64,
    pub pad: u32,
    /// The rollouts' sampling temperature: the ratio, KL and entropy are taken under
    /// `softmax(logits / temperature)`, the distribution the replies were drawn from, as verl's
    /// actor does (the old and reference log-probs too).
    pub temperature: f64,
    /// Seeds the mini-batch shuffles.
    pub seed: u64,
    /// Bad updates in a row before this one.
    pub bad_streak: usize,
    /// Stop (with an error) once this many updates in a row were bad.
    pub max_bad_updates: usize,
}

/// The update failed `max_bad_updates` times in a row.
#[derive(Debug, Clone, PartialEq)]
pub struct TooManyBadUpdates {
    pub streak: usize,
    pub last: String,
}

/// PPO epochs over `samples` (old log-probs filled in; reference ones too when the KL term
/// is on). Each mini-batch is one optimizer step whose loss is the token mean over its reply
/// tokens. A mini-batch whose loss or gradient norm is not finite is skipped (no step) and
/// counted; `Err(TooManyBadUpdates)` once `max_bad_updates` in a row were skipped.
pub fn ppo_update(
    model: &Llama,
    opt: &mut AdamW,
    samples: &[Sample],
    o: &UpdateOptions,
) -> Result<std::result::Result<UpdateStats, TooManyBadUpdates>> {
    let mut stats = UpdateStats {
        bad_streak: o.bad_streak,
        ..UpdateStats::default()
    };
    let mut norms = Vec::new();
    for epoch in 0..o.epochs {
        let mut order: Vec<usize> = (0..samples.len()).collect();
        order.shuffle(&mut ChaCha8Rng::seed_from_u64(mix(o.seed, epoch as u64)));
        for mini in order.chunks(o.mini_batch.max(1)) {
            let (loss, terms, mut grads) = mini_batch_gradients(model, opt, samples, mini, o)?;
            let norm = opt.grad_norm(&grads)?;
            if !(loss.is_finite() && norm.is_finite()) {
                stats.skipped += 1;
                stats.bad_streak += 1;
                let why = format!("loss {loss}, gradient norm {norm}");
                eprintln!("update skipped: {why} ({} in a row)", stats.bad_streak);
                if stats.bad_streak >= o.max_bad_updates {
                    return Ok(Err(TooManyBadUpdates {
                        streak: stats.bad_streak,
                        last: why,
                    }));
                }
                continue;
            }
            if o.max_grad_norm > 0.0 {
                opt.clip_grad_norm(&mut grads, o.max_grad_norm)?;
            }
            opt.step(&grads)?;
            stats.bad_streak = 0;
            stats.updates += 1;
            stats.loss_sum += loss;
            stats.terms.add(&terms);
            norms.push(norm);
        }
    }
    if !norms.is_empty() {
        stats.grad_norm_mean = norms.iter().sum::<f64>() / norms.len() as f64;
        stats.grad_norm_max = norms.iter().copied().fold(0.0, f64::max);
    }
    Ok(Ok(stats))
}

/// Forward and backward over the micro-batches of one mini-batch: (loss, its terms, summed
/// gradients).
fn mini_batch_gradients(
    model: &Llama,
    opt: &AdamW,
    samples: &[Sample],
    mini: &[usize],
    o: &UpdateOptions,
) -> Result<(f64, PpoStats, candle_core::backprop::GradStore)> {
    let tokens: usize = mini.iter().map(|&i| samples[i].response.len()).sum();
    let mut acc = Accumulator::new(&opt.vars());
    let mut terms = PpoStats::default();
    let mut loss_sum = 0.0;
    for rows in by_length(samples, mini, o.micro_batch) {
        let b = batch(model, samples, &rows, o.pad, o.temperature)?;
        let lens = &b.response_lens;
        let old = per_token(&rows, lens, |i, k| samples[i].old[k], model)?;
        let adv = per_token(&rows, lens, |i, _| samples[i].advantage, model)?;
        let reference = if o.loss.kl_coef != 0.0 {
            Some(per_token(&rows, lens, |i, k| samples[i].reference[k], model)?)
        } else {
            None
        };
        let mask = Tensor::ones_like(&adv)?;
        let mut stats = None;
        let (loss, grads) = model.backward_from_hidden(&b.input_ids, o.gradient_checkpointing, |hidden| {
            let scores = reply_token_scores_of_hidden(model, &b, hidden)?;
            let inputs = PpoInputs {
                logp: &scores.logprobs,
                entropy: &scores.entropy,
                old_logp: &old,
                ref_logp: reference.as_ref(),
                advantages: &adv,
                mask: &mask,
            };
            let out = ppo_loss(&inputs, o.loss, tokens as f64)?;
            stats = Some(out.stats);
            Ok(out.loss)
        })?;
        loss_sum += loss.to_dtype(DType::F64)?.to_scalar::<f64>()?;
        if let Some(stats) = stats {
            terms.add(&stats);
        }
        acc.add(grads)?;
    }
    Ok((loss_sum, terms, acc.take()))
}
