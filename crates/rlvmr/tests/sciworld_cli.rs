//! `rlvmr sciworld` end to end, with the real simulator JVM (the jar is fetched into the cache
//! with pip on first use).

mod harness;

use std::io::{BufRead, BufReader, Read};
use std::process::Stdio;
use std::time::{Duration, Instant};

use harness::{command, rlvmr_input};

#[test]
fn replay_writes_one_record_per_game_and_one_error_per_bad_line() {
    let mut input = Vec::new();
    input.extend_from_slice(
        br#"{"task": "boil", "variation": 21, "commands": ["look around", "teleport to kitchen", "", "xyzzy"]}"#,
    );
    input.extend_from_slice(b"\n{\"task\": \"boiling\", \"variation\": 0, \"commands\": []}\n");
    input.extend_from_slice(b"{\"task\": 0, \"variation\": 30, \"commands\": []}\n");
    input.extend_from_slice(b"{\"task\": \"melt\", \"variation\": 0, \"commands\": \"look\"}\n");
    input.extend_from_slice(b"{\"task\": \"melt\", \"variation\": 0, \"commands\": [\"\xff\xfe\"]}\n");
    input.extend_from_slice(b"\n");
    input.extend_from_slice(b"{\"task\": 22, \"variation\": 0, \"commands\": []}\n");
    let (code, out, err) = rlvmr_input(&["sciworld", "replay"], &input);
    assert_eq!(code, 1, "{err}");
    let lines: Vec<serde_json::Value> = out.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 6, "{out}");

    let game = &lines[0];
    assert_eq!((game["task"].as_str(), game["variation"].as_u64()), (Some("boil"), Some(21)));
    assert!(game["task_description"].as_str().unwrap().starts_with("Your task is to boil"));
    let steps = game["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 5);
    assert!(steps[0]["command"].is_null());
    assert_eq!(steps[2]["command"], "teleport to kitchen");
    assert!(steps[2]["observation"].as_str().unwrap().contains("kitchen"));
    assert_eq!(steps[3]["observation"], "No known action matches that input.");
    assert!(steps.iter().all(|s| s["score"].as_i64().is_some_and(|v| (0..=100).contains(&v))));
    assert!(steps.iter().all(|s| s["done"] == false));

    assert_eq!(lines[1]["line"], 2);
    assert!(lines[1]["error"].as_str().unwrap().contains("unknown task `boiling`"));
    assert_eq!(lines[2]["line"], 3);
    assert!(lines[2]["error"].as_str().unwrap().contains("variation 30"));
    assert_eq!(lines[3]["line"], 4);
    assert!(lines[3]["error"].as_str().unwrap().contains("bad request"));
    assert_eq!(lines[4]["line"], 5);
    assert!(lines[4]["error"].as_str().unwrap().contains("not valid UTF-8"));
    assert_eq!(lines[5]["task"], "melt", "the batch goes on after bad lines");
    assert!(err.contains("4 of 6 games failed"), "{err}");
}

#[test]
fn play_prints_the_task_and_answers_commands() {
    // The simulator writes a file into its working directory: not the caller's.
    let dir = std::env::temp_dir().join(format!("sciworld-cli-cwd-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = command(&["sciworld", "play", "freeze", "--variation", "3"])
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0, "files left in the caller's directory");
    let _ = std::fs::remove_dir_all(&dir);

    let (code, out, err) = rlvmr_input(&["sciworld", "play", "freeze", "--variation", "3"], b"look around\nquit\n");
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("Your task is to freeze"), "{out}");
    assert_eq!(out.matches(" is called the ").count(), 2, "{out}");
    assert!(out.contains("[score 0, moves 0]"), "{out}");
    let (code, _, err) = rlvmr_input(&["sciworld", "play", "nosuchtask"], b"");
    assert_eq!(code, 2);
    assert!(err.contains("unknown task `nosuchtask`"), "{err}");
}

fn children_of(parent: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|stat| stat.rsplit(") ").next()?.split(' ').nth(1)?.parse::<u32>().ok())
                == Some(parent)
        })
        .collect()
}

fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|stat| !stat.rsplit(") ").next().is_some_and(|rest| rest.starts_with('Z')))
}

#[test]
fn killing_the_cli_leaves_no_jvm_behind() {
    let mut child = command(&["sciworld", "play", "boil"])
        .stdin(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // The first prompt means the JVM is up and the task loaded.
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut seen = String::new();
    while !seen.contains("> ") {
        let mut byte = [0u8; 1];
        assert_eq!(stdout.read(&mut byte).unwrap(), 1, "play ended early: {seen}");
        seen.push(byte[0] as char);
    }
    let jvms: Vec<u32> = children_of(child.id())
        .into_iter()
        .filter(|pid| std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == "java"))
        .collect();
    assert_eq!(jvms.len(), 1, "one JVM per environment");
    child.kill().unwrap(); // SIGKILL: no destructor runs
    child.wait().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while alive(jvms[0]) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!alive(jvms[0]), "JVM {} outlived its killed parent", jvms[0]);
    drop(stdout.lines());
}

#[test]
fn tasks_lists_splits_and_levels() {
    let (code, out, _) = rlvmr_input(&["sciworld", "tasks"], b"");
    assert_eq!(code, 0);
    assert_eq!(out.lines().count(), 31);
    assert!(out.contains("0\tboil\t30\t0-13\t14-20\t21-29"), "{out}");
    let (code, out, _) = rlvmr_input(&["sciworld", "tasks", "--level", "L2", "--phase", "test"], b"");
    assert_eq!(code, 0);
    assert!(out.lines().all(|l| !l.starts_with("boil\t")));
    assert!(out.contains("find-plant\t225"));
    let (code, _, err) = rlvmr_input(&["sciworld", "tasks", "--level", "L9"], b"");
    assert_eq!(code, 2);
    assert!(err.contains("unknown level 'L9'"), "{err}");
}

/// `rlvmr sciworld gold-paths` records a task's training variations as the committed
/// recording holds them, resumes from what its file holds, and names what is wrong with a
/// file it cannot resume from, leaving that file as it was.
#[test]
fn gold_paths_records_resumes_and_names_a_bad_line() {
    let dir = std::env::temp_dir().join(format!("sciworld-gold-paths-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("paths.jsonl");
    let _ = std::fs::remove_file(&out);
    let args = ["sciworld", "gold-paths", "--task", "identify-life-stages-2", "--jobs", "1", "--out", out.to_str().unwrap()];
    let (code, _, err) = rlvmr_input(&args, b"");
    assert_eq!(code, 0, "{err}");
    let text = std::fs::read_to_string(&out).unwrap();
    let recorded = sciworld::GoldPaths::parse(&text).unwrap();
    assert_eq!(recorded.len(), 4, "{text}");
    let committed = sciworld::GoldPaths::recorded_train();
    for record in recorded.sorted_records() {
        let saved = committed.get("easy", &record.task, record.variation, record.cut_at);
        assert_eq!(saved, Some(record.playable()), "{} {}", record.task, record.variation);
    }

    let (code, _, err) = rlvmr_input(&args, b"");
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("0 gold paths to generate (4 already in"), "{err}");
    assert_eq!(std::fs::read_to_string(&out).unwrap(), text);

    let broken = format!("{text}{{\"task\": \"identify-life-stages-2\"}}\n");
    std::fs::write(&out, &broken).unwrap();
    let (code, _, err) = rlvmr_input(&args, b"");
    assert_ne!(code, 0);
    assert!(err.contains("paths.jsonl") && err.contains("line 5"), "{err}");
    assert_eq!(std::fs::read_to_string(&out).unwrap(), broken, "the file is left as it was");

    let mut zero_cut = args.to_vec();
    zero_cut.extend(["--cut-at", "0"]);
    let (code, _, err) = rlvmr_input(&zero_cut, b"");
    assert_ne!(code, 0);
    assert!(err.contains("--cut-at must be at least 1"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}
