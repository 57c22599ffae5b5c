//! The real simulator JVM: protocol, step semantics, bad input, crashes and hangs.
//! The jar is fetched into the cache on first use (pip download, sha256 checked).

use std::time::{Duration, Instant};

use rlvmr_core::Env;
use sciworld::sim::Simulator;
use sciworld::{tasks, EnvConfig, OfficialSplit, SciError, SciWorldEnv};

fn config() -> EnvConfig {
    EnvConfig::from_default_jar().expect("the scienceworld jar (fetched with pip on first use)")
}

fn process_exists(pid: u32) -> bool {
    // A zombie still has a /proc entry; count it as gone.
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .split(") ")
            .nth(1)
            .is_some_and(|rest| rest.starts_with('Z')),
        Err(_) => false,
    }
}

fn wait_gone(pid: u32, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if !process_exists(pid) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

fn signal(pid: u32, sig: libc::c_int) {
    // SAFETY: sending a signal to a process id we started.
    unsafe {
        libc::kill(pid as libc::pid_t, sig);
    }
}

#[test]
fn catalog_matches_the_simulator() {
    let mut sim = Simulator::start(&config().jvm).unwrap();
    let names = sim.task_names().unwrap();
    let table = tasks();
    assert_eq!(names, table.iter().map(|t| t.name).collect::<Vec<_>>());
    for task in &table {
        sim.load(task.name, 0, "", false).unwrap();
        assert_eq!(
            sim.max_variations(task.name).unwrap(),
            task.variations,
            "{}",
            task.name
        );
        for split in OfficialSplit::ALL {
            let got = sim.variations(split).unwrap();
            assert_eq!(
                got,
                task.split(split).collect::<Vec<_>>(),
                "{} {}",
                task.name,
                split.name()
            );
        }
    }
}

#[test]
fn steps_follow_the_official_client() {
    let mut env = SciWorldEnv::new(config()).unwrap();
    let first = env.reset_to("boil", 0).unwrap();
    assert!(
        first
            .observation
            .starts_with("This room is called the hallway."),
        "{}",
        first.observation
    );
    assert_eq!(
        (first.score, first.reward, first.done, first.moves),
        (0, 0, false, 0)
    );
    assert!(env.task_description().unwrap().contains("boil water"));
    let valid = first
        .valid_actions
        .clone()
        .expect("valid actions asked for");
    assert!(
        valid.len() > 20 && valid.contains(&"look around".to_string()),
        "{valid:?}"
    );
    assert_eq!(valid, env.valid_actions().unwrap());
    assert!(valid.windows(2).all(|w| w[0] <= w[1]), "sorted");
    assert!(
        valid.iter().any(|a| a.starts_with("teleport to")),
        "easy mode teleports"
    );
    assert!(env
        .action_templates()
        .unwrap()
        .contains(&"open OBJ".to_string()));
    assert!(env.objects().unwrap().contains(&"agent".to_string()));
    let inventory = env.inventory().unwrap();
    assert!(inventory.contains("In your inventory"), "{inventory}");

    // Bad commands are answered by the simulator, like the official client's.
    let unknown = "No known action matches that input.";
    for command in ["", "xyzzy", "\u{1F600} caf\u{e9}", "back\\slash"] {
        let step = env.step_command(command).unwrap();
        assert_eq!(step.observation, unknown, "{command:?}");
        assert!(!step.done);
    }
    let huge = "x".repeat(1 << 20);
    assert_eq!(env.step_command(&huge).unwrap().observation, unknown);
    let multi_line = env.step_command("look\naround").unwrap();
    assert!(multi_line
        .observation
        .starts_with("This room is called the hallway."));

    // Moving spends a move; the trait view maps the score to 0..1.
    let moved = env.step("teleport to kitchen").unwrap();
    assert!(
        moved.observation.contains("kitchen"),
        "{}",
        moved.observation
    );
    assert!(moved.admissible_actions.is_some());
    assert_eq!(env.anchor(), moved.observation);
    let again = Env::reset(&mut env).unwrap();
    assert_eq!(again.observation, first.observation);
}

#[test]
fn bad_tasks_and_variations_are_errors_and_the_env_survives() {
    let mut env = SciWorldEnv::new(config()).unwrap();
    let err = env.reset_to("boiling", 0).unwrap_err();
    assert!(matches!(err, SciError::UnknownTask(_)), "{err}");
    assert!(err.to_string().contains("`boiling`"));
    let err = env.reset_to("boil", 30).unwrap_err();
    assert!(
        err.to_string().contains("variation 30") && err.to_string().contains("boil"),
        "{err}"
    );
    let err = env.step_command("look around").unwrap_err();
    assert!(matches!(err, SciError::NoTask), "{err}");
    assert!(env.reset_to("29", 3).is_ok());
    assert_eq!(env.restarts(), 0);
    // The simulator's own refusal is reported with its words.
    let mut sim = Simulator::start(&config().jvm).unwrap();
    let err = sim.load("no-such-task", 0, "", false).unwrap_err();
    assert!(err.to_string().contains("Unknown task"), "{err}");
}

#[test]
fn a_killed_jvm_fails_the_episode_and_is_replaced() {
    let mut env = SciWorldEnv::new(config()).unwrap();
    env.reset_to("melt", 1).unwrap();
    env.step_command("look around").unwrap();
    let pid = env.jvm_pid().unwrap();
    signal(pid, libc::SIGKILL);
    assert!(wait_gone(pid, Duration::from_secs(5)));
    let started = Instant::now();
    let err = env.step_command("look around").unwrap_err();
    assert!(err.jvm_is_broken(), "{err}");
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(env.jvm_pid().is_none());
    assert!(matches!(
        env.step_command("look around"),
        Err(SciError::NoTask)
    ));
    let fresh = env.reset_to("melt", 1).unwrap();
    assert!(fresh.observation.contains("This room is called"));
    assert_eq!(env.restarts(), 1);
    assert_ne!(env.jvm_pid(), Some(pid));
}

#[test]
fn a_hung_jvm_times_out_is_killed_and_replaced() {
    let mut env = SciWorldEnv::new(config()).unwrap();
    env.reset_to("freeze", 2).unwrap();
    env.set_call_timeout(Duration::from_millis(1500));
    let pid = env.jvm_pid().unwrap();
    signal(pid, libc::SIGSTOP);
    let started = Instant::now();
    let err = env.step_command("look around").unwrap_err();
    let waited = started.elapsed();
    assert!(matches!(err, SciError::Timeout { .. }), "{err}");
    assert!(
        waited >= Duration::from_millis(1400) && waited < Duration::from_secs(10),
        "{waited:?}"
    );
    assert!(
        wait_gone(pid, Duration::from_secs(5)),
        "the hung JVM is killed"
    );
    env.set_call_timeout(Duration::from_secs(30));
    assert!(env.reset_to("freeze", 2).is_ok());
    assert_eq!(env.restarts(), 1);
}

#[test]
fn dropping_an_env_ends_its_jvm() {
    let env = SciWorldEnv::new(config()).unwrap();
    let pid = env.jvm_pid().unwrap();
    assert!(process_exists(pid));
    drop(env);
    assert!(wait_gone(pid, Duration::from_secs(5)));
}

#[test]
fn a_missing_java_or_jar_is_a_clear_error() {
    let mut cfg = config();
    cfg.jvm.java = "/nonexistent/java".into();
    let err = SciWorldEnv::new(cfg).err().expect("no java");
    assert!(err.to_string().contains("/nonexistent/java"), "{err}");
    let mut cfg = config();
    cfg.jvm.jar = "/nonexistent/scienceworld.jar".into();
    let err = SciWorldEnv::new(cfg).err().expect("no jar");
    assert!(
        err.to_string().contains("/nonexistent/scienceworld.jar"),
        "{err}"
    );
}

#[test]
fn a_pool_starts_one_jvm_per_environment() {
    let mut envs = sciworld::start_envs(2, &config()).unwrap();
    let pids: Vec<u32> = envs.iter().map(|e| e.jvm_pid().unwrap()).collect();
    assert_ne!(pids[0], pids[1]);
    let first = envs[0].reset_to("boil", 0).unwrap();
    let second = envs[1].reset_to("boil", 0).unwrap();
    assert_eq!(first.score, second.score);
    assert!(second
        .observation
        .starts_with("This room is called the hallway."));
    drop(envs);
    assert!(pids
        .iter()
        .all(|&pid| wait_gone(pid, Duration::from_secs(5))));
}
