//! SFT end to end with a tiny random Llama (the SmolLM2 tokenizer) on short samples in the
//! cold start's reply format: the loss falls, checkpoints load back as models, and a resumed
//! run ends with exactly the weights of an uninterrupted one. (Short samples keep it fast:
//! the 49k-token vocabulary's logits dominate the cost of long cold-start prompts.)

use candle_core::{DType, Device, Tensor};
use policy::{Llama, LlamaConfig, Tokenizer};
use trainer::coldstart::SftSample;
use trainer::config::SftSection;
use trainer::checkpoints::load_model;
use trainer::sft::{train, SftReport};
use trainer::{RunConfig, RunDir};

fn tokenizer() -> Tokenizer {
    let path = policy::assets::default_model_path().unwrap();
    policy::gguf::GgufFile::open(&path)
        .unwrap()
        .tokenizer()
        .unwrap()
}

fn tiny(vocab: usize) -> Llama {
    let cfg = LlamaConfig {
        vocab_size: vocab,
        hidden_size: 32,
        intermediate_size: 64,
        num_layers: 2,
        num_heads: 4,
        num_kv_heads: 2,
        head_dim: 8,
        max_position: 1024,
        ..LlamaConfig::tiny()
    };
    Llama::random(cfg, DType::F32, &Device::Cpu, 11).unwrap()
}

/// Samples 1..=n, each the prompt and reply `sample(i)` makes.
fn numbered(n: usize, sample: impl Fn(usize) -> (String, String)) -> Vec<SftSample> {
    (1..=n)
        .map(|i| {
            let (prompt, response) = sample(i);
            SftSample { prompt, response }
        })
        .collect()
}

/// The tests' SFT settings: a large learning rate for a tiny model, a log line every step,
/// no evaluation.
fn quick_sft() -> SftSection {
    SftSection {
        lr: 1e-2,
        log_every: 1,
        eval_episodes: 0,
        ..SftSection::default()
    }
}

fn weights(model: &Llama) -> Vec<(String, Vec<f32>)> {
    model
        .named_vars()
        .into_iter()
        .map(|(n, v)| {
            (
                n,
                v.as_tensor()
                    .flatten_all()
                    .and_then(|t: Tensor| t.to_vec1())
                    .unwrap(),
            )
        })
        .collect()
}

#[test]
fn sft_learns_checkpoints_and_resumes_exactly() {
    let mut samples = numbered(8, |i| {
        (
            format!("Task: put a mug in cabinet. Now: you arrive at cabinet {i}. Actions: move mug 1 to cabinet {i}, look"),
            format!("<monitor>I hold mug 1 at cabinet {i}, so I put it there.</monitor>\n<action>move mug 1 to cabinet {i}</action>"),
        )
    });
    samples.push(SftSample {
        prompt: "too long ".repeat(100),
        response: "<monitor>x</monitor><action>look</action>".into(),
    });
    let tok = tokenizer();
    let config = RunConfig {
        sft: SftSection {
            epochs: 3,
            warmup_ratio: 0.2,
            batch_size: 2,
            grad_accum: 2,
            save_every: 2,
            max_seq_len: 96,
            ..quick_sft()
        },
        ..RunConfig::default()
    };
    let root = std::env::temp_dir().join(format!("trainer-sft-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);

    let model = tiny(tok.vocab_size());
    let dir = RunDir::create(&root.join("a"), &config).unwrap();
    let report = train(&config, &model, &tok, &samples, &dir, None).unwrap();
    assert_eq!((report.samples, report.skipped, report.steps), (8, 1, 6));
    assert_eq!(report.log.len(), 6);
    assert!(
        report.log[5].loss < report.log[0].loss * 0.9,
        "the loss falls: {:?}",
        report.log.iter().map(|l| l.loss).collect::<Vec<_>>()
    );
    assert!(
        report.log[5].lr < report.log[1].lr,
        "cosine decay after warmup"
    );
    let metrics = std::fs::read_to_string(dir.file("metrics.jsonl")).unwrap();
    assert_eq!(metrics.lines().count(), 6);
    for file in ["config.json", "model.safetensors", "tokenizer.json"] {
        assert!(report.final_dir.join(file).is_file(), "final/{file}");
    }
    assert!(dir.file("checkpoints/step-4/optimizer").is_dir());
    for saved in [
        report.final_dir.join("rlvmr.toml"),
        dir.file("checkpoints/step-4/rlvmr.toml"),
    ] {
        assert_eq!(
            RunConfig::from_file(&saved).unwrap(),
            config,
            "{} holds the run config (eval builds the model's prompts from it)",
            saved.display()
        );
    }
    let (reloaded, _) = load_model(report.final_dir.to_str().unwrap(), &Device::Cpu).unwrap();
    assert_eq!(
        weights(&reloaded),
        weights(&model),
        "final/ loads back as the trained model"
    );

    let resumed = tiny(tok.vocab_size());
    let dir_b = RunDir::create(&root.join("b"), &config).unwrap();
    let report_b = train(
        &config,
        &resumed,
        &tok,
        &samples,
        &dir_b,
        Some(&dir.file("checkpoints/step-4")),
    )
    .unwrap();
    assert_eq!(report_b.log.first().map(|l| l.step), Some(5));
    assert_eq!(
        weights(&resumed),
        weights(&model),
        "resume = uninterrupted training"
    );

    let other = RunConfig {
        sft: SftSection {
            epochs: 4,
            ..config.sft.clone()
        },
        ..config.clone()
    };
    let err = train(
        &other,
        &tiny(tok.vocab_size()),
        &tok,
        &samples,
        &dir_b,
        Some(&dir.file("checkpoints/step-4")),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("steps"), "{err}");
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn sft_from_scratch_trains_its_own_tokenizer_and_model() {
    use policy::scratch::ScratchConfig;
    use trainer::sft::initial_model;
    let samples = numbered(12, |i| {
        (
            format!("Task: put a mug in cabinet. Now: you arrive at cabinet {i}. Actions: move mug 1 to cabinet {i}, look"),
            format!("<monitor>I hold mug 1 at cabinet {i}.</monitor>\n<action>move mug 1 to cabinet {i}</action>"),
        )
    });
    let mut config = RunConfig {
        sft: SftSection {
            epochs: 4,
            warmup_ratio: 0.1,
            batch_size: 4,
            grad_accum: 1,
            save_every: 6,
            max_seq_len: 256,
            ..quick_sft()
        },
        scratch: ScratchConfig {
            vocab_size: 320,
            hidden_size: 32,
            intermediate_size: 64,
            num_layers: 2,
            num_heads: 4,
            num_kv_heads: 2,
            max_position: 256,
            ..ScratchConfig::default()
        },
        ..RunConfig::default()
    };
    config.model.path = "scratch".into();
    config.validate().unwrap();
    let root = std::env::temp_dir().join(format!("trainer-sft-scratch-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);

    let (model, tok) = initial_model(&config, &samples, None).unwrap();
    assert!(tok.vocab_size() <= 320, "{}", tok.vocab_size());
    assert_eq!(model.config().vocab_size, tok.vocab_size());
    let text = &samples[3].response;
    assert!(
        tok.encode(text).unwrap().len() * 2 < text.len(),
        "the BPE learned this corpus's words"
    );
    let (again, _) = initial_model(&config, &samples, None).unwrap();
    assert_eq!(weights(&again), weights(&model), "seeded");

    let dir = RunDir::create(&root.join("a"), &config).unwrap();
    let report = train(&config, &model, &tok, &samples, &dir, None).unwrap();
    let losses: Vec<f64> = report.log.iter().map(|l| l.loss).collect();
    assert!(losses[losses.len() - 1] < losses[0] * 0.8, "{losses:?}");
    let (reloaded, reloaded_tok) = load_model(report.final_dir.to_str().unwrap(), &Device::Cpu).unwrap();
    assert_eq!(weights(&reloaded), weights(&model));
    assert_eq!(reloaded_tok.encode(text).unwrap(), tok.encode(text).unwrap());

    // Resuming takes the tokenizer and weights from the checkpoint, not a new BPE.
    let checkpoint = dir.file("checkpoints/step-6");
    let (resumed, resumed_tok) = initial_model(&config, &samples[..2], Some(&checkpoint)).unwrap();
    assert_eq!(resumed_tok.vocab_size(), tok.vocab_size());
    let dir_b = RunDir::create(&root.join("b"), &config).unwrap();
    train(&config, &resumed, &resumed_tok, &samples, &dir_b, Some(&checkpoint)).unwrap();
    assert_eq!(weights(&resumed), weights(&model), "resume = uninterrupted");

    config.scratch.hidden_size = 30;
    let err = config.validate().unwrap_err().to_string();
    assert!(err.contains("scratch") && err.contains("hidden_size"), "{err}");
    let _ = std::fs::remove_dir_all(&root);
}

/// Mean negative log-likelihood of the prompt tokens (after the first) of `samples`.
fn prompt_nll(model: &Llama, tok: &Tokenizer, samples: &[SftSample]) -> f64 {
    let mut total = 0.0;
    let mut count = 0;
    for s in samples {
        let ids = tok.encode(&s.prompt).unwrap();
        let input = Tensor::new(ids.as_slice(), &Device::Cpu).unwrap().unsqueeze(0).unwrap();
        let scores = policy::logprobs::token_scores(model, &input).unwrap();
        let logp: Vec<f32> = scores.logprobs.flatten_all().unwrap().to_vec1().unwrap();
        total -= logp.iter().map(|&x| x as f64).sum::<f64>();
        count += logp.len();
    }
    total / count as f64
}

/// A fresh [`tiny`] model trained on `samples` under `sft` in a temporary run folder named
/// by `tag` (removed afterwards): the trained model and the report.
fn train_tiny(sft: SftSection, tag: &str, tok: &Tokenizer, samples: &[SftSample]) -> (Llama, SftReport) {
    let config = RunConfig { sft, ..RunConfig::default() };
    let root = std::env::temp_dir().join(format!("trainer-sft-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let model = tiny(tok.vocab_size());
    let dir = RunDir::create(&root, &config).unwrap();
    let report = train(&config, &model, tok, samples, &dir, None).unwrap();
    let _ = std::fs::remove_dir_all(&root);
    (model, report)
}

#[test]
fn a_prompt_loss_weight_trains_on_the_prompt_and_logs_the_response_loss() {
    let samples = numbered(8, |i| {
        (
            format!("Now: you arrive at cabinet {i}. Actions: move mug 1 to cabinet {i}, look"),
            format!("<monitor>At cabinet {i}.</monitor>\n<action>move mug 1 to cabinet {i}</action>"),
        )
    });
    let tok = tokenizer();
    let run = |weight: f64| {
        let sft = SftSection {
            epochs: 3,
            batch_size: 4,
            grad_accum: 1,
            max_seq_len: 128,
            prompt_loss_weight: weight,
            ..quick_sft()
        };
        let (model, report) = train_tiny(sft, &format!("pw{weight}"), &tok, &samples);
        (report.log[0].loss, prompt_nll(&model, &tok, &samples))
    };
    let (first_plain, prompt_plain) = run(0.0);
    let (first_weighted, prompt_weighted) = run(1.0);
    assert!(
        (first_plain - first_weighted).abs() < 1e-9,
        "the logged loss is the response's: {first_plain} vs {first_weighted}"
    );
    assert!(
        prompt_weighted < prompt_plain - 0.5,
        "training on the prompt lowers its loss: {prompt_weighted} vs {prompt_plain}"
    );
}

/// `sft.gradient_checkpointing` recomputes each layer's activations in the backward: the
/// same run logs the same losses and gradient norms, step for step, as one without (with a
/// prompt loss, so both of the step's loss terms go through it).
#[test]
fn gradient_checkpointing_trains_as_the_ordinary_backward_does() {
    let samples = numbered(6, |i| {
        (
            format!("Task: heat a mug. Now: you arrive at microwave {i}. Actions: heat mug 1 with microwave {i}, look"),
            format!("<monitor>I hold mug 1, so I heat it.</monitor>\n<action>heat mug 1 with microwave {i}</action>"),
        )
    });
    let tok = tokenizer();
    let run = |checkpointing: bool| {
        let sft = SftSection {
            epochs: 2,
            batch_size: 2,
            grad_accum: 2,
            max_seq_len: 96,
            prompt_loss_weight: 0.5,
            gradient_checkpointing: checkpointing,
            ..quick_sft()
        };
        let (_, report) = train_tiny(sft, &format!("ckpt-{checkpointing}"), &tok, &samples);
        report.log.iter().map(|l| (l.loss, l.grad_norm)).collect::<Vec<_>>()
    };
    let (ordinary, recomputed) = (run(false), run(true));
    assert_eq!(ordinary.len(), 4);
    for (step, (a, b)) in ordinary.iter().zip(&recomputed).enumerate() {
        assert!((a.0 - b.0).abs() <= 1e-4 * a.0.abs(), "step {step}: loss {} vs {}", a.0, b.0);
        assert!((a.1 - b.1).abs() <= 1e-4 * a.1.abs(), "step {step}: grad norm {} vs {}", a.1, b.1);
    }
}

/// `sft.lora_rank` trains an adapter on a pretrained folder: the base weights stay as they
/// were, checkpoints hold the adapter (PEFT) and the optimizer, `final/` the merged model,
/// and a resumed run ends with exactly the adapter of an uninterrupted one.
#[test]
fn lora_sft_keeps_the_base_saves_merged_and_resumes_exactly() {
    use trainer::sft::initial_model;
    let samples = numbered(8, |i| {
        (
            format!("Task: cool a mug. Now: you arrive at fridge {i}. Actions: cool mug 1 with fridge {i}, look"),
            format!("<monitor>I hold mug 1 at fridge {i}.</monitor>\n<action>cool mug 1 with fridge {i}</action>"),
        )
    });
    let tok = tokenizer();
    let root = std::env::temp_dir().join(format!("trainer-sft-lora-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let base_dir = root.join("base");
    policy::checkpoint::save_model(&tiny(tok.vocab_size()), &tok, &base_dir).unwrap();
    let mut config = RunConfig::default();
    config.model.path = base_dir.display().to_string();
    config.sft = SftSection {
        epochs: 3,
        lr: 5e-2,
        batch_size: 2,
        grad_accum: 2,
        save_every: 2,
        max_seq_len: 96,
        lora_rank: 4,
        lora_alpha: 16.0,
        ..quick_sft()
    };
    config.validate().unwrap();

    let (model, tok) = initial_model(&config, &samples, None).unwrap();
    assert!(model.lora().is_some(), "the adapter is attached");
    let base = weights(&model);
    let dir = RunDir::create(&root.join("a"), &config).unwrap();
    let report = train(&config, &model, &tok, &samples, &dir, None).unwrap();
    let losses: Vec<f64> = report.log.iter().map(|l| l.loss).collect();
    assert!(losses[losses.len() - 1] < losses[0] - 0.1, "the loss falls: {losses:?}");
    assert_eq!(weights(&model), base, "the base weights are frozen");
    let checkpoint = dir.file("checkpoints/step-4");
    assert!(checkpoint.join("adapter_model.safetensors").is_file());
    assert!(!checkpoint.join("model.safetensors").exists(), "a checkpoint holds the adapter only");
    let merged = weights(&model.merged().unwrap());
    let (saved, _) = load_model(report.final_dir.to_str().unwrap(), &Device::Cpu).unwrap();
    assert_eq!(weights(&saved), merged, "final/ is the merged model");
    assert_ne!(merged, base, "the adapter changed what the model computes");

    let (resumed, _) = initial_model(&config, &samples, Some(&checkpoint)).unwrap();
    let dir_b = RunDir::create(&root.join("b"), &config).unwrap();
    train(&config, &resumed, &tok, &samples, &dir_b, Some(&checkpoint)).unwrap();
    assert_eq!(weights(&resumed.merged().unwrap()), merged, "resume = uninterrupted training");
    let _ = std::fs::remove_dir_all(&root);
}
