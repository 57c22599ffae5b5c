//! Sampling for rollouts.
//!
//! [`sample_batch`] is the fast path: a batch of prompts of different lengths, left-padded, one
//! prefill then one token per step with a KV cache ([`Llama::prefill`] / [`Llama::decode_step`]);
//! rows that finish are dropped from the batch so they cost nothing. [`sample`] is the slow,
//! simple baseline without a cache (each step re-runs the whole sequence); it draws exactly the
//! same tokens for the same options (up to float rounding in the logits).
//!
//! Options: temperature (0 = greedy), top-k (0 = off), top-p (1 = off), a seed (ChaCha8; row `i`
//! of a batch uses stream `i` of that seed, so a row's draws do not depend on the other rows),
//! stop token ids, stop strings and a maximum number of new tokens.
//!
//! Stop rules, checked after each token in this order:
//! - a stop token id: generation ends; the token is kept in `ids` (and its log-prob in
//!   `logprobs`) but, being special, it does not appear in `text`;
//! - a stop string: checked on the decoded text of the generated tokens (special tokens
//!   skipped); generation ends and `text` is cut just before the earliest occurrence of a stop
//!   string (the stop string itself and anything after it are removed). `ids`/`logprobs` keep
//!   every generated token, including the one(s) that completed the stop string;
//! - `max_new_tokens` reached, or the context length is full.

use crate::error::{PolicyError, Result};
use crate::model::{InferenceModel, Llama};
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
    /// Keep only the `top_k` most likely tokens (0: no limit).
    pub top_k: usize,
    /// Nucleus sampling: keep the smallest set of most likely tokens whose probability (after
    /// temperature and top-k) reaches `top_p` (1: no limit). At least one token is kept.
    pub top_p: f64,
    pub seed: u64,
    /// Generation stops after emitting one of these (it is kept in the output ids).
    pub stop_ids: Vec<u32>,
    /// Generation stops when the decoded text contains one of these; the text is cut before it.
    pub stop_strings: Vec<String>,
    /// One seed per prompt: row `i` draws from its own generator seeded with `row_seeds[i]`
    /// (so a rollout keeps its stream whatever batch it lands in). Empty: row `i` uses
    /// stream `i` of `seed`.
    pub row_seeds: Vec<u64>,
}

impl Default for SampleOptions {
    fn default() -> Self {
        Self {
            max_new_tokens: 128,
            temperature: 0.0,
            top_k: 0,
            top_p: 1.0,
            seed: 0,
            stop_ids: Vec::new(),
            stop_strings: Vec::new(),
            row_seeds: Vec::new(),
        }
    }
}

impl SampleOptions {
    /// Stop on `<|im_end|>` and `<|endoftext|>` when the tokenizer has them.
    pub fn chat_defaults(tok: &Tokenizer) -> Self {
        let stop_ids = ["<|im_end|>", "<|endoftext|>"]
            .iter()
            .filter_map(|t| tok.token_to_id(t))
            .collect();
        Self {
            stop_ids,
            ..Self::default()
        }
    }

    fn validate(&self) -> Result<()> {
        if !(self.temperature >= 0.0 && self.temperature.is_finite()) {
            return Err(PolicyError::Input(format!(
                "temperature must be >= 0, got {}",
                self.temperature
            )));
        }
        if !(self.top_p > 0.0 && self.top_p <= 1.0) {
            return Err(PolicyError::Input(format!(
                "top_p must be in (0, 1], got {}",
                self.top_p
            )));
        }
        if self.stop_strings.iter().any(String::is_empty) {
            return Err(PolicyError::Input("empty stop string".into()));
        }
        Ok(())
    }
}

/// Why generation of a row ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// A token of `stop_ids` was emitted.
    StopToken,
    /// The text contains one of `stop_strings`.
    StopString,
    /// `max_new_tokens` reached.
    MaxTokens,
    /// The context length is full.
    ContextFull,
}

/// A sampled continuation.
#[derive(Debug, Clone)]
pub struct Sampled {
    pub ids: Vec<u32>,
    /// Log-prob of each sampled token under the distribution it was actually drawn from: the
    /// temperature-scaled, top-k/top-p truncated and renormalised one. Greedy (temperature 0):
    /// the log-prob under the model's own distribution (temperature 1, no truncation).
    pub logprobs: Vec<f32>,
    /// Decoded `ids`, special tokens skipped, cut before a stop string.
    pub text: String,
    pub stop_reason: StopReason,
}

impl Sampled {
    /// True when a stop token or stop string ended generation.
    pub fn stopped(&self) -> bool {
        matches!(
            self.stop_reason,
            StopReason::StopToken | StopReason::StopString
        )
    }
}

/// One row's generation state.
struct Row {
    ids: Vec<u32>,
    logprobs: Vec<f32>,
    rng: ChaCha8Rng,
    done: Option<(StopReason, String)>,
}

impl Row {
    fn new(seed: u64, stream: u64) -> Self {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        rng.set_stream(stream);
        Self {
            ids: Vec::new(),
            logprobs: Vec::new(),
            rng,
            done: None,
        }
    }

    /// Draw the next token from `logits`, record it and check the stop rules (`len` = the
    /// sequence length after this token).
    fn step(
        &mut self,
        logits: &[f32],
        opts: &SampleOptions,
        tok: &Tokenizer,
        len: usize,
        max_len: usize,
    ) -> Result<u32> {
        let (next, lp) = pick(logits, opts, &mut self.rng);
        self.ids.push(next);
        self.logprobs.push(lp as f32);
        if opts.stop_ids.contains(&next) {
            self.done = Some((StopReason::StopToken, String::new()));
        } else if !opts.stop_strings.is_empty() {
            let text = tok.decode(&self.ids, true)?;
            let cut = opts
                .stop_strings
                .iter()
                .filter_map(|s| text.find(s.as_str()))
                .min();
            if let Some(at) = cut {
                self.done = Some((StopReason::StopString, text[..at].to_string()));
            }
        }
        if self.done.is_none() {
            if self.ids.len() >= opts.max_new_tokens {
                self.done = Some((StopReason::MaxTokens, String::new()));
            } else if len >= max_len {
                self.done = Some((StopReason::ContextFull, String::new()));
            }
        }
        Ok(next)
    }

    fn finish(self, tok: &Tokenizer) -> Result<Sampled> {
        let (reason, text) = self.done.unwrap_or((StopReason::MaxTokens, String::new()));
        let text = if reason == StopReason::StopString {
            text
        } else {
            tok.decode(&self.ids, true)?
        };
        Ok(Sampled {
            ids: self.ids,
            logprobs: self.logprobs,
            text,
            stop_reason: reason,
        })
    }
}

/// Each active row (`active[slot]`, at `positions[slot]`) draws its next token from its
/// logits `table[slot]`, the rows side by side: a row draws from its own generator, so the
/// threads change no draw. (With 128 rows of a 49k vocabulary, one thread spent as long in
/// the draws as the GPU in the decode step.)
fn step_rows(
    rows: &mut [Row],
    active: &[usize],
    table: &[Vec<f32>],
    positions: &[usize],
    opts: &SampleOptions,
    tok: &Tokenizer,
    max_len: usize,
) -> Result<Vec<u32>> {
    use rayon::prelude::*;
    let mut slots: Vec<Option<&mut Row>> = rows.iter_mut().map(Some).collect();
    let ordered: Vec<&mut Row> = active
        .iter()
        .map(|&r| slots[r].take().expect("a row is active in one slot"))
        .collect();
    ordered
        .into_par_iter()
        .zip(table.par_iter().zip(positions.par_iter()))
        .map(|(row, (logits, &position))| row.step(logits, opts, tok, position + 1, max_len))
        .collect()
}

fn check_prompts(max_len: usize, prompts: &[Vec<u32>]) -> Result<()> {
    for (i, p) in prompts.iter().enumerate() {
        if p.is_empty() {
            return Err(PolicyError::Input(format!("row {i}: empty prompt")));
        }
        if p.len() >= max_len {
            return Err(PolicyError::Input(format!(
                "row {i}: prompt of {} tokens leaves no room in the context length {max_len}",
                p.len()
            )));
        }
    }
    Ok(())
}

/// Sample a continuation of every prompt, with a KV cache, all rows in one batch. Row `i` uses
/// stream `i` of the seed.
pub fn sample_batch(
    model: &Llama,
    tok: &Tokenizer,
    prompts: &[Vec<u32>],
    opts: &SampleOptions,
) -> Result<Vec<Sampled>> {
    sample_batch_with(&model.inference()?, tok, prompts, opts)
}

/// [`sample_batch`] on a given inference model, e.g. a quantized copy ([`Llama::quantized`]).
/// With a quantized copy the log-probs are those of the quantized model.
pub fn sample_batch_with(
    model: &InferenceModel,
    tok: &Tokenizer,
    prompts: &[Vec<u32>],
    opts: &SampleOptions,
) -> Result<Vec<Sampled>> {
    opts.validate()?;
    if prompts.is_empty() {
        return Ok(Vec::new());
    }
    check_prompts(model.config().max_position, prompts)?;
    let max_len = model.config().max_position;
    if !opts.row_seeds.is_empty() && opts.row_seeds.len() != prompts.len() {
        return Err(PolicyError::Input(format!(
            "{} row seeds for {} prompts",
            opts.row_seeds.len(),
            prompts.len()
        )));
    }
    let mut rows: Vec<Row> = (0..prompts.len())
        .map(|i| match opts.row_seeds.get(i) {
            Some(&seed) => Row::new(seed, 0),
            None => Row::new(opts.seed, i as u64),
        })
        .collect();
    if opts.max_new_tokens == 0 {
        return rows
            .into_iter()
            .map(|mut r| {
                r.done = Some((StopReason::MaxTokens, String::new()));
                r.finish(tok)
            })
            .collect();
    }
    let (mut logits, mut cache) = model.prefill_reserving(prompts, opts.max_new_tokens)?;
    // `active[j]`: the row index of batch slot `j`.
    let mut active: Vec<usize> = (0..prompts.len()).collect();
    loop {
        let table: Vec<Vec<f32>> = logits.to_vec2()?;
        let mut next = step_rows(&mut rows, &active, &table, cache.positions(), opts, tok, max_len)?;
        let keep = crate::model::swap_remove_order(active.len(), |s| rows[active[s]].done.is_some());
        if keep.is_empty() {
            break;
        }
        if keep.len() < active.len() {
            cache.retain(&keep)?;
            active = keep.iter().map(|&s| active[s]).collect();
            next = keep.iter().map(|&s| next[s]).collect();
        }
        logits = model.decode_step(&next, &mut cache)?;
    }
    rows.into_iter().map(|r| r.finish(tok)).collect()
}

/// Sample one continuation with the KV cache (a batch of one).
pub fn sample_cached(
    model: &Llama,
    tok: &Tokenizer,
    prompt_ids: &[u32],
    opts: &SampleOptions,
) -> Result<Sampled> {
    let mut out = sample_batch(model, tok, &[prompt_ids.to_vec()], opts)?;
    Ok(out.remove(0))
}

/// Sample a continuation of `prompt_ids` WITHOUT a cache (the slow baseline; each step runs the
/// training forward on the whole sequence). Same draws as row 0 of [`sample_batch`].
pub fn sample(
    model: &Llama,
    tok: &Tokenizer,
    prompt_ids: &[u32],
    opts: &SampleOptions,
) -> Result<Sampled> {
    opts.validate()?;
    let prompts = [prompt_ids.to_vec()];
    check_prompts(model.config().max_position, &prompts)?;
    let max_len = model.config().max_position;
    let mut row = Row::new(opts.seed, 0);
    let mut seq = prompt_ids.to_vec();
    if opts.max_new_tokens == 0 {
        row.done = Some((StopReason::MaxTokens, String::new()));
    }
    while row.done.is_none() {
        let input = Tensor::new(seq.as_slice(), model.device())?.unsqueeze(0)?;
        let logits = model.forward(&input)?.get(0)?.get(seq.len() - 1)?;
        let logits: Vec<f32> = logits.to_dtype(DType::F32)?.to_vec1()?;
        let next = row.step(&logits, opts, tok, seq.len() + 1, max_len)?;
        seq.push(next);
    }
    row.finish(tok)
}

/// Draw a token from `logits` under the options; returns it and its log-prob under the
/// distribution drawn from (greedy: under the model's own distribution).
pub fn pick(logits: &[f32], opts: &SampleOptions, rng: &mut impl Rng) -> (u32, f64) {
    if opts.temperature == 0.0 {
        let m = logits
            .iter()
            .fold(f64::NEG_INFINITY, |a, &l| a.max(l as f64));
        let z: f64 = logits.iter().map(|&l| (l as f64 - m).exp()).sum();
        let idx = logits
            .iter()
            .enumerate()
            .fold(0, |best, (i, &l)| if l > logits[best] { i } else { best });
        return (idx as u32, logits[idx] as f64 - m - z.ln());
    }
    let t = opts.temperature;
    // Candidates sorted by decreasing logit (ties: lower id first).
    let mut cand: Vec<(u32, f64)> = logits
        .iter()
        .enumerate()
        .map(|(i, &l)| (i as u32, l as f64 / t))
        .collect();
    let by_logit = |a: &(u32, f64), b: &(u32, f64)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
    if opts.top_k > 0 && opts.top_k < cand.len() {
        cand.select_nth_unstable_by(opts.top_k - 1, by_logit);
        cand.truncate(opts.top_k);
    }
    if opts.top_p < 1.0 {
        // Sort only the head of the distribution when it already holds `top_p` of the mass
        // (exact: the nucleus is then inside it); otherwise sort everything.
        const HEAD: usize = 512;
        let m = cand.iter().fold(f64::NEG_INFINITY, |a, c| a.max(c.1));
        let z: f64 = cand.iter().map(|c| (c.1 - m).exp()).sum();
        if cand.len() > HEAD {
            cand.select_nth_unstable_by(HEAD - 1, by_logit);
            let head: f64 = cand[..HEAD].iter().map(|c| (c.1 - m).exp()).sum();
            if head / z >= opts.top_p {
                cand.truncate(HEAD);
                cand.sort_unstable_by(by_logit);
            } else {
                cand.sort_unstable_by(by_logit);
            }
        } else {
            cand.sort_unstable_by(by_logit);
        }
        let mut acc = 0.0;
        let mut keep = cand.len();
        for (i, c) in cand.iter().enumerate() {
            acc += (c.1 - m).exp() / z;
            if acc >= opts.top_p {
                keep = i + 1;
                break;
            }
        }
        cand.truncate(keep);
    } else if opts.top_k > 0 {
        cand.sort_unstable_by(by_logit);
    }
    let m = cand.iter().fold(f64::NEG_INFINITY, |a, c| a.max(c.1));
    let weights: Vec<f64> = cand.iter().map(|c| (c.1 - m).exp()).collect();
    let z: f64 = weights.iter().sum();
    let u: f64 = rng.gen::<f64>() * z;
    let mut acc = 0.0;
    let mut chosen = weights.len() - 1;
    for (i, w) in weights.iter().enumerate() {
        acc += w;
        if acc > u {
            chosen = i;
            break;
        }
    }
    (cand[chosen].0, (weights[chosen] / z).ln())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(temperature: f64, top_k: usize, top_p: f64) -> SampleOptions {
        SampleOptions {
            temperature,
            top_k,
            top_p,
            ..SampleOptions::default()
        }
    }

    #[test]
    fn greedy_and_seeded_sampling() {
        let mut rng = ChaCha8Rng::seed_from_u64(0);
        let (i, lp) = pick(&[0.0, 3.0, 1.0], &opts(0.0, 0, 1.0), &mut rng);
        assert_eq!(i, 1);
        assert!(lp < 0.0 && lp > -0.5);
        let draw = |seed| {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            (0..20)
                .map(|_| pick(&[0.0, 0.5, 1.0], &opts(1.0, 0, 1.0), &mut rng).0)
                .collect::<Vec<_>>()
        };
        assert_eq!(draw(3), draw(3));
        assert!(draw(3).iter().any(|&i| i != draw(3)[0]));
    }

    #[test]
    fn top_k_and_top_p_truncate() {
        let logits = [0.0f32, 2.0, 1.0, 1.5];
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        for _ in 0..50 {
            // top-k 1 is greedy, with log-prob 0 (a point mass).
            let (i, lp) = pick(&logits, &opts(1.0, 1, 1.0), &mut rng);
            assert_eq!((i, lp), (1, 0.0));
            // tiny top-p is greedy too.
            let (i, lp) = pick(&logits, &opts(0.7, 0, 1e-6), &mut rng);
            assert_eq!((i, lp), (1, 0.0));
            // top-k 2 draws only from the two best, log-probs renormalised over them.
            let (i, lp) = pick(&logits, &opts(1.0, 2, 1.0), &mut rng);
            assert!(i == 1 || i == 3);
            let z = (2.0f64).exp() + (1.5f64).exp();
            let want = (logits[i as usize] as f64).exp() / z;
            assert!((lp - want.ln()).abs() < 1e-9);
        }
        // top-p 0.99 over a distribution whose best token has p > 0.99 is greedy.
        let (i, _) = pick(&[0.0, 10.0, 0.0], &opts(1.0, 0, 0.99), &mut rng);
        assert_eq!(i, 1);
        // Full sampling, temperature 1: the log-prob is the model's.
        let (i, lp) = pick(&logits, &opts(1.0, 0, 1.0), &mut rng);
        let z: f64 = logits.iter().map(|&l| (l as f64).exp()).sum();
        assert!((lp - ((logits[i as usize] as f64).exp() / z).ln()).abs() < 1e-9);
    }
}
