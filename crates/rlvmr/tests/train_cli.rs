//! `rlvmr train` end to end on the smoke preset: the run directory, exact resume after a
//! SIGKILL of the real process, and clear errors for bad input.

mod harness;

use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

use harness::{rlvmr, scratch, command, repo};

/// The smoke preset with each `(from, to)` of `edits` applied (every `from` must be in it),
/// written into `dir/name`.
fn smoke_variant(dir: &Path, name: &str, edits: &[(&str, &str)]) -> PathBuf {
    let mut text = std::fs::read_to_string(repo().join("configs/smoke.toml")).unwrap();
    for (from, to) in edits {
        assert!(text.contains(from), "configs/smoke.toml has no {from:?}");
        text = text.replace(from, to);
    }
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// The smoke preset with `iterations` iterations, written into `dir`.
fn smoke_config(dir: &Path, iterations: usize) -> PathBuf {
    smoke_variant(dir, "smoke.toml", &[("iterations = 2", &format!("iterations = {iterations}"))])
}

fn json_lines(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// metrics.jsonl without the speed figures (the only part allowed to differ between runs).
fn metrics_without_time(dir: &Path) -> Vec<serde_json::Value> {
    json_lines(&dir.join("metrics.jsonl"))
        .into_iter()
        .map(|mut line| {
            line.as_object_mut().unwrap().remove("time");
            if let Some(eval) = line.get_mut("eval") {
                eval.as_object_mut().unwrap().remove("time");
            }
            line
        })
        .collect()
}

/// The folder names of ALFWorld's two L2 test types (cool, pick_two) and their labels in a
/// record: what a file mentions when it holds one of their games.
const L2_TEST_MARKS: [&str; 4] = [
    "pick_cool_then_place_in_recep",
    "pick_two_obj_and_place",
    "\"task_type\":\"cool\"",
    "\"task_type\":\"pick_two\"",
];

/// Every file under `dir` with its bytes, gzipped files unpacked.
fn files_under(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let unpack = |(path, bytes): (PathBuf, Vec<u8>)| {
        if path.extension().is_none_or(|e| e != "gz") {
            return (path, bytes);
        }
        let mut text = Vec::new();
        std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&bytes[..]), &mut text).unwrap();
        (path, text)
    };
    testkit::files_under(dir).into_iter().map(unpack).collect()
}

fn mentions(bytes: &[u8], mark: &str) -> bool {
    bytes.windows(mark.len()).any(|w| w == mark.as_bytes())
}

fn task_types(lines: &[serde_json::Value]) -> std::collections::BTreeSet<String> {
    lines.iter().map(|l| l["task_type"].as_str().unwrap().to_string()).collect()
}

/// The smoke preset with 40 demonstrations under `protocol`, episodes of up to 30 steps (the
/// expert needs more than the preset's 6 for every type), no evaluation during RL and no
/// final evaluation: everything it writes comes before the test.
fn protocol_run(dir: &Path, protocol: &str) -> (PathBuf, String) {
    let config = smoke_variant(
        dir,
        "smoke.toml",
        &[
            ("episodes = 20", "episodes = 40"),
            ("max_steps = 6", "max_steps = 30"),
            ("eval_every = 2", "eval_every = 0"),
            ("final_eval = [\"L2\"]", "final_eval = []"),
        ],
    );
    let out = dir.join(protocol);
    let (code, stdout, err) = rlvmr(&[
        "train", "--config", config.to_str().unwrap(), "--protocol", protocol, "--out", out.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    (out, stdout)
}

#[test]
fn under_published_the_cold_start_holds_all_six_types_and_rl_only_types_1_to_4() {
    let dir = scratch("published");
    let (out, stdout) = protocol_run(&dir, "published");
    assert!(stdout.starts_with("protocol published:"), "the table's header names it: {stdout}");
    assert!(std::fs::read_to_string(out.join("config.toml")).unwrap().contains("protocol = \"published\""));
    let demonstrations = json_lines(&out.join("coldstart/trajectories.jsonl"));
    assert_eq!(
        task_types(&demonstrations).into_iter().collect::<Vec<_>>(),
        ["clean", "cool", "heat", "look", "pick", "pick_two"],
        "the authors' cold start draws from every type"
    );
    let mut rollouts = Vec::new();
    for (path, bytes) in files_under(&out.join("rollouts")) {
        let text = String::from_utf8(bytes).unwrap();
        assert!(!text.is_empty(), "{}", path.display());
        rollouts.extend(text.lines().map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()));
    }
    assert_eq!(rollouts.len(), 2 * 2 * 4, "2 iterations of 2 games x 4 rollouts");
    for episode in &rollouts {
        let game = episode["game"].as_str().unwrap();
        assert!(game.starts_with("json_2.1.1/train/"), "{game}");
        assert!(
            ["pick", "look", "clean", "heat"].contains(&episode["task_type"].as_str().unwrap()),
            "RL under published plays types 1-4 only: {game}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn under_strict_no_file_written_before_the_test_mentions_a_cool_or_pick_two_game() {
    let dir = scratch("strict");
    let (out, stdout) = protocol_run(&dir, "strict");
    assert!(stdout.starts_with("protocol strict:"), "{stdout}");
    let demonstrations = json_lines(&out.join("coldstart/trajectories.jsonl"));
    assert_eq!(task_types(&demonstrations).into_iter().collect::<Vec<_>>(), ["clean", "heat", "look", "pick"]);
    let files = files_under(&out);
    assert!(files.iter().any(|(p, _)| p.ends_with("rollouts/0002.jsonl.gz")));
    for (path, bytes) in &files {
        for mark in L2_TEST_MARKS {
            assert!(!mentions(bytes, mark), "{} mentions {mark}", path.display());
        }
    }
    // The check can fail: a record of a cool game is caught.
    let record = br#"{"game":"json_2.1.1/train/pick_cool_then_place_in_recep-Apple-None-Microwave-19/trial_1/game.tw-pddl","task_type":"cool"}"#;
    assert!(mentions(record, L2_TEST_MARKS[0]) && mentions(record, L2_TEST_MARKS[2]));
    let _ = std::fs::remove_dir_all(&dir);
}

/// The smoke preset as a per-level job (`rl.per_level`): one RL iteration per run, the
/// final evaluations on 3 seeded draws per level.
fn per_level_config(dir: &Path) -> PathBuf {
    smoke_variant(
        dir,
        "per-level.toml",
        &[
            ("iterations = 2", "iterations = 1"),
            ("eval_every = 2", "eval_every = 0"),
            ("temperature = 0.4", "temperature = 0.4\nepisodes = 3"),
            ("final_eval = [\"L2\"]", "final_eval = [\"L0\", \"L1\", \"L2\"]\nper_level = true"),
        ],
    )
}

fn config_of(run: &Path) -> toml::Value {
    toml::from_str(&std::fs::read_to_string(run.join("config.toml")).unwrap()).unwrap()
}

/// As the authors' code trains one model per level: L0 and L1 share their training games
/// and so one run, L2 has its own, both from one cold start and SFT under `published`; each
/// level is played by its own run's model, and a resumed job does not play a finished run again.
#[test]
fn a_per_level_job_trains_each_level_on_its_own_games_from_one_sft_model() {
    let dir = scratch("per-level");
    let config = per_level_config(&dir);
    let out = dir.join("run");
    let (code, stdout, err) = rlvmr(&["train", "--config", config.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(stdout.contains("## RL at L0, its final model on L0, L1"), "{stdout}");
    assert!(stdout.contains("## RL at L2, its final model on L2"), "{stdout}");
    for level in ["L0", "L1", "L2"] {
        assert!(stdout.contains(&format!("| final model, {level} test games | 3 |")), "{stdout}");
    }
    let sft = out.join("sft/final");
    assert!(sft.join("model.safetensors").is_file(), "one shared SFT model");
    for (run, split, plays) in [("L0", "L0", &["L0", "L1"][..]), ("L2", "L2", &["L2"][..])] {
        let run = out.join(run);
        let saved = config_of(&run);
        assert_eq!(saved["env"]["split"].as_str(), Some(split));
        assert_eq!(saved["rl"]["init"].as_str(), Some(sft.to_str().unwrap()));
        assert_eq!(saved["rl"]["per_level"].as_bool(), Some(false));
        assert!(!run.join("coldstart").exists() && !run.join("sft").exists(), "no second cold start");
        for level in plays {
            assert!(run.join(format!("eval/{level}.json")).is_file(), "{} plays {level}", run.display());
        }
        assert!(run.join("checkpoints/iter-0001/model.safetensors").is_file());
    }
    assert!(!out.join("L1").exists(), "L1 trains on L0's games: no run of its own");
    assert!(!out.join("L0/eval/L2.json").exists() && !out.join("L2/eval/L0.json").exists());
    assert_eq!(config_of(&out)["rl"]["per_level"].as_bool(), Some(true));
    // The job's charts hold both runs, and `rlvmr report` reads the job's folder as its runs.
    assert!(std::fs::read(out.join("plots/success.png")).unwrap().starts_with(b"\x89PNG"));
    let (code, stdout, err) = rlvmr(&["report", out.to_str().unwrap(), "--out", dir.join("plots").to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    for run in ["L0", "L2"] {
        assert!(stdout.contains(&out.join(run).display().to_string()), "{stdout}");
    }

    // Resumed: both runs are finished, so nothing is played again.
    let before = std::fs::read(out.join("L2/eval/L2.jsonl")).unwrap();
    let (code, stdout, err) = rlvmr(&["train", "--resume", out.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(stdout.matches("finished before").count(), 2, "{stdout}");
    assert_eq!(std::fs::read(out.join("L2/eval/L2.jsonl")).unwrap(), before);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Under `strict` the levels' cold starts draw different games (L2's never shows types 5-6),
/// so each run makes its own.
#[test]
fn a_strict_per_level_job_gives_each_run_its_own_cold_start() {
    let dir = scratch("per-level-strict");
    let config = per_level_config(&dir);
    let out = dir.join("run");
    let (code, _, err) = rlvmr(&[
        "train", "--config", config.to_str().unwrap(), "--protocol", "strict", "--out", out.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(!out.join("sft").exists(), "no shared SFT under strict");
    for run in ["L0", "L2"] {
        let run = out.join(run);
        assert!(run.join("sft/final/model.safetensors").is_file(), "{}", run.display());
        assert_eq!(config_of(&run)["rl"]["init"].as_str(), Some("coldstart"));
    }
    let demonstrations = json_lines(&out.join("L2/coldstart/trajectories.jsonl"));
    assert!(task_types(&demonstrations).iter().all(|t| !["cool", "pick_two"].contains(&t.as_str())));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_smoke_preset_writes_metrics_rollouts_checkpoints_and_the_final_model() {
    let dir = scratch("smoke");
    let out = dir.join("run");
    let config = repo().join("configs/smoke.toml");
    let (code, stdout, err) = rlvmr(&["train", "--config", config.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(stdout.contains("| training, iteration 2 |") && stdout.contains("| eval L2, iteration 2 |"), "{stdout}");
    // The final model on every L2 test game, and the run's charts.
    assert!(stdout.contains("| final model, L2 test games | 38 |"), "{stdout}");
    let summary: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(out.join("eval/L2.json")).unwrap()).unwrap();
    assert_eq!(summary["episodes"], 38);
    assert_eq!(json_lines(&out.join("eval/L2.jsonl")).len(), 38);
    assert!(std::fs::read(out.join("plots/success.png")).unwrap().starts_with(b"\x89PNG"));

    let lines = json_lines(&out.join("metrics.jsonl"));
    let iterations: Vec<_> = lines.iter().filter(|l| l.get("eval").is_none()).collect();
    assert_eq!(iterations.len(), 2);
    for key in [
        "success", "success_by_type", "rewards", "tag_mix", "invalid_rate", "inadmissible_rate",
        "repetitive_rate", "avg_actions", "response_length", "kl", "entropy", "clip_fraction",
        "grad_norm", "lr", "tokens", "time",
    ] {
        assert!(iterations[0].get(key).is_some(), "no {key} in {}", iterations[0]);
    }
    // The old log-probs were the sampler's: nothing recomputed, no gap to report.
    assert!(iterations[0].get("logprob_gap_mean").is_none(), "{}", iterations[0]);
    for phase in ["rollout", "scoring", "logprobs", "update"] {
        assert!(iterations[0]["time"]["seconds"][phase].is_number());
    }
    for kind in ["outcome", "format", "planning", "exploration", "reflection", "monitor"] {
        assert!(iterations[0]["rewards"][kind].is_number());
    }
    let evals: Vec<_> = lines.iter().filter(|l| l.get("eval").is_some()).collect();
    assert_eq!(evals.len(), 1);
    assert_eq!(evals[0]["iteration"], 2);
    assert_eq!(evals[0]["eval"]["episodes"], 4);

    // Rollouts in `rlvmr score`'s schema, with the advantage each step was trained with.
    for n in ["0001", "0002"] {
        let gz = std::fs::read(out.join(format!("rollouts/{n}.jsonl.gz"))).unwrap();
        let mut text = String::new();
        std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(&gz[..]), &mut text).unwrap();
        let episodes: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(episodes.len(), 8, "2 games x 4 rollouts");
        let uids: std::collections::BTreeSet<_> = episodes.iter().map(|e| e["uid"].as_str().unwrap().to_string()).collect();
        assert_eq!(uids.len(), 2);
        let step = &episodes[0]["steps"][0];
        for key in ["format_valid", "tag", "action", "admissible", "reward", "mr_reward", "advantage", "output", "observation"] {
            assert!(step.get(key).is_some(), "no {key} in a rollout step");
        }
        assert!(episodes[0]["metrics"]["success_rate"].is_number());
    }
    for n in ["0001", "0002"] {
        let ckpt = out.join(format!("checkpoints/iter-{n}"));
        for file in ["model.safetensors", "optimizer/optimizer.safetensors", "rl_state.json", "rlvmr.toml"] {
            assert!(ckpt.join(file).is_file(), "{} missing", ckpt.join(file).display());
        }
    }
    // `rlvmr report`: the charts and the final table; a directory without metrics is named.
    let plots = dir.join("plots");
    let (code, stdout, err) = rlvmr(&["report", out.to_str().unwrap(), out.to_str().unwrap(), "--out", plots.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(stdout.matches(&format!("| {} | 2 |", out.display())).count(), 2, "{stdout}");
    for chart in ["success", "rewards", "tags", "rates", "optimization", "time"] {
        let png = std::fs::read(plots.join(format!("{chart}.png"))).unwrap();
        assert!(png.starts_with(b"\x89PNG"), "{chart}.png is not a PNG");
    }
    let (code, _, err) = rlvmr(&["report", dir.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(err.contains("metrics.jsonl"), "{err}");

    // `rlvmr advantages`: every trained step in one cell; iterations it lacks and folders
    // without rollouts are named.
    let (code, stdout, err) = rlvmr(&["advantages", out.to_str().unwrap(), "--iterations", "1-2"]);
    assert_eq!(code, 0, "{err}");
    assert!(stdout.contains("iterations 1-2 (16 episodes,"), "{stdout}");
    let cell_steps: usize = stdout
        .lines()
        .filter(|l| l.starts_with("| lost |") || l.starts_with("| won |"))
        .map(|l| l.split('|').nth(4).unwrap().trim().parse::<usize>().unwrap())
        .sum();
    let trained_steps: u64 = iterations.iter().map(|l| l["samples"].as_u64().unwrap()).sum();
    assert_eq!(cell_steps as u64, trained_steps, "{stdout}");
    let (code, _, err) = rlvmr(&["advantages", out.to_str().unwrap(), "--iterations", "2-3"]);
    assert_eq!(code, 2);
    assert!(err.contains("no rollouts of iteration 3 (it has iterations 1-2)"), "{err}");
    let (code, _, err) = rlvmr(&["advantages", dir.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(err.contains("not a `rlvmr train` run"), "{err}");

    // The final model is one `rlvmr eval` reads with its own prompt settings.
    let (code, stdout, err) = rlvmr(&[
        "eval", "--env", "alfworld", "--split", "L2", "--policy", out.join("final").to_str().unwrap(),
        "--episodes", "2", "--max-steps", "2", "--out", dir.join("eval").to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(stdout.contains("| all | 2 |"), "{stdout}");

    // A folder whose tokenizer (the smoke model's 512 tokens) does not match its weights
    // (the tiny Qwen2 fixture's 276 rows): a clear error naming the folder, before any rollout.
    let mismatched = dir.join("mismatched");
    std::fs::create_dir_all(&mismatched).unwrap();
    let fixture = repo().join("crates/policy/tests/fixtures/qwen2-tiny-tied");
    for entry in std::fs::read_dir(&fixture).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), mismatched.join(entry.file_name())).unwrap();
    }
    std::fs::copy(out.join("final/tokenizer.json"), mismatched.join("tokenizer.json")).unwrap();
    let run = dir.join("mismatched-run");
    let (code, _, err) = rlvmr(&[
        "train", "--config", config.to_str().unwrap(), "--init", mismatched.to_str().unwrap(),
        "--out", run.to_str().unwrap(),
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("tokenizer mismatch") && err.contains(mismatched.to_str().unwrap()), "{err}");
    assert!(!run.join("rollouts").exists());
    let _ = std::fs::remove_dir_all(&dir);
}

fn wait_for(child: &mut Child, path: &Path, limit: Duration) -> bool {
    let started = Instant::now();
    while started.elapsed() < limit {
        if path.exists() {
            return true;
        }
        if child.try_wait().unwrap().is_some() {
            return path.exists();
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    false
}

fn kill(mut child: Child) {
    // SIGKILL: no destructor, no flush.
    let _ = child.kill();
    child.wait().unwrap();
}

#[test]
fn a_run_killed_twice_and_resumed_ends_exactly_as_an_uninterrupted_one() {
    let dir = scratch("resume");
    let config = smoke_config(&dir, 4);
    // Recomputed old log-probs and evaluations on two levels resume exactly too.
    let text = std::fs::read_to_string(&config).unwrap().replace(
        "[rl]\n",
        "[rl]\nold_logprobs = \"recompute\"\neval_levels = [\"L0\", \"L2\"]\n",
    );
    std::fs::write(&config, text).unwrap();
    let config = config.to_str().unwrap();
    let (whole, broken) = (dir.join("whole"), dir.join("broken"));
    let (code, _, err) = rlvmr(&["train", "--config", config, "--out", whole.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");

    // Killed right after its first checkpoint ...
    let mut child = command(&["train", "--config", config, "--out", broken.to_str().unwrap()]).spawn().unwrap();
    let first = broken.join("checkpoints/iter-0001/rl_state.json");
    assert!(wait_for(&mut child, &first, Duration::from_secs(120)), "no checkpoint appeared");
    kill(child);
    assert!(!broken.join("final").exists(), "the run ended before it was killed");
    // ... then resumed and killed again at an arbitrary moment of the rollouts or updates ...
    let mut child = command(&["train", "--resume", broken.to_str().unwrap()]).spawn().unwrap();
    let third = broken.join("rollouts/0003.jsonl.gz");
    assert!(wait_for(&mut child, &third, Duration::from_secs(120)));
    kill(child);
    // ... and resumed to the end.
    let (code, _, err) = rlvmr(&["train", "--resume", broken.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("resuming after iteration"), "{err}");

    let lines = metrics_without_time(&whole);
    assert_eq!(lines, metrics_without_time(&broken));
    // The sampler's log-probs equal the recomputed ones up to float rounding: what lets
    // `old_logprobs = "sampler"` (the default) skip the recomputation.
    let iterations: Vec<_> = lines.iter().filter(|l| l.get("eval").is_none()).collect();
    assert_eq!(iterations.len(), 4);
    for line in &iterations {
        let (mean, max) = (line["logprob_gap_mean"].as_f64().unwrap(), line["logprob_gap_max"].as_f64().unwrap());
        assert!(mean < 1e-5 && max < 1e-3, "sampled against recomputed: mean {mean}, max {max}");
    }
    let evals: Vec<&str> = lines.iter().filter_map(|l| l.pointer("/eval/split")?.as_str()).collect();
    assert_eq!(evals, ["L0", "L2", "L0", "L2"], "iterations 2 and 4 on both levels");
    let weights = |d: &Path| std::fs::read(d.join("final/model.safetensors")).unwrap();
    assert!(weights(&whole) == weights(&broken), "final weights differ");
    for n in 1..=4 {
        let name = format!("rollouts/{n:04}.jsonl.gz");
        assert_eq!(std::fs::read(whole.join(&name)).unwrap(), std::fs::read(broken.join(&name)).unwrap(), "{name}");
    }

    // A finished run of 2 iterations, extended to 4, is the run planned with 4.
    let extended = dir.join("extended");
    let (code, _, err) = rlvmr(&["train", "--config", config, "--iterations", "2", "--out", extended.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = rlvmr(&["train", "--resume", extended.to_str().unwrap(), "--iterations", "4"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(lines, metrics_without_time(&extended));
    assert!(weights(&whole) == weights(&extended), "final weights differ");
    let (code, _, err) = rlvmr(&["train", "--resume", extended.to_str().unwrap(), "--iterations", "3"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("rl.iterations") && err.contains("3 is fewer than the 4 iterations"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_input_is_named_before_any_rollout() {
    let dir = scratch("bad");
    let smoke = repo().join("configs/smoke.toml");
    let smoke = smoke.to_str().unwrap();

    let missing = dir.join("no-such-checkpoint");
    let (code, _, err) = rlvmr(&["train", "--config", smoke, "--init", missing.to_str().unwrap(), "--out", dir.join("a").to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(err.contains("no-such-checkpoint"), "{err}");
    assert!(!dir.join("a/rollouts").exists());

    // An output directory that cannot be made (its parent is a file).
    std::fs::write(dir.join("file"), "x").unwrap();
    let under_file = dir.join("file/run");
    let (code, _, err) = rlvmr(&["train", "--config", smoke, "--out", under_file.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(err.contains("file/run"), "{err}");

    // A full disk: the run's config.toml lands on /dev/full.
    let full = dir.join("full");
    std::fs::create_dir_all(&full).unwrap();
    std::os::unix::fs::symlink("/dev/full", full.join("config.toml")).unwrap();
    let (code, _, err) = rlvmr(&["train", "--config", smoke, "--out", full.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(err.contains("config.toml") && err.to_lowercase().contains("space"), "{err}");
    assert!(!full.join("rollouts").exists() && !full.join("coldstart").exists());

    // A folder holding a run of another config (here another seed): refused before it is
    // touched, as a new run there would take that run's SFT model and write over its runs.
    let taken = dir.join("taken");
    std::fs::create_dir_all(&taken).unwrap();
    let other_seed = std::fs::read_to_string(smoke).unwrap().replace("seed = 0", "seed = 5");
    std::fs::write(taken.join("config.toml"), &other_seed).unwrap();
    let (code, _, err) = rlvmr(&["train", "--config", smoke, "--out", taken.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("run.seed = 5 there, 0 asked") && err.contains("--resume"), "{err}");
    assert_eq!(std::fs::read_to_string(taken.join("config.toml")).unwrap(), other_seed);
    assert_eq!(std::fs::read_dir(&taken).unwrap().count(), 1, "nothing written beside it");

    let (code, _, err) = rlvmr(&["train", "--config", smoke, "--protocol", "loose"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("loose") && err.contains("published or strict"), "{err}");
    let (code, _, err) = rlvmr(&["train", "--config", smoke, "--algo", "ppo"]);
    assert_eq!(code, 2);
    assert!(err.contains("ppo"), "{err}");

    let bad = dir.join("bad.toml");
    std::fs::write(&bad, "[rl]\nmini_batch = 0\n").unwrap();
    let (code, _, err) = rlvmr(&["train", "--config", bad.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(err.contains("rl.mini_batch"), "{err}");
    std::fs::write(&bad, "[rl]\nfinal_eval = [\"L3\"]\n").unwrap();
    let (code, _, err) = rlvmr(&["train", "--config", bad.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(err.contains("rl.final_eval") && err.contains("L3"), "{err}");
    std::fs::write(&bad, "[rl]\nkl_coeff = 0.1\n").unwrap();
    let (_, _, err) = rlvmr(&["train", "--config", bad.to_str().unwrap()]);
    assert!(err.contains("kl_coeff"), "{err}");

    let (code, _, err) = rlvmr(&["train", "--resume", dir.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(err.contains("not a run directory"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
