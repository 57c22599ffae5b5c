//! Sampling without a KV cache (each step re-runs the whole sequence): greedy or temperature.
//! A slow, simple baseline; the batched KV-cache sampler replaces it.

use crate::error::{PolicyError, Result};
use crate::model::Llama;
use crate::tokenizer::Tokenizer;
use candle_core::{DType, Tensor};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// How to sample.
#[derive(Debug, Clone)]
pub struct SampleOptions {
    pub max_new_tokens: usize,
    /// 0 means greedy.
    pub temperature: f64,
    pub seed: u64,
    /// Generation stops after emitting one of these (it is kept in the output ids).
    pub stop_ids: Vec<u32>,
}

impl SampleOptions {
    /// Stop on `<|im_end|>` and `<|endoftext|>` when the tokenizer has them.
    pub fn chat_defaults(tok: &Tokenizer) -> Self {
        let stop_ids = ["<|im_end|>", "<|endoftext|>"]
            .iter()
            .filter_map(|t| tok.token_to_id(t))
            .collect();
        Self {
            max_new_tokens: 128,
            temperature: 0.0,
            seed: 0,
            stop_ids,
        }
    }
}

/// A sampled continuation.
#[derive(Debug, Clone)]
pub struct Sampled {
    pub ids: Vec<u32>,
    /// Log-prob of each sampled token under the distribution it was drawn from (the
    /// temperature-scaled one; temperature 1 or greedy: the model's own).
    pub logprobs: Vec<f32>,
    pub text: String,
    /// True when a stop token ended generation (false: `max_new_tokens` reached).
    pub stopped: bool,
}

/// Sample a continuation of `prompt_ids`.
pub fn sample(
    model: &Llama,
    tok: &Tokenizer,
    prompt_ids: &[u32],
    opts: &SampleOptions,
) -> Result<Sampled> {
    if prompt_ids.is_empty() {
        return Err(PolicyError::Input("empty prompt".into()));
    }
    if !(opts.temperature >= 0.0 && opts.temperature.is_finite()) {
        return Err(PolicyError::Input(format!(
            "temperature must be >= 0, got {}",
            opts.temperature
        )));
    }
    let max_len = model.config().max_position;
    if prompt_ids.len() >= max_len {
        return Err(PolicyError::Input(format!(
            "prompt of {} tokens leaves no room in the context length {max_len}",
            prompt_ids.len()
        )));
    }
    let mut rng = ChaCha8Rng::seed_from_u64(opts.seed);
    let mut seq = prompt_ids.to_vec();
    let (mut ids, mut logprobs, mut stopped) = (Vec::new(), Vec::new(), false);
    while ids.len() < opts.max_new_tokens && seq.len() < max_len {
        let input = Tensor::new(seq.as_slice(), model.device())?.unsqueeze(0)?;
        let logits = model.forward(&input)?.get(0)?.get(seq.len() - 1)?;
        let logits: Vec<f64> = logits.to_dtype(DType::F64)?.to_vec1()?;
        let (next, lp) = pick(&logits, opts.temperature, &mut rng);
        seq.push(next);
        ids.push(next);
        logprobs.push(lp as f32);
        if opts.stop_ids.contains(&next) {
            stopped = true;
            break;
        }
    }
    let text = tok.decode(&ids, true)?;
    Ok(Sampled {
        ids,
        logprobs,
        text,
        stopped,
    })
}

fn pick(logits: &[f64], temperature: f64, rng: &mut impl Rng) -> (u32, f64) {
    let t = if temperature == 0.0 { 1.0 } else { temperature };
    let scaled: Vec<f64> = logits.iter().map(|l| l / t).collect();
    let m = scaled.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let z: f64 = scaled.iter().map(|l| (l - m).exp()).sum();
    let lse = m + z.ln();
    let idx = if temperature == 0.0 {
        scaled
            .iter()
            .enumerate()
            .fold(0, |best, (i, &l)| if l > scaled[best] { i } else { best })
    } else {
        let u: f64 = rng.gen::<f64>() * z;
        let mut acc = 0.0;
        let mut chosen = scaled.len() - 1;
        for (i, l) in scaled.iter().enumerate() {
            acc += (l - m).exp();
            if acc > u {
                chosen = i;
                break;
            }
        }
        chosen
    };
    (idx as u32, scaled[idx] - lse)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greedy_and_seeded_sampling() {
        let mut rng = ChaCha8Rng::seed_from_u64(0);
        let (i, lp) = pick(&[0.0, 3.0, 1.0], 0.0, &mut rng);
        assert_eq!(i, 1);
        assert!(lp < 0.0 && lp > -0.5);
        let draw = |seed| {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            (0..20)
                .map(|_| pick(&[0.0, 0.5, 1.0], 1.0, &mut rng).0)
                .collect::<Vec<_>>()
        };
        assert_eq!(draw(3), draw(3));
        assert!(draw(3).iter().any(|&i| i != draw(3)[0]));
    }
}
