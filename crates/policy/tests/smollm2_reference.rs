//! The differentiable forward on the real SmolLM2-135M GGUF agrees with candle-transformers'
//! `quantized_llama` (weights dequantized to f32, and as shipped in Q4_1).

mod common;

use candle_core::quantized::gguf_file::{self, Content};
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{DType, Device, Tensor, D};
use candle_transformers::models::quantized_llama::ModelWeights;
use policy::chat::{apply_chatml, ChatMessage};
use std::io::Cursor;
use std::time::Instant;

fn stats(ours: &Tensor, theirs: &Tensor) -> (f32, f32, u32, u32) {
    let max_diff = (ours - theirs)
        .unwrap()
        .abs()
        .unwrap()
        .max_all()
        .unwrap()
        .to_scalar::<f32>()
        .unwrap();
    let scale = theirs
        .abs()
        .unwrap()
        .max_all()
        .unwrap()
        .to_scalar::<f32>()
        .unwrap();
    let a = ours.argmax(D::Minus1).unwrap().to_scalar::<u32>().unwrap();
    let b = theirs
        .argmax(D::Minus1)
        .unwrap()
        .to_scalar::<u32>()
        .unwrap();
    (max_diff, scale, a, b)
}

/// The same GGUF with every tensor dequantized to F32.
fn f32_gguf(path: &std::path::Path) -> Vec<u8> {
    let mut reader = std::fs::File::open(path).unwrap();
    let ct = Content::read(&mut reader).unwrap();
    let mut names: Vec<&String> = ct.tensor_infos.keys().collect();
    names.sort();
    let tensors: Vec<(String, QTensor)> = names
        .iter()
        .map(|n| {
            let q = ct.tensor(&mut reader, n, &Device::Cpu).unwrap();
            let t = q.dequantize(&Device::Cpu).unwrap();
            (
                n.to_string(),
                QTensor::quantize(&t, GgmlDType::F32).unwrap(),
            )
        })
        .collect();
    let md: Vec<(&str, &gguf_file::Value)> =
        ct.metadata.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let tr: Vec<(&str, &QTensor)> = tensors.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let mut buf = Cursor::new(Vec::new());
    gguf_file::write(&mut buf, &md, &tr).unwrap();
    buf.into_inner()
}

#[test]
fn logits_agree_with_quantized_llama() {
    let path = policy::assets::default_model_path().expect("fetch the default model");
    let dev = common::device();
    let t0 = Instant::now();
    let (model, tok) = policy::gguf::load(&path, DType::F32, &dev).unwrap();
    eprintln!("load + dequantize: {:.2?}", t0.elapsed());
    let cfg = model.config().clone();
    assert_eq!(
        (
            cfg.num_layers,
            cfg.hidden_size,
            cfg.num_heads,
            cfg.num_kv_heads
        ),
        (30, 576, 9, 3)
    );
    assert_eq!(cfg.vocab_size, 49152);
    assert!(cfg.tie_word_embeddings);
    assert_eq!(cfg.rope_theta, 100000.0);

    let prompt = apply_chatml(&[ChatMessage::user("What is the capital of France?")], true);
    let ids = tok.encode(&prompt).unwrap();
    let input = Tensor::new(ids.as_slice(), &dev)
        .unwrap()
        .unsqueeze(0)
        .unwrap();
    let ours = model.forward(&input).unwrap();
    let ours_last = ours.get(0).unwrap().get(ids.len() - 1).unwrap();

    // Reference 1: quantized_llama on the same weights dequantized to f32.
    let bytes = f32_gguf(&path);
    let mut cur = Cursor::new(bytes);
    let ct = Content::read(&mut cur).unwrap();
    let mut reference = ModelWeights::from_gguf(ct, &mut cur, &dev).unwrap();
    let theirs = reference.forward(&input, 0).unwrap().squeeze(0).unwrap();
    let (diff, scale, a, b) = stats(&ours_last, &theirs);
    eprintln!(
        "vs quantized_llama (f32 dequantized): max |diff| {diff:.3e}, max |logit| {scale:.2}, relative {:.3e}; argmax ours {a} ({:?}) theirs {b}",
        diff / scale,
        tok.decode(&[a], false).unwrap()
    );
    assert_eq!(a, b, "greedy next token differs");
    assert!(diff / scale < 1e-4, "logits differ: {diff} (scale {scale})");

    // Reference 2: quantized_llama on the Q4_1 weights as shipped (activations quantized too).
    let mut f = std::fs::File::open(&path).unwrap();
    let ct = Content::read(&mut f).unwrap();
    let mut shipped = ModelWeights::from_gguf(ct, &mut f, &dev).unwrap();
    let theirs_q = shipped.forward(&input, 0).unwrap().squeeze(0).unwrap();
    let (diff, scale, a, b) = stats(&ours_last, &theirs_q);
    eprintln!(
        "vs quantized_llama (Q4_1 as shipped): max |diff| {diff:.3e}, max |logit| {scale:.2}, relative {:.3e}; argmax ours {a} theirs {b}",
        diff / scale
    );
    assert!(
        diff / scale < 0.1,
        "logits far from the shipped Q4_1 model: {diff} (scale {scale})"
    );

    // Timing: forward of a 64-token prompt.
    let long: Vec<u32> = tok
        .encode(&prompt.repeat(8))
        .unwrap()
        .into_iter()
        .take(64)
        .collect();
    assert_eq!(long.len(), 64);
    let input = Tensor::new(long.as_slice(), &dev)
        .unwrap()
        .unsqueeze(0)
        .unwrap();
    model.forward(&input).unwrap();
    let t0 = Instant::now();
    let reps = 3;
    for _ in 0..reps {
        model.forward(&input).unwrap();
    }
    eprintln!(
        "forward, 64 tokens, batch 1: {:.1} ms",
        t0.elapsed().as_secs_f64() * 1000.0 / reps as f64
    );

    // Backward through the real model: all 272 parameters receive a gradient.
    let t0 = Instant::now();
    let scores = policy::logprobs::token_scores(&model, &input).unwrap();
    let grads = scores.logprobs.mean_all().unwrap().backward().unwrap();
    eprintln!(
        "forward + backward, 64 tokens: {:.1} ms",
        t0.elapsed().as_secs_f64() * 1000.0
    );
    let vars = model.named_vars();
    assert_eq!(vars.len(), 272);
    for (name, var) in &vars {
        let g = grads
            .get(var.as_tensor())
            .unwrap_or_else(|| panic!("{name}: no gradient"));
        let norm = g
            .sqr()
            .unwrap()
            .sum_all()
            .unwrap()
            .to_scalar::<f32>()
            .unwrap();
        assert!(
            norm.is_finite() && norm > 0.0,
            "{name}: gradient norm {norm}"
        );
    }
    drop(grads);

    // Log-probs: a batch of rows of different lengths gives the same numbers as one row at a time.
    let p1 = tok.encode(&prompt).unwrap();
    let r1 = tok
        .encode("The capital of France is Paris.<|im_end|>")
        .unwrap();
    let p2 = tok
        .encode("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n")
        .unwrap();
    let r2 = tok.encode("Hello!").unwrap();
    let both = policy::logprobs::response_logprobs(
        &model,
        &[(p1.clone(), r1.clone()), (p2.clone(), r2.clone())],
        0,
    )
    .unwrap();
    let one = policy::logprobs::response_logprobs(&model, &[(p2, r2.clone())], 0).unwrap();
    assert_eq!(both[0].len(), r1.len());
    assert_eq!(both[1].len(), r2.len());
    for (x, y) in both[1].iter().zip(one[0].iter()) {
        assert!((x - y).abs() < 1e-4, "batched {x} vs single {y}");
    }
    assert!(both.iter().flatten().all(|&l| l <= 0.0 && l.is_finite()));
    let mean: f32 = both[0].iter().sum::<f32>() / both[0].len() as f32;
    eprintln!("mean log-prob of 'The capital of France is Paris.': {mean:.3}");
    assert!(
        mean > -3.0,
        "the model should find its own kind of answer likely: {mean}"
    );
}

#[test]
fn score_text_rejects_bad_input_and_loading_rejects_bad_files() {
    let path = policy::assets::default_model_path().expect("fetch the default model");
    let (model, tok) = policy::gguf::load(&path, DType::F32, &common::device()).unwrap();
    let err = policy::logprobs::score_text(&model, &tok, "hi", "").unwrap_err();
    assert!(err.to_string().contains("empty response"), "{err}");
    let err = policy::logprobs::score_text(&model, &tok, "", "x").unwrap_err();
    assert!(err.to_string().contains("empty prompt"), "{err}");
    let long = "7".repeat(model.config().max_position + 1);
    let err = policy::logprobs::score_text(&model, &tok, &long, "x").unwrap_err();
    assert!(
        err.to_string().contains("exceed the context length"),
        "{err}"
    );
    let ok = policy::logprobs::score_text(
        &model,
        &tok,
        "<|im_start|>user\nhi<|im_end|>\n",
        "<|im_start|>assistant\nHello",
    )
    .unwrap();
    assert_eq!(ok.response_ids[0], 1);
    assert_eq!(ok.response_logprobs.len(), ok.response_ids.len());

    // A truncated GGUF and a file that is not GGUF are clear errors, not panics.
    let dir = std::env::temp_dir().join(format!("policy-bad-gguf-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    let truncated = dir.join("truncated.gguf");
    std::fs::write(&truncated, &bytes[..bytes.len() / 2]).unwrap();
    assert!(policy::gguf::load(&truncated, DType::F32, &common::device()).is_err());
    let header_only = dir.join("header.gguf");
    std::fs::write(&header_only, &bytes[..1000]).unwrap();
    assert!(policy::gguf::load(&header_only, DType::F32, &common::device()).is_err());
    let junk = dir.join("junk.gguf");
    std::fs::write(&junk, b"not a gguf file at all").unwrap();
    let err = policy::gguf::load(&junk, DType::F32, &common::device()).unwrap_err();
    assert!(err.to_string().contains("not a readable GGUF"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
