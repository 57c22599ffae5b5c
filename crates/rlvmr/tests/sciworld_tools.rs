//! tools/sciworld_circuits.py and tools/sciworld_copies.py on evaluations written by hand:
//! what they count, and a bad line named by file and line.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn tool(script: &str, files: &[&Path]) -> Output {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    Command::new("python3")
        .arg(root.join("tools").join(script))
        .args(files)
        .output()
        .unwrap_or_else(|e| panic!("python3 runs tools/{script}: {e}"))
}

fn circuits(files: &[&Path]) -> Output {
    tool("sciworld_circuits.py", files)
}

fn step(action: &str, feedback: &str) -> serde_json::Value {
    serde_json::json!({ "action": action, "next_observation": feedback })
}

/// A step whose prompt showed `observation`.
fn after(observation: &str, action: &str, feedback: &str) -> serde_json::Value {
    serde_json::json!({ "observation": observation, "action": action, "next_observation": feedback })
}

const BOXES: &str = "If it is electrically conductive, place it in the green box. If it is electrically nonconductive, place it in the blue box.";

fn episode(task_type: &str, won: bool, steps: Vec<serde_json::Value>) -> String {
    serde_json::json!({ "task_type": task_type, "task": BOXES, "won": won, "steps": steps }).to_string()
}

fn scratch(name: &str, lines: &[String]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rlvmr-circuits-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    path
}

#[test]
fn whole_circuits_and_carried_out_connects_are_counted() {
    let connected = |a: &str, b: &str| format!("{a} is now connected to {b}");
    let whole = vec![
        step("connect battery anode to black wire terminal 1", &connected("anode on battery", "terminal 1 on black wire")),
        step("connect battery cathode to red wire terminal 1", &connected("cathode on battery", "terminal 1 on red wire")),
        step("connect black wire terminal 2 to cathode in buzzer", &connected("terminal 2 on black wire", "cathode on electric buzzer")),
        step("connect yellow wire terminal 2 to anode in buzzer", &connected("terminal 2 on yellow wire", "anode on electric buzzer")),
        step("connect tested object terminal 1 to red wire terminal 2", &connected("terminal 1 on tested object", "terminal 2 on red wire")),
        step("connect tested object terminal 2 to yellow wire terminal 1", &connected("terminal 2 on tested object", "terminal 1 on yellow wire")),
        step("look around", "a electric buzzer, which is on"),
        after("a electric buzzer, which is on", "move tested object to green box", "You move the tested object to the green box."),
    ];
    let open = vec![
        step("connect battery anode to orange wire terminal 1", "No known action matches that input."),
        step("connect battery cathode to red wire terminal 1", &connected("cathode on battery", "terminal 1 on red wire")),
        // The conductive box with nothing on: not the box the room showed (the second move is
        // not counted).
        after("a electric buzzer, which is off", "move tested object to green box", "You move the tested object to the green box."),
        after("a electric buzzer, which is off", "move tested object to blue box", "You move the tested object to the blue box."),
    ];
    let file = scratch(
        "eval.jsonl",
        &[
            episode("test-conductivity", true, whole),
            episode("test-conductivity-of-unknown-substances", true, open),
            episode("find-animal", true, vec![step("connect a to b", "x is now connected to y")]),
        ],
    );
    let out = circuits(&[&file]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let table = String::from_utf8(out.stdout).unwrap();
    let row = table.lines().last().unwrap();
    // 2 episodes, both wire, 7 of 8 connects carried out, 1 whole, 1 with the part on, 2 won,
    // 1 won with a whole circuit, 2 box moves (the first of each episode), 1 into the box the
    // room showed.
    assert!(row.ends_with("| 2 | 2 | 88% of 8 | 1 | 1 | 2 | 1 | 2 | 1 |"), "{table}");
}

#[test]
fn a_bad_line_is_named_by_file_and_line() {
    let file = scratch("bad.jsonl", &[episode("test-conductivity", false, vec![]), "{not json".to_string()]);
    let out = circuits(&[&file]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&format!("{}:2:", file.display())), "{err}");
}

fn prompted(action: &str, prompt: &str) -> serde_json::Value {
    serde_json::json!({ "action": action, "next_observation": "", "prompt": prompt })
}

fn focused(action: &str, prompt: &str) -> serde_json::Value {
    let feedback = format!("You focus on the {}.", action.trim_start_matches("focus on "));
    serde_json::json!({ "action": action, "next_observation": feedback, "prompt": prompt })
}

#[test]
fn copied_boxes_and_shown_objects_are_counted() {
    let task = "Your task is to find a(n) animal. First, focus on the thing. Then, move it to the green box in the bedroom.";
    let room = "Text science game.\nPlan: find it\nNow: In the outside: frog egg | axe\nInventory: orange\nTask: a blue jay egg";
    let find = serde_json::json!({
        "task_type": "find-animal", "task": task, "won": true,
        "steps": [
            focused("focus on frog egg", room),
            // Named only on the task and plan lines, not shown in the scene.
            prompted("focus on blue jay egg", room),
            prompted("move frog egg to red box", room),
            prompted("teleport to bedroom", room),
            prompted("move frog egg to green box", room),
        ],
    });
    // A find game that carries its object to another room than the box's.
    let astray = serde_json::json!({
        "task_type": "find-plant", "task": task.replace("animal", "plant"), "won": false,
        "steps": [
            prompted("teleport to greenhouse", room),
            // Not carried out first; the second focus does not count.
            prompted("focus on peach tree", room),
            focused("focus on frog egg", room),
            prompted("teleport to kitchen", room),
        ],
    });
    // A find game that picks up what it focused on, and one that ends at its focus.
    let picked = serde_json::json!({
        "task_type": "find-animal", "task": task, "won": false,
        "steps": [focused("focus on frog egg", room), prompted("pick up frog egg", room)],
    });
    let ended = serde_json::json!({
        "task_type": "find-animal", "task": task, "won": false,
        "steps": [focused("focus on frog egg", room)],
    });
    let conductivity = serde_json::json!({
        "task_type": "test-conductivity", "won": false,
        "task": "If it is electrically conductive, place it in the yellow box. If it is electrically nonconductive, place it in the purple box.",
        // A focus outside the find tasks is not counted.
        "steps": [prompted("focus on tested object", room), prompted("move tested object to purple box", room)],
    });
    let file = scratch("copies.jsonl", &[&find, &conductivity, &astray, &picked, &ended].map(|game| game.to_string()));
    let out = tool("sciworld_copies.py", &[&file]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let table = String::from_utf8(out.stdout).unwrap();
    // 1 of 5 games won; 2 of 3 box moves name a box of their task; 4 of 6 focus commands name
    // an object the scene shows; 3 of the 4 find games have their first focus carried out,
    // and of the 2 of those that went on, 1 focused again; 1 enters the box's room.
    let expected = "| 1 of 5 | 67% of 3 | 67% of 6 | 75% of 4 | 50% of 2 | 25% of 4 |";
    assert!(table.lines().last().unwrap().ends_with(expected), "{table}");
    let bad = scratch("copies-bad.jsonl", &[find.to_string(), "[1,".to_string()]);
    let out = tool("sciworld_copies.py", &[&bad]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&format!("{}:2:", bad.display())), "{err}");
}
