//! `rlvmr eval` and `rlvmr coldstart` end to end: the table, the run directory's files and
//! their keys, and clear errors for bad input.

mod harness;

use std::path::PathBuf;

use harness::{rlvmr_input, zip, scratch};

fn json_lines(path: &PathBuf) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

const RATES: [&str; 6] = [
    "success_rate",
    "invalid_rate",
    "inadmissible_rate",
    "repetitive_rate",
    "avg_actions",
    "episodes",
];

#[test]
fn eval_prints_the_table_and_writes_the_run_directory() {
    let out = scratch("eval");
    let zip = zip();
    let (code, stdout, err) = rlvmr_input(
        &[
            "eval",
            "--env",
            "alfworld",
            "--split",
            "L2",
            "--policy",
            "expert",
            "--episodes",
            "4",
            "--data",
            &zip,
            "--out",
            out.to_str().unwrap(),
        ],
        b"",
    );
    assert_eq!(code, 0, "{err}");
    assert!(
        stdout.contains("| all | 4 | 100.0 | 0.0 | 0.0 |"),
        "{stdout}"
    );
    assert!(
        stdout.contains("tag mix: planning") && stdout.contains("steps/s"),
        "{stdout}"
    );
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    for key in RATES {
        assert!(
            summary[key].is_number(),
            "summary.json lacks {key}: {summary}"
        );
    }
    assert_eq!(summary["success_rate"], 1.0);
    let per_type = summary["per_type"].as_object().unwrap();
    assert!(!per_type.is_empty() && per_type.keys().all(|t| t == "cool" || t == "pick_two"));
    for rates in per_type.values() {
        assert!(RATES.iter().all(|k| rates[k].is_number()));
    }
    let episodes = json_lines(&out.join("trajectories.jsonl"));
    assert_eq!(episodes.len(), 4);
    assert!(episodes.iter().all(|e| e["game"]
        .as_str()
        .is_some_and(|g| g.starts_with("json_2.1.1/valid_unseen/"))
        && e["won"] == true));
    let config = std::fs::read_to_string(out.join("config.toml")).unwrap();
    assert!(
        config.contains("episodes = 4")
            && config.contains("split = \"L2\"")
            && config.contains("temperature = 0.4"),
        "{config}"
    );

    // The trajectories are valid `rlvmr score` input.
    let (code, scored, err) = rlvmr_input(
        &["score"],
        &std::fs::read(out.join("trajectories.jsonl")).unwrap(),
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(scored.lines().count(), 4);
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn coldstart_writes_demonstrations_and_sft_samples_from_training_games() {
    let out = scratch("coldstart");
    let zip = zip();
    let (code, stdout, err) = rlvmr_input(
        &[
            "coldstart",
            "--env",
            "alfworld",
            "--split",
            "L2",
            "--protocol",
            "strict",
            "-n",
            "6",
            "--data",
            &zip,
            "--out",
            out.to_str().unwrap(),
        ],
        b"",
    );
    assert_eq!(code, 0, "{err}");
    assert!(stdout.contains("kept 6 of") && stdout.starts_with("protocol strict:"), "{stdout}");
    assert!(std::fs::read_to_string(out.join("config.toml")).unwrap().contains("protocol = \"strict\""));
    let episodes = json_lines(&out.join("trajectories.jsonl"));
    assert_eq!(episodes.len(), 6);
    for e in &episodes {
        assert!(e["game"].as_str().unwrap().starts_with("json_2.1.1/train/"));
        assert!(!["cool", "pick_two"].contains(&e["task_type"].as_str().unwrap()));
    }
    let samples = json_lines(&out.join("sft.jsonl"));
    assert!(samples.len() >= 6 * 3);
    for s in &samples {
        let keys: Vec<&String> = s.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["prompt", "response"]);
        assert!(s["response"].as_str().unwrap().contains("</action>"));
    }
    assert!(out.join("config.toml").is_file());
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn bad_input_gets_a_clear_error() {
    let zip = zip();
    let (code, _, err) = rlvmr_input(
        &[
            "eval", "--env", "sciworld", "--split", "L7", "--policy", "random",
        ],
        b"",
    );
    assert_eq!(code, 2);
    assert!(err.contains("L7"), "{err}");

    let (code, _, err) = rlvmr_input(
        &[
            "eval", "--split", "L5", "--policy", "random", "--data", &zip,
        ],
        b"",
    );
    assert_eq!(code, 2);
    assert!(err.contains("env.split") && err.contains("L5"), "{err}");

    let out = scratch("badmodel");
    let (code, _, err) = rlvmr_input(
        &[
            "eval",
            "--split",
            "L2",
            "--policy",
            "/nonexistent/model.gguf",
            "--episodes",
            "1",
            "--data",
            &zip,
            "--out",
            out.to_str().unwrap(),
        ],
        b"",
    );
    assert_eq!(code, 2);
    assert!(err.contains("/nonexistent/model.gguf"), "{err}");

    let dir = scratch("badconfig");
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("bad.toml");
    std::fs::write(&config, "[rollout]\ngroup_size = 8\ntemprature = 1.0\n").unwrap();
    let (code, _, err) = rlvmr_input(
        &[
            "eval",
            "--policy",
            "random",
            "--config",
            config.to_str().unwrap(),
        ],
        b"",
    );
    assert_eq!(code, 2);
    assert!(
        err.contains("bad.toml") && err.contains("temprature") && err.contains("line 3"),
        "{err}"
    );

    // Without --config, a model folder's saved run config is read (here a broken one).
    let model_dir = dir.join("model");
    std::fs::create_dir_all(&model_dir).unwrap();
    std::fs::write(model_dir.join("rlvmr.toml"), "[prompt]\nhistroy = 2\n").unwrap();
    let (code, _, err) = rlvmr_input(&["eval", "--policy", model_dir.to_str().unwrap()], b"");
    assert_eq!(code, 2);
    assert!(
        err.contains("rlvmr.toml") && err.contains("histroy"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_presets_parse() {
    let configs = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../configs");
    let mut seen = 0;
    for entry in std::fs::read_dir(&configs).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "toml") {
            trainer::RunConfig::from_file(&path)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            seen += 1;
        }
    }
    assert!(seen >= 3, "configs/ holds the presets");
}
