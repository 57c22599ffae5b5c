//! The tiny random Qwen2 fixtures (made by `tools/make_qwen2_fixture.py` with PyTorch; see there)
//! load through the Hugging Face folder path and agree with transformers: the tokenizer's ids,
//! the logits at every position, greedy continuations (cached sampling and the full forward),
//! gradients for every parameter (biases included), and a save/reload round trip.

mod common;

use candle_core::{DType, Tensor};
use common::{fixture, fresh_dir};
use policy::sample::{sample, sample_batch, SampleOptions};
use policy::{Family, Llama, Tokenizer};
use std::collections::HashMap;

/// The texts of the fixture's reference inputs (the script's `INPUTS`, in the same order).
const INPUTS: [&str; 2] = [
    "<|im_start|>user\nclean a mug<|im_end|>\n<|im_start|>assistant\n",
    "You see a shelf 2. Go!",
];

/// The fixtures: folder name, tied head, stored dtype, number of reference inputs.
const FIXTURES: [(&str, bool, DType, usize); 2] = [
    ("qwen2-tiny", false, DType::BF16, 2),
    ("qwen2-tiny-tied", true, DType::F16, 1),
];

fn load(name: &str) -> (Llama, Tokenizer) {
    let dir = fixture(name);
    policy::load_model(dir.to_str().unwrap(), DType::F32, &common::device())
        .unwrap_or_else(|e| panic!("loading {name}: {e}"))
}

fn reference(name: &str) -> HashMap<String, Tensor> {
    let path = fixture(&format!("{name}-reference.safetensors"));
    candle_core::safetensors::load(&path, &common::device()).unwrap()
}

fn u32s(t: &Tensor) -> Vec<u32> {
    t.to_dtype(DType::U32).unwrap().to_vec1().unwrap()
}

fn max_abs(t: &Tensor) -> f32 {
    t.abs().unwrap().max_all().unwrap().to_scalar().unwrap()
}

#[test]
fn fixtures_are_qwen2_as_stored() {
    for (name, tied, stored, _) in FIXTURES {
        let dir = fixture(name);
        let weights = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "safetensors"))
            .collect::<Vec<_>>();
        for w in &weights {
            for (tname, t) in candle_core::safetensors::load(w, &common::device()).unwrap() {
                assert_eq!(t.dtype(), stored, "{name}: {tname}");
            }
        }
        assert_eq!(weights.len(), if tied { 1 } else { 2 }, "{name}: shards");
        let (model, tok) = load(name);
        let cfg = model.config();
        assert_eq!(cfg.family, Family::Qwen2);
        assert_eq!(cfg.tie_word_embeddings, tied);
        assert_eq!(cfg.rope_theta, 5000.0);
        assert_eq!(cfg.rms_norm_eps, 1e-5);
        assert_eq!(cfg.max_position, 64);
        // The embedding is padded beyond the tokenizer, as in Qwen2 models.
        assert!(tok.vocab_size() < cfg.vocab_size);
        let biases: Vec<f32> = model
            .named_vars()
            .iter()
            .filter(|(n, _)| n.ends_with("_proj.bias"))
            .map(|(_, v)| max_abs(v.as_tensor()))
            .collect();
        assert_eq!(biases.len(), 3 * cfg.num_layers);
        assert!(biases.iter().all(|&b| b > 0.1), "{name}: biases {biases:?}");
    }
}

#[test]
fn logits_and_greedy_tokens_match_transformers() {
    for (name, _, _, n_inputs) in FIXTURES {
        let (model, tok) = load(name);
        let refs = reference(name);
        for (i, text) in INPUTS.iter().enumerate().take(n_inputs) {
            let ids = u32s(&refs[&format!("input_ids_{i}")]);
            assert_eq!(
                tok.encode(text).unwrap(),
                ids,
                "{name}: tokenizer ids of input {i}"
            );
            let input = Tensor::new(ids.as_slice(), &common::device())
                .unwrap()
                .unsqueeze(0)
                .unwrap();
            let ours = model.forward(&input).unwrap().squeeze(0).unwrap();
            let theirs = &refs[&format!("logits_{i}")];
            let diff = max_abs(&(&ours - theirs).unwrap());
            let scale = max_abs(theirs);
            eprintln!(
                "{name} input {i}: {} positions, max |diff| {diff:.3e}, max |logit| {scale:.2}",
                ids.len()
            );
            assert!(diff < 1e-4, "{name} input {i}: logits differ by {diff}");

            let greedy = u32s(&refs[&format!("greedy_{i}")]);
            let opts = SampleOptions {
                max_new_tokens: greedy.len(),
                ..SampleOptions::default()
            };
            let cached = sample_batch(&model, &tok, std::slice::from_ref(&ids), &opts).unwrap();
            assert_eq!(
                cached[0].ids, greedy,
                "{name} input {i}: cached greedy tokens"
            );
            let uncached = sample(&model, &tok, &ids, &opts).unwrap();
            assert_eq!(
                uncached.ids, greedy,
                "{name} input {i}: uncached greedy tokens"
            );
        }
    }
}

#[test]
fn every_qwen2_parameter_gets_a_gradient() {
    let (model, _) = load("qwen2-tiny");
    let ids: Vec<u32> = (0..12u32).map(|i| (i * 37 + 5) % 270).collect();
    let input = Tensor::from_vec(ids, (2, 6), &common::device()).unwrap();
    let scores = policy::logprobs::token_scores(&model, &input).unwrap();
    let loss = scores.logprobs.mean_all().unwrap().neg().unwrap();
    let grads = loss.backward().unwrap();
    let vars = model.named_vars();
    assert_eq!(vars.len(), model.config().parameter_shapes().len());
    for (name, var) in vars {
        let g = grads
            .get(var.as_tensor())
            .unwrap_or_else(|| panic!("{name}: no gradient"));
        let norm: f32 = g.sqr().unwrap().sum_all().unwrap().to_scalar().unwrap();
        assert!(
            norm.is_finite() && norm > 0.0,
            "{name}: gradient norm {norm}"
        );
    }
}

/// Sharded weights load without `model.safetensors.index.json` too (every `*.safetensors`).
#[test]
fn shards_without_an_index_load() {
    let dir = common::copy_fixture("qwen2-tiny", "shards-no-index");
    std::fs::remove_file(dir.join("model.safetensors.index.json")).unwrap();
    let (a, _) = load("qwen2-tiny");
    let (b, _) = policy::load_model(dir.to_str().unwrap(), DType::F32, &common::device()).unwrap();
    let input = Tensor::new(&[[3u32, 100, 7, 250]], &common::device()).unwrap();
    let diff = max_abs(&(a.forward(&input).unwrap() - b.forward(&input).unwrap()).unwrap());
    assert_eq!(diff, 0.0);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `save_model` writes a Qwen2 folder (architecture, biases, tokenizer) that reloads through
/// the same path with identical logits and tokenizer.
#[test]
fn qwen2_save_and_reload() {
    for (name, tied, _, _) in FIXTURES {
        let (model, tok) = load(name);
        let dir = fresh_dir(&format!("save-{name}"));
        policy::checkpoint::save_model(&model, &tok, &dir).unwrap();
        let cfg: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("config.json")).unwrap())
                .unwrap();
        assert_eq!(cfg["architectures"][0], "Qwen2ForCausalLM");
        assert_eq!(cfg["model_type"], "qwen2");
        assert_eq!(cfg["tie_word_embeddings"], tied);
        assert_eq!(cfg["rope_theta"], 5000.0);
        let saved =
            candle_core::safetensors::load(dir.join("model.safetensors"), &common::device()).unwrap();
        assert!(saved.contains_key("model.layers.0.self_attn.q_proj.bias"));
        assert_eq!(saved.contains_key("lm_head.weight"), !tied);

        let (back, back_tok) =
            policy::load_model(dir.to_str().unwrap(), DType::F32, &common::device()).unwrap();
        assert_eq!(back.config(), model.config());
        assert_eq!(
            back_tok.encode(INPUTS[0]).unwrap(),
            tok.encode(INPUTS[0]).unwrap()
        );
        let input = Tensor::new(&[[1u32, 2, 40, 200, 9]], &common::device()).unwrap();
        let diff =
            max_abs(&(model.forward(&input).unwrap() - back.forward(&input).unwrap()).unwrap());
        assert_eq!(diff, 0.0, "{name}: logits changed by the round trip");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
