//! The collector end to end on real ALFWorld games: the expert wins through it, garbage
//! replies become invalid steps, failing environments fail only their own episode, and
//! runs are reproducible from their seed.

mod common;

use rlvmr_core::{Env, EnvError, OutputStyle, PromptEnv, StepResult};
use trainer::agent::{Policy, Reply, Turn};
use trainer::envs::{Detours, EnvProvider};
use trainer::envs::alfworld::expert::ExpertPolicy;
use trainer::policies::RandomPolicy;
use trainer::{collect, grouped_specs, CollectorOptions, EpisodeSpec, TaskRef};

fn options(max_steps: usize) -> CollectorOptions {
    CollectorOptions {
        max_steps,
        ..CollectorOptions::default()
    }
}

#[test]
fn the_expert_wins_every_l2_test_game_through_the_collector() {
    let provider = common::alfworld("L2");
    let tasks = provider.test_tasks();
    assert_eq!(tasks.len(), 38);
    assert!(tasks
        .iter()
        .all(|t| t.task_type == "cool" || t.task_type == "pick_two"));
    let specs = grouped_specs(&tasks, 1, 0);
    let run = collect(
        provider.as_ref(),
        &mut ExpertPolicy::new(0.0),
        &specs,
        &options(30),
    )
    .unwrap();
    assert_eq!(run.episodes.len(), 38);
    for e in &run.episodes {
        assert!(
            e.won && e.error.is_none(),
            "{} not won: {:?}",
            e.game,
            e.error
        );
        assert!(e
            .steps
            .iter()
            .all(|s| s.format_valid && s.tag.is_some() && s.admissible == Some(true)));
        assert!(e.steps.last().is_some_and(|s| s.won && s.done));
        // The record chains: each step's next observation is the following step's observation.
        for pair in e.steps.windows(2) {
            assert_eq!(pair[0].next_observation, pair[1].observation);
        }
    }
    assert_eq!(
        run.throughput.env_steps,
        run.episodes.iter().map(|e| e.steps.len()).sum::<usize>()
    );
    assert_eq!(run.throughput.generated_tokens, 0);
}

#[test]
fn groups_share_game_and_env_seed_and_runs_repeat_exactly() {
    let provider = common::alfworld("L0");
    let tasks = provider.test_tasks()[..3].to_vec();
    let specs = grouped_specs(&tasks, 4, 9);
    assert_eq!(specs.len(), 12);
    for group in specs.chunks(4) {
        assert!(group.iter().all(|s| s.uid == group[0].uid
            && s.env_seed == group[0].env_seed
            && s.task == group[0].task));
        let mut seeds: Vec<u64> = group.iter().map(|s| s.rollout_seed).collect();
        seeds.dedup();
        assert_eq!(seeds.len(), 4, "each rollout has its own seed");
    }
    let a = collect(
        provider.as_ref(),
        &mut RandomPolicy::new(),
        &specs,
        &options(6),
    )
    .unwrap();
    let b = collect(
        provider.as_ref(),
        &mut RandomPolicy::new(),
        &specs,
        &options(6),
    )
    .unwrap();
    assert_eq!(a.episodes, b.episodes);
    let actions = |i: usize| {
        a.episodes[i]
            .steps
            .iter()
            .map(|s| s.action.clone())
            .collect::<Vec<_>>()
    };
    assert_ne!(actions(0), actions(1), "rollouts of one group differ");
    for e in &a.episodes {
        assert!(
            e.steps.len() == 6 && e.steps[5].done || e.won,
            "{} steps, won {}, error {:?}",
            e.steps.len(),
            e.won,
            e.error
        );
    }
}

/// Replies that break every rule: huge garbage, invalid UTF-8, no tags at all.
struct Garbage;

impl Policy for Garbage {
    fn name(&self) -> String {
        "garbage".into()
    }
    fn start_episode(&mut self, _: usize, _: &EpisodeSpec) -> trainer::Result<()> {
        Ok(())
    }
    fn act(&mut self, turns: &[Turn]) -> trainer::Result<Vec<Result<Reply, String>>> {
        Ok(turns
            .iter()
            .map(|t| {
                let output: Vec<u8> = match (t.slot + t.step) % 3 {
                    0 => (0..10_000u32)
                        .flat_map(|i| format!("tok{} <act", i % 97).into_bytes())
                        .collect(),
                    1 => vec![0xff, 0xfe, b'<', b'a', 0xc3, 0x28, 0x80],
                    _ => b"go to desk 1".to_vec(),
                };
                Ok(Reply {
                    response_ids: vec![1; 10_000],
                    logprobs: vec![-1.0; 10_000],
                    output,
                    ..Reply::default()
                })
            })
            .collect())
    }
}

#[test]
fn garbage_replies_are_invalid_steps_and_the_episode_goes_on() {
    let provider = common::alfworld("L1");
    let specs = grouped_specs(&provider.test_tasks()[..3], 1, 0);
    let run = collect(provider.as_ref(), &mut Garbage, &specs, &options(4)).unwrap();
    for e in &run.episodes {
        assert!(e.error.is_none());
        assert_eq!(e.steps.len(), 4, "the episode ran to the step limit");
        for s in &e.steps {
            assert!(!s.format_valid && s.tag.is_none() && !s.invalid_reasons.is_empty());
            assert_eq!(s.action, "");
            assert_eq!(s.admissible, Some(false));
            assert_eq!(s.next_observation, "Nothing happens.");
        }
    }
    assert!(
        run.episodes
            .iter()
            .flat_map(|e| &e.steps)
            .any(|s| s.output.contains('\u{FFFD}')),
        "invalid UTF-8 is replaced, not fatal"
    );
    // A 10 000-token reply is kept whole in its record but cut in later prompts.
    let long = run.episodes[0].steps[0].output.len();
    assert!(long > 50_000);
    assert!(run.episodes[0].steps[1].prompt.len() < long / 5);
}

/// ALFWorld, except that one game's environment fails at its third step and another's
/// panics at its second.
struct Flaky {
    inner: Box<dyn EnvProvider>,
    failing: String,
    panicking: String,
}

struct FlakyEnv {
    inner: Box<dyn Env + Send>,
    steps: usize,
    fail_at: Option<usize>,
    panic_at: Option<usize>,
}

impl Env for FlakyEnv {
    fn reset(&mut self) -> Result<StepResult, EnvError> {
        self.inner.reset()
    }
    fn step(&mut self, command: &str) -> Result<StepResult, EnvError> {
        self.steps += 1;
        if Some(self.steps) == self.fail_at {
            return Err(EnvError("the simulator went away".into()));
        }
        if Some(self.steps) == self.panic_at {
            panic!("simulator bug");
        }
        self.inner.step(command)
    }
    fn task(&self) -> &str {
        self.inner.task()
    }
    fn anchor(&self) -> String {
        self.inner.anchor()
    }
}

impl EnvProvider for Flaky {
    fn name(&self) -> &'static str {
        "flaky"
    }
    fn prompt_env(&self) -> PromptEnv {
        PromptEnv::AlfWorld
    }
    fn train_tasks(&self) -> Vec<TaskRef> {
        Vec::new()
    }
    fn test_tasks(&self) -> Vec<TaskRef> {
        self.inner.test_tasks()
    }
    fn expert(&self, detours: Detours, style: OutputStyle) -> trainer::Result<Box<dyn Policy>> {
        self.inner.expert(detours, style)
    }
    fn make(
        &self,
        task: &TaskRef,
        seed: u64,
        max_steps: usize,
    ) -> Result<Box<dyn Env + Send>, EnvError> {
        let inner = self.inner.make(task, seed, max_steps)?;
        let fail_at = (task.game == self.failing).then_some(3);
        let panic_at = (task.game == self.panicking).then_some(2);
        Ok(Box::new(FlakyEnv {
            inner,
            steps: 0,
            fail_at,
            panic_at,
        }))
    }
}

#[test]
fn a_failing_environment_fails_only_its_episode() {
    let inner = common::alfworld("L2");
    let tasks = inner.test_tasks()[..4].to_vec();
    let provider = Flaky {
        failing: tasks[1].game.clone(),
        panicking: tasks[2].game.clone(),
        inner,
    };
    let mut tasks_plus_missing = tasks.clone();
    tasks_plus_missing.push(TaskRef {
        game: "json_2.1.1/valid_unseen/no-such-game/trial_0/game.tw-pddl".into(),
        task_type: "cool".into(),
    });
    let specs = grouped_specs(&tasks_plus_missing, 1, 0);
    let run = collect(&provider, &mut ExpertPolicy::new(0.0), &specs, &options(30)).unwrap();
    let [ok_a, failed, panicked, ok_b, missing] = run.episodes.as_slice() else {
        panic!("5 episodes")
    };
    assert!(ok_a.won && ok_b.won && ok_a.error.is_none() && ok_b.error.is_none());
    assert!(
        !failed.won && failed.steps.len() == 2,
        "two steps recorded before the failure"
    );
    assert!(
        failed
            .error
            .as_deref()
            .is_some_and(|e| e.contains("the simulator went away") && e.contains("step 2")),
        "{:?}",
        failed.error
    );
    assert!(
        !panicked.won
            && panicked
                .error
                .as_deref()
                .is_some_and(|e| e.contains("panicked") && e.contains("simulator bug")),
        "{:?}",
        panicked.error
    );
    assert!(
        !missing.won
            && missing.steps.is_empty()
            && missing
                .error
                .as_deref()
                .is_some_and(|e| e.contains("no-such-game")),
        "{:?}",
        missing.error
    );
}

/// The expert, except that slot 1's turn fails at its second step.
struct FailsInSlotOne(ExpertPolicy);

impl Policy for FailsInSlotOne {
    fn name(&self) -> String {
        "fails-in-slot-one".into()
    }
    fn start_episode(&mut self, slot: usize, spec: &EpisodeSpec) -> trainer::Result<()> {
        self.0.start_episode(slot, spec)
    }
    fn act(&mut self, turns: &[Turn]) -> trainer::Result<Vec<Result<Reply, String>>> {
        let mut replies = self.0.act(turns)?;
        for (turn, reply) in turns.iter().zip(&mut replies) {
            if turn.slot == 1 && turn.step == 1 {
                *reply = Err("prompt does not fit the context".into());
            }
        }
        Ok(replies)
    }
}

#[test]
fn a_policy_error_for_one_turn_fails_only_that_episode() {
    let provider = common::alfworld("L2");
    let specs = grouped_specs(&provider.test_tasks()[..3], 1, 0);
    let run = collect(
        provider.as_ref(),
        &mut FailsInSlotOne(ExpertPolicy::new(0.0)),
        &specs,
        &options(30),
    )
    .unwrap();
    assert!(run.episodes[0].won && run.episodes[2].won);
    let failed = &run.episodes[1];
    assert!(!failed.won && failed.steps.len() == 1);
    assert!(
        failed
            .error
            .as_deref()
            .is_some_and(|e| e.contains("policy failed at step 1") && e.contains("context")),
        "{:?}",
        failed.error
    );
}
