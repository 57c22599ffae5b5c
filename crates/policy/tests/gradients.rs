//! The training model's gradients: every parameter gets one, and they match finite differences.

mod common;

use candle_core::{DType, Device, Tensor, D};
use policy::model::{log_softmax_last_dim, Family, Llama, LlamaConfig};

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
        policy::model::linear(&x, w)
            .unwrap()
            .reshape((1, t, heads, hd))
            .unwrap()
            .transpose(1, 2)
            .unwrap()
            .contiguous()
            .unwrap()
    };
    let ours = policy::model::rope(&proj(&w), &cos_full, &sin_full).unwrap();
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
