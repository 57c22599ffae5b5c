//! Every `rlvmr` command that README.md and the pages under docs/ show names a real subcommand
//! and only flags that subcommand has (checked against its `--help`), and every relative link
//! names a file of the repository and, after `#`, a heading of that page, so the
//! documentation cannot drift from the binary or from itself.

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
    let root = harness::repo();
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

/// GitHub's anchor of a heading: lower case, punctuation (backticks, colons, commas, ...)
/// dropped, spaces as hyphens.
fn anchor_of(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of a page's headings (outside fenced code).
fn anchors(markdown: &str) -> Vec<String> {
    let mut fenced = false;
    let mut found = Vec::new();
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced && line.starts_with('#') {
            found.push(anchor_of(line.trim_start_matches('#')));
        }
    }
    found
}

/// The targets of a page's Markdown links `[text](target)`, with their line numbers, outside
/// fenced code; web addresses left out.
fn relative_links(markdown: &str) -> Vec<(usize, String)> {
    let mut fenced = false;
    let mut links = Vec::new();
    for (number, line) in markdown.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        for (at, _) in line.match_indices("](") {
            let rest = &line[at + 2..];
            let Some(end) = rest.find(')') else { continue };
            let target = &rest[..end];
            if !target.contains("://") && !target.starts_with("mailto:") {
                links.push((number + 1, target.to_string()));
            }
        }
    }
    links
}

/// What is wrong with the relative links of `page` (its path relative to the repository), each
/// as `page:line: ...`; `pages` maps every documentation page to its text.
fn broken_links(page: &str, markdown: &str, pages: &BTreeMap<String, String>, root: &Path) -> Vec<String> {
    let folder = Path::new(page).parent().unwrap_or(Path::new(""));
    let mut problems = Vec::new();
    for (line, target) in relative_links(markdown) {
        let (file, anchor) = target.split_once('#').unwrap_or((&target, ""));
        let target_page = if file.is_empty() {
            page.to_string()
        } else {
            let joined = folder.join(file);
            let normal: Vec<_> = joined.components().fold(Vec::new(), |mut parts, part| {
                match part {
                    std::path::Component::ParentDir => {
                        parts.pop();
                    }
                    std::path::Component::CurDir => {}
                    other => parts.push(other.as_os_str().to_string_lossy().into_owned()),
                }
                parts
            });
            normal.join("/")
        };
        if !pages.contains_key(&target_page) && !root.join(&target_page).exists() {
            problems.push(format!("{page}:{line}: link to {target}: no file {target_page}"));
        } else if !anchor.is_empty() {
            match pages.get(&target_page) {
                Some(text) if anchors(text).iter().any(|a| a == anchor) => {}
                Some(_) => problems.push(format!("{page}:{line}: link to {target}: no heading #{anchor} in {target_page}")),
                None => problems.push(format!("{page}:{line}: link to {target}: {target_page} is not a documentation page")),
            }
        }
    }
    problems
}

#[test]
fn every_link_in_the_documentation_resolves() {
    let root = harness::repo();
    let pages: BTreeMap<String, String> = documentation().into_iter().collect();
    let problems: Vec<String> =
        pages.iter().flat_map(|(page, text)| broken_links(page, text, &pages, &root)).collect();
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    let links: usize = pages.values().map(|text| relative_links(text).len()).sum();
    assert!(links >= 40, "only {links} relative links found: the link reader stopped finding them");
}

#[test]
fn a_broken_link_is_found() {
    let root = harness::repo();
    let pages: BTreeMap<String, String> = [
        ("docs/a.md".to_string(), "# Page A\n## The comparison under `published`\n".to_string()),
        ("README.md".to_string(), String::new()),
    ]
    .into_iter()
    .collect();
    let page = "[ok](a.md#the-comparison-under-published) [up](../README.md) [web](https://x.org/#y)\n\
                [gone](b.md) [anchor](a.md#nope) [here](#page-a)\n```\n[in code](c.md)\n```\n";
    let problems = broken_links("docs/a.md", page, &pages, &root);
    assert_eq!(
        problems,
        vec![
            "docs/a.md:2: link to b.md: no file docs/b.md".to_string(),
            "docs/a.md:2: link to a.md#nope: no heading #nope in docs/a.md".to_string(),
        ]
    );
}
