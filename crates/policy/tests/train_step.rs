//! Training primitives: AdamW against hand-derived numbers, weight decay, clipping, gradient
//! accumulation, the PPO-clip loss, SFT training on a tiny model, checkpoints and exact resume.

mod common;

use candle_core::{backprop::GradStore, DType, Tensor, Var};
use policy::checkpoint;
use policy::logprobs::{response_scores, ResponseBatch};
use policy::model::{Llama, LlamaConfig};
use policy::optim::{
    clip_grad_norm, ppo_clip_loss, sft_loss, train_step, Accumulator, AdamW, AdamWConfig, Objective,
};

fn scalar(v: &Var) -> f64 {
    v.as_tensor().to_vec1::<f64>().unwrap()[0]
}

fn var1(x: f64) -> Var {
    Var::from_tensor(&Tensor::new(&[x], &common::device()).unwrap()).unwrap()
}

/// loss = 0.5 * w1^2 + 3 * w2, so dL/dw1 = w1 and dL/dw2 = 3.
fn quad_grads(w1: &Var, w2: &Var) -> GradStore {
    let loss = ((w1.as_tensor().sqr().unwrap() * 0.5).unwrap() + (w2.as_tensor() * 3.0).unwrap())
        .unwrap()
        .sum_all()
        .unwrap();
    loss.backward().unwrap()
}

fn close(a: f64, b: f64, tol: f64, what: &str) {
    assert!((a - b).abs() <= tol, "{what}: {a} vs {b} (tol {tol})");
}

/// Three AdamW steps (lr 0.1, betas 0.9/0.999, eps 1e-8, no decay) on
/// L = 0.5 w1^2 + 3 w2 from w1 = 1, w2 = -2. By hand (PyTorch's formulas):
///
/// step 1: g = (1, 3). m = 0.1 g = (0.1, 0.3), v = 0.001 g^2 = (0.001, 0.009).
///   bias corrections 1 - 0.9 = 0.1 and 1 - 0.999 = 0.001, so m^ = g and sqrt(v^) = |g|:
///   w1 = 1 - 0.1 * 1 / (1 + 1e-8) = 0.900000001,  w2 = -2 - 0.1 * 3 / (3 + 1e-8) = -2.0999999997.
/// step 2: g1 = w1 = 0.900000001, g2 = 3.
///   m1 = 0.9 * 0.1 + 0.1 * 0.900000001 = 0.1800000001
///   v1 = 0.999 * 0.001 + 0.001 * 0.900000001^2 = 0.001809000002
///   bc1 = 1 - 0.81 = 0.19, bc2 = 1 - 0.998001 = 0.001999
///   w1 = 0.900000001 - (0.1 / 0.19) * 0.1800000001 / (sqrt(0.001809000002 / 0.001999) + 1e-8)
///      = 0.900000001 - 0.526316 * 0.18 / 0.951290 = 0.80041223
///   w2: the gradient is constant, so m^ = 3 and sqrt(v^) = 3 at every step: w2 = -2.2 (+6.7e-10).
/// step 3: g1 = 0.80041223.
///   m1 = 0.9 * 0.18 + 0.1 * 0.80041223 = 0.24204122
///   v1 = 0.999 * 0.001809 + 0.001 * 0.80041223^2 = 0.00244785
///   bc1 = 1 - 0.729 = 0.271, bc2 = 1 - 0.997002999 = 0.002997001
///   w1 = 0.80041223 - (0.1 / 0.271) * 0.24204122 / sqrt(0.00244785 / 0.002997001) = 0.70158627
///   w2 = -2.3 (+1.0e-9).
#[test]
fn adamw_three_steps_match_hand_derivation() {
    let (w1, w2) = (var1(1.0), var1(-2.0));
    let cfg = AdamWConfig {
        lr: 0.1,
        beta1: 0.9,
        beta2: 0.999,
        eps: 1e-8,
        weight_decay: 0.0,
    };
    let mut opt = AdamW::new(
        vec![("w1".into(), w1.clone()), ("w2".into(), w2.clone())],
        cfg,
    )
    .unwrap();
    // Exact expressions of the derivation above, evaluated in f64.
    let step1_w1 = 1.0 - 0.1 * 1.0 / (1.0 + 1e-8);
    let m2 = 0.9 * 0.1 + 0.1 * step1_w1;
    let v2 = 0.999 * 0.001 + 0.001 * step1_w1 * step1_w1;
    let step2_w1 = step1_w1 - (0.1 / 0.19) * m2 / ((v2 / (1.0 - 0.999f64.powi(2))).sqrt() + 1e-8);
    let m3 = 0.9 * m2 + 0.1 * step2_w1;
    let v3 = 0.999 * v2 + 0.001 * step2_w1 * step2_w1;
    let step3_w1 = step2_w1 - (0.1 / 0.271) * m3 / ((v3 / (1.0 - 0.999f64.powi(3))).sqrt() + 1e-8);
    let w2_step = 0.1 * 3.0 / (3.0 + 1e-8);
    let want = [
        (step1_w1, -2.0 - w2_step, 0.900000001, -2.0999999997),
        (step2_w1, -2.0 - 2.0 * w2_step, 0.80041223, -2.2),
        (step3_w1, -2.0 - 3.0 * w2_step, 0.70158627, -2.3),
    ];
    for (t, (e1, e2, approx1, approx2)) in want.into_iter().enumerate() {
        opt.step(&quad_grads(&w1, &w2)).unwrap();
        close(scalar(&w1), e1, 1e-12, &format!("w1 after step {}", t + 1));
        close(scalar(&w2), e2, 1e-12, &format!("w2 after step {}", t + 1));
        close(scalar(&w1), approx1, 1e-8, "w1 (decimal)");
        close(scalar(&w2), approx2, 2e-9, "w2 (decimal)");
    }
    assert_eq!(opt.step_count(), 3);
    let (m, v, step) = opt.moments("w1").unwrap();
    assert_eq!(step, 3);
    close(m.to_vec1::<f64>().unwrap()[0], m3, 1e-15, "exp_avg");
    close(v.to_vec1::<f64>().unwrap()[0], v3, 1e-15, "exp_avg_sq");
}

/// Decoupled weight decay (lr 0.1, wd 0.5) on L = 3 w from w = 2, PyTorch order:
/// step 1: w = 2 * (1 - 0.1 * 0.5) = 1.9, then the Adam step removes 0.1 * 3 / (3 + 1e-8): 1.8.
/// step 2: w = 1.8 * 0.95 = 1.71, minus the same Adam step: 1.61.
/// The decay does not enter the moments: m = 0.1 * 3 = 0.3 after step 1.
/// A parameter without a gradient is left alone (no decay), as in PyTorch.
#[test]
fn adamw_weight_decay_is_decoupled() {
    let w = var1(2.0);
    let idle = var1(5.0);
    let cfg = AdamWConfig {
        lr: 0.1,
        weight_decay: 0.5,
        ..AdamWConfig::default()
    };
    let mut opt = AdamW::new(
        vec![("w".into(), w.clone()), ("idle".into(), idle.clone())],
        cfg,
    )
    .unwrap();
    let adam = 0.1 * 3.0 / (3.0 + 1e-8);
    let grads = || {
        (w.as_tensor() * 3.0)
            .unwrap()
            .sum_all()
            .unwrap()
            .backward()
            .unwrap()
    };
    opt.step(&grads()).unwrap();
    close(scalar(&w), 2.0 * 0.95 - adam, 1e-12, "step 1");
    close(scalar(&w), 1.8, 1e-8, "step 1 decimal");
    let (m, _, _) = opt.moments("w").unwrap();
    close(
        m.to_vec1::<f64>().unwrap()[0],
        0.3,
        1e-15,
        "m excludes decay",
    );
    opt.step(&grads()).unwrap();
    close(
        scalar(&w),
        (2.0 * 0.95 - adam) * 0.95 - adam,
        1e-12,
        "step 2",
    );
    close(scalar(&w), 1.61, 1e-8, "step 2 decimal");
    assert_eq!(scalar(&idle), 5.0);
    assert!(opt.moments("idle").is_none());
}

/// Gradients (3, 4) have norm 5. clip to 1: scaled by 1 / (5 + 1e-6) (torch's coefficient),
/// i.e. (0.6, 0.8) up to 2e-7; the returned value is the pre-clip norm 5. clip to 10: unchanged.
#[test]
fn clip_grad_norm_like_torch() {
    let (a, b) = (var1(0.0), var1(0.0));
    let make = || {
        ((a.as_tensor() * 3.0).unwrap() + (b.as_tensor() * 4.0).unwrap())
            .unwrap()
            .sum_all()
            .unwrap()
            .backward()
            .unwrap()
    };
    let vars = [a.clone(), b.clone()];
    let g =
        |grads: &GradStore, v: &Var| grads.get(v.as_tensor()).unwrap().to_vec1::<f64>().unwrap()[0];

    let mut grads = make();
    let norm = clip_grad_norm(&vars, &mut grads, 1.0).unwrap();
    close(norm, 5.0, 1e-12, "pre-clip norm");
    close(g(&grads, &a), 3.0 / (5.0 + 1e-6), 1e-15, "clipped a");
    close(g(&grads, &b), 4.0 / (5.0 + 1e-6), 1e-15, "clipped b");
    close(g(&grads, &a), 0.6, 2e-7, "clipped a decimal");

    let mut grads = make();
    let norm = clip_grad_norm(&vars, &mut grads, 10.0).unwrap();
    close(norm, 5.0, 1e-12, "norm");
    assert_eq!(g(&grads, &a), 3.0);
    assert_eq!(g(&grads, &b), 4.0);
}

fn equal_length_pairs() -> Vec<(Vec<u32>, Vec<u32>)> {
    vec![
        (vec![3, 4, 5], vec![6, 7, 8, 9]),
        (vec![10, 11, 12], vec![13, 14, 15, 16]),
    ]
}

/// Two half-batches (each loss scaled by 1/2, same token counts) accumulated, then one AdamW
/// step, equals one step on the full batch.
#[test]
fn accumulation_of_two_halves_equals_full_batch() {
    let dev = common::device();
    let cfg = LlamaConfig::tiny();
    let pairs = equal_length_pairs();
    let opt_cfg = AdamWConfig {
        lr: 1e-2,
        ..AdamWConfig::default()
    };

    let full = Llama::random(cfg.clone(), DType::F64, &dev, 3).unwrap();
    let mut opt_full = AdamW::for_model(&full, opt_cfg.clone()).unwrap();
    let batch = ResponseBatch::new(&pairs, 0, 64, DType::F64, &dev).unwrap();
    let scores = response_scores(&full, &batch).unwrap();
    let grads_full = sft_loss(&scores.logprobs, &batch.response_mask)
        .unwrap()
        .backward()
        .unwrap();

    let acc_model = Llama::random(cfg, DType::F64, &dev, 3).unwrap();
    let mut opt_acc = AdamW::for_model(&acc_model, opt_cfg).unwrap();
    let mut acc = Accumulator::new(&acc_model.named_vars());
    for pair in &pairs {
        let b = ResponseBatch::new(std::slice::from_ref(pair), 0, 64, DType::F64, &dev).unwrap();
        let s = response_scores(&acc_model, &b).unwrap();
        let loss = (sft_loss(&s.logprobs, &b.response_mask).unwrap() * 0.5).unwrap();
        acc.add(loss.backward().unwrap()).unwrap();
    }
    assert_eq!(acc.micro_batches(), 2);
    let grads_acc = acc.take();
    assert_eq!(acc.micro_batches(), 0);

    let nf = opt_full.grad_norm(&grads_full).unwrap();
    let na = opt_acc.grad_norm(&grads_acc).unwrap();
    close(nf, na, 1e-12 * nf, "gradient norms");
    opt_full.step(&grads_full).unwrap();
    opt_acc.step(&grads_acc).unwrap();
    let mut worst: f64 = 0.0;
    for ((name, a), (_, b)) in full.named_vars().iter().zip(acc_model.named_vars().iter()) {
        let d = (a.as_tensor() - b.as_tensor())
            .unwrap()
            .abs()
            .unwrap()
            .max_all()
            .unwrap()
            .to_scalar::<f64>()
            .unwrap();
        assert!(d < 1e-10, "{name}: max diff {d}");
        worst = worst.max(d);
    }
    eprintln!("accumulation vs full batch: max weight difference after a step {worst:e}");
}

/// Hand-checked PPO-clip values (eps 0.2), tokens:
///   a: r = 1.5, A = +1: min(1.5, 1.2) = 1.2 (clipped, no gradient)
///   b: r = 0.5, A = +1: min(0.5, 0.8) = 0.5 (unclipped, d/dlogp = r A = 0.5)
///   c: r = 0.5, A = -2: min(-1.0, -1.6) = -1.6 (clipped, no gradient)
///   d: masked out (r = 1, A = 5)
///   e: r = 1.1, A = -1: min(-1.1, -1.1) = -1.1 (inside the range: gradient r A = -1.1)
/// loss = -(1.2 + 0.5 - 1.6 - 1.1) / 4 = 0.25; dloss/dlogp = -(0, 0.5, 0, 0, -1.1) / 4.
#[test]
fn ppo_clip_loss_hand_values() {
    let dev = common::device();
    let old = Tensor::new(&[[-1.0f64, -2.0, -0.5, -3.0, -1.5]], &dev).unwrap();
    let ratios = [1.5f64, 0.5, 0.5, 1.0, 1.1];
    let logp: Vec<f64> = old.to_vec2::<f64>().unwrap()[0]
        .iter()
        .zip(ratios)
        .map(|(o, r)| o + r.ln())
        .collect();
    let logp = Var::from_tensor(
        &Tensor::new(logp.as_slice(), &dev)
            .unwrap()
            .unsqueeze(0)
            .unwrap(),
    )
    .unwrap();
    let adv = Tensor::new(&[[1.0f64, 1.0, -2.0, 5.0, -1.0]], &dev).unwrap();
    let mask = Tensor::new(&[[1.0f64, 1.0, 1.0, 0.0, 1.0]], &dev).unwrap();
    let loss = ppo_clip_loss(logp.as_tensor(), &old, &adv, &mask, 0.2).unwrap();
    close(loss.to_scalar::<f64>().unwrap(), 0.25, 1e-12, "ppo loss");
    let grads = loss.backward().unwrap();
    let g = grads
        .get(logp.as_tensor())
        .unwrap()
        .to_vec2::<f64>()
        .unwrap();
    let want = [0.0, -0.5 / 4.0, 0.0, 0.0, 1.1 / 4.0];
    for (i, (a, b)) in g[0].iter().zip(want).enumerate() {
        close(*a, b, 1e-12, &format!("ppo gradient {i}"));
    }
    // At r = 1 everywhere the loss is -mean(A) over the mask.
    let same = ppo_clip_loss(&old, &old, &adv, &mask, 0.2).unwrap();
    close(
        same.to_scalar::<f64>().unwrap(),
        -(1.0 + 1.0 - 2.0 - 1.0) / 4.0,
        1e-12,
        "r = 1",
    );
}

/// 30 SFT steps on one short sequence cut its loss by more than half.
#[test]
fn sft_steps_reduce_loss() {
    let dev = common::device();
    let model = Llama::random(LlamaConfig::tiny(), DType::F32, &dev, 1).unwrap();
    let mut opt = AdamW::for_model(
        &model,
        AdamWConfig {
            lr: 1e-2,
            weight_decay: 0.0,
            ..AdamWConfig::default()
        },
    )
    .unwrap();
    let pairs = vec![(vec![1u32, 5, 9], vec![20u32, 3, 33, 7, 2])];
    let batch = ResponseBatch::new(&pairs, 0, 64, DType::F32, &dev).unwrap();
    let mut losses = Vec::new();
    for _ in 0..30 {
        let s = train_step(&model, &mut opt, &batch, &Objective::Sft, Some(1.0)).unwrap();
        assert!(s.loss.is_finite() && s.grad_norm.is_finite());
        losses.push(s.loss);
    }
    let scores = response_scores(&model, &batch).unwrap();
    let last = sft_loss(&scores.logprobs, &batch.response_mask)
        .unwrap()
        .to_scalar::<f32>()
        .unwrap() as f64;
    eprintln!("SFT loss: first {:.4}, after 30 steps {last:.4}", losses[0]);
    assert!(last < 0.5 * losses[0], "loss {} -> {last}", losses[0]);
}

/// PPO-clip through the whole step: a positive advantage on the response raises its log-prob.
#[test]
fn ppo_step_raises_logprob_of_advantaged_response() {
    let dev = common::device();
    let model = Llama::random(LlamaConfig::tiny(), DType::F32, &dev, 2).unwrap();
    let mut opt = AdamW::for_model(
        &model,
        AdamWConfig {
            lr: 1e-2,
            ..AdamWConfig::default()
        },
    )
    .unwrap();
    let pairs = vec![(vec![1u32, 5], vec![20u32, 3, 33])];
    let batch = ResponseBatch::new(&pairs, 0, 64, DType::F32, &dev).unwrap();
    let resp_logp = |m: &Llama| {
        let s = response_scores(m, &batch).unwrap();
        (s.logprobs * &batch.response_mask)
            .unwrap()
            .sum_all()
            .unwrap()
            .to_scalar::<f32>()
            .unwrap()
    };
    let old = response_scores(&model, &batch).unwrap().logprobs.detach();
    let before = resp_logp(&model);
    let obj = Objective::PpoClip {
        old_logp: old,
        advantages: batch.response_mask.ones_like().unwrap(),
        clip_eps: 0.2,
    };
    let stats = train_step(&model, &mut opt, &batch, &obj, Some(1.0)).unwrap();
    assert!(
        (stats.loss + 1.0).abs() < 1e-6,
        "loss at r = 1 is -mean(A) = -1: {}",
        stats.loss
    );
    let after = resp_logp(&model);
    assert!(after > before, "{before} -> {after}");
}

fn tmp_dir(tag: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("policy-test-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

#[test]
fn hf_checkpoint_round_trip() {
    let dev = common::device();
    for tie in [true, false] {
        let cfg = LlamaConfig {
            tie_word_embeddings: tie,
            ..LlamaConfig::tiny()
        };
        let model = Llama::random(cfg.clone(), DType::F32, &dev, 9).unwrap();
        let dir = tmp_dir(&format!("hf-{tie}"));
        checkpoint::save_model(&model, &common::word_tokenizer(37), &dir).unwrap();

        let names: Vec<String> =
            candle_core::safetensors::load(dir.join("model.safetensors"), &dev)
                .unwrap()
                .into_keys()
                .collect();
        assert_eq!(names.len(), cfg.parameter_shapes().len());
        assert!(names.contains(&"model.embed_tokens.weight".to_string()));
        assert!(names.contains(&"model.layers.1.self_attn.q_proj.weight".to_string()));
        assert!(names.contains(&"model.norm.weight".to_string()));
        assert_eq!(names.contains(&"lm_head.weight".to_string()), !tie);
        let json: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("config.json")).unwrap())
                .unwrap();
        assert_eq!(json["architectures"][0], "LlamaForCausalLM");
        assert_eq!(json["num_key_value_heads"], 2);
        assert_eq!(json["tie_word_embeddings"], tie);

        let loaded = checkpoint::load_model(&dir, DType::F32, &dev).unwrap();
        assert_eq!(loaded.config(), &cfg);
        let ids = Tensor::new(&[[1u32, 7, 3, 30, 2, 11]], &dev).unwrap();
        let a = model
            .forward(&ids)
            .unwrap()
            .flatten_all()
            .unwrap()
            .to_vec1::<f32>()
            .unwrap();
        let b = loaded
            .forward(&ids)
            .unwrap()
            .flatten_all()
            .unwrap()
            .to_vec1::<f32>()
            .unwrap();
        assert_eq!(a, b, "logits differ after the round trip (tied = {tie})");

        // Loading into an existing model of another seed.
        let other = Llama::random(cfg, DType::F32, &dev, 10).unwrap();
        checkpoint::load_weights_into(&other, &dir).unwrap();
        let c = other
            .forward(&ids)
            .unwrap()
            .flatten_all()
            .unwrap()
            .to_vec1::<f32>()
            .unwrap();
        assert_eq!(a, c);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

#[test]
fn checkpoint_errors_are_clear() {
    let dev = common::device();
    let dir = tmp_dir("bad");
    assert!(checkpoint::load_model(&dir, DType::F32, &dev).is_err());
    let model = Llama::random(LlamaConfig::tiny(), DType::F32, &dev, 1).unwrap();
    checkpoint::save_model(&model, &common::word_tokenizer(37), &dir).unwrap();
    // Wrong architecture.
    let cfg_path = dir.join("config.json");
    let text = std::fs::read_to_string(&cfg_path).unwrap();
    std::fs::write(
        &cfg_path,
        text.replace("\"llama\"", "\"mamba\"")
            .replace("LlamaForCausalLM", "MambaForCausalLM"),
    )
    .unwrap();
    let err = checkpoint::load_model(&dir, DType::F32, &dev)
        .unwrap_err()
        .to_string();
    assert!(err.contains("architecture"), "{err}");
    std::fs::write(&cfg_path, &text).unwrap();
    // Truncated weights.
    let w = dir.join("model.safetensors");
    let bytes = std::fs::read(&w).unwrap();
    std::fs::write(&w, &bytes[..bytes.len() / 2]).unwrap();
    let err = checkpoint::load_model(&dir, DType::F32, &dev)
        .unwrap_err()
        .to_string();
    assert!(err.contains("safetensors"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// 2 steps, save model + optimizer, load into a fresh model and optimizer, 1 more step ==
/// 3 steps straight, bit for bit.
#[test]
fn exact_resume_from_checkpoint() {
    let dev = common::device();
    let cfg = LlamaConfig::tiny();
    let opt_cfg = AdamWConfig {
        lr: 5e-3,
        weight_decay: 0.1,
        ..AdamWConfig::default()
    };
    let pairs = vec![
        (vec![1u32, 5, 9], vec![20u32, 3, 33, 7]),
        (vec![4u32], vec![8u32, 12]),
    ];
    let batch = ResponseBatch::new(&pairs, 0, 64, DType::F32, &dev).unwrap();
    let step = |m: &Llama, o: &mut AdamW| {
        train_step(m, o, &batch, &Objective::Sft, Some(0.5)).unwrap();
    };

    let straight = Llama::random(cfg.clone(), DType::F32, &dev, 4).unwrap();
    let mut opt_s = AdamW::for_model(&straight, opt_cfg.clone()).unwrap();
    for _ in 0..3 {
        step(&straight, &mut opt_s);
    }

    let first = Llama::random(cfg.clone(), DType::F32, &dev, 4).unwrap();
    let mut opt_f = AdamW::for_model(&first, opt_cfg).unwrap();
    step(&first, &mut opt_f);
    step(&first, &mut opt_f);
    let dir = tmp_dir("resume");
    checkpoint::save_training_state(&first, &common::word_tokenizer(37), &opt_f, &dir).unwrap();
    assert!(dir.join("optimizer/optimizer.safetensors").exists());
    assert!(dir.join("optimizer/optimizer.json").exists());

    let resumed = Llama::random(cfg, DType::F32, &dev, 99).unwrap();
    let mut opt_r = AdamW::for_model(&resumed, AdamWConfig::default()).unwrap();
    checkpoint::load_training_state(&resumed, &mut opt_r, &dir).unwrap();
    assert_eq!(opt_r.step_count(), 2);
    assert_eq!(opt_r.config().lr, 5e-3);
    step(&resumed, &mut opt_r);

    for ((name, a), (_, b)) in straight
        .named_vars()
        .iter()
        .zip(resumed.named_vars().iter())
    {
        let a = a
            .as_tensor()
            .flatten_all()
            .unwrap()
            .to_vec1::<f32>()
            .unwrap();
        let b = b
            .as_tensor()
            .flatten_all()
            .unwrap()
            .to_vec1::<f32>()
            .unwrap();
        assert_eq!(a, b, "{name} differs after resume");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
