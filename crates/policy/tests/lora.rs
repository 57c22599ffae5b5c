//! LoRA on a frozen base: which tensors get gradients, finite differences, merging, the PEFT
//! files, exact resume, and errors.

mod common;
use candle_core::{DType, Device, Tensor, Var, D};
use policy::checkpoint;
use policy::logprobs::ResponseBatch;
use policy::lora::{
    LoraAdapters, LoraConfig, TargetModule, ADAPTER_CONFIG_FILE, ADAPTER_MODEL_FILE,
};
use policy::model::{Llama, LlamaConfig};
use policy::ops::reference::log_softmax_last_dim;
use policy::optim::{train_step, AdamW, AdamWConfig, Objective};
use rand::{Rng, SeedableRng};

const RANK: usize = 3;

fn ids(device: &Device, vocab: u32) -> Tensor {
    let data: Vec<u32> = (0..2 * 9).map(|i| (i * 7 + 3) % vocab).collect();
    Tensor::from_vec(data, (2, 9), device).unwrap()
}

/// Mean next-token cross-entropy.
fn loss(model: &Llama, ids: &Tensor) -> Tensor {
    let (_, t) = ids.dims2().unwrap();
    let logits = model.forward(ids).unwrap().narrow(1, 0, t - 1).unwrap();
    let logp = log_softmax_last_dim(&logits).unwrap();
    let targets = ids
        .narrow(1, 1, t - 1)
        .unwrap()
        .contiguous()
        .unwrap()
        .unsqueeze(D::Minus1)
        .unwrap();
    logp.gather(&targets, D::Minus1)
        .unwrap()
        .mean_all()
        .unwrap()
        .neg()
        .unwrap()
}

fn lora_config(targets: &[TargetModule]) -> LoraConfig {
    LoraConfig::new(RANK, 6.0, targets.to_vec())
}

/// A tiny model with an adapter on `targets` (A seeded, B zero as at init).
fn tiny_with_lora(cfg: &LlamaConfig, dtype: DType, targets: &[TargetModule], seed: u64) -> Llama {
    let dev = common::device();
    let mut model = Llama::random(cfg.clone(), dtype, &dev, seed).unwrap();
    let adapters = LoraAdapters::new(cfg, lora_config(targets), dtype, &dev, seed + 100).unwrap();
    model.attach_lora(adapters).unwrap();
    model
}

/// Give every B random values (as after some training), so that A's gradients are non-zero.
fn randomize_b(model: &Llama, seed: u64) {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    for (name, var) in model.trainable_vars() {
        if name.contains("lora_B") {
            let n = var.elem_count();
            let data: Vec<f64> = (0..n).map(|_| rng.gen_range(-0.2..0.2)).collect();
            let t = Tensor::from_vec(data, var.shape(), &common::device())
                .unwrap()
                .to_dtype(var.dtype())
                .unwrap();
            var.set(&t).unwrap();
        }
    }
}

fn norm(t: &Tensor) -> f64 {
    t.to_dtype(DType::F64)
        .unwrap()
        .sqr()
        .unwrap()
        .sum_all()
        .unwrap()
        .to_scalar::<f64>()
        .unwrap()
        .sqrt()
}

fn max_abs_diff(a: &Tensor, b: &Tensor) -> f64 {
    (a - b)
        .unwrap()
        .abs()
        .unwrap()
        .flatten_all()
        .unwrap()
        .max(0)
        .unwrap()
        .to_dtype(DType::F64)
        .unwrap()
        .to_scalar::<f64>()
        .unwrap()
}

/// At init (B = 0) the math says: dL/dB = s (x A^T)^T g is non-zero, dL/dA = s B^T g x = 0.
/// After B is made non-zero both are non-zero. Never a gradient for a base weight: none of the
/// base `Var`s is in the store, and no tensor in it has the shape of a base weight matrix
/// (so no frozen-weight gradient was even computed on a detached copy).
#[test]
fn gradients_reach_exactly_the_adapter() {
    for tie in [true, false] {
        let cfg = LlamaConfig {
            tie_word_embeddings: tie,
            ..LlamaConfig::tiny()
        };
        let model = tiny_with_lora(&cfg, DType::F32, &TargetModule::ALL, 5);
        let x = ids(&common::device(), cfg.vocab_size as u32);
        let base_shapes: Vec<Vec<usize>> = cfg
            .parameter_shapes()
            .into_iter()
            .map(|(_, s)| s)
            .filter(|s| s.len() == 2)
            .collect();
        for b_is_zero in [true, false] {
            if !b_is_zero {
                randomize_b(&model, 1);
            }
            let grads = loss(&model, &x).backward().unwrap();
            for (name, var) in model.named_vars() {
                assert!(
                    grads.get(var.as_tensor()).is_none(),
                    "base weight {name} has a gradient (tied = {tie})"
                );
            }
            let lora = model.trainable_vars();
            assert_eq!(lora.len(), 2 * 7 * cfg.num_layers);
            for (name, var) in &lora {
                let g = grads
                    .get(var.as_tensor())
                    .unwrap_or_else(|| panic!("{name}: no gradient"));
                let n = norm(g);
                let want_zero = b_is_zero && name.contains("lora_A");
                assert!(n.is_finite(), "{name}: gradient norm {n}");
                assert_eq!(
                    n == 0.0,
                    want_zero,
                    "{name}: gradient norm {n} (B zero: {b_is_zero})"
                );
            }
            for id in grads.get_ids() {
                let dims = grads.get_id(*id).unwrap().dims().to_vec();
                assert!(
                    !base_shapes.contains(&dims),
                    "a gradient of base-weight shape {dims:?} was computed"
                );
            }
        }
    }
}

/// Only some modules adapted: the others are frozen too and carry no adapter.
#[test]
fn partial_targets_adapt_only_those_modules() {
    let cfg = LlamaConfig::tiny();
    let targets = [TargetModule::QProj, TargetModule::VProj];
    let model = tiny_with_lora(&cfg, DType::F32, &targets, 2);
    randomize_b(&model, 2);
    let names: Vec<String> = model.trainable_vars().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names.len(), 2 * 2 * cfg.num_layers);
    assert!(names
        .iter()
        .all(|n| n.contains("q_proj") || n.contains("v_proj")));
    let grads = loss(&model, &ids(&common::device(), cfg.vocab_size as u32))
        .backward()
        .unwrap();
    for (name, var) in model.trainable_vars() {
        assert!(norm(grads.get(var.as_tensor()).unwrap()) > 0.0, "{name}");
    }
    for (name, var) in model.named_vars() {
        assert!(grads.get(var.as_tensor()).is_none(), "{name}");
    }
}

/// Central differences in f64 on the adapter matrices (B non-zero), the largest-gradient
/// coordinates of every A and B.
#[test]
fn lora_gradients_match_finite_differences_f64() {
    let cfg = LlamaConfig {
        tie_word_embeddings: false,
        ..LlamaConfig::tiny()
    };
    let dev = common::device();
    let model = tiny_with_lora(&cfg, DType::F64, &TargetModule::ALL, 11);
    randomize_b(&model, 3);
    let x = ids(&dev, cfg.vocab_size as u32);
    let grads = loss(&model, &x).backward().unwrap();
    let eps = 1e-6;
    let (mut worst, mut checked) = (0f64, 0);
    for (name, var) in model.trainable_vars() {
        let g = grads
            .get(var.as_tensor())
            .unwrap()
            .flatten_all()
            .unwrap()
            .to_vec1::<f64>()
            .unwrap();
        let orig = var
            .as_tensor()
            .flatten_all()
            .unwrap()
            .to_vec1::<f64>()
            .unwrap();
        let shape = var.shape().clone();
        let mut order: Vec<usize> = (0..g.len()).collect();
        order.sort_by(|&a, &b| g[b].abs().total_cmp(&g[a].abs()));
        for &i in order.iter().take(2) {
            let eval = |delta: f64| {
                let mut w = orig.clone();
                w[i] += delta;
                var.set(&Tensor::from_vec(w, shape.clone(), &dev).unwrap())
                    .unwrap();
                loss(&model, &x).to_scalar::<f64>().unwrap()
            };
            let fd = (eval(eps) - eval(-eps)) / (2.0 * eps);
            let rel = (fd - g[i]).abs() / fd.abs().max(g[i].abs()).max(1e-12);
            assert!(
                rel < 1e-4,
                "{name}[{i}]: analytic {} vs finite difference {fd}",
                g[i]
            );
            worst = worst.max(rel);
            checked += 1;
        }
        var.set(&Tensor::from_vec(orig, shape, &dev).unwrap())
            .unwrap();
    }
    eprintln!(
        "LoRA finite-difference check: {checked} coordinates, worst relative error {worst:.3e}"
    );
}

/// A fresh adapter (B = 0) changes nothing; a trained one equals the merged model, on the
/// training forward and on the sampling path.
#[test]
fn lora_forward_equals_merged_weights() {
    let cfg = LlamaConfig::tiny();
    let dev = common::device();
    let plain = Llama::random(cfg.clone(), DType::F64, &dev, 8).unwrap();
    let model = tiny_with_lora(&cfg, DType::F64, &TargetModule::ALL, 8);
    let x = ids(&dev, cfg.vocab_size as u32);
    let fresh = model.forward(&x).unwrap();
    assert_eq!(max_abs_diff(&fresh, &plain.forward(&x).unwrap()), 0.0);

    randomize_b(&model, 4);
    let adapted = model.forward(&x).unwrap();
    assert!(
        max_abs_diff(&adapted, &fresh) > 1e-3,
        "the adapter changes nothing"
    );
    let merged = model.merged().unwrap();
    assert!(merged.lora().is_none());
    let diff = max_abs_diff(&adapted, &merged.forward(&x).unwrap());
    assert!(diff < 1e-12, "LoRA forward vs merged: {diff}");
}

/// The sampling path (fused f32 ops) of a LoRA model runs the merged weights.
#[test]
fn sampling_path_of_a_lora_model_uses_the_adapter() {
    let cfg = LlamaConfig::tiny();
    let dev = common::device();
    let model = tiny_with_lora(&cfg, DType::F32, &TargetModule::ALL, 9);
    randomize_b(&model, 9);
    let prompt: Vec<u32> = vec![3, 10, 17, 24, 31];
    let (logits, _) = model.prefill(std::slice::from_ref(&prompt)).unwrap();
    let input = Tensor::new(prompt.as_slice(), &dev)
        .unwrap()
        .unsqueeze(0)
        .unwrap();
    let want = model
        .forward(&input)
        .unwrap()
        .get(0)
        .unwrap()
        .get(4)
        .unwrap();
    let diff = max_abs_diff(&logits.get(0).unwrap(), &want);
    assert!(diff < 1e-4, "prefill vs training forward: {diff}");
    let plain = Llama::random(cfg, DType::F32, &dev, 9).unwrap();
    let (base_logits, _) = plain.prefill(std::slice::from_ref(&prompt)).unwrap();
    assert!(
        max_abs_diff(&base_logits, &logits) > 1e-3,
        "prefill ignores the adapter"
    );
}

fn tmp_dir(tag: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("policy-lora-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// The adapter folder has PEFT's files and names, and loads back to the same logits; the
/// merged HF checkpoint of a LoRA model loads as a plain model with the same logits.
#[test]
fn peft_adapter_and_merged_checkpoint_round_trip() {
    let cfg = LlamaConfig::tiny();
    let dev = common::device();
    let targets = [
        TargetModule::QProj,
        TargetModule::OProj,
        TargetModule::DownProj,
    ];
    let mut model = tiny_with_lora(&cfg, DType::F32, &targets, 6);
    randomize_b(&model, 6);
    let x = ids(&dev, cfg.vocab_size as u32);
    let want = model.forward(&x).unwrap();

    let dir = tmp_dir("adapter");
    model.lora().unwrap().save(&dir).unwrap();
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join(ADAPTER_CONFIG_FILE)).unwrap())
            .unwrap();
    assert_eq!(json["peft_type"], "LORA");
    assert_eq!(json["task_type"], "CAUSAL_LM");
    assert_eq!(json["r"], 3);
    assert_eq!(json["lora_alpha"], 6);
    assert_eq!(json["bias"], "none");
    assert_eq!(
        json["target_modules"],
        serde_json::json!(["q_proj", "o_proj", "down_proj"])
    );
    let tensors = candle_core::safetensors::load(dir.join(ADAPTER_MODEL_FILE), &dev).unwrap();
    assert_eq!(tensors.len(), 2 * 3 * cfg.num_layers);
    assert_eq!(
        tensors["base_model.model.model.layers.1.self_attn.o_proj.lora_A.weight"].dims(),
        &[3, 16]
    );
    assert_eq!(
        tensors["base_model.model.model.layers.0.mlp.down_proj.lora_B.weight"].dims(),
        &[16, 3]
    );

    let loaded = LoraAdapters::load(&dir, &cfg, DType::F32, &dev).unwrap();
    model.take_lora().unwrap();
    assert_eq!(model.trainable_vars().len(), cfg.parameter_shapes().len());
    model.attach_lora(loaded).unwrap();
    assert_eq!(max_abs_diff(&model.forward(&x).unwrap(), &want), 0.0);

    let merged_dir = tmp_dir("merged");
    let tok = common::word_tokenizer(cfg.vocab_size as u32);
    checkpoint::save_model(&model, &tok, &merged_dir).unwrap();
    let plain = checkpoint::load_model(&merged_dir, DType::F32, &dev).unwrap();
    assert!(plain.lora().is_none());
    let diff = max_abs_diff(&plain.forward(&x).unwrap(), &want);
    assert!(diff < 1e-5, "merged checkpoint vs LoRA forward: {diff}");
    std::fs::remove_dir_all(&dir).unwrap();
    std::fs::remove_dir_all(&merged_dir).unwrap();
}

/// 2 LoRA steps, save (adapter + optimizer), load into a fresh model with another adapter
/// init, 1 more step == 3 steps straight, bit for bit; the base never moves.
#[test]
fn lora_exact_resume_and_frozen_base() {
    let cfg = LlamaConfig::tiny();
    let dev = common::device();
    let opt_cfg = AdamWConfig {
        lr: 1e-2,
        weight_decay: 0.1,
        ..AdamWConfig::default()
    };
    let pairs = vec![
        (vec![1u32, 5, 9], vec![20u32, 3, 33, 7]),
        (vec![4u32], vec![8u32, 12]),
    ];
    let batch = ResponseBatch::new(&pairs, 0, 64, DType::F32, &dev).unwrap();
    let step = |m: &Llama, o: &mut AdamW| {
        train_step(m, o, &batch, &Objective::Sft, Some(0.5))
            .unwrap()
            .loss
    };
    let flat = |v: &Var| {
        v.as_tensor()
            .flatten_all()
            .unwrap()
            .to_vec1::<f32>()
            .unwrap()
    };

    let straight = tiny_with_lora(&cfg, DType::F32, &TargetModule::ALL, 4);
    let base_before: Vec<Vec<f32>> = straight.named_vars().iter().map(|(_, v)| flat(v)).collect();
    let mut opt_s = AdamW::for_model(&straight, opt_cfg.clone()).unwrap();
    let first_loss = step(&straight, &mut opt_s);
    step(&straight, &mut opt_s);
    let last_loss = step(&straight, &mut opt_s);
    assert!(
        last_loss < first_loss,
        "LoRA SFT loss {first_loss} -> {last_loss}"
    );
    let base_after: Vec<Vec<f32>> = straight.named_vars().iter().map(|(_, v)| flat(v)).collect();
    assert_eq!(
        base_before, base_after,
        "a base weight changed during LoRA training"
    );

    let first = tiny_with_lora(&cfg, DType::F32, &TargetModule::ALL, 4);
    let mut opt_f = AdamW::for_model(&first, opt_cfg).unwrap();
    step(&first, &mut opt_f);
    step(&first, &mut opt_f);
    let dir = tmp_dir("resume");
    let tok = common::word_tokenizer(cfg.vocab_size as u32);
    checkpoint::save_training_state(&first, &tok, &opt_f, &dir).unwrap();
    assert!(dir.join(ADAPTER_MODEL_FILE).exists());
    assert!(!dir.join(checkpoint::MODEL_FILE).exists());

    // Same base (seed 4), another adapter init (seed 104 + 50).
    let mut resumed = Llama::random(cfg.clone(), DType::F32, &dev, 4).unwrap();
    let other =
        LoraAdapters::new(&cfg, lora_config(&TargetModule::ALL), DType::F32, &dev, 154).unwrap();
    resumed.attach_lora(other).unwrap();
    let mut opt_r = AdamW::for_model(&resumed, AdamWConfig::default()).unwrap();
    checkpoint::load_training_state(&resumed, &mut opt_r, &dir).unwrap();
    assert_eq!(opt_r.step_count(), 2);
    step(&resumed, &mut opt_r);
    for ((name, a), (_, b)) in straight
        .trainable_vars()
        .iter()
        .zip(resumed.trainable_vars().iter())
    {
        assert_eq!(flat(a), flat(b), "{name} differs after resume");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bad_adapters_are_refused_with_the_reason() {
    let cfg = LlamaConfig::tiny();
    let dev = common::device();
    let mut model = tiny_with_lora(&cfg, DType::F32, &[TargetModule::QProj], 1);
    let dir = tmp_dir("bad");
    model.lora().unwrap().save(&dir).unwrap();
    let err = |dir: &std::path::Path| {
        LoraAdapters::load(dir, &cfg, DType::F32, &dev)
            .unwrap_err()
            .to_string()
    };

    // Attaching a second adapter, or one made for another shape.
    let again = LoraAdapters::new(
        &cfg,
        lora_config(&[TargetModule::KProj]),
        DType::F32,
        &dev,
        1,
    )
    .unwrap();
    let e = model.attach_lora(again).unwrap_err().to_string();
    assert!(e.contains("already has a LoRA adapter"), "{e}");
    let wide = LlamaConfig {
        hidden_size: 20,
        ..cfg.clone()
    };
    let misfit = LoraAdapters::new(
        &wide,
        lora_config(&[TargetModule::QProj]),
        DType::F32,
        &dev,
        1,
    )
    .unwrap();
    let mut plain = Llama::random(cfg.clone(), DType::F32, &dev, 1).unwrap();
    let e = plain.attach_lora(misfit).unwrap_err().to_string();
    assert!(e.contains("q_proj of layer 0"), "{e}");
    // An adapter folder for another model shape.
    let e = LoraAdapters::load(&dir, &wide, DType::F32, &dev)
        .unwrap_err()
        .to_string();
    assert!(e.contains("has shape"), "{e}");

    // A missing tensor, then an unexpected one.
    let weights = dir.join(ADAPTER_MODEL_FILE);
    let mut tensors = candle_core::safetensors::load(&weights, &dev).unwrap();
    let gone = "base_model.model.model.layers.1.self_attn.q_proj.lora_B.weight";
    let kept = tensors.remove(gone).unwrap();
    candle_core::safetensors::save(&tensors, &weights).unwrap();
    let e = err(&dir);
    assert!(e.contains(gone) && e.contains("no tensor"), "{e}");
    tensors.insert(gone.to_string(), kept.clone());
    tensors.insert("base_model.model.lm_head.lora_A.weight".into(), kept);
    candle_core::safetensors::save(&tensors, &weights).unwrap();
    let e = err(&dir);
    assert!(
        e.contains("unexpected tensors") && e.contains("lm_head"),
        "{e}"
    );

    // A truncated weights file, a missing one, a broken or unsupported config.
    model.lora().unwrap().save(&dir).unwrap();
    let bytes = std::fs::read(&weights).unwrap();
    std::fs::write(&weights, &bytes[..bytes.len() / 2]).unwrap();
    let e = err(&dir);
    assert!(
        e.contains("cannot read safetensors") && e.contains(ADAPTER_MODEL_FILE),
        "{e}"
    );
    std::fs::remove_file(&weights).unwrap();
    assert!(err(&dir).contains(ADAPTER_MODEL_FILE));
    let config = dir.join(ADAPTER_CONFIG_FILE);
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(&config, &text[..text.len() / 2]).unwrap();
    assert!(err(&dir).contains(ADAPTER_CONFIG_FILE));
    std::fs::write(
        &config,
        text.replace("\"use_dora\": false", "\"use_dora\": true"),
    )
    .unwrap();
    let e = err(&dir);
    assert!(
        e.contains("use_dora") && e.contains(ADAPTER_CONFIG_FILE),
        "{e}"
    );

    // Resuming into an adapter of another rank.
    model.lora().unwrap().save(&dir).unwrap();
    let mut other = Llama::random(cfg.clone(), DType::F32, &dev, 1).unwrap();
    let rank2 = LoraConfig::new(2, 4.0, vec![TargetModule::QProj]);
    other
        .attach_lora(LoraAdapters::new(&cfg, rank2, DType::F32, &dev, 1).unwrap())
        .unwrap();
    let e = other
        .lora()
        .unwrap()
        .load_weights_into(&dir)
        .unwrap_err()
        .to_string();
    assert!(e.contains("differs"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}
