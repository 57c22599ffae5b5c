//! Gold paths reach 100 on the first test variation of every task, with the real simulator.
//! Two workers (a gold JVM and a playing JVM each) share the 30 tasks.
//! `SCIWORLD_GOLD_PER_TASK=N` checks the first N test variations per task instead of 1
//! (minutes; not for CI).

use std::sync::Mutex;

use sciworld::{replay_gold, tasks, EnvConfig, GoldOracle, OfficialSplit, SciWorldEnv};

const WORKERS: usize = 2;

#[test]
fn gold_paths_reach_100_on_a_test_variation_of_every_task() {
    let per_task: usize = std::env::var("SCIWORLD_GOLD_PER_TASK")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    let mut config = EnvConfig::from_default_jar().expect("the scienceworld jar");
    // Replays need no valid-action lists (3-5x the cost of a step).
    config.valid_actions = false;
    let games: Vec<(&'static str, usize)> = tasks()
        .iter()
        .flat_map(|t| {
            t.split(OfficialSplit::Test)
                .take(per_task)
                .map(|v| (t.name, v))
        })
        .collect();
    let queue = Mutex::new(games.clone());
    let results = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..WORKERS {
            scope.spawn(|| {
                let mut oracle = GoldOracle::new(&config).unwrap();
                let mut env = SciWorldEnv::new(config.clone()).unwrap();
                while let Some((task, variation)) = queue.lock().unwrap().pop() {
                    let check = replay_gold(&mut oracle, &mut env, task, variation);
                    results.lock().unwrap().push((task, variation, check));
                }
            });
        }
    });
    let results = results.into_inner().unwrap();
    assert_eq!(results.len(), games.len());
    let failures: Vec<String> = results
        .iter()
        .filter_map(|(task, variation, check)| match check {
            Ok(c) if c.score == 100 && c.done && c.actions > 0 => None,
            Ok(c) => Some(format!(
                "{task} {variation}: score {} done {} after {} actions",
                c.score, c.done, c.actions
            )),
            Err(e) => Some(format!("{task} {variation}: {e}")),
        })
        .collect();
    assert!(failures.is_empty(), "{failures:#?}");
}
