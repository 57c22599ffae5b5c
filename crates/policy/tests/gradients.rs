//! The training model's gradients: every parameter gets one, and they match finite differences.

mod common;

use candle_core::{DType, Device, Tensor, D};
use policy::logprobs::token_scores_of_hidden;
use policy::lora::{LoraAdapters, LoraConfig, TargetModule};
use policy::model::{Family, Llama, LlamaConfig};
use policy::ops::reference::log_softmax_last_dim;

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

#[test]
fn every_parameter_gets_a_nonzero_gradient() {
    for (dtype, tie, family) in [
        (DType::F32, true, Family::Llama),
        (DType::F32, false, Family::Llama),
        (DType::F64, true, Family::Llama),
        (DType::F32, false, Family::Qwen2),
        (DType::F32, true, Family::Qwen2),
    ] {
        let cfg = LlamaConfig {
            tie_word_embeddings: tie,
            family,
            ..LlamaConfig::tiny()
        };
        let dev = common::device();
        let model = Llama::random(cfg.clone(), dtype, &dev, 7).unwrap();
        let x = ids(&dev, cfg.vocab_size as u32);
        let grads = loss(&model, &x).backward().unwrap();
        let vars = model.named_vars();
        assert_eq!(vars.len(), cfg.parameter_shapes().len());
        let biases = vars
            .iter()
            .filter(|(n, _)| n.ends_with("_proj.bias"))
            .count();
        let expected_biases = if family == Family::Qwen2 {
            3 * cfg.num_layers
        } else {
            0
        };
        assert_eq!(biases, expected_biases, "{family:?}: q/k/v biases");
        for (name, var) in vars {
            let g = grads
                .get(var.as_tensor())
                .unwrap_or_else(|| panic!("{name}: no gradient"));
            let norm = g
                .sqr()
                .unwrap()
                .sum_all()
                .unwrap()
                .to_dtype(DType::F64)
                .unwrap()
                .to_scalar::<f64>()
                .unwrap();
            assert!(
                norm.is_finite() && norm > 0.0,
                "{name} ({dtype:?}, tied={tie}, {family:?}): gradient norm {norm}"
            );
        }
    }
}

#[test]
fn gradients_match_finite_differences_f64() {
    for family in [Family::Llama, Family::Qwen2] {
        finite_differences_f64(family);
    }
}

fn finite_differences_f64(family: Family) {
    let cfg = LlamaConfig {
        tie_word_embeddings: false,
        family,
        ..LlamaConfig::tiny()
    };
    let dev = common::device();
    let model = Llama::random(cfg.clone(), DType::F64, &dev, 11).unwrap();
    let x = ids(&dev, cfg.vocab_size as u32);
    let grads = loss(&model, &x).backward().unwrap();
    let eps = 1e-6;
    let mut worst: f64 = 0.0;
    let mut checked = 0;
    for (name, var) in model.named_vars() {
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
        let shape = var.as_tensor().shape().clone();
        // Check the coordinates with the largest gradient (well above the FD noise floor) and one more.
        let mut order: Vec<usize> = (0..g.len()).collect();
        order.sort_by(|&a, &b| g[b].abs().partial_cmp(&g[a].abs()).unwrap());
        for &i in order.iter().take(2) {
            let eval = |delta: f64| {
                let mut w = orig.clone();
                w[i] += delta;
                var.set(&Tensor::from_vec(w, shape.clone(), &dev).unwrap())
                    .unwrap();
                loss(&model, &x).to_scalar::<f64>().unwrap()
            };
            let fd = (eval(eps) - eval(-eps)) / (2.0 * eps);
            eval(0.0);
            let rel = (fd - g[i]).abs() / fd.abs().max(g[i].abs()).max(1e-12);
            assert!(
                rel < 1e-4,
                "{name}[{i}]: analytic {} vs finite difference {fd} (rel {rel:e})",
                g[i]
            );
            worst = worst.max(rel);
            checked += 1;
        }
        var.set(&Tensor::from_vec(orig, shape, &dev).unwrap())
            .unwrap();
    }
    eprintln!(
        "finite-difference check ({family:?}): {checked} coordinates, worst relative error {worst:.3e}"
    );
}

#[test]
fn gguf_qk_permutation_round_trips_and_matches_interleaved_rope() {
    use policy::gguf::{permute_rope_rows, unpermute_rope_rows};
    let dev = common::device();
    let (heads, hd, hidden, t) = (3usize, 8usize, 12usize, 5usize);
    let w = Tensor::randn(0f32, 1.0, (heads * hd, hidden), &dev).unwrap();
    let p = permute_rope_rows(&w, heads).unwrap();
    let back = unpermute_rope_rows(&p, heads).unwrap();
    assert_eq!(back.to_vec2::<f32>().unwrap(), w.to_vec2::<f32>().unwrap());

    // HF weights + half-split rope == GGUF (permuted) weights + interleaved rope, up to the
    // same within-head permutation of the output features.
    let x = Tensor::randn(0f32, 1.0, (1, t, hidden), &dev).unwrap();
    let inv: Vec<f32> = (0..hd / 2)
        .map(|i| 1.0 / 10000f32.powf(2.0 * i as f32 / hd as f32))
        .collect();
    let ang: Vec<f32> = (0..t)
        .flat_map(|p| inv.iter().map(move |f| p as f32 * f))
        .collect();
    let ang = Tensor::from_vec(ang, (t, hd / 2), &dev).unwrap();
    let (cos_h, sin_h) = (ang.cos().unwrap(), ang.sin().unwrap());
    let cos_full = Tensor::cat(&[&cos_h, &cos_h], 1).unwrap();
    let sin_full = Tensor::cat(&[&sin_h, &sin_h], 1).unwrap();
    let proj = |w: &Tensor| {
        policy::ops::reference::linear(&x, w)
            .unwrap()
            .reshape((1, t, heads, hd))
            .unwrap()
            .transpose(1, 2)
            .unwrap()
            .contiguous()
            .unwrap()
    };
    let ours = policy::ops::reference::rope(&proj(&w), &cos_full, &sin_full).unwrap();
    let theirs = candle_nn::rotary_emb::rope_i(&proj(&p), &cos_h, &sin_h).unwrap();
    // Map interleaved features (2j + s) back to half-split order (s * hd/2 + j).
    let theirs = theirs
        .reshape((1, heads, t, hd / 2, 2))
        .unwrap()
        .transpose(3, 4)
        .unwrap()
        .contiguous()
        .unwrap()
        .reshape((1, heads, t, hd))
        .unwrap();
    let diff = (ours - theirs)
        .unwrap()
        .abs()
        .unwrap()
        .max_all()
        .unwrap()
        .to_scalar::<f32>()
        .unwrap();
    assert!(diff < 1e-5, "rope mismatch {diff}");
}

/// A loss of every scored token's log-prob and entropy, from the final hidden states.
fn scores_loss(model: &Llama, ids: &Tensor, hidden: &Tensor) -> policy::Result<Tensor> {
    let scores = token_scores_of_hidden(model, ids, hidden)?;
    Ok((scores.logprobs.sum_all()? - (scores.entropy.sum_all()? * 0.3)?)?)
}

/// The largest |difference| between two gradients of `var`, relative to the largest |entry|.
fn relative_gap(a: &Tensor, b: &Tensor) -> f64 {
    let a = a.to_dtype(DType::F64).unwrap().flatten_all().unwrap().to_vec1::<f64>().unwrap();
    let b = b.to_dtype(DType::F64).unwrap().flatten_all().unwrap().to_vec1::<f64>().unwrap();
    let scale = a.iter().fold(0f64, |m, x| m.max(x.abs()));
    let gap = a.iter().zip(&b).fold(0f64, |m, (x, y)| m.max((x - y).abs()));
    gap / scale.max(1e-30)
}

/// Activation checkpointing ([`Llama::backward_recomputed`]) gives every trainable variable
/// the gradient of the ordinary backward, detached from any graph, and the same loss: with and without tied
/// embeddings, Llama and Qwen2 (q/k/v biases), f64 and f32, and with a LoRA adapter (where
/// only the adapter trains).
#[test]
fn recomputed_backward_matches_the_ordinary_one() {
    let cases = [
        (DType::F64, true, Family::Llama, false, 1e-12),
        (DType::F64, false, Family::Qwen2, false, 1e-12),
        (DType::F32, true, Family::Qwen2, false, 1e-5),
        (DType::F32, false, Family::Llama, true, 1e-5),
    ];
    for (dtype, tie, family, lora, tol) in cases {
        let cfg = LlamaConfig { tie_word_embeddings: tie, family, ..LlamaConfig::tiny() };
        let dev = common::device();
        let mut model = Llama::random(cfg.clone(), dtype, &dev, 13).unwrap();
        if lora {
            let lora_cfg = LoraConfig::new(2, 4.0, vec![TargetModule::QProj, TargetModule::DownProj]);
            model.attach_lora(LoraAdapters::new(&cfg, lora_cfg, dtype, &dev, 5).unwrap()).unwrap();
            // B starts at zero; give it values so that A's gradients are not zero.
            for (name, var) in model.trainable_vars() {
                if name.contains("lora_B") {
                    var.set(&var.as_tensor().ones_like().unwrap().affine(0.05, 0.0).unwrap()).unwrap();
                }
            }
        }
        let x = ids(&dev, cfg.vocab_size as u32);
        let what = format!("{dtype:?}, tied={tie}, {family:?}, lora={lora}");
        let ordinary_loss = scores_loss(&model, &x, &model.hidden(&x).unwrap()).unwrap();
        let ordinary = ordinary_loss.backward().unwrap();
        let (loss, recomputed) = model.backward_recomputed(&x, |h| scores_loss(&model, &x, h)).unwrap();
        let value = |t: &Tensor| t.to_dtype(DType::F64).unwrap().to_scalar::<f64>().unwrap();
        assert!(!loss.track_op(), "{what}: the returned loss is detached");
        close(value(&loss), value(&ordinary_loss), tol * value(&ordinary_loss).abs(), &what);
        let vars = model.trainable_vars();
        assert!(!vars.is_empty());
        for (name, var) in vars {
            let a = ordinary.get(var.as_tensor()).unwrap_or_else(|| panic!("{what}: {name}: no ordinary gradient"));
            let b = recomputed.get(var.as_tensor()).unwrap_or_else(|| panic!("{what}: {name}: no recomputed gradient"));
            // A gradient still attached to its graph would keep the recomputed layers alive.
            assert!(!b.track_op(), "{what}: {name}: the recomputed gradient holds a graph");
            let gap = relative_gap(a, b);
            assert!(gap <= tol, "{what}: {name}: gradients differ by {gap:e} of their largest entry");
        }
    }
}

fn close(a: f64, b: f64, tol: f64, what: &str) {
    assert!((a - b).abs() <= tol, "{what}: loss {a} vs {b}");
}

/// [`Llama::hidden_without_graph`] computes exactly [`Llama::hidden`]'s values with nothing
/// recorded, trainable base or LoRA adapter alike, so the log-prob passes built on it keep
/// no activations alive.
#[test]
fn the_forward_without_a_graph_equals_the_recorded_one() {
    let cfg = LlamaConfig::tiny();
    let dev = common::device();
    for lora in [false, true] {
        let mut model = Llama::random(cfg.clone(), DType::F32, &dev, 17).unwrap();
        if lora {
            let lora_cfg = LoraConfig::new(2, 4.0, vec![TargetModule::VProj, TargetModule::UpProj]);
            model.attach_lora(LoraAdapters::new(&cfg, lora_cfg, DType::F32, &dev, 3).unwrap()).unwrap();
        }
        let x = ids(&dev, cfg.vocab_size as u32);
        let recorded = model.hidden(&x).unwrap();
        let plain = model.hidden_without_graph(&x).unwrap();
        assert!(recorded.track_op(), "lora={lora}: the ordinary forward records a graph");
        assert!(!plain.track_op(), "lora={lora}: the forward without a graph records none");
        assert_eq!(relative_gap(&recorded, &plain), 0.0, "lora={lora}: the same values");
    }
}
