//! Supervised fine-tuning on cold-start samples: loss on response tokens only (the prompt
//! goes through the chat template, the response is followed by the end-of-turn token, so
//! the model learns to stop), AdamW, linear warmup then cosine decay to 0, epochs of seeded
//! shuffles, micro-batches with gradient accumulation (each optimizer step's loss is the
//! token-level mean over all its micro-batches), periodic loss lines, checkpoints in the
//! policy crate's formats, exact resume, and a final evaluation.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::time::Instant;

use candle_core::{DType, Tensor};
use policy::chat::{apply_chatml, ChatMessage, IM_END};
use policy::logprobs::{token_scores_of_hidden, ResponseBatch};
use policy::optim::Accumulator;
use policy::{AdamW, AdamWConfig, Llama, LoraAdapters, Tokenizer};
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use crate::coldstart::SftSample;
use crate::collector::mix;
use crate::seeds;
use crate::checkpoints::{load_model, save_checkpoint, read_state, SFT_STATE_FILE};
use crate::config::{learning_rate, RunConfig, SftSection, SCRATCH_MODEL};
use crate::error::{Result, TrainerError};
use crate::eval::{eval_tasks, evaluate, Summary};
use crate::policies::ModelPolicy;
use crate::rundir::RunDir;


/// Reads `{"prompt", "response"}` lines; a bad line is an error naming the file and line.
pub fn read_samples(path: &Path) -> Result<Vec<SftSample>> {
    let file = std::fs::File::open(path).map_err(|e| TrainerError::io(path, e))?;
    let mut samples = Vec::new();
    for (i, line) in BufReader::new(file).split(b'\n').enumerate() {
        let line = line.map_err(|e| TrainerError::io(path, e))?;
        let bad = |message: String| TrainerError::Line {
            path: path.to_path_buf(),
            line: i + 1,
            message,
        };
        let text =
            std::str::from_utf8(&line).map_err(|_| bad("the line is not valid UTF-8".into()))?;
        if text.trim().is_empty() {
            continue;
        }
        let sample: SftSample = serde_json::from_str(text)
            .map_err(|e| bad(format!("expected {{\"prompt\", \"response\"}}: {e}")))?;
        if sample.response.is_empty() {
            return Err(bad("empty response".into()));
        }
        samples.push(sample);
    }
    if samples.is_empty() {
        return Err(TrainerError::Invalid(format!(
            "{}: no samples",
            path.display()
        )));
    }
    Ok(samples)
}

/// The model an SFT run starts from: `model.path` loaded (with a fresh seeded LoRA adapter
/// when `sft.lora_rank` > 0; a resumed run reads the adapter's weights back in
/// [`train`]), or for `scratch` a BPE tokenizer trained on the samples' chat texts and a
/// seeded random model of the `[scratch]` shape. Resuming a scratch run reads the tokenizer
/// back from the checkpoint.
pub fn initial_model(
    config: &RunConfig,
    samples: &[SftSample],
    resume: Option<&Path>,
) -> Result<(Llama, Tokenizer)> {
    let device = config.model.device()?;
    if config.model.path != SCRATCH_MODEL {
        let (mut model, tokenizer) = load_model(&config.model.path, &device)?;
        if let Some(lora) = config.sft.lora_config()? {
            let adapters = LoraAdapters::new(model.config(), lora, model.dtype(), model.device(), mix(config.run.seed, seeds::SFT_LORA))?;
            model.attach_lora(adapters)?;
        }
        return Ok((model, tokenizer));
    }
    if let Some(checkpoint) = resume {
        return load_model(&checkpoint.display().to_string(), &device);
    }
    let texts: Vec<String> = samples.iter().map(chat_text).collect();
    Ok(policy::scratch::create(
        &config.scratch,
        texts.iter().map(String::as_str),
        config.run.seed,
        &device,
    )?)
}

/// A sample as the model reads it: the templated prompt, the reply, the end-of-turn token.
fn chat_text(sample: &SftSample) -> String {
    let mut text = apply_chatml(&[ChatMessage::user(&sample.prompt)], true);
    text.push_str(&sample.response);
    text.push_str(IM_END);
    text
}

/// A tokenized sample: the chat prompt's ids and the response's ids (end-of-turn appended).
#[derive(Debug, Clone, PartialEq)]
pub struct Tokenized {
    pub prompt: Vec<u32>,
    pub response: Vec<u32>,
}

/// Tokenizes samples; those longer than `max_len` tokens are left out (returned as a count).
pub fn tokenize(
    samples: &[SftSample],
    tokenizer: &Tokenizer,
    max_len: usize,
) -> Result<(Vec<Tokenized>, usize)> {
    let end = tokenizer
        .token_to_id(IM_END)
        .ok_or_else(|| TrainerError::Invalid(format!("the tokenizer has no {IM_END} token")))?;
    let mut kept = Vec::with_capacity(samples.len());
    let mut skipped = 0;
    for s in samples {
        let prompt = tokenizer.encode(&apply_chatml(&[ChatMessage::user(&s.prompt)], true))?;
        let mut response = tokenizer.encode(&s.response)?;
        response.push(end);
        if prompt.len() + response.len() > max_len {
            skipped += 1;
        } else {
            kept.push(Tokenized { prompt, response });
        }
    }
    Ok((kept, skipped))
}

/// The token that pads training batches: `<|endoftext|>`, else id 0.
pub fn pad_id(tokenizer: &Tokenizer) -> u32 {
    tokenizer.token_to_id("<|endoftext|>").unwrap_or(0)
}

/// Samples sorted together by length, in windows of this many micro-batches: rows of a
/// micro-batch are padded to its longest, and attention costs the square of that.
const LENGTH_WINDOW_BATCHES: usize = 16;

/// The optimizer steps of the whole run: per step, its micro-batches of sample indices.
/// Epoch `e` shuffles the samples with a seed derived from `seed` and `e`, sorts each window
/// of [`LENGTH_WINDOW_BATCHES`] micro-batches by length (`lengths[i]`: sample i's tokens) so
/// that micro-batches hold rows of similar length, and shuffles the micro-batches again.
pub fn plan(lengths: &[usize], cfg: &SftSection, seed: u64) -> Vec<Vec<Vec<usize>>> {
    let mut steps = Vec::new();
    for epoch in 0..cfg.epochs {
        let mut rng = ChaCha8Rng::seed_from_u64(mix(seed, epoch as u64));
        let mut order: Vec<usize> = (0..lengths.len()).collect();
        order.shuffle(&mut rng);
        for window in order.chunks_mut(cfg.batch_size * LENGTH_WINDOW_BATCHES) {
            window.sort_by_key(|&i| lengths[i]);
        }
        let mut micro: Vec<Vec<usize>> = order
            .chunks(cfg.batch_size)
            .map(<[usize]>::to_vec)
            .collect();
        micro.shuffle(&mut rng);
        steps.extend(micro.chunks(cfg.grad_accum).map(<[Vec<usize>]>::to_vec));
    }
    steps
}

/// Where a checkpoint left off.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct TrainerState {
    /// Optimizer steps done.
    step: usize,
    total_steps: usize,
}

/// One logged line of `metrics.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LogLine {
    pub step: usize,
    pub epoch: f64,
    /// Mean loss per response token over the steps since the last line.
    pub loss: f64,
    pub lr: f64,
    /// Gradient norm of the last step, before clipping.
    pub grad_norm: f64,
    pub tokens: usize,
    pub elapsed_s: f64,
}

/// What a training run did.
#[derive(Debug, Clone)]
pub struct SftReport {
    pub samples: usize,
    pub skipped: usize,
    pub steps: usize,
    pub log: Vec<LogLine>,
    pub final_dir: PathBuf,
}

/// `[rows, seq - 1]`: 1 where the target token is part of row i's prompt (its first token,
/// which nothing predicts, excepted).
fn prompt_mask(batch: &ResponseBatch, model: &Llama) -> Result<Tensor> {
    let (rows, seq) = batch.input_ids.dims2()?;
    let mut mask = Vec::with_capacity(rows * (seq - 1));
    for &prompt in &batch.prompt_lens {
        mask.extend((1..seq).map(|target| if target < prompt { 1f32 } else { 0f32 }));
    }
    Ok(Tensor::from_vec(mask, (rows, seq - 1), model.device())?.to_dtype(model.dtype())?)
}

/// One optimizer step: forward and backward per micro-batch, clip, AdamW. The step's loss
/// is the sum of the response tokens' negative log-likelihoods (plus `sft.prompt_loss_weight` times
/// the prompt tokens') over the step's response tokens, so micro-batches add up to the
/// full-batch loss. Returns (response loss, grad norm, response tokens).
fn train_step(
    model: &Llama,
    opt: &mut AdamW,
    data: &[Tokenized],
    micro_batches: &[Vec<usize>],
    pad: u32,
    cfg: &SftSection,
) -> Result<(f64, f64, usize)> {
    let (prompt_weight, recompute) = (cfg.prompt_loss_weight, cfg.gradient_checkpointing);
    let tokens: usize = micro_batches
        .iter()
        .flatten()
        .map(|&i| data[i].response.len())
        .sum();
    let mut acc = Accumulator::new(&opt.vars());
    let mut loss_sum = 0.0;
    for micro in micro_batches {
        let pairs: Vec<(Vec<u32>, Vec<u32>)> = micro
            .iter()
            .map(|&i| (data[i].prompt.clone(), data[i].response.clone()))
            .collect();
        let batch = ResponseBatch::new(
            &pairs,
            pad,
            model.config().max_position,
            model.dtype(),
            model.device(),
        )?;
        let prompt = match prompt_weight > 0.0 {
            true => Some(prompt_mask(&batch, model)?),
            false => None,
        };
        let mut response_loss = 0.0;
        let (_, grads) = model.backward_from_hidden(&batch.input_ids, recompute, |hidden| {
            let nll = token_scores_of_hidden(model, &batch.input_ids, hidden)?.logprobs.neg()?;
            let response = ((&nll * &batch.response_mask)?.sum_all()? / tokens as f64)?;
            response_loss = response.to_dtype(DType::F64)?.to_scalar::<f64>()?;
            Ok(match &prompt {
                Some(mask) => (response + ((&nll * mask)?.sum_all()? * (prompt_weight / tokens as f64))?)?,
                None => response,
            })
        })?;
        loss_sum += response_loss;
        acc.add(grads)?;
    }
    let mut grads = acc.take();
    let grad_norm = if cfg.max_grad_norm > 0.0 {
        opt.clip_grad_norm(&mut grads, cfg.max_grad_norm)?
    } else {
        opt.grad_norm(&grads)?
    };
    opt.step(&grads)?;
    Ok((loss_sum, grad_norm, tokens))
}

/// Trains `model` on `samples` under `config.sft`, writing `metrics.jsonl`, checkpoints and
/// `final/` into `dir`. `resume`: a checkpoint folder this run wrote earlier.
pub fn train(
    config: &RunConfig,
    model: &Llama,
    tokenizer: &Tokenizer,
    samples: &[SftSample],
    dir: &RunDir,
    resume: Option<&Path>,
) -> Result<SftReport> {
    let cfg = &config.sft;
    let max_len = cfg.max_seq_len.min(model.config().max_position);
    let (data, skipped) = tokenize(samples, tokenizer, max_len)?;
    if data.is_empty() {
        return Err(TrainerError::value(
            "sft.max_seq_len",
            format!("every sample is longer than {max_len} tokens"),
        ));
    }
    let lengths: Vec<usize> = data
        .iter()
        .map(|t| t.prompt.len() + t.response.len())
        .collect();
    let steps = plan(&lengths, cfg, config.run.seed);
    let warmup = (cfg.warmup_ratio * steps.len() as f64).ceil() as usize;
    let adam = AdamWConfig {
        lr: cfg.lr,
        weight_decay: cfg.weight_decay,
        ..AdamWConfig::default()
    };
    let mut opt = AdamW::for_model(model, adam)?;
    let mut start = 0;
    if let Some(checkpoint) = resume {
        policy::checkpoint::load_training_state(model, &mut opt, checkpoint)?;
        let path = checkpoint.join(SFT_STATE_FILE);
        let state: TrainerState = read_state(&path)?;
        if state.total_steps != steps.len() {
            return Err(TrainerError::Invalid(format!(
                "{}: the checkpoint is of a run with {} steps, this config makes {}",
                path.display(),
                state.total_steps,
                steps.len()
            )));
        }
        start = state.step;
    }
    let pad = pad_id(tokenizer);
    let steps_per_epoch = steps.len() as f64 / cfg.epochs as f64;
    let started = Instant::now();
    let mut log = Vec::new();
    let mut window = (0.0, 0usize, 0usize);
    let mut log_lines = Vec::new();
    for (step, micro_batches) in steps.iter().enumerate().skip(start) {
        let lr = learning_rate(step, steps.len(), warmup, cfg.lr);
        opt.set_lr(lr);
        let (loss, grad_norm, tokens) = train_step(
            model,
            &mut opt,
            &data,
            micro_batches,
            pad,
            cfg,
        )?;
        if !loss.is_finite() {
            return Err(TrainerError::Invalid(format!(
                "the loss became {loss} at step {}",
                step + 1
            )));
        }
        window = (
            window.0 + loss * tokens as f64,
            window.1 + tokens,
            window.2 + 1,
        );
        let done = step + 1;
        if done % cfg.log_every == 0 || done == steps.len() {
            let line = LogLine {
                step: done,
                epoch: done as f64 / steps_per_epoch,
                loss: window.0 / window.1.max(1) as f64,
                lr,
                grad_norm,
                tokens: window.1,
                elapsed_s: started.elapsed().as_secs_f64(),
            };
            eprintln!(
                "step {}/{} epoch {:.2} loss {:.4} lr {:.2e} grad_norm {:.3}",
                line.step,
                steps.len(),
                line.epoch,
                line.loss,
                line.lr,
                line.grad_norm
            );
            log_lines.push(line.clone());
            dir.write_jsonl("metrics.jsonl", &log_lines)?;
            log.push(line);
            window = (0.0, 0, 0);
        }
        if cfg.save_every > 0 && done % cfg.save_every == 0 && done < steps.len() {
            let state = TrainerState {
                step: done,
                total_steps: steps.len(),
            };
            let path = dir.file(&format!("checkpoints/step-{done}"));
            save_checkpoint(&path, config, model, tokenizer, Some((&opt, SFT_STATE_FILE, &state)))?;
        }
    }
    let final_dir = dir.file("final");
    save_checkpoint::<()>(&final_dir, config, model, tokenizer, None)?;
    Ok(SftReport {
        samples: data.len(),
        skipped,
        steps: steps.len(),
        log,
        final_dir,
    })
}

/// `rlvmr sft`: trains `model.path` on `sft.data`; writes config.toml, metrics.jsonl,
/// checkpoints/ and final/, then (when `sft.eval_episodes` > 0) evaluates the final model
/// on that many test episodes into `eval/`.
pub fn run(
    config: &RunConfig,
    out: &Path,
    resume: Option<&Path>,
) -> Result<(SftReport, Option<Summary>)> {
    config.validate_for_training("rlvmr sft")?;
    let samples = read_samples(&config.sft.data)?;
    let provider = config.open_env()?;
    let (model, tokenizer) = initial_model(config, &samples, resume)?;
    let dir = RunDir::create(out, config)?;
    let report = train(config, &model, &tokenizer, &samples, &dir, resume)?;
    if config.sft.eval_episodes == 0 {
        return Ok((report, None));
    }
    let name = report.final_dir.display().to_string();
    let mut policy = ModelPolicy::new(
        name,
        model,
        tokenizer,
        config.model_options(config.eval.temperature),
    )?;
    let eval_dir = RunDir::create(&dir.file("eval"), config)?;
    let tasks = eval_tasks(
        provider.as_ref(),
        Some(config.sft.eval_episodes),
        config.eval_draw_seed(),
    );
    let mut evaluation = evaluate(
        provider.as_ref(),
        &mut policy,
        &tasks,
        &config.env.split,
        &config.collector_options(),
        config.run.seed,
    )?;
    evaluation.summary.protocol = Some(config.env.protocol);
    eval_dir.write_jsonl("trajectories.jsonl", &evaluation.episodes)?;
    eval_dir.write_json("summary.json", &evaluation.summary)?;
    Ok((report, Some(evaluation.summary)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warmup_then_cosine() {
        let peak = 1e-5;
        assert_eq!(learning_rate(0, 100, 10, peak), peak / 10.0);
        assert_eq!(learning_rate(9, 100, 10, peak), peak);
        assert_eq!(learning_rate(10, 100, 10, peak), peak);
        assert!(
            (learning_rate(55, 100, 10, peak) - peak / 2.0).abs() < 1e-12,
            "half way down at the middle of the decay"
        );
        assert!(learning_rate(99, 100, 10, peak) < peak * 0.01);
        assert_eq!(learning_rate(0, 1, 0, peak), peak);
    }

    #[test]
    fn the_plan_covers_every_sample_each_epoch() {
        let cfg = SftSection {
            epochs: 2,
            batch_size: 3,
            grad_accum: 2,
            ..SftSection::default()
        };
        let lengths: Vec<usize> = (0..10).map(|i| (i * 7) % 10).collect();
        let steps = plan(&lengths, &cfg, 4);
        // 10 samples -> 4 micro-batches -> 2 optimizer steps per epoch.
        assert_eq!(steps.len(), 4);
        for epoch in steps.chunks(2) {
            let mut seen: Vec<usize> = epoch.iter().flatten().flatten().copied().collect();
            seen.sort();
            assert_eq!(seen, (0..10).collect::<Vec<_>>());
        }
        assert_ne!(steps[0], steps[2], "each epoch reshuffles");
        assert_eq!(plan(&lengths, &cfg, 4), steps);
        // Within a window, a micro-batch holds neighbours in length.
        for micro in steps.iter().flatten() {
            let lens: Vec<usize> = micro.iter().map(|&i| lengths[i]).collect();
            let spread = lens.iter().max().unwrap() - lens.iter().min().unwrap();
            assert!(spread <= 4, "{lens:?}");
        }
    }

    #[test]
    fn bad_sample_files_name_the_line() {
        let dir = std::env::temp_dir().join(format!("trainer-sft-read-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("sft.jsonl");
        std::fs::write(
            &path,
            "{\"prompt\": \"p\", \"response\": \"r\"}\n\n{\"prompt\": \"p\"}\n",
        )
        .unwrap();
        let err = read_samples(&path).unwrap_err().to_string();
        assert!(
            err.contains("sft.jsonl") && err.contains("line 3") && err.contains("response"),
            "{err}"
        );
        std::fs::write(
            &path,
            b"{\"prompt\": \"p\", \"response\": \"r\"}\n\xff\xfe\n",
        )
        .unwrap();
        let err = read_samples(&path).unwrap_err().to_string();
        assert!(err.contains("line 2") && err.contains("UTF-8"), "{err}");
        std::fs::write(
            &path,
            "{\"prompt\": \"p\", \"response\": \"r\", \"extra\": 1}\n",
        )
        .unwrap();
        assert!(read_samples(&path)
            .unwrap_err()
            .to_string()
            .contains("extra"));
        std::fs::write(&path, "\n").unwrap();
        assert!(read_samples(&path)
            .unwrap_err()
            .to_string()
            .contains("no samples"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
