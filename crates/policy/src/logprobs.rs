//! Per-token log-probabilities and entropies of responses given prompts.
//!
//! A batch holds `prompt ++ response` rows padded on the right. Position `p` of the logits
//! predicts token `p + 1`, so the per-token tensors are `[batch, seq - 1]`, aligned with the
//! targets `ids[:, 1:]`; the response mask is 1 exactly where the target is a response token.

use crate::error::{PolicyError, Result};
use crate::model::Llama;
use candle_core::{DType, Device, Tensor};

/// Right-padded `prompt ++ response` rows and the response mask.
#[derive(Debug, Clone)]
pub struct ResponseBatch {
    /// `[batch, seq]` u32 token ids.
    pub input_ids: Tensor,
    /// `[batch, seq - 1]` in the model dtype: 1 where the target token is part of the response.
    pub response_mask: Tensor,
    pub prompt_lens: Vec<usize>,
    pub response_lens: Vec<usize>,
    /// The sampling temperature the replies were drawn at: [`reply_token_scores`] scores them
    /// under `softmax(logits / temperature)`, the distribution they were sampled from (as
    /// verl's actor divides its logits by the rollout temperature). 1 from [`ResponseBatch::new`].
    pub temperature: f64,
}

impl ResponseBatch {
    /// Build a batch; every prompt and response must be non-empty and every row must fit the
    /// context of `max_len` tokens.
    pub fn new(
        pairs: &[(Vec<u32>, Vec<u32>)],
        pad_id: u32,
        max_len: usize,
        dtype: DType,
        device: &Device,
    ) -> Result<Self> {
        if pairs.is_empty() {
            return Err(PolicyError::Input("empty batch".into()));
        }
        for (i, (p, r)) in pairs.iter().enumerate() {
            if p.is_empty() {
                return Err(PolicyError::Input(format!("row {i}: empty prompt")));
            }
            if r.is_empty() {
                return Err(PolicyError::Input(format!("row {i}: empty response")));
            }
            if p.len() + r.len() > max_len {
                return Err(PolicyError::Input(format!(
                    "row {i}: prompt ({}) + response ({}) tokens exceed the context length {max_len}",
                    p.len(),
                    r.len()
                )));
            }
        }
        let seq = pairs
            .iter()
            .map(|(p, r)| p.len() + r.len())
            .max()
            .unwrap_or(0);
        let b = pairs.len();
        let mut ids = Vec::with_capacity(b * seq);
        let mut mask = Vec::with_capacity(b * (seq - 1));
        for (p, r) in pairs {
            let n = p.len() + r.len();
            ids.extend_from_slice(p);
            ids.extend_from_slice(r);
            ids.extend(std::iter::repeat_n(pad_id, seq - n));
            // target index j (0-based over ids[1..]) is token j + 1.
            for j in 0..seq - 1 {
                let tok = j + 1;
                mask.push(if tok >= p.len() && tok < n {
                    1f32
                } else {
                    0f32
                });
            }
        }
        Ok(Self {
            input_ids: Tensor::from_vec(ids, (b, seq), device)?,
            response_mask: Tensor::from_vec(mask, (b, seq - 1), device)?.to_dtype(dtype)?,
            prompt_lens: pairs.iter().map(|(p, _)| p.len()).collect(),
            response_lens: pairs.iter().map(|(_, r)| r.len()).collect(),
            temperature: 1.0,
        })
    }

    /// The batch scored at sampling temperature `temperature` (finite and positive).
    pub fn at_temperature(mut self, temperature: f64) -> Result<Self> {
        if !(temperature.is_finite() && temperature > 0.0) {
            return Err(PolicyError::Input(format!(
                "temperature {temperature}: replies are scored at a finite, positive temperature"
            )));
        }
        self.temperature = temperature;
        Ok(self)
    }
}

/// Log-probs and entropies of the next token at every position.
#[derive(Debug, Clone)]
pub struct TokenScores {
    /// `[batch, seq - 1]`: log p(ids[:, j+1] | ids[:, ..=j]).
    pub logprobs: Tensor,
    /// `[batch, seq - 1]`: entropy of the predictive distribution at position j.
    pub entropy: Tensor,
}

/// Differentiable per-token log-probs and entropies of `input_ids` (`[batch, seq]`, seq >= 2).
pub fn token_scores(model: &Llama, input_ids: &Tensor) -> Result<TokenScores> {
    check_scorable(input_ids)?;
    token_scores_of_hidden(model, input_ids, &model.hidden(input_ids)?)
}

/// [`token_scores`] from the final hidden states `hidden` of `input_ids` ([`Llama::hidden`];
/// [`Llama::backward_recomputed`] hands them to its loss).
pub fn token_scores_of_hidden(model: &Llama, input_ids: &Tensor, hidden: &Tensor) -> Result<TokenScores> {
    let t = check_scorable(input_ids)?;
    let (b, h) = (input_ids.dim(0)?, model.config().hidden_size);
    let hidden = hidden.narrow(1, 0, t - 1)?;
    let targets = input_ids.narrow(1, 1, t - 1)?.flatten_all()?;
    let both = crate::ops::fused::head_token_scores(
        &hidden.contiguous()?.reshape((b * (t - 1), h))?,
        &model.head(),
        &targets,
    )?;
    split_scores(&both, b, t - 1)
}

/// The length of `input_ids: [batch, seq]`, which must be at least 2 to score a token.
fn check_scorable(input_ids: &Tensor) -> Result<usize> {
    let (_, t) = input_ids.dims2()?;
    if t < 2 {
        return Err(PolicyError::Input("need at least 2 tokens to score".into()));
    }
    Ok(t)
}

/// `[b * t, 2]` (log-prob, entropy) columns as `[b, t]` tensors.
fn split_scores(both: &Tensor, b: usize, t: usize) -> Result<TokenScores> {
    let logprobs = both.narrow(1, 0, 1)?.reshape((b, t))?;
    let entropy = both.narrow(1, 1, 1)?.reshape((b, t))?;
    Ok(TokenScores { logprobs, entropy })
}

/// Scores for a [`ResponseBatch`] (at temperature 1); multiply by `batch.response_mask` to
/// keep response tokens.
pub fn response_scores(model: &Llama, batch: &ResponseBatch) -> Result<TokenScores> {
    token_scores(model, &batch.input_ids)
}

/// Differentiable scores of the response tokens alone, `[1, n]` for the batch's `n` response
/// tokens in row order (row 0's reply, then row 1's, ...). The LM head and its softmax run
/// on those positions only: a prompt position's logits are never needed, and at ~290 prompt
/// tokens per 40-token reply the head over every position was most of its cost.
pub fn reply_token_scores(model: &Llama, batch: &ResponseBatch) -> Result<TokenScores> {
    reply_token_scores_of_hidden(model, batch, &model.hidden(&batch.input_ids)?)
}

/// [`reply_token_scores`] from the batch's final hidden states `hidden` ([`Llama::hidden`]).
pub fn reply_token_scores_of_hidden(model: &Llama, batch: &ResponseBatch, hidden: &Tensor) -> Result<TokenScores> {
    let (b, t) = batch.input_ids.dims2()?;
    let h = model.config().hidden_size;
    let mut positions = Vec::new();
    for (row, (&p, &r)) in batch.prompt_lens.iter().zip(&batch.response_lens).enumerate() {
        // Position `p - 1 + k` of a row predicts its response token `k`.
        positions.extend((0..r).map(|k| (row * (t - 1) + p - 1 + k) as u32));
    }
    let n = positions.len();
    let positions = Tensor::from_vec(positions, n, batch.input_ids.device())?;
    let hidden = hidden
        .narrow(1, 0, t - 1)?
        .contiguous()?
        .reshape((b * (t - 1), h))?
        .index_select(&positions, 0)?;
    // logits / T = (hidden / T) @ head^T: one scaling of the gathered rows.
    let hidden = match batch.temperature {
        1.0 => hidden,
        t => hidden.affine(1.0 / t, 0.0)?,
    };
    let targets = batch
        .input_ids
        .narrow(1, 1, t - 1)?
        .flatten_all()?
        .index_select(&positions, 0)?;
    let both = crate::ops::fused::head_token_scores(&hidden, &model.head(), &targets)?;
    split_scores(&both, 1, n)
}

/// Per-row response log-probs as plain vectors (no gradient needed).
pub fn response_logprobs(
    model: &Llama,
    pairs: &[(Vec<u32>, Vec<u32>)],
    pad_id: u32,
) -> Result<Vec<Vec<f32>>> {
    response_logprobs_at(model, pairs, pad_id, 1.0)
}

/// [`response_logprobs`] under `softmax(logits / temperature)`.
pub fn response_logprobs_at(
    model: &Llama,
    pairs: &[(Vec<u32>, Vec<u32>)],
    pad_id: u32,
    temperature: f64,
) -> Result<Vec<Vec<f32>>> {
    let batch = ResponseBatch::new(
        pairs,
        pad_id,
        model.config().max_position,
        model.dtype(),
        model.device(),
    )?
    .at_temperature(temperature)?;
    let hidden = model.hidden_without_graph(&batch.input_ids)?;
    let flat: Vec<f32> = reply_token_scores_of_hidden(model, &batch, &hidden)?
        .logprobs
        .detach()
        .to_dtype(DType::F32)?
        .flatten_all()?
        .to_vec1()?;
    let mut rows = Vec::with_capacity(pairs.len());
    let mut at = 0;
    for &r in &batch.response_lens {
        rows.push(flat[at..at + r].to_vec());
        at += r;
    }
    Ok(rows)
}

/// One scored `(prompt, response)` text pair.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ScoredText {
    pub prompt_ids: Vec<u32>,
    pub response_ids: Vec<u32>,
    pub response_logprobs: Vec<f32>,
}

/// Tokenize `prompt` and `response` separately (raw text, no template, no added special
/// tokens) and score the response tokens given the prompt.
pub fn score_text(
    model: &Llama,
    tok: &crate::tokenizer::Tokenizer,
    prompt: &str,
    response: &str,
) -> Result<ScoredText> {
    let prompt_ids = tok.encode(prompt)?;
    let response_ids = tok.encode(response)?;
    if prompt_ids.is_empty() {
        return Err(PolicyError::Input("empty prompt".into()));
    }
    if response_ids.is_empty() {
        return Err(PolicyError::Input("empty response".into()));
    }
    let max = model.config().max_position;
    if prompt_ids.len() + response_ids.len() > max {
        return Err(PolicyError::Input(format!(
            "prompt ({}) + response ({}) tokens exceed the context length {max}",
            prompt_ids.len(),
            response_ids.len()
        )));
    }
    let pad = 0;
    let mut lp = response_logprobs(model, &[(prompt_ids.clone(), response_ids.clone())], pad)?;
    Ok(ScoredText {
        prompt_ids,
        response_ids,
        response_logprobs: lp.remove(0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::LlamaConfig;
    use crate::ops::reference::log_softmax_last_dim;

    #[test]
    fn mask_alignment_logprobs_and_entropy() {
        let dev = Device::Cpu;
        let model = Llama::random(LlamaConfig::tiny(), DType::F64, &dev, 5).unwrap();
        let pairs = vec![
            (vec![3u32, 4, 5], vec![6u32, 7]),
            (vec![8u32], vec![9u32, 10, 11, 12]),
        ];
        let batch = ResponseBatch::new(&pairs, 0, 64, DType::F64, &dev).unwrap();
        assert_eq!(batch.input_ids.dims(), &[2, 5]);
        let mask = batch.response_mask.to_vec2::<f64>().unwrap();
        assert_eq!(
            mask,
            vec![vec![0.0, 0.0, 1.0, 1.0], vec![1.0, 1.0, 1.0, 1.0]]
        );

        let rows = response_logprobs(&model, &pairs, 0).unwrap();
        let scores = response_scores(&model, &batch).unwrap();
        let entropy = scores.entropy.to_vec2::<f64>().unwrap();
        for (b, (p, r)) in pairs.iter().enumerate() {
            let seq: Vec<u32> = p.iter().chain(r.iter()).cloned().collect();
            let ids = Tensor::new(seq.as_slice(), &dev)
                .unwrap()
                .unsqueeze(0)
                .unwrap();
            let logp = log_softmax_last_dim(&model.forward(&ids).unwrap())
                .unwrap()
                .get(0)
                .unwrap();
            for (j, &tok) in r.iter().enumerate() {
                let pos = p.len() + j - 1;
                let want = logp
                    .get(pos)
                    .unwrap()
                    .get(tok as usize)
                    .unwrap()
                    .to_scalar::<f64>()
                    .unwrap();
                assert!((rows[b][j] as f64 - want).abs() < 1e-5, "row {b} token {j}");
                let lp = logp.get(pos).unwrap().to_vec1::<f64>().unwrap();
                let h: f64 = -lp.iter().map(|l| l.exp() * l).sum::<f64>();
                assert!(
                    (entropy[b][pos] - h).abs() < 1e-9,
                    "entropy row {b} pos {pos}"
                );
            }
        }
        let reply = reply_token_scores(&model, &batch).unwrap();
        let (flat_lp, flat_h) = (
            reply.logprobs.flatten_all().unwrap().to_vec1::<f64>().unwrap(),
            reply.entropy.flatten_all().unwrap().to_vec1::<f64>().unwrap(),
        );
        let all_lp = scores.logprobs.to_vec2::<f64>().unwrap();
        let mut at = 0;
        for (b, (p, r)) in pairs.iter().enumerate() {
            for j in 0..r.len() {
                let pos = p.len() + j - 1;
                assert!((flat_lp[at] - all_lp[b][pos]).abs() < 1e-12, "reply token {at}");
                assert!((flat_h[at] - entropy[b][pos]).abs() < 1e-12, "reply entropy {at}");
                at += 1;
            }
        }
        assert_eq!(at, flat_lp.len());
        // The same gradient as the masked all-position scores.
        let grads_of = |loss: Tensor| {
            let store = loss.backward().unwrap();
            model
                .named_vars()
                .iter()
                .map(|(_, v)| store.get(v).unwrap().flatten_all().unwrap().to_vec1::<f64>().unwrap())
                .collect::<Vec<_>>()
        };
        let reply_grads = grads_of(reply.logprobs.sum_all().unwrap());
        let masked = (&scores.logprobs * &batch.response_mask).unwrap().sum_all().unwrap();
        for (a, b) in reply_grads.iter().zip(grads_of(masked)) {
            for (x, y) in a.iter().zip(&b) {
                assert!((x - y).abs() < 1e-10, "gradient {x} vs {y}");
            }
        }
        assert!(ResponseBatch::new(&[(vec![1], vec![])], 0, 64, DType::F32, &dev).is_err());
        assert!(ResponseBatch::new(&[(vec![1; 60], vec![2; 5])], 0, 64, DType::F32, &dev).is_err());
    }

    /// Replies drawn at temperature 0.7 (`sample::pick`, token by token) and scored by
    /// [`reply_token_scores`] at the same temperature give the log-probs the sampler recorded;
    /// at temperature 1 they do not (the gap the RL metrics report). Bad temperatures are errors.
    #[test]
    fn replies_are_scored_at_the_temperature_they_were_sampled_at() {
        use crate::sample::{pick, SampleOptions};
        use rand::SeedableRng;
        let dev = Device::Cpu;
        let model = Llama::random(LlamaConfig::tiny(), DType::F32, &dev, 11).unwrap();
        let opts = SampleOptions { temperature: 0.7, top_k: 0, top_p: 1.0, ..SampleOptions::default() };
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
        let prompt = vec![3u32, 4, 5, 6];
        let (mut seq, mut sampled) = (prompt.clone(), Vec::new());
        for _ in 0..12 {
            let ids = Tensor::new(seq.as_slice(), &dev).unwrap().unsqueeze(0).unwrap();
            let logits = model.forward(&ids).unwrap().get(0).unwrap().get(seq.len() - 1).unwrap();
            let (token, lp) = pick(&logits.to_vec1::<f32>().unwrap(), &opts, &mut rng);
            seq.push(token);
            sampled.push(lp);
        }
        let pairs = vec![(prompt.clone(), seq[prompt.len()..].to_vec())];
        let at_t = response_logprobs_at(&model, &pairs, 0, 0.7).unwrap();
        let gap = |scored: &[f32]| scored.iter().zip(&sampled).map(|(&a, &b)| (a as f64 - b).abs()).fold(0.0, f64::max);
        assert!(gap(&at_t[0]) < 1e-5, "at the sampling temperature: {}", gap(&at_t[0]));
        assert!(gap(&response_logprobs(&model, &pairs, 0).unwrap()[0]) > 1e-3, "at temperature 1 the scores differ");
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            let err = ResponseBatch::new(&pairs, 0, 64, DType::F32, &dev).unwrap().at_temperature(bad).unwrap_err();
            assert!(err.to_string().contains("temperature"), "{err}");
        }
    }
}
