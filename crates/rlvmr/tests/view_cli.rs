//! `rlvmr view` in a real browser: headless Chromium (Debian's `chromium`) opens the page and
//! the rendered DOM is checked: episodes listed, filters (set through the URL's hash, as the
//! page's controls do) change the list, the same game from two files side by side, and an
//! episode whose texts hold markup and script shows them literally and runs nothing. Without
//! Chromium the browser test says it skipped (CI installs it).

mod harness;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::json;

use harness::{rlvmr, scratch};

fn step(observation: &str, output: &str, action: &str, tag: Option<&str>, valid: bool) -> serde_json::Value {
    json!({"observation": observation, "prompt": format!("PROMPT {observation}"), "output": output,
           "action": action, "tag": tag, "format_valid": valid, "admissible": valid,
           "next_observation": "Nothing happens.", "advantage": 0.25})
}

const EVIL: &str = "<img src=x onerror=\"document.title='pwned'\"><script>document.body.setAttribute('data-pwned','1')</script>";

fn write_lines(path: &Path, episodes: &[serde_json::Value]) {
    let text: String = episodes.iter().map(|e| format!("{e}\n")).collect();
    std::fs::write(path, text).unwrap();
}

/// Two files: A (a won pick, a lost cool with an invalid step, an episode full of markup)
/// and B (the same pick game as A's first).
fn fixture(dir: &Path) -> (PathBuf, PathBuf) {
    let a = dir.join("a.jsonl");
    let b = dir.join("b.jsonl");
    write_lines(&a, &[
        json!({"uid": "1", "game": "g/pick-1", "task": "put a pen in drawer.", "task_type": "pick", "won": true,
               "steps": [step("room", "<planning>find the pen</planning>\n<action>go to desk 1</action>", "go to desk 1", Some("planning"), true)]}),
        json!({"uid": "2", "game": "g/cool-1", "task": "cool an apple.", "task_type": "cool", "won": false,
               "steps": [step("room", "gibberish", "", None, false),
                         step("room", "<reflection>that failed</reflection><action>look</action>", "look", Some("reflection"), true)]}),
        json!({"uid": "3", "game": "g/evil", "task": format!("task {EVIL}"), "task_type": "pick", "won": false,
               "steps": [step(EVIL, &format!("<monitor>{EVIL}</monitor><action>look</action></script>"), "look", Some("monitor"), true)]}),
    ]);
    write_lines(&b, &[json!({"uid": "1", "game": "g/pick-1", "task": "put a pen in drawer.", "task_type": "pick", "won": false,
        "steps": [step("room", "<think>hm</think><action>look</action>", "look", None, true)]})]);
    (a, b)
}

fn chromium() -> Option<&'static str> {
    ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|b| Command::new(b).arg("--version").output().is_ok_and(|o| o.status.success()))
}

/// The DOM after the page's script ran, at `page#hash`.
fn dom(browser: &str, page: &Path, hash: &str) -> String {
    let url = format!("file://{}#{hash}", page.display());
    let out = Command::new(browser)
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=3000", "--dump-dom"])
        .arg(url)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into()
}

fn rows(dom: &str) -> usize {
    dom.matches("class=\"ep-row").count()
}

#[test]
fn the_page_lists_filters_compares_and_never_runs_episode_text() {
    let dir = scratch("browser");
    let (a, b) = fixture(&dir);
    let page = dir.join("page.html");
    let (code, _, err) = rlvmr(&["view", a.to_str().unwrap(), b.to_str().unwrap(), "-o", page.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("4 episodes from 2 files"), "{err}");
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(!html.contains("http://") && !html.contains("https://"), "self-contained: no network");
    assert_eq!(html.matches("</script>").count(), 2, "episode text cannot close a script element");
    let Some(browser) = chromium() else {
        eprintln!("skipped the browser checks: no chromium (apt-get install chromium)");
        return;
    };
    let all = dom(browser, &page, "");
    assert_eq!(rows(&all), 4, "every episode listed");
    assert!(all.contains("4 of 4 episodes"));
    assert_eq!(rows(&dom(browser, &page, "won=won")), 1);
    assert_eq!(rows(&dom(browser, &page, "won=lost&type=pick")), 2);
    assert_eq!(rows(&dom(browser, &page, "invalid=1")), 1);
    assert_eq!(rows(&dom(browser, &page, "tag=reflection")), 1);
    assert_eq!(rows(&dom(browser, &page, "source=1")), 1);
    assert_eq!(rows(&dom(browser, &page, "q=cool")), 1);

    // The pick game from both files, side by side.
    let pair = dom(browser, &page, "episode=0:0");
    assert_eq!(pair.matches("class=\"column\"").count(), 2, "{pair}");
    assert!(pair.contains("find the pen") && pair.contains("&lt;think&gt;hm&lt;/think&gt;"));

    // Markup in a task, an observation and a reply is shown as text and runs nothing.
    let evil = dom(browser, &page, "episode=0:2");
    assert!(evil.contains("&lt;img src=x onerror="), "shown literally");
    assert!(evil.contains("&lt;script&gt;document.body.setAttribute"), "shown literally");
    assert!(!evil.contains("<img"), "no image element was made");
    assert!(!evil.contains("data-pwned=\"1\""), "no script ran");
    assert!(evil.contains("<title>rlvmr episodes</title>"), "no handler ran");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn view_reads_run_directories_and_names_bad_input() {
    let dir = scratch("inputs");
    let (a, _) = fixture(&dir);
    let run = dir.join("run");
    std::fs::create_dir_all(run.join("eval")).unwrap();
    std::fs::copy(&a, run.join("eval/L0.jsonl")).unwrap();
    std::fs::write(run.join("metrics.jsonl"), "{\"iteration\": 1}\n").unwrap();
    let (code, _, err) = rlvmr(&["view", run.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(run.join("view.html").is_file() && err.contains("3 episodes from 1 files"), "{err}");

    let bad = dir.join("bad.jsonl");
    std::fs::write(&bad, format!("{}\nnot json\n", std::fs::read_to_string(&a).unwrap().lines().next().unwrap())).unwrap();
    let (code, _, err) = rlvmr(&["view", bad.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(err.contains("bad.jsonl") && err.contains("line 2") && err.contains("not JSON"), "{err}");
    let (code, _, err) = rlvmr(&["view", dir.join("missing.jsonl").to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(err.contains("missing.jsonl") && err.contains("no such file"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
