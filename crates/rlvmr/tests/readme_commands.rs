//! Every `rlvmr` command that README.md and the pages under docs/ show names a real subcommand
//! and only flags that subcommand has (checked against its `--help`), so the documentation
//! cannot drift from the binary.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use harness::BIN;

mod harness;

/// Subcommands that have subcommands of their own.
const GROUPS: [&str; 2] = ["alfworld", "sciworld"];
/// At least this many commands in README.md, and in README.md and docs/*.md together.
const README_MIN: usize = 12;
const TOTAL_MIN: usize = 120;

/// A Markdown file's code: the lines of its fenced blocks and its inline `code` spans.
fn code_segments(markdown: &str) -> Vec<(usize, String)> {
    let mut segments = Vec::new();
    let mut fenced = false;
    for (number, line) in markdown.lines().enumerate() {
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

/// How many commands the Markdown file `name` (its text: `markdown`) shows, and what is wrong
/// with them, each problem as `name:line: ...`. `helps` caches the `--help` texts.
fn check(name: &str, markdown: &str, helps: &mut BTreeMap<String, Option<String>>) -> (usize, Vec<String>) {
    let mut problems = Vec::new();
    let mut checked = 0;
    for (line, segment) in code_segments(markdown) {
        let Some(command) = command_of(&segment) else { continue };
        let words: Vec<&str> = command.split_whitespace().collect();
        let Some(first) = words.first().copied() else { continue };
        let path: Vec<&str> = match words.get(1) {
            Some(second) if GROUPS.contains(&first) && !second.starts_with('-') => vec![first, second],
            _ => vec![first],
        };
        let text = helps.entry(path.join(" ")).or_insert_with(|| help(&path));
        let Some(text) = text.as_ref() else {
            problems.push(format!("{name}:{line}: `rlvmr {}` is not a subcommand", path.join(" ")));
            continue;
        };
        for flag in words.iter().map(|w| w.trim_matches(|c| "[]().,;|".contains(c))).filter(|w| w.starts_with('-') && w.len() > 1) {
            let flag_name = flag.split('=').next().unwrap_or(flag);
            let known = text.contains(&format!("{flag_name} "))
                || text.contains(&format!("{flag_name},"))
                || text.contains(&format!("{flag_name}\n"));
            if !known {
                problems.push(format!("{name}:{line}: `rlvmr {}` has no flag {flag_name}", path.join(" ")));
            }
        }
        checked += 1;
    }
    (checked, problems)
}

/// README.md and every `docs/*.md`, as (path relative to the repository, text), README first.
fn documentation() -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut pages: Vec<String> = std::fs::read_dir(root.join("docs"))
        .expect("docs/")
        .map(|entry| entry.expect("docs/ entry").file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".md"))
        .map(|name| format!("docs/{name}"))
        .collect();
    pages.sort();
    pages.insert(0, "README.md".to_string());
    pages
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(root.join(&path)).unwrap_or_else(|e| panic!("{path}: {e}"));
            (path, text)
        })
        .collect()
}

#[test]
fn every_command_in_the_documentation_parses() {
    let mut helps = BTreeMap::new();
    let mut problems = Vec::new();
    let mut counts = BTreeMap::new();
    for (path, text) in documentation() {
        let (checked, found) = check(&path, &text, &mut helps);
        problems.extend(found);
        counts.insert(path, checked);
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    // The README shows a command for every common job and the command table; the docs pages
    // show the rest. Fewer commands than this means the check stopped finding them.
    assert!(counts["README.md"] >= README_MIN, "only {} commands found in README.md: {counts:?}", counts["README.md"]);
    let total: usize = counts.values().sum();
    assert!(total >= TOTAL_MIN, "only {total} commands found in README.md and docs/: {counts:?}");
    assert!(counts.len() >= 2, "no docs/*.md pages found: {counts:?}");
}

#[test]
fn a_wrong_flag_or_subcommand_is_found() {
    let page = "Run `rlvmr eval --split L0 --no-such-flag`.\n\n```sh\ncargo run --release -p rlvmr -- frobnicate  # a comment --ignored\nrlvmr alfworld replay --data D\nrlvmr sciworld tasks --level L2 -x\n```\n";
    let (checked, problems) = check("docs/page.md", page, &mut BTreeMap::new());
    assert_eq!(checked, 3);
    assert_eq!(
        problems,
        vec![
            "docs/page.md:1: `rlvmr eval` has no flag --no-such-flag".to_string(),
            "docs/page.md:4: `rlvmr frobnicate` is not a subcommand".to_string(),
            "docs/page.md:6: `rlvmr sciworld tasks` has no flag -x".to_string(),
        ]
    );
}
