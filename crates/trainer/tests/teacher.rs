//! Cold start annotated by a served teacher (a fake OpenAI-compatible server that answers
//! in JSON, sometimes wrongly): accepted steps carry the teacher's tag and reason, rejected
//! ones keep the built-in annotation and are counted, and every SFT prompt shows the replies
//! the trajectory now has.

mod common;

use std::time::Duration;

use common::fake_openai::{Answer, FakeServer, Seen};
use serde_json::{json, Map};
use trainer::coldstart::{coldstart, Detours};
use trainer::envs::Protocol;
use trainer::collector::CollectorOptions;
use trainer::served::ServedOptions;
use trainer::coldstart::teacher::Teacher;

/// The actions a teacher prompt lists, in order.
fn actions_of(seen: &Seen) -> Vec<String> {
    let prompt = seen.body["messages"][0]["content"].as_str().unwrap();
    prompt
        .lines()
        .filter_map(|l| l.strip_prefix("Action: "))
        .map(str::to_string)
        .collect()
}

fn teacher_reason(step: usize) -> String {
    format!("Teacher says step {step} moves the task forward.")
}

/// A JSON answer for `actions`: planning first, monitor after.
fn annotation(actions: &[String]) -> Vec<serde_json::Value> {
    actions
        .iter()
        .enumerate()
        .map(|(i, a)| {
            let tag = if i == 0 { "planning" } else { "monitor" };
            json!({"step": i + 1, "tag": tag, "reason": teacher_reason(i + 1), "action": a})
        })
        .collect()
}

fn teacher(url: &str) -> Teacher {
    let options = ServedOptions {
        base_url: url.into(),
        model: "teacher".into(),
        api_key_env: "RLVMR_TEST_NO_KEY".into(),
        max_in_flight: 4,
        timeout: Duration::from_secs(5),
        retries: 1,
        backoff: Duration::from_millis(1),
        logprobs: false,
        extra: Map::new(),
    };
    Teacher::connect(options, 0.0, 2048).unwrap()
}

#[test]
fn a_teacher_annotates_with_actions_fixed_and_rejections_fall_back() {
    // Trajectory answers by the episode's first action: one answer too short, one with a
    // changed action at step 2, one not JSON; the rest right.
    let server = FakeServer::start(|_, seen| {
        let actions = actions_of(seen);
        let mut items = annotation(&actions);
        let key = actions.len() % 4;
        match key {
            0 => Answer::chat("Sorry, I cannot do that."),
            1 => {
                items.pop();
                Answer::chat(&serde_json::Value::Array(items).to_string())
            }
            2 => {
                items[1]["action"] = json!("go to somewhere else 9");
                Answer::chat(&format!("```json\n{}\n```", serde_json::Value::Array(items)))
            }
            _ => Answer::chat(&serde_json::Value::Array(items).to_string()),
        }
    });
    let provider = common::alfworld("L0");
    let options = CollectorOptions {
        progress: false,
        ..CollectorOptions::default()
    };
    let builtin = coldstart(provider.as_ref(), 12, 0, Detours::mistakes(0.5), Protocol::Strict, 7, &options, None).unwrap();
    let teacher = teacher(&server.url);
    let run = coldstart(provider.as_ref(), 12, 0, Detours::mistakes(0.5), Protocol::Strict, 7, &options, Some(&teacher)).unwrap();
    let report = run.teacher.as_ref().unwrap();

    // Same expert trajectories, same actions; only the reasoning differs.
    assert_eq!(run.episodes.len(), builtin.episodes.len());
    let mut expected = std::collections::BTreeMap::<String, usize>::new();
    let (mut teacher_steps, mut fallback_steps) = (0, 0);
    for (new, old) in run.episodes.iter().zip(&builtin.episodes) {
        let actions: Vec<&str> = new.steps.iter().map(|s| s.action.as_str()).collect();
        assert_eq!(actions, old.steps.iter().map(|s| s.action.as_str()).collect::<Vec<_>>());
        assert!(new.won);
        let key = new.steps.len() % 4;
        for (i, (step, before)) in new.steps.iter().zip(&old.steps).enumerate() {
            let by_teacher = key == 3 || (key == 2 && i != 1);
            if by_teacher {
                teacher_steps += 1;
                assert!(step.output.contains(&teacher_reason(i + 1)), "{}", step.output);
                assert_eq!(step.tag.unwrap().name(), if i == 0 { "planning" } else { "monitor" });
                assert!(step.format_valid);
            } else {
                fallback_steps += 1;
                assert_eq!(step.output, before.output);
            }
            assert_eq!(step.mistake, before.mistake);
        }
        let kind = ["not a JSON array", "wrong number of steps", "action changed", ""][key];
        if !kind.is_empty() {
            *expected.entry(kind.to_string()).or_default() += 1;
        }
        // Prompts were rebuilt: a later step's prompt shows the reply before it.
        for pair in new.steps.windows(2) {
            let previous_action = format!("<action>{}</action>", pair[0].action);
            assert!(pair[1].prompt.contains(&previous_action) || pair[0].output.len() > 2000);
            if key == 3 {
                assert!(pair[1].prompt.contains(&teacher_reason(pair[0].step + 1)), "{}", pair[1].prompt);
            }
        }
    }
    assert_eq!(report.trajectories, run.episodes.len());
    assert_eq!(report.teacher_steps, teacher_steps);
    assert_eq!(report.fallback_steps, fallback_steps);
    assert_eq!(report.rejections, expected);
    assert!(teacher_steps > 0 && fallback_steps > 0, "the fixture exercises both");
    assert_eq!(report.requests.requests, run.episodes.len());
    // Every SFT sample is a step of a kept trajectory, planted mistakes excepted.
    let targets: Vec<&str> = run
        .episodes
        .iter()
        .flat_map(|e| e.steps.iter().filter(|s| !s.mistake))
        .map(|s| s.output.as_str())
        .collect();
    assert_eq!(run.samples.iter().map(|s| s.response.as_str()).collect::<Vec<_>>(), targets);
}

#[test]
fn a_failed_teacher_request_keeps_the_builtin_annotation() {
    let server = FakeServer::start(|_, _| Answer::status(500, "down"));
    let provider = common::alfworld("L0");
    let options = CollectorOptions {
        progress: false,
        ..CollectorOptions::default()
    };
    let teacher = teacher(&server.url);
    let run = coldstart(provider.as_ref(), 3, 0, Detours::mistakes(0.0), Protocol::Strict, 1, &options, Some(&teacher)).unwrap();
    let builtin = coldstart(provider.as_ref(), 3, 0, Detours::mistakes(0.0), Protocol::Strict, 1, &options, None).unwrap();
    let report = run.teacher.unwrap();
    assert_eq!(report.rejected_trajectories, 3);
    assert_eq!(report.rejections["request failed"], 3);
    assert_eq!(report.teacher_steps, 0);
    assert_eq!(report.requests.retries, 3);
    assert_eq!(run.samples, builtin.samples);
}
