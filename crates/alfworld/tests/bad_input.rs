//! Bad input gets a clear error, never a panic or a hang.

use std::path::Path;
use std::sync::Arc;

use alfworld::{load_game, AlfworldData};

const GAME: &str = "json_2.1.1/valid_seen/pick_and_place_simple-Book-None-Sofa-229/trial_T20190907_042856_259139/game.tw-pddl";

fn data() -> AlfworldData {
    AlfworldData::open(&testkit::alfworld_data()).unwrap()
}

fn game_text() -> String {
    data().read(GAME).unwrap()
}

#[test]
fn truncated_game_files_are_errors() {
    let text = game_text();
    for cut in (0..text.len()).step_by(997) {
        let err = load_game(&text[..cut]).err().unwrap_or_else(|| panic!("a file cut at byte {cut} loaded"));
        assert!(err.to_string().contains("JSON"), "cut {cut}: {err}");
    }
}

fn with_field(text: &str, key: &str, f: impl Fn(&str) -> String) -> String {
    let mut v: serde_json::Value = serde_json::from_str(text).unwrap();
    let old = v[key].as_str().unwrap().to_string();
    v[key] = serde_json::Value::String(f(&old));
    v.to_string()
}

#[test]
fn malformed_parts_name_the_part() {
    let text = game_text();
    let mut no_domain: serde_json::Value = serde_json::from_str(&text).unwrap();
    no_domain.as_object_mut().unwrap().remove("pddl_domain");
    assert!(load_game(&no_domain.to_string()).unwrap_err().to_string().contains("'pddl_domain'"));

    let cut_problem = with_field(&text, "pddl_problem", |p| p[..p.len() / 2].to_string());
    let err = load_game(&cut_problem).unwrap_err().to_string();
    assert!(err.contains("pddl_problem") && err.contains("truncated"), "{err}");

    let unknown_object = with_field(&text, "pddl_problem", |p| p.replacen("(:init", "(:init (openable nosuchthing)", 1));
    let err = load_game(&unknown_object).unwrap_err().to_string();
    assert!(err.contains("nosuchthing"), "{err}");

    let bad_grammar = with_field(&text, "grammar", |g| g.replacen("\"intro\": [", "\"intro\": [[", 1));
    let err = load_game(&bad_grammar).unwrap_err().to_string();
    assert!(err.contains("grammar"), "{err}");

    let no_template = with_field(&text, "grammar", |g| g.replacen("action help {", "action helpless {", 1));
    let err = load_game(&no_template).unwrap_err().to_string();
    assert!(err.contains("'help'"), "{err}");
}

#[test]
fn odd_commands_answer_nothing_happens() {
    let game = Arc::new(load_game(&game_text()).unwrap());
    let (mut session, intro) = textworld::Session::start(game).unwrap();
    let huge = "go to sofa 1 ".repeat(80_000); // about 1 MB
    for command in ["", "   ", "\u{0}", "LOOK", "go  to sofa 1", huge.as_str(), "{r.name}", "#intro#", "🙂"] {
        let obs = session.step(command).unwrap();
        assert_eq!(obs.feedback, "Nothing happens.", "{:?}", &command[..command.len().min(20)]);
        assert_eq!(obs.admissible_commands, intro.admissible_commands);
    }
}

#[test]
fn missing_data_folder_says_how_to_get_the_data() {
    let err = AlfworldData::open(Path::new("/nonexistent/alfworld")).unwrap_err().to_string();
    assert!(err.contains("/nonexistent/alfworld") && err.contains("ALFWORLD_DATA") && err.contains("alfworld-download"), "{err}");
    assert!(data().read("json_2.1.1/nope/game.tw-pddl").unwrap_err().to_string().contains("nope"));
    assert!(data().read("../secret").is_err());
}

#[test]
fn replay_stream_reports_bad_lines_and_runs_the_rest() {
    let mut input = Vec::new();
    input.extend_from_slice(format!("{{\"game\": \"{GAME}\", \"commands\": [\"look\"]}}\n").as_bytes());
    input.extend_from_slice(b"{\"game\": \"x\"\xff\xfe}\n");
    input.extend_from_slice(b"{not json}\n");
    input.extend_from_slice(b"\n");
    input.extend_from_slice(b"{\"game\": \"json_2.1.1/missing/game.tw-pddl\", \"commands\": []}\n");
    input.extend_from_slice(b"{\"game\": \"a\", \"extra\": 1}\n");
    input.extend_from_slice(format!("{{\"game\": \"{GAME}\", \"commands\": [\"\", \"go to sofa 1\"]}}").as_bytes());
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let summary = alfworld::replay::replay_stream(&data(), &input[..], &mut out, &mut err).unwrap();
    assert_eq!((summary.games, summary.failed), (6, 4));
    let out = String::from_utf8(out).unwrap();
    let lines: Vec<serde_json::Value> = out.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 6);
    assert_eq!(lines[0]["steps"].as_array().unwrap().len(), 2);
    assert_eq!(lines[1]["line"], 2);
    assert!(lines[1]["error"].as_str().unwrap().contains("UTF-8"));
    assert_eq!(lines[2]["line"], 3);
    assert_eq!(lines[3]["line"], 5);
    assert!(lines[4]["error"].as_str().unwrap().contains("extra"));
    let last = lines[5]["steps"].as_array().unwrap();
    assert_eq!(last[1]["observation"], "Nothing happens.");
    assert!(last[2]["observation"].as_str().unwrap().starts_with("You arrive at sofa 1."));
    let err = String::from_utf8(err).unwrap();
    assert!(err.contains("line 2:") && err.contains("line 3:") && err.contains("line 5 (game json_2.1.1/missing/game.tw-pddl)"), "{err}");
}
