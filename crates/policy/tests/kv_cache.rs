//! The inference path (KV cache, left-padded batches) agrees with the training forward, and the
//! cached sampler agrees with the no-cache baseline; every sampling option is exercised.

mod common;

use candle_core::{DType, Tensor};
use policy::chat::{apply_chatml, ChatMessage};
use policy::model::{Llama, LlamaConfig};
use policy::sample::{sample, sample_batch, sample_cached, SampleOptions, StopReason};

/// Relative max |diff| between two logit vectors.
fn rel_diff(a: &[f32], b: &[f32]) -> f32 {
    let d = a
        .iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0f32, f32::max);
    let s = b.iter().map(|y| y.abs()).fold(0f32, f32::max);
    d / s.max(1e-6)
}

/// Prefill each row's first `split[i]` tokens, decode the rest one token per step (rows of
/// different lengths: a row that has run out is dropped from the batch), and compare every
/// logit vector with the training forward on the row alone. Returns the worst relative diff.
fn check_cached_vs_full(model: &Llama, rows: &[Vec<u32>], split: &[usize]) -> f32 {
    let dev = model.device().clone();
    let full: Vec<Vec<Vec<f32>>> = rows
        .iter()
        .map(|r| {
            let input = Tensor::new(r.as_slice(), &dev)
                .unwrap()
                .unsqueeze(0)
                .unwrap();
            model
                .forward(&input)
                .unwrap()
                .squeeze(0)
                .unwrap()
                .to_dtype(DType::F32)
                .unwrap()
                .to_vec2()
                .unwrap()
        })
        .collect();
    let prompts: Vec<Vec<u32>> = rows
        .iter()
        .zip(split)
        .map(|(r, &s)| r[..s].to_vec())
        .collect();
    let (logits, mut cache) = model.prefill(&prompts).unwrap();
    let mut worst = 0f32;
    let mut active: Vec<usize> = (0..rows.len()).collect();
    let mut at: Vec<usize> = split.to_vec(); // next token index per row
    let mut logits: Vec<Vec<f32>> = logits.to_vec2().unwrap();
    loop {
        for (slot, &r) in active.iter().enumerate() {
            worst = worst.max(rel_diff(&logits[slot], &full[r][at[r] - 1]));
        }
        let keep: Vec<usize> = (0..active.len())
            .filter(|&s| at[active[s]] < rows[active[s]].len())
            .collect();
        if keep.is_empty() {
            break;
        }
        cache.retain(&keep).unwrap();
        active = keep.iter().map(|&s| active[s]).collect();
        let next: Vec<u32> = active.iter().map(|&r| rows[r][at[r]]).collect();
        for &r in &active {
            at[r] += 1;
        }
        logits = model
            .decode_step(&next, &mut cache)
            .unwrap()
            .to_vec2()
            .unwrap();
    }
    worst
}

#[test]
fn tiny_model_cache_matches_full_forward() {
    {
        let model = Llama::random(LlamaConfig::tiny(), DType::F32, &common::device(), 7).unwrap();
        let row = |n: usize, k: u32| (0..n as u32).map(|i| (i * 5 + k) % 37).collect::<Vec<_>>();
        // Batch 1.
        let d = check_cached_vs_full(&model, &[row(12, 1)], &[4]);
        assert!(d < 1e-4, "batch 1: {d}");
        // Batch 3, prompts of different lengths, continuations of different lengths (past
        // the cache's first buffers, which then grow).
        let rows = vec![row(9, 2), row(40, 3), row(14, 4)];
        let d = check_cached_vs_full(&model, &rows, &[3, 11, 1]);
        assert!(d < 1e-4, "batch 3: {d}");
    }
}

#[test]
fn smollm2_cache_and_sampler() {
    let path = policy::assets::default_model_path().expect("fetch the default model");
    let (model, tok) = policy::gguf::load(&path, DType::F32, &common::device()).unwrap();
    let chat = |q: &str| {
        tok.encode(&apply_chatml(&[ChatMessage::user(q)], true))
            .unwrap()
    };
    let p1 = chat("What is the capital of France?");
    let p2 = chat("hi");
    let p3 = tok
        .encode("The quick brown fox jumps over the lazy dog. Then")
        .unwrap();
    let cont = tok
        .encode(" the fox ran into the forest and was never seen again")
        .unwrap();
    let rows: Vec<Vec<u32>> = [&p1, &p2, &p3]
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let mut r = (*p).clone();
            r.extend_from_slice(&cont[..4 + 3 * i]);
            r
        })
        .collect();
    let split: Vec<usize> = [&p1, &p2, &p3].iter().map(|p| p.len()).collect();
    let d1 = check_cached_vs_full(&model, &rows[..1], &split[..1]);
    let d3 = check_cached_vs_full(&model, &rows, &split);
    eprintln!("cached vs full forward, relative max |diff|: batch 1 {d1:.2e}, batch 3 {d3:.2e}");
    assert!(d1 < 1e-3 && d3 < 1e-3, "batch 1 {d1}, batch 3 {d3}");

    // Greedy: cached == no-cache baseline, batched == single.
    let greedy = SampleOptions {
        max_new_tokens: 24,
        ..SampleOptions::chat_defaults(&tok)
    };
    let slow = sample(&model, &tok, &p1, &greedy).unwrap();
    let fast = sample_cached(&model, &tok, &p1, &greedy).unwrap();
    eprintln!("greedy: {:?} ({:?})", fast.text, fast.stop_reason);
    assert_eq!(slow.ids, fast.ids);
    assert_eq!(slow.text, fast.text);
    for (a, b) in slow.logprobs.iter().zip(&fast.logprobs) {
        assert!((a - b).abs() < 1e-3, "{a} vs {b}");
    }
    let prompts = vec![p1.clone(), p2.clone(), p3.clone()];
    let batch = sample_batch(&model, &tok, &prompts, &greedy).unwrap();
    assert_eq!(batch[0].ids, fast.ids);
    for (i, p) in prompts.iter().enumerate().skip(1) {
        let one = sample_cached(&model, &tok, p, &greedy).unwrap();
        assert_eq!(batch[i].ids, one.ids, "row {i}");
    }
    for s in &batch {
        assert!(s.ids.len() <= 24);
        assert!(s.logprobs.iter().all(|l| l.is_finite() && *l <= 0.0));
        if s.stop_reason == StopReason::StopToken {
            assert!(greedy.stop_ids.contains(s.ids.last().unwrap()));
        } else {
            assert_eq!(s.stop_reason, StopReason::MaxTokens);
            assert_eq!(s.ids.len(), 24);
        }
    }

    // top-k 1 and a tiny top-p are greedy, at any temperature; their log-probs are 0.
    for (k, p) in [(1, 1.0), (0, 1e-9)] {
        let o = SampleOptions {
            temperature: 1.3,
            top_k: k,
            top_p: p,
            seed: 5,
            ..greedy.clone()
        };
        let s = sample_batch(&model, &tok, &prompts, &o).unwrap();
        for (a, b) in s.iter().zip(&batch) {
            assert_eq!(a.ids, b.ids, "top_k {k} top_p {p}");
            assert!(a.logprobs.iter().all(|&l| l == 0.0));
        }
    }

    // Seeds reproduce; different seeds differ; the no-cache baseline draws the same tokens.
    let hot = |seed| SampleOptions {
        temperature: 1.0,
        top_k: 50,
        top_p: 0.95,
        seed,
        max_new_tokens: 16,
        ..SampleOptions::chat_defaults(&tok)
    };
    let a = sample_batch(&model, &tok, &prompts, &hot(11)).unwrap();
    let b = sample_batch(&model, &tok, &prompts, &hot(11)).unwrap();
    let c = sample_batch(&model, &tok, &prompts, &hot(12)).unwrap();
    let ids = |v: &[policy::sample::Sampled]| v.iter().map(|s| s.ids.clone()).collect::<Vec<_>>();
    assert_eq!(ids(&a), ids(&b));
    assert_ne!(ids(&a), ids(&c));
    let slow = sample(&model, &tok, &p1, &hot(11)).unwrap();
    assert_eq!(slow.ids, a[0].ids);
    for s in &a {
        assert!(s.logprobs.iter().all(|l| l.is_finite() && *l <= 0.0));
    }

    // Stop strings: the text is cut before the stop string; generation ends there.
    let full = sample_cached(
        &model,
        &tok,
        &p3,
        &SampleOptions {
            max_new_tokens: 20,
            ..SampleOptions::default()
        },
    )
    .unwrap();
    eprintln!("continuation: {:?}", full.text);
    // A stop string made of the 3rd..5th characters of the greedy text (not from its start).
    let chars: Vec<char> = full.text.chars().collect();
    assert!(chars.len() > 8, "{:?}", full.text);
    let stop: String = chars[3..6].iter().collect();
    let want_text = &full.text[..full.text.find(&stop).unwrap()];
    let cut = sample_cached(
        &model,
        &tok,
        &p3,
        &SampleOptions {
            max_new_tokens: 20,
            stop_strings: vec!["never matches".into(), stop.clone()],
            ..SampleOptions::default()
        },
    )
    .unwrap();
    assert_eq!(cut.stop_reason, StopReason::StopString);
    assert_eq!(cut.text, want_text);
    assert!(!cut.text.contains(&stop));
    assert!(cut.ids.len() < full.ids.len());
    assert_eq!(cut.ids[..], full.ids[..cut.ids.len()]);

    // Stop token: the first greedy token of row 3 made a stop id ends it after one token.
    let first = full.ids[0];
    let one = sample_cached(
        &model,
        &tok,
        &p3,
        &SampleOptions {
            max_new_tokens: 20,
            stop_ids: vec![first],
            ..SampleOptions::default()
        },
    )
    .unwrap();
    assert_eq!(one.ids, vec![first]);
    assert_eq!(one.stop_reason, StopReason::StopToken);

    // max_new_tokens.
    let short = sample_batch(
        &model,
        &tok,
        &prompts,
        &SampleOptions {
            max_new_tokens: 3,
            ..SampleOptions::default()
        },
    )
    .unwrap();
    assert!(short
        .iter()
        .all(|s| s.ids.len() == 3 && s.stop_reason == StopReason::MaxTokens));
}

#[test]
fn smollm2_q8_sampling_copy() {
    use candle_core::quantized::GgmlDType;
    use policy::sample::sample_batch_with;
    let path = policy::assets::default_model_path().expect("fetch the default model");
    let (model, tok) = policy::gguf::load(&path, DType::F32, &common::device()).unwrap();
    let q8 = model.quantized(GgmlDType::Q8_0).unwrap();
    let dense = model.inference().unwrap();
    let chat = |q: &str| {
        tok.encode(&apply_chatml(&[ChatMessage::user(q)], true))
            .unwrap()
    };
    let prompts = vec![chat("What is the capital of France?"), chat("hi")];
    // Decode-step logits of the Q8_0 copy stay close to the f32 ones.
    let (_, mut cq) = q8.prefill(&prompts).unwrap();
    let (_, mut cd) = dense.prefill(&prompts).unwrap();
    let next = [504u32, 504];
    let lq: Vec<Vec<f32>> = q8.decode_step(&next, &mut cq).unwrap().to_vec2().unwrap();
    let ld: Vec<Vec<f32>> = dense
        .decode_step(&next, &mut cd)
        .unwrap()
        .to_vec2()
        .unwrap();
    for (a, b) in lq.iter().zip(&ld) {
        let d = rel_diff(a, b);
        eprintln!("Q8_0 vs f32 decode logits: relative max |diff| {d:.2e}");
        assert!(d < 0.05, "{d}");
    }
    let opts = SampleOptions {
        max_new_tokens: 12,
        ..SampleOptions::chat_defaults(&tok)
    };
    let a = sample_batch_with(&q8, &tok, &prompts, &opts).unwrap();
    let b = sample_batch_with(&dense, &tok, &prompts, &opts).unwrap();
    eprintln!(
        "Q8_0 greedy: {:?}",
        a.iter().map(|s| &s.text).collect::<Vec<_>>()
    );
    // The first greedy tokens agree (the quantized model is close, not identical).
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(x.ids[..3], y.ids[..3]);
    }
    let hot = SampleOptions {
        temperature: 0.8,
        top_p: 0.9,
        seed: 3,
        ..opts.clone()
    };
    let s1 = sample_batch_with(&q8, &tok, &prompts, &hot).unwrap();
    let s2 = sample_batch_with(&q8, &tok, &prompts, &hot).unwrap();
    for (x, y) in s1.iter().zip(&s2) {
        assert_eq!(x.ids, y.ids);
        assert!(x.logprobs.iter().all(|l| l.is_finite() && *l <= 0.0));
    }
}
