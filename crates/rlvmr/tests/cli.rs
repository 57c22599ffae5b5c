//! The command line end to end.

mod harness;

use std::path::PathBuf;

use harness::{rlvmr_input, zip};

const GAME: &str = "json_2.1.1/valid_seen/pick_and_place_simple-Book-None-Sofa-229/trial_T20190907_042856_259139/game.tw-pddl";

#[test]
fn replay_writes_one_line_per_game() {
    let input = format!("{{\"game\": \"{GAME}\", \"commands\": [\"go to sidetable 3\", \"take book 1 from sidetable 3\", \"go to sofa 1\", \"move book 1 to sofa 1\"]}}\n");
    let (code, out, err) = rlvmr_input(&["alfworld", "replay", "--data", &zip()], input.as_bytes());
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    let steps = v["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 5);
    assert!(steps[0]["command"].is_null());
    assert_eq!(steps[4]["observation"], "You move the book 1 to the sofa 1.");
    assert_eq!((steps[4]["won"].as_bool(), steps[4]["done"].as_bool()), (Some(true), Some(true)));
    assert!(steps[0]["admissible_commands"].as_array().unwrap().iter().any(|c| c == "help"));
}

#[test]
fn replay_exit_status_says_some_failed() {
    let input = format!("garbage\n{{\"game\": \"{GAME}\"}}\n");
    let (code, out, err) = rlvmr_input(&["alfworld", "replay", "--data", &zip()], input.as_bytes());
    assert_eq!(code, 1);
    assert_eq!(out.lines().count(), 2);
    assert!(err.contains("line 1: malformed request JSON"), "{err}");
}

#[test]
fn missing_data_is_a_clear_error() {
    let (code, _, err) = rlvmr_input(&["alfworld", "replay", "--data", "/nonexistent/data"], b"");
    assert_eq!(code, 2);
    assert!(err.contains("/nonexistent/data") && err.contains("ALFWORLD_DATA"), "{err}");
}

#[test]
fn play_at_a_terminal() {
    let (code, out, err) = rlvmr_input(&["alfworld", "play", GAME, "--data", &zip()], b"go to sidetable 3\nLOOK\nquit\n");
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("Your task is to: put a book in sofa."));
    assert!(out.contains("You arrive at sidetable 3."));
    assert!(out.contains("Nothing happens."));
}

#[test]
fn games_lists_a_split() {
    let (code, out, _) = rlvmr_input(&["alfworld", "games", "--split", "valid_unseen", "--data", &zip()], b"");
    assert_eq!(code, 0);
    assert_eq!(out.lines().count(), 134);
    let (code, _, err) = rlvmr_input(&["alfworld", "games", "--split", "nope", "--data", &zip()], b"");
    assert_eq!(code, 2);
    assert!(err.contains("unknown split 'nope'"));
}

const EPISODES: &str = r#"{"uid": "t1", "won": true, "steps": [{"observation": "o1", "admissible_actions": ["go to desk 1", "look"], "output": "<planning>find the pen</planning><action>go to desk 1</action>"}, {"observation": "o2", "admissible_actions": ["look"], "output": "<explore>look around</explore>\n<action>\nlook\n</action>"}]}
{"uid": "t1", "won": false, "steps": [{"observation": "o1", "admissible_actions": ["look"], "output": "no tags at all"}]}
"#;

#[test]
fn score_adds_per_step_fields_and_metrics() {
    let (code, out, err) = rlvmr_input(&["score"], EPISODES.as_bytes());
    assert_eq!(code, 0, "{err}");
    let lines: Vec<serde_json::Value> = out.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 2);
    let s = &lines[0]["steps"];
    assert_eq!((s[0]["tag"].as_str(), s[1]["tag"].as_str()), (Some("planning"), Some("explore")));
    assert_eq!(s[1]["action"], "look", "multi-line action blocks count (the reference's DOTALL bug is not copied)");
    assert_eq!((s[0]["mr_reward"].as_f64(), s[1]["mr_reward"].as_f64()), (Some(1.0), Some(1.0)));
    assert_eq!(s[0]["reward"].as_f64(), Some(10.0));
    let t = &lines[1]["steps"][0];
    assert_eq!((t["tag"].as_str(), t["format_valid"].as_bool(), t["reward"].as_f64()), (Some("none"), Some(false), Some(-0.1)));
    let sum: f64 = lines.iter().flat_map(|l| l["steps"].as_array().unwrap().iter()).map(|s| s["advantage"].as_f64().unwrap()).sum();
    assert!(sum.is_finite());
    assert_eq!(lines[0]["metrics"]["success_rate"].as_f64(), Some(1.0));
}

#[test]
fn score_reports_bad_lines_and_bad_configs() {
    let input = format!("{{\"uid\": 1}}\n{EPISODES}");
    let (code, out, err) = rlvmr_input(&["score", "--algo", "gigpo"], input.as_bytes());
    assert_eq!(code, 1);
    assert_eq!(out.lines().count(), 3);
    assert!(err.contains("line 1: not an episode"), "{err}");

    let (code, _, err) = rlvmr_input(&["score", "--algo", "ppo"], b"");
    assert_eq!(code, 2);
    assert!(err.contains("unknown --algo 'ppo'"), "{err}");

    let dir = std::env::temp_dir().join(format!("rlvmr-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = dir.join("bad.toml");
    std::fs::write(&cfg, "[reward]\nformat_penalty = 0.2\nplaning_reward = 1.0\n").unwrap();
    let (code, _, err) = rlvmr_input(&["score", "--config", cfg.to_str().unwrap()], b"");
    assert_eq!(code, 2);
    assert!(err.contains("planing_reward") && err.contains("bad.toml"), "{err}");
    let good = dir.join("good.toml");
    std::fs::write(&good, "[advantage]\nalgo = \"rloo\"\n[format]\nvalidity = \"lenient\"\n").unwrap();
    let (code, _, err) = rlvmr_input(&["score", "--config", good.to_str().unwrap()], EPISODES.as_bytes());
    assert_eq!(code, 0, "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The `rlvmr score --config` example of docs/method.md (its first toml block) is accepted.
#[test]
fn the_documented_score_config_example_is_valid() {
    let page = std::fs::read_to_string(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/method.md")).unwrap();
    let start = page.find("```toml\n").expect("a toml block in docs/method.md") + 8;
    let block = &page[start..start + page[start..].find("```").unwrap()];
    assert!(block.contains("[advantage]"), "docs/method.md's first toml block is not the score config:\n{block}");
    let path = std::env::temp_dir().join(format!("rlvmr-readme-{}.toml", std::process::id()));
    std::fs::write(&path, block).unwrap();
    let (code, _, err) = rlvmr_input(&["score", "--config", path.to_str().unwrap()], EPISODES.as_bytes());
    std::fs::remove_file(&path).unwrap();
    assert_eq!(code, 0, "{err}");
}

#[test]
fn logprobs_scores_lines_and_reports_bad_ones() {
    let mut input = Vec::new();
    input.extend_from_slice(b"{\"prompt\": \"<|im_start|>user\\nHi<|im_end|>\\n<|im_start|>assistant\\n\", \"response\": \"Hello!\"}\n");
    input.extend_from_slice(b"not json\n");
    input.extend_from_slice(b"{\"prompt\": \"\xff\"}\n");
    input.extend_from_slice(b"{\"prompt\": \"a\", \"response\": \"\"}\n");
    let (code, out, err) = rlvmr_input(&["logprobs"], &input);
    assert_eq!(code, 1, "{err}");
    let lines: Vec<serde_json::Value> = out.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 4);
    let ids = lines[0]["response_ids"].as_array().unwrap();
    let lps = lines[0]["response_logprobs"].as_array().unwrap();
    assert!(!ids.is_empty() && ids.len() == lps.len());
    assert!(lps.iter().all(|v| v.as_f64().unwrap() <= 0.0));
    assert!(!lines[0]["prompt_ids"].as_array().unwrap().is_empty());
    for (i, l) in lines.iter().enumerate().skip(1) {
        assert_eq!(l["line"].as_u64(), Some(i as u64 + 1));
    }
    assert!(err.contains("line 3: the line is not valid UTF-8"), "{err}");
}

/// The tiny Qwen2 fixture of the policy crate: an HF folder with a context of 64 tokens.
fn qwen2_fixture() -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../policy/tests/fixtures/qwen2-tiny")
        .to_str()
        .unwrap()
        .to_string()
}

#[test]
fn model_flag_takes_a_hugging_face_folder() {
    let model = qwen2_fixture();
    let (code, out, err) = rlvmr_input(&["generate", "--model", &model, "--max-new-tokens", "3", "clean a mug"], b"");
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["ids"].as_array().unwrap().len(), 3);
}

#[test]
fn prompts_longer_than_the_context_are_clear_errors() {
    let model = qwen2_fixture();
    let long = "a mug ".repeat(40);
    let line = serde_json::json!({"prompt": long, "response": "ok"}).to_string();
    let input = format!("{line}\n{}\n", serde_json::json!({"prompt": "a mug", "response": "ok"}));
    let (code, out, err) = rlvmr_input(&["logprobs", "--model", &model], input.as_bytes());
    assert_eq!(code, 1, "{err}");
    let lines: Vec<serde_json::Value> = out.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0]["line"], 1);
    assert!(lines[0]["error"].as_str().unwrap().contains("context length 64"), "{out}");
    assert!(lines[1]["response_logprobs"].is_array(), "{out}");

    let (code, out, err) = rlvmr_input(&["generate", "--model", &model, "--raw", &long], b"");
    assert_eq!(code, 2, "{out}");
    assert!(err.contains("context length 64") && !err.contains("panicked"), "{err}");
}

#[test]
fn bad_model_folders_are_clear_errors() {
    let dir = std::env::temp_dir().join(format!("rlvmr-cli-bad-model-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("config.json"), r#"{"architectures": ["MambaForCausalLM"]}"#).unwrap();
    let (code, _, err) = rlvmr_input(&["generate", "--model", dir.to_str().unwrap(), "hi"], b"");
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(code, 2);
    assert!(err.contains("config.json") && err.contains("`architectures`") && err.contains("MambaForCausalLM"), "{err}");
}

/// `rlvmr bench-policy` on the CPU with the tiny model: every phase runs and reports, the
/// weights and inputs PyTorch would read are written, and on one device the check finds the
/// same log-probs and replies. Bad arguments are errors that name them.
#[test]
fn bench_policy_runs_every_phase_and_names_bad_arguments() {
    let dir = std::env::temp_dir().join(format!("rlvmr-cli-bench-{}", std::process::id()));
    let (weights, out) = (dir.join("weights"), dir.join("bench.json"));
    let (weights, out) = (weights.to_str().unwrap(), out.to_str().unwrap());
    let mut args = vec!["bench-policy", "--device", "cpu", "--shape", "tiny", "--weights", weights, "--samples", "4"];
    args.extend(["--prompt-tokens", "20", "--reply-tokens", "8", "--micro-batch", "2", "--prompts", "3"]);
    args.extend(["--sample-prompt-tokens", "12", "--new-tokens", "5", "--phases", "check,update,parts,logprobs,sample", "--out", out]);
    let (code, _, err) = rlvmr_input(&args, b"");
    assert_eq!(code, 0, "{err}");
    let report: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(out).unwrap()).unwrap();
    for phase in ["check", "update", "parts", "logprobs", "sample"] {
        assert!(report[phase].is_object(), "{phase}: {report}");
    }
    assert_eq!(report["check"]["logprob_max_abs_diff_vs_cpu"], 0.0, "{report}");
    assert_eq!(report["check"]["greedy_tokens_equal_to_cpu"], "32 of 32", "{report}");
    assert!(report["check"]["padded_batch_vs_alone_max_abs_diff"].as_f64().unwrap() < 1e-5, "{report}");
    assert!(report["update"]["tokens_per_s"].as_f64().unwrap() > 0.0);
    assert_eq!(report["sample"]["new_tokens"], 5);
    let inputs: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("weights/bench_inputs.json")).unwrap()).unwrap();
    assert_eq!((inputs["pairs"].as_array().unwrap().len(), inputs["prompts"].as_array().unwrap().len()), (4, 3));
    assert!(dir.join("weights/model.safetensors").exists() && dir.join("weights/config.json").exists());

    let bad: [(&[&str], &str); 4] = [
        (&["--device", "cpu", "--shape", "tiny", "--phases", "update,fly"], "unknown phase \"fly\""),
        (&["--device", "cpu", "--shape", "gpt5"], "unknown --shape \"gpt5\""),
        (&["--device", "tpu", "--shape", "tiny"], "unknown device \"tpu\""),
        (&["--device", "cpu", "--shape", "tiny", "--micro-batch", "0"], "--micro-batch"),
    ];
    for (extra, want) in bad {
        let mut args = vec!["bench-policy", "--weights", weights];
        args.extend_from_slice(extra);
        let (code, _, err) = rlvmr_input(&args, b"");
        assert_eq!(code, 2, "{extra:?}: {err}");
        assert!(err.contains(want) && !err.contains("panicked"), "{extra:?}: {err}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
