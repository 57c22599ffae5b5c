//! Replays transcripts recorded from the reference engine (alfworld 0.4.2 on
//! textworld 1.7.0, see tools/record_alfworld.sh) and requires identical output:
//! observation, admissible commands (content and order), won and done.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use alfworld::replay::{replay_game, ReplayStep};
use alfworld::AlfworldData;
use serde::Deserialize;

#[derive(Deserialize)]
struct Transcript {
    game: String,
    kind: String,
    steps: Vec<ReplayStep>,
}

fn shared_zip() -> PathBuf {
    testkit::alfworld_data()
}

fn transcript_files() -> Vec<PathBuf> {
    // A developer can point the test at other recordings (a single .jsonl.gz).
    if let Some(file) = std::env::var_os("PARITY_TRANSCRIPTS") {
        return vec![PathBuf::from(file)];
    }
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/transcripts");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|d| d.flatten().map(|e| e.path()).filter(|p| p.to_string_lossy().ends_with(".jsonl.gz")).collect())
        .unwrap_or_default();
    files.sort();
    files
}

fn read_lines(path: &Path) -> Vec<String> {
    let file = std::fs::File::open(path).unwrap();
    let reader: Box<dyn Read> = Box::new(flate2::read::GzDecoder::new(file));
    BufReader::new(reader).lines().map(|l| l.unwrap()).collect()
}

/// Replays one transcript; returns a description of each difference.
fn replay(data: &AlfworldData, t: &Transcript) -> Vec<String> {
    let text = data.read(&t.game).unwrap();
    let game = Arc::new(alfworld::load_game(&text).unwrap());
    let commands: Vec<String> = t.steps[1..].iter().map(|s| s.command.clone().unwrap_or_default()).collect();
    let observed = replay_game(game, &commands).unwrap();
    let mut diffs = Vec::new();
    for (i, (want, got)) in t.steps.iter().zip(&observed).enumerate() {
        let at = format!("{} [{}] step {i} ({:?})", t.game, t.kind, want.command);
        if want.observation != got.observation {
            diffs.push(format!("{at}: observation\n  want {:?}\n  got  {:?}", want.observation, got.observation));
        }
        if want.admissible_commands != got.admissible_commands {
            let missing: Vec<_> = want.admissible_commands.iter().filter(|c| !got.admissible_commands.contains(c)).collect();
            let extra: Vec<_> = got.admissible_commands.iter().filter(|c| !want.admissible_commands.contains(c)).collect();
            diffs.push(format!("{at}: admissible commands; missing {missing:?}, extra {extra:?}"));
        }
        if (want.won, want.done) != (got.won, got.done) {
            diffs.push(format!("{at}: won/done want {}/{} got {}/{}", want.won, want.done, got.won, got.done));
        }
    }
    diffs
}

#[test]
fn transcripts_replay_identically() {
    let files = transcript_files();
    assert!(!files.is_empty(), "no transcripts in tests/transcripts");
    let data = AlfworldData::open(&shared_zip()).expect("the shared ALFWorld zip");
    let (mut episodes, mut steps, mut failed) = (0, 0, Vec::new());
    for file in &files {
        for line in read_lines(file) {
            let t: Transcript = serde_json::from_str(&line).unwrap();
            episodes += 1;
            steps += t.steps.len();
            let diffs = replay(&data, &t);
            if !diffs.is_empty() {
                failed.push(diffs);
            }
        }
    }
    eprintln!("replayed {episodes} episodes, {steps} steps; {} episodes differ", failed.len());
    let shown: Vec<String> = failed.iter().take(5).map(|d| d[..d.len().min(3)].join("\n")).collect();
    assert!(failed.is_empty(), "{} of {episodes} episodes differ; first ones:\n{}", failed.len(), shown.join("\n\n"));
}
