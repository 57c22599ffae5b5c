//! Replaying transcripts recorded with the official Python client (`tools/record_sciworld.sh`)
//! gives the same task descriptions, observations, scores and done flags.

use std::io::Read;
use std::sync::Mutex;

use sciworld::replay::{replay, ReplayRecord, ReplayRequest, TaskKey};
use sciworld::{EnvConfig, SciWorldEnv};

const TRANSCRIPTS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/transcripts/official.jsonl.gz"
);
const WORKERS: usize = 2;

#[derive(serde::Deserialize)]
struct Transcript {
    task: String,
    variation: usize,
    kind: String,
    simplifications: String,
    task_description: String,
    commands: Vec<String>,
    steps: Vec<sciworld::replay::StepRecord>,
}

fn transcripts() -> Vec<Transcript> {
    let file = std::fs::File::open(TRANSCRIPTS).unwrap();
    let mut text = String::new();
    flate2::read::GzDecoder::new(file)
        .read_to_string(&mut text)
        .unwrap();
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn official_transcripts_replay_identically() {
    let all = transcripts();
    assert_eq!(all.len(), 60, "two episodes per task");
    let config = EnvConfig::from_default_jar().expect("the scienceworld jar");
    let mut config = config;
    config.valid_actions = std::env::var_os("NOVALID").is_none();
    let queue = Mutex::new((0..all.len()).collect::<Vec<_>>());
    let replayed: Mutex<Vec<(usize, ReplayRecord)>> = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..WORKERS {
            scope.spawn(|| {
                let mut env = SciWorldEnv::new(config.clone()).unwrap();
                while let Some(i) = queue.lock().unwrap().pop() {
                    let t = &all[i];
                    assert_eq!(t.simplifications, "easy");
                    let request = ReplayRequest {
                        task: TaskKey::Name(t.task.clone()),
                        variation: t.variation,
                        commands: t.commands.clone(),
                    };
                    let record = replay(&mut env, &request).unwrap();
                    replayed.lock().unwrap().push((i, record));
                }
            });
        }
    });
    let mut differences = Vec::new();
    for (i, record) in replayed.into_inner().unwrap() {
        let t = &all[i];
        let name = format!("{} {} ({})", t.task, t.variation, t.kind);
        if record.task_description != t.task_description {
            differences.push(format!("{name}: task description"));
        }
        assert_eq!(record.steps.len(), t.steps.len(), "{name}");
        for (n, (ours, theirs)) in record.steps.iter().zip(&t.steps).enumerate() {
            if ours != theirs {
                differences.push(format!(
                    "{name} step {n}: ours {ours:?}\n  official {theirs:?}"
                ));
            }
        }
    }
    assert!(
        differences.is_empty(),
        "{} differences:\n{}",
        differences.len(),
        differences.join("\n")
    );
}
