//! Every `rlvmr` command the README shows names a real subcommand and only flags that
//! subcommand has (checked against its `--help`), so the README cannot drift from the binary.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_rlvmr");
/// Subcommands that have subcommands of their own.
const GROUPS: [&str; 2] = ["alfworld", "sciworld"];

/// The README's code: the lines of its fenced blocks and its inline `code` spans.
fn code_segments(readme: &str) -> Vec<(usize, String)> {
    let mut segments = Vec::new();
    let mut fenced = false;
    for (number, line) in readme.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            segments.push((number + 1, line.to_string()));
        } else {
            segments.extend(line.split('`').skip(1).step_by(2).map(|span| (number + 1, span.to_string())));
        }
    }
    segments
}

/// The `rlvmr ...` command a segment starts with (after `cargo run ... -p rlvmr --`), its
/// comment cut off.
fn command_of(segment: &str) -> Option<String> {
    let text = segment.trim();
    let text = match text.find("-p rlvmr -- ") {
        Some(at) if text.starts_with("cargo run") => format!("rlvmr {}", &text[at + "-p rlvmr -- ".len()..]),
        _ => text.to_string(),
    };
    let command = text.strip_prefix("rlvmr ")?;
    let command = command.split(" #").next().unwrap_or(command);
    Some(command.trim().to_string())
}

fn help(path: &[&str]) -> Option<String> {
    let out = Command::new(BIN).args(path).arg("--help").output().expect("run rlvmr");
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// How many commands `readme` shows, and what is wrong with them.
fn check(readme: &str) -> (usize, Vec<String>) {
    let mut helps: BTreeMap<String, Option<String>> = BTreeMap::new();
    let mut problems = Vec::new();
    let mut checked = 0;
    for (line, segment) in code_segments(readme) {
        let Some(command) = command_of(&segment) else { continue };
        let words: Vec<&str> = command.split_whitespace().collect();
        let Some(first) = words.first().copied() else { continue };
        let path: Vec<&str> = match words.get(1) {
            Some(second) if GROUPS.contains(&first) && !second.starts_with('-') => vec![first, second],
            _ => vec![first],
        };
        let text = helps.entry(path.join(" ")).or_insert_with(|| help(&path));
        let Some(text) = text.as_ref() else {
            problems.push(format!("README.md:{line}: `rlvmr {}` is not a subcommand", path.join(" ")));
            continue;
        };
        for flag in words.iter().map(|w| w.trim_matches(|c| "[]().,;|".contains(c))).filter(|w| w.starts_with('-') && w.len() > 1) {
            let name = flag.split('=').next().unwrap_or(flag);
            let known = text.contains(&format!("{name} ")) || text.contains(&format!("{name},")) || text.contains(&format!("{name}\n"));
            if !known {
                problems.push(format!("README.md:{line}: `rlvmr {}` has no flag {name}", path.join(" ")));
            }
        }
        checked += 1;
    }
    (checked, problems)
}

#[test]
fn every_command_in_the_readme_parses() {
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md")).expect("README.md");
    let (checked, problems) = check(&readme);
    assert!(checked >= 30, "only {checked} commands found in the README");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn a_wrong_flag_or_subcommand_is_found() {
    let readme = "Run `rlvmr eval --split L0 --no-such-flag`.\n\n```sh\ncargo run --release -p rlvmr -- frobnicate  # a comment --ignored\nrlvmr alfworld replay --data D\nrlvmr sciworld tasks --level L2 -x\n```\n";
    let (checked, problems) = check(readme);
    assert_eq!(checked, 3);
    assert_eq!(
        problems,
        vec![
            "README.md:1: `rlvmr eval` has no flag --no-such-flag".to_string(),
            "README.md:4: `rlvmr frobnicate` is not a subcommand".to_string(),
            "README.md:6: `rlvmr sciworld tasks` has no flag -x".to_string(),
        ]
    );
}
