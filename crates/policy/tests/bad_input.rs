//! Bad input gives a clear error naming what was wrong (file, key, value, tensor), never a
//! panic: missing or truncated weights (safetensors and GGUF), an unknown architecture, a
//! missing tensor, a shape mismatch, a tokenizer that does not fit the model, and prompts
//! longer than the context (log-probs, sampling, the forward pass).

mod common;

use candle_core::quantized::gguf_file::{self, Value};
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{DType, Tensor};
use common::{copy_fixture, fixture};
use policy::sample::{sample, sample_batch, SampleOptions, StopReason};
use policy::{Llama, LlamaConfig, Tokenizer};
use std::path::Path;

/// `policy::load_model` on `path`, expecting an error; returns its message.
fn load_err(path: &Path) -> String {
    match policy::load_model(path.to_str().unwrap(), DType::F32, &common::device()) {
        Ok(_) => panic!("{} loaded, expected an error", path.display()),
        Err(e) => e.to_string(),
    }
}

fn assert_mentions(err: &str, parts: &[&str]) {
    for p in parts {
        assert!(err.contains(p), "error does not mention {p:?}: {err}");
    }
}

fn edit_config(dir: &Path, edit: impl FnOnce(&mut serde_json::Value)) {
    let path = dir.join("config.json");
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    edit(&mut v);
    std::fs::write(&path, serde_json::to_string_pretty(&v).unwrap()).unwrap();
}

fn truncate(path: &Path, keep: usize) {
    let bytes = std::fs::read(path).unwrap();
    std::fs::write(path, &bytes[..keep]).unwrap();
}

#[test]
fn missing_model_path_or_weights() {
    let err = load_err(Path::new("/nonexistent/model.gguf"));
    assert_mentions(&err, &["/nonexistent/model.gguf", "neither a path"]);

    let dir = copy_fixture("qwen2-tiny-tied", "no-weights");
    std::fs::remove_file(dir.join("model.safetensors")).unwrap();
    assert_mentions(
        &load_err(&dir),
        &[dir.to_str().unwrap(), "no *.safetensors"],
    );

    // A shard named by the index is missing.
    let dir = copy_fixture("qwen2-tiny", "missing-shard");
    std::fs::remove_file(dir.join("model-00002-of-00002.safetensors")).unwrap();
    assert_mentions(&load_err(&dir), &["model-00002-of-00002.safetensors"]);

    // The weights file itself instead of its folder.
    let file = fixture("qwen2-tiny-tied").join("model.safetensors");
    assert_mentions(&load_err(&file), &["model.safetensors", "folder"]);

    // No tokenizer.json.
    let dir = copy_fixture("qwen2-tiny-tied", "no-tokenizer");
    std::fs::remove_file(dir.join("tokenizer.json")).unwrap();
    assert_mentions(&load_err(&dir), &["tokenizer.json"]);
}

#[test]
fn truncated_safetensors_names_the_file() {
    for keep in [4, 100, 20_000] {
        let dir = copy_fixture("qwen2-tiny-tied", &format!("truncated-{keep}"));
        truncate(&dir.join("model.safetensors"), keep);
        assert_mentions(&load_err(&dir), &["model.safetensors", "safetensors"]);
    }
}

#[test]
fn bad_config_json_names_file_key_and_value() {
    let dir = copy_fixture("qwen2-tiny-tied", "arch");
    edit_config(&dir, |v| {
        v["architectures"] = serde_json::json!(["MambaForCausalLM"])
    });
    assert_mentions(
        &load_err(&dir),
        &[
            "config.json",
            "`architectures`",
            "MambaForCausalLM",
            "Qwen2ForCausalLM",
        ],
    );

    let dir = copy_fixture("qwen2-tiny-tied", "model-type");
    edit_config(&dir, |v| {
        v.as_object_mut().unwrap().remove("architectures");
        v["model_type"] = serde_json::json!("gpt2");
    });
    assert_mentions(&load_err(&dir), &["config.json", "`model_type`", "gpt2"]);

    let dir = copy_fixture("qwen2-tiny-tied", "bad-value");
    edit_config(&dir, |v| v["num_hidden_layers"] = serde_json::json!(-2));
    assert_mentions(
        &load_err(&dir),
        &["config.json", "`num_hidden_layers`", "-2"],
    );

    let dir = copy_fixture("qwen2-tiny-tied", "not-json");
    std::fs::write(dir.join("config.json"), "{\"vocab_size\": ").unwrap();
    assert_mentions(&load_err(&dir), &["config.json", "JSON"]);
}

#[test]
fn missing_tensor_and_shape_mismatch_name_the_tensor() {
    let dir = copy_fixture("qwen2-tiny-tied", "missing-tensor");
    let weights = dir.join("model.safetensors");
    let mut tensors = candle_core::safetensors::load(&weights, &common::device()).unwrap();
    tensors
        .remove("model.layers.0.self_attn.k_proj.bias")
        .unwrap();
    candle_core::safetensors::save(&tensors, &weights).unwrap();
    assert_mentions(&load_err(&dir), &["model.layers.0.self_attn.k_proj.bias"]);

    let dir = copy_fixture("qwen2-tiny-tied", "shape");
    edit_config(&dir, |v| v["intermediate_size"] = serde_json::json!(50));
    assert_mentions(
        &load_err(&dir),
        &[
            "model.layers.0.mlp.gate_proj.weight",
            "[48, 32]",
            "[50, 32]",
        ],
    );
}

#[test]
fn tokenizer_mismatch_is_named() {
    // A tokenizer with more ids than the embedding has rows.
    let dir = copy_fixture("qwen2-tiny-tied", "tok-mismatch");
    let big = common::word_tokenizer(400);
    big.inner().save(dir.join("tokenizer.json"), false).unwrap();
    assert_mentions(
        &load_err(&dir),
        &["tokenizer mismatch", "tokenizer.json", "276"],
    );

    let dir = copy_fixture("qwen2-tiny-tied", "tok-garbage");
    std::fs::write(dir.join("tokenizer.json"), "{\"model\": 3}").unwrap();
    assert_mentions(&load_err(&dir), &["tokenizer", "tokenizer.json"]);

    // The same check for a GGUF whose vocabulary is longer than its embedding.
    let dir = common::fresh_dir("gguf-mismatch");
    let path = dir.join("tiny.gguf");
    let model = Llama::random(LlamaConfig::tiny(), DType::F32, &common::device(), 3).unwrap();
    std::fs::write(&path, tiny_gguf(&model, 40)).unwrap();
    assert_mentions(
        &load_err(&path),
        &["tokenizer mismatch", "tiny.gguf", "37 rows"],
    );
}

/// A Llama GGUF of `model` (f32 tensors, llama.cpp's names and rope row order) with a
/// byte-free toy vocabulary of `vocab` tokens (three ChatML control tokens, then letters).
fn tiny_gguf(model: &Llama, vocab: usize) -> Vec<u8> {
    let cfg = model.config();
    let mut tokens = vec!["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
        .into_iter()
        .map(String::from)
        .collect::<Vec<_>>();
    tokens.extend((0..vocab - 3).map(|i| format!("t{i}")));
    let types: Vec<Value> = (0..vocab)
        .map(|i| Value::I32(if i < 3 { 3 } else { 1 }))
        .collect();
    let u32v = |x: usize| Value::U32(x as u32);
    let metadata = vec![
        ("general.architecture", Value::String("llama".into())),
        ("llama.embedding_length", u32v(cfg.hidden_size)),
        ("llama.feed_forward_length", u32v(cfg.intermediate_size)),
        ("llama.block_count", u32v(cfg.num_layers)),
        ("llama.attention.head_count", u32v(cfg.num_heads)),
        ("llama.attention.head_count_kv", u32v(cfg.num_kv_heads)),
        ("llama.rope.dimension_count", u32v(cfg.head_dim)),
        ("llama.rope.freq_base", Value::F32(cfg.rope_theta as f32)),
        (
            "llama.attention.layer_norm_rms_epsilon",
            Value::F32(cfg.rms_norm_eps as f32),
        ),
        ("llama.context_length", u32v(cfg.max_position)),
        ("tokenizer.ggml.model", Value::String("gpt2".into())),
        (
            "tokenizer.ggml.tokens",
            Value::Array(tokens.into_iter().map(Value::String).collect()),
        ),
        ("tokenizer.ggml.merges", Value::Array(Vec::new())),
        ("tokenizer.ggml.token_type", Value::Array(types)),
    ];
    let tensors: Vec<(String, QTensor)> = model
        .named_vars()
        .into_iter()
        .map(|(name, var)| {
            let (gguf_name, t) = to_gguf(&name, var.as_tensor(), cfg);
            (gguf_name, QTensor::quantize(&t, GgmlDType::F32).unwrap())
        })
        .collect();
    let md: Vec<(&str, &Value)> = metadata.iter().map(|(k, v)| (*k, v)).collect();
    let tr: Vec<(&str, &QTensor)> = tensors.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let mut buf = std::io::Cursor::new(Vec::new());
    gguf_file::write(&mut buf, &md, &tr).unwrap();
    buf.into_inner()
}

/// llama.cpp's name for an HF tensor, with Q/K rows permuted for interleaved rope.
fn to_gguf(name: &str, t: &Tensor, cfg: &LlamaConfig) -> (String, Tensor) {
    match name {
        "model.embed_tokens.weight" => return ("token_embd.weight".into(), t.clone()),
        "model.norm.weight" => return ("output_norm.weight".into(), t.clone()),
        "lm_head.weight" => return ("output.weight".into(), t.clone()),
        _ => {}
    }
    let rest = name.strip_prefix("model.layers.").unwrap();
    let (layer, leaf) = rest.split_once('.').unwrap();
    let permute = |heads| policy::gguf::permute_rope_rows(t, heads).unwrap();
    let (short, t) = match leaf {
        "input_layernorm.weight" => ("attn_norm", t.clone()),
        "self_attn.q_proj.weight" => ("attn_q", permute(cfg.num_heads)),
        "self_attn.k_proj.weight" => ("attn_k", permute(cfg.num_kv_heads)),
        "self_attn.v_proj.weight" => ("attn_v", t.clone()),
        "self_attn.o_proj.weight" => ("attn_output", t.clone()),
        "post_attention_layernorm.weight" => ("ffn_norm", t.clone()),
        "mlp.gate_proj.weight" => ("ffn_gate", t.clone()),
        "mlp.up_proj.weight" => ("ffn_up", t.clone()),
        "mlp.down_proj.weight" => ("ffn_down", t.clone()),
        other => panic!("no GGUF name for {other}"),
    };
    (format!("blk.{layer}.{short}.weight"), t)
}

#[test]
fn truncated_gguf_names_the_file() {
    let dev = common::device();
    let model = Llama::random(LlamaConfig::tiny(), DType::F32, &dev, 5).unwrap();
    let bytes = tiny_gguf(&model, 37);
    let dir = common::fresh_dir("gguf-truncated");
    let path = dir.join("tiny.gguf");

    // The intact file loads and gives the model's logits (the writer above is right).
    std::fs::write(&path, &bytes).unwrap();
    let (loaded, _) = policy::load_model(path.to_str().unwrap(), DType::F32, &dev).unwrap();
    let ids = Tensor::new(&[[1u32, 5, 9, 30]], &dev).unwrap();
    let diff = (model.forward(&ids).unwrap() - loaded.forward(&ids).unwrap())
        .unwrap()
        .abs()
        .unwrap()
        .max_all()
        .unwrap()
        .to_scalar::<f32>()
        .unwrap();
    assert!(diff < 1e-5, "GGUF round trip changed the logits by {diff}");

    // Cut in the magic, in the metadata, and in the tensor data.
    for keep in [2, 200, bytes.len() / 2, bytes.len() - 8] {
        std::fs::write(&path, &bytes[..keep]).unwrap();
        assert_mentions(&load_err(&path), &["tiny.gguf"]);
    }
    std::fs::write(&path, b"not a gguf file at all").unwrap();
    assert_mentions(&load_err(&path), &["tiny.gguf", "GGUF"]);
}

fn tiny_qwen2() -> (Llama, Tokenizer) {
    let dir = fixture("qwen2-tiny-tied");
    policy::load_model(dir.to_str().unwrap(), DType::F32, &common::device()).unwrap()
}

/// A prompt of `n` tokens (the fixture's context is 64).
fn long_ids(n: usize) -> Vec<u32> {
    (0..n as u32).map(|i| 3 + i % 200).collect()
}

#[test]
fn prompt_longer_than_the_context() {
    let (model, tok) = tiny_qwen2();
    assert_eq!(model.config().max_position, 64);
    let long_text = "a mug ".repeat(40); // 80 tokens
    assert!(tok.encode(&long_text).unwrap().len() > 64);

    let err = policy::logprobs::score_text(&model, &tok, &long_text, "ok").unwrap_err();
    assert_mentions(&err.to_string(), &["context length 64"]);
    let err = policy::logprobs::score_text(&model, &tok, "a mug", &long_text).unwrap_err();
    assert_mentions(&err.to_string(), &["context length 64"]);
    let err = policy::logprobs::response_logprobs(&model, &[(long_ids(60), long_ids(10))], 0)
        .unwrap_err();
    assert_mentions(&err.to_string(), &["context length 64"]);

    let input = Tensor::new(long_ids(65).as_slice(), &common::device())
        .unwrap()
        .unsqueeze(0)
        .unwrap();
    let err = model.forward(&input).unwrap_err();
    assert_mentions(&err.to_string(), &["65 tokens", "context length 64"]);

    let opts = SampleOptions {
        max_new_tokens: 8,
        ..SampleOptions::default()
    };
    for n in [64, 65, 200] {
        let err = sample_batch(&model, &tok, &[long_ids(3), long_ids(n)], &opts).unwrap_err();
        assert_mentions(&err.to_string(), &["row 1", "context length 64"]);
        let err = sample(&model, &tok, &long_ids(n), &opts).unwrap_err();
        assert_mentions(&err.to_string(), &["context length 64"]);
    }
    // A prompt that fits but leaves less room than asked for stops at the context's end.
    let out = sample_batch(&model, &tok, &[long_ids(60)], &opts).unwrap();
    assert_eq!(out[0].stop_reason, StopReason::ContextFull);
    assert_eq!(out[0].ids.len(), 4);
}
