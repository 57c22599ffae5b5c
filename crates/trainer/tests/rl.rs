//! The RL loop on a toy environment a tiny model can master: a hall with four doors, one of
//! which opens (door 3). A model fine-tuned on uniformly random choices wins about a quarter
//! of its one-step episodes; GRPO-MR must raise that to nearly every episode in a few
//! iterations, and the same run with the outcome's sign flipped must drive it down instead.

use std::path::{Path, PathBuf};

use rlvmr_core::{Env, EnvError, PromptEnv, StepResult};
use trainer::coldstart::SftSample;
use trainer::collector::{collect, grouped_specs};
use trainer::config::RunConfig;
use trainer::envs::EnvProvider;
use trainer::policies::RandomPolicy;
use trainer::record::TaskRef;
use trainer::rl::update::{ppo_update, reply_logprobs, Sample, UpdateOptions};
use trainer::RunDir;

const WINNING: &str = "open door 3";

struct Doors {
    task: String,
    last: String,
}

impl Doors {
    fn result(&self, observation: &str, won: bool) -> StepResult {
        StepResult {
            observation: observation.into(),
            admissible_actions: Some((1..=4).map(|d| format!("open door {d}")).collect()),
            won,
            done: won,
            score: if won { 1.0 } else { 0.0 },
        }
    }
}

impl Env for Doors {
    fn reset(&mut self) -> Result<StepResult, EnvError> {
        self.last = "You are in a hall with four doors.".into();
        Ok(self.result(&self.last.clone(), false))
    }
    fn step(&mut self, command: &str) -> Result<StepResult, EnvError> {
        let won = command == WINNING;
        self.last = if won { "The door opens." } else { "The door is locked." }.into();
        Ok(self.result(&self.last.clone(), won))
    }
    fn task(&self) -> &str {
        &self.task
    }
    fn anchor(&self) -> String {
        self.last.clone()
    }
}

struct DoorsProvider;

impl EnvProvider for DoorsProvider {
    fn name(&self) -> &'static str {
        "alfworld"
    }
    fn prompt_env(&self) -> PromptEnv {
        PromptEnv::AlfWorld
    }
    fn train_tasks(&self) -> Vec<TaskRef> {
        (0..4)
            .map(|i| TaskRef { game: format!("hall-{i}"), task_type: "pick".into() })
            .collect()
    }
    fn test_tasks(&self) -> Vec<TaskRef> {
        self.train_tasks()
    }
    fn make(&self, _: &TaskRef, _: u64, _: usize) -> Result<Box<dyn Env + Send>, EnvError> {
        Ok(Box::new(Doors { task: "leave the hall.".into(), last: String::new() }))
    }
}

fn scratch_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rl-test-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// One-step episodes, a tiny model, GRPO-MR with no KL or entropy term.
fn toy_config() -> RunConfig {
    RunConfig::from_toml(
        r#"
[run]
seed = 7
[env]
max_steps = 1
[model]
path = "scratch"
[scratch]
vocab_size = 320
hidden_size = 32
intermediate_size = 64
num_layers = 2
num_heads = 2
num_kv_heads = 1
max_position = 512
[prompt]
compact = true
instructions = false
recent_outputs = 0
[rollout]
group_size = 8
max_new_tokens = 96
[sft]
epochs = 30
lr = 1e-2
warmup_ratio = 0.1
batch_size = 8
grad_accum = 1
log_every = 100
prompt_loss_weight = 1.0
[rl]
iterations = 12
tasks_per_iter = 4
mini_batch = 32
micro_batch = 16
lr = 2e-3
kl_coef = 0.0
entropy_coef = 0.0
eval_every = 12
eval_episodes = 32
save_every = 0
"#,
    )
    .unwrap()
}

/// A model fine-tuned on uniformly random (tagged) choices of a door: the chance baseline.
fn chance_model(config: &RunConfig, dir: &Path) -> PathBuf {
    let provider = DoorsProvider;
    let tasks: Vec<TaskRef> = (0..64).map(|i| provider.train_tasks()[i % 4].clone()).collect();
    let specs = grouped_specs(&tasks, 1, 11);
    let played = collect(&provider, &mut RandomPolicy::new(), &specs, &config.collector_options()).unwrap();
    let samples: Vec<SftSample> = played
        .episodes
        .iter()
        .flat_map(|e| &e.steps)
        .map(|s| SftSample { prompt: s.prompt.clone(), response: s.output.clone() })
        .collect();
    let (model, tokenizer) = trainer::sft::initial_model(config, &samples, None).unwrap();
    let run = RunDir::create(&dir.join("sft"), config).unwrap();
    trainer::sft::train(config, &model, &tokenizer, &samples, &run, None).unwrap().final_dir
}

fn train(config: &RunConfig, out: &Path) -> trainer::rl::RlReport {
    trainer::rl::train_on(config, &DoorsProvider, out, false).unwrap()
}

#[test]
fn grpo_mr_learns_the_door_and_a_flipped_outcome_unlearns_it() {
    let dir = scratch_dir("doors");
    let mut config = toy_config();
    let init = chance_model(&config, &dir);
    config.rl.init = init.display().to_string();

    let report = train(&config, &dir.join("rlvmr"));
    let success: Vec<f64> = report.lines.iter().map(|l| l.success).collect();
    eprintln!("GRPO-MR success per iteration: {success:?}");
    assert!(
        (0.05..=0.5).contains(&success[0]),
        "the fine-tuned model should start near chance (25%): {success:?}"
    );
    // Sampled at temperature 1 a tiny model still babbles now and then; evaluated at the
    // published 0.4 it opens the right door nearly every time.
    let eval = report.evals.last().unwrap().eval.overall.success_rate;
    assert!(eval >= 0.9, "GRPO-MR should master the door: eval {eval}, training {success:?}");
    assert!(success[success.len() - 1] > 2.0 * success[0], "{success:?}");

    // The same run rewarding failure instead of success: the advantage's sign flips, and
    // success must fall below the start.
    let mut flipped = config.clone();
    flipped.reward.success_reward = -10.0;
    let report = train(&flipped, &dir.join("flipped"));
    let success: Vec<f64> = report.lines.iter().map(|l| l.success).collect();
    eprintln!("flipped-outcome success per iteration: {success:?}");
    let eval = report.evals.last().unwrap().eval.overall.success_rate;
    assert!(eval <= 0.05 && success[success.len() - 1] <= 0.1, "eval {eval}, training {success:?}");

    // The two runs' curves, overlaid (kept outside the scratch folder for a person to open).
    let runs: Vec<_> = ["rlvmr", "flipped"]
        .iter()
        .map(|name| trainer::report::Run::read(&dir.join(name)).unwrap())
        .collect();
    let plots = std::env::temp_dir().join("rlvmr-toy-report");
    let written = trainer::report::draw(&runs, &plots).unwrap();
    assert_eq!(written.len(), 7, "six charts and eval-L0.png");
    for png in &written {
        assert!(std::fs::read(png).unwrap().starts_with(b"\x89PNG"), "{}", png.display());
    }
    let table = trainer::report::table(&runs);
    assert!(table.contains("| 12 |") && table.contains("| 100.0 |"), "{table}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn lora_learns_the_door_with_the_adapter_off_base_as_reference() {
    let dir = scratch_dir("lora");
    let mut config = toy_config();
    config.rl.init = chance_model(&config, &dir).display().to_string();
    config.rl.lora_rank = 8;
    config.rl.lora_alpha = 16.0;
    config.rl.lr = 5e-3;
    config.rl.kl_coef = 0.01;
    // Prompts unlike the fine-tuned model's: the run takes the ones saved beside it.
    config.prompt.compact = false;
    let report = train(&config, &dir.join("lora"));
    let used = RunConfig::from_file(&dir.join("lora/config.toml")).unwrap();
    assert!(used.prompt.compact, "the init model's prompt settings are carried over");
    let success: Vec<f64> = report.lines.iter().map(|l| l.success).collect();
    let kl: Vec<f64> = report.lines.iter().map(|l| l.kl).collect();
    eprintln!("LoRA success per iteration: {success:?}, KL {kl:?}");
    // The reference is the base without the adapter: the KL starts at 0 and grows as the
    // adapter moves away from it.
    assert!(kl[0] < 1e-3 && kl[kl.len() - 1] > kl[0], "{kl:?}");
    let eval = report.evals.last().unwrap().eval.overall.success_rate;
    assert!(eval >= 0.9, "eval {eval}, training {success:?}");
    // The checkpoint holds the adapter; the final folder the merged model.
    assert!(dir.join("lora/checkpoints/iter-0012/adapter_model.safetensors").is_file());
    assert!(report.final_dir.join("model.safetensors").is_file());
    let _ = std::fs::remove_dir_all(&dir);
}

fn samples_of(model_dir: &Path, n: usize) -> (policy::Llama, Vec<Sample>) {
    let (model, tokenizer) = trainer::checkpoints::load_model(&model_dir.display().to_string(), &candle_core::Device::Cpu).unwrap();
    let samples = (0..n)
        .map(|i| Sample {
            prompt: tokenizer.encode(&format!("<|im_start|>user\nopen a door, {i}<|im_end|>\n")).unwrap(),
            response: tokenizer.encode(&format!("<monitor>door {}</monitor><action>{WINNING}</action>", i % 4)).unwrap(),
            advantage: if i % 2 == 0 { 1.0 } else { -1.0 },
            sampled: Vec::new(),
            old: Vec::new(),
            reference: Vec::new(),
        })
        .collect();
    (model, samples)
}

#[test]
fn equal_weights_give_ratio_one_and_zero_kl_and_a_nan_update_is_skipped() {
    let dir = scratch_dir("update");
    let config = toy_config();
    let init = chance_model(&config, &dir);
    let (model, mut samples) = samples_of(&init, 12);
    // Scored at a sampling temperature other than 1 throughout (as a rollout at 0.7 is).
    let old = reply_logprobs(&model, &samples, 5, 0, 0.7).unwrap();
    for (s, lp) in samples.iter_mut().zip(old) {
        s.reference = lp.clone();
        s.old = lp;
    }
    let loss = trainer::config::RlSection { kl_coef: 0.5, ..config.rl.clone() }.loss_config();
    let mut opt = policy::AdamW::for_model(&model, policy::AdamWConfig { lr: 1e-3, ..Default::default() }).unwrap();
    let options = |max_bad| UpdateOptions {
        loss: &loss,
        epochs: 1,
        mini_batch: 12,
        micro_batch: 5,
        gradient_checkpointing: false,
        max_grad_norm: 1.0,
        pad: 0,
        temperature: 0.7,
        seed: 1,
        bad_streak: 0,
        max_bad_updates: max_bad,
    };
    // One mini-batch over every sample, taken at the weights the old and reference
    // log-probs came from (micro-batches of other sizes than theirs): ratio 1, KL 0.
    let stats = ppo_update(&model, &mut opt, &samples, &options(3)).unwrap().unwrap();
    assert_eq!(stats.updates, 1);
    assert!(stats.terms.ratio_dev / stats.terms.tokens < 1e-6, "{:?}", stats.terms);
    assert!(stats.terms.kl.abs() / stats.terms.tokens < 1e-9, "{:?}", stats.terms);
    assert_eq!(stats.terms.clipped, 0.0);

    // A non-finite advantage makes the loss NaN: the update is skipped, the weights stay.
    let before = model.named_vars()[1].1.as_tensor().flatten_all().unwrap().to_vec1::<f32>().unwrap();
    samples[3].advantage = f32::NAN;
    let stats = ppo_update(&model, &mut opt, &samples, &options(3)).unwrap().unwrap();
    assert_eq!((stats.updates, stats.skipped, stats.bad_streak), (0, 1, 1));
    let after = model.named_vars()[1].1.as_tensor().flatten_all().unwrap().to_vec1::<f32>().unwrap();
    assert_eq!(before, after);
    // The streak carries over and stops at max_bad_updates.
    let stopped = ppo_update(&model, &mut opt, &samples, &UpdateOptions { bad_streak: 1, ..options(2) }).unwrap();
    assert_eq!(stopped.unwrap_err().streak, 2);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `rl.gradient_checkpointing` recomputes each layer's activations in the update's backward:
/// the same update (PPO clip, KL and entropy terms) gives the same loss and gradient norms.
#[test]
fn an_update_with_gradient_checkpointing_matches_the_ordinary_one() {
    let dir = scratch_dir("update-checkpointing");
    let config = toy_config();
    let init = chance_model(&config, &dir);
    let loss = trainer::config::RlSection { kl_coef: 0.5, entropy_coef: 0.01, ..config.rl.clone() }.loss_config();
    let update = |checkpointing: bool| {
        let (model, mut samples) = samples_of(&init, 12);
        let old = reply_logprobs(&model, &samples, 5, 0, 0.7).unwrap();
        for (i, (s, lp)) in samples.iter_mut().zip(old).enumerate() {
            // Old log-probs off the current ones, so that the ratio and the KL are not trivial.
            s.reference = lp.iter().map(|x| x - 0.05 * (i % 3) as f32).collect();
            s.old = lp.iter().map(|x| x + 0.1 * (i % 2) as f32).collect();
        }
        let mut opt = policy::AdamW::for_model(&model, policy::AdamWConfig { lr: 1e-3, ..Default::default() }).unwrap();
        let options = UpdateOptions {
            loss: &loss,
            epochs: 2,
            mini_batch: 6,
            micro_batch: 4,
            gradient_checkpointing: checkpointing,
            max_grad_norm: 1.0,
            pad: 0,
            temperature: 0.7,
            seed: 1,
            bad_streak: 0,
            max_bad_updates: 3,
        };
        ppo_update(&model, &mut opt, &samples, &options).unwrap().unwrap()
    };
    let (ordinary, recomputed) = (update(false), update(true));
    assert_eq!((ordinary.updates, recomputed.updates), (4, 4));
    let close = |a: f64, b: f64, what: &str| assert!((a - b).abs() <= 1e-4 * a.abs().max(1e-6), "{what}: {a} vs {b}");
    close(ordinary.loss_sum, recomputed.loss_sum, "loss");
    close(ordinary.grad_norm_mean, recomputed.grad_norm_mean, "mean gradient norm");
    close(ordinary.grad_norm_max, recomputed.grad_norm_max, "largest gradient norm");
    close(ordinary.terms.kl, recomputed.terms.kl, "KL");
    let _ = std::fs::remove_dir_all(&dir);
}


#[test]
fn a_run_whose_updates_keep_failing_stops_and_leaves_the_last_checkpoint_whole() {
    let dir = scratch_dir("bad-run");
    let mut config = toy_config();
    config.rl.init = chance_model(&config, &dir).display().to_string();
    config.rl.iterations = 1;
    config.rl.save_every = 1;
    config.rl.eval_every = 0;
    let out = dir.join("run");
    train(&config, &out);
    let checkpoint = out.join("checkpoints/iter-0001");
    let saved = testkit::files_under(&checkpoint);
    let metrics = std::fs::read_to_string(out.join("metrics.jsonl")).unwrap();

    // Resumed with a learning rate that blows the weights up at the first step: every later
    // mini-batch has a non-finite loss.
    config.rl.iterations = 3;
    config.rl.lr = 1e30;
    config.rl.mini_batch = 8;
    config.rl.max_bad_updates = 2;
    let err = trainer::rl::train_on(&config, &DoorsProvider, &out, true).unwrap_err().to_string();
    assert!(err.contains("iteration 2: 2 updates in a row had a non-finite loss"), "{err}");
    assert!(err.contains("the last checkpoint is untouched"), "{err}");
    assert_eq!(testkit::files_under(&checkpoint), saved, "the last checkpoint is byte-identical");
    assert!(!out.join("checkpoints/iter-0002").exists());
    assert_eq!(std::fs::read_to_string(out.join("metrics.jsonl")).unwrap(), metrics, "no line for the failed iteration");
    let _ = std::fs::remove_dir_all(&dir);
}
