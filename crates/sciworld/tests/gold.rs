//! Gold paths reach 100 on the first test variation of every task, with the real simulator.
//! Two workers (a gold JVM and a playing JVM each) share the 30 tasks, one episode each (the
//! simulator is deterministic under `JvmConfig::DEFAULT_FLAGS`, bees and circuits included).
//! `SCIWORLD_GOLD_PER_TASK=N` checks the first N test variations per task instead of 1
//! (minutes; not for CI).

use std::sync::Mutex;

use sciworld::{replay_gold, tasks, EnvConfig, GoldCheck, GoldOracle, OfficialSplit, SciWorldEnv};

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
            Ok(c) if won(c) => None,
            Ok(c) => Some(format!(
                "{task} {variation}: score {} done {} after {} actions",
                c.score, c.done, c.actions
            )),
            Err(e) => Some(format!("{task} {variation}: {e}")),
        })
        .collect();
    assert!(failures.is_empty(), "{failures:#?}");
}

fn won(check: &GoldCheck) -> bool {
    check.score == 100 && check.done && check.actions > 0
}

/// The committed gold-path lengths (`GoldLengths::recorded_train`, which the cold start
/// uses to leave out paths too long for its episodes) are the simulator's: a third of the
/// tasks (every third index, mendelian genetics among them), first training variation, to
/// the action (recorded under the default JVM flags, as the cold start generates them).
#[test]
fn recorded_gold_lengths_are_the_simulators() {
    let config = EnvConfig::from_default_jar().expect("the scienceworld jar");
    let mut oracle = GoldOracle::new(&config).unwrap();
    let recorded = sciworld::GoldLengths::recorded_train();
    for task in tasks().iter().filter(|t| t.index % 3 == 0) {
        let variation = task.split(OfficialSplit::Train).next().unwrap();
        let path = oracle.gold_actions(task.name, variation).unwrap();
        let playable = sciworld::without_door_openings(path).len();
        let saved = recorded.get(task.name, variation).expect("recorded");
        assert_eq!(saved, playable, "{} {variation}", task.name);
    }
}

/// A path that does not win as written (a gold path without its last action) cannot be
/// checked by its score, so no rewrite of it is trusted: it comes back as given, flagged
/// unchanged, after both rewrites (with and without containers named by their contents) lost.
#[test]
fn a_path_that_cannot_win_is_kept_as_given() {
    let mut config = EnvConfig::from_default_jar().expect("the scienceworld jar");
    config.valid_actions = false;
    let mut oracle = GoldOracle::new(&config).unwrap();
    let mut gold = sciworld::with_teleports(sciworld::without_door_openings(
        oracle.gold_actions("find-plant", 0).unwrap(),
    ));
    gold.pop();
    let (kept, changed) = oracle.with_plain_names("find-plant", 0, gold.clone()).unwrap();
    assert!(!changed);
    assert_eq!(kept, gold);
}

/// Gold paths with objects named as the room shows them ([`GoldOracle::with_plain_names`])
/// still win when a playing simulator replays them, and use those names: the find tasks'
/// animal, the potted plant (carried by its name, not its pot's), the conductivity tasks'
/// object. A path kept as the simulator
/// wrote it must be the gold path itself.
#[test]
fn plain_named_gold_paths_win_and_name_what_the_room_shows() {
    let mut config = EnvConfig::from_default_jar().expect("the scienceworld jar");
    config.valid_actions = false;
    let mut oracle = GoldOracle::new(&config).unwrap();
    let mut env = SciWorldEnv::new(config).unwrap();
    let games = [
        ("find-animal", 0),
        ("find-living-thing", 0),
        ("find-plant", 0),
        ("lifespan-longest-lived", 0),
        ("test-conductivity", 0),
        ("measure-melting-point-known-substance", 0),
    ];
    let mut rewritten = 0;
    for (task, variation) in games {
        let gold = sciworld::with_teleports(sciworld::without_door_openings(
            oracle.gold_actions(task, variation).unwrap(),
        ));
        let (plain, changed) = oracle.with_plain_names(task, variation, gold.clone()).unwrap();
        assert_eq!(plain.len(), gold.len(), "{task} {variation}: {plain:?}");
        if !changed {
            assert_eq!(plain, gold, "{task} {variation}");
        }
        if plain != gold {
            rewritten += 1;
        }
        env.reset_to(task, variation).unwrap();
        let mut last = None;
        for (i, action) in plain.iter().enumerate() {
            let step = env.step_command(action).unwrap();
            // An ambiguous command is answered by the path's next action, a number.
            let answered = plain.get(i + 1).is_some_and(|next| sciworld::plain::is_choice(next));
            assert!(answered || sciworld::plain::was_understood(&step.observation), "{task} {variation}: {action:?}: {}", step.observation);
            last = Some(step);
        }
        let last = last.unwrap();
        assert!(last.won, "{task} {variation}: score {} after {plain:?}", last.score);
        // No referent of the simulator's own ("egg blue jay egg in inventory").
        for action in plain.iter().filter(|a| a.starts_with("move ") || a.starts_with("focus on ")) {
            assert!(!action.contains(" in inventory"), "{task} {variation}: {action}");
        }
        // The potted plant is carried and moved by its own name, not its pot's.
        if task == "find-plant" {
            let focused = plain.iter().find_map(|a| a.strip_prefix("focus on ")).unwrap();
            assert!(plain.last().unwrap().starts_with(&format!("move {focused} to ")), "{plain:?}");
            assert!(plain.iter().all(|a| !a.contains("flower pot")), "{plain:?}");
        }
    }
    // Most of these gold paths name something by a referent the room does not show.
    assert!(rewritten >= 3, "only {rewritten} paths rewritten");
}

/// The committed playable gold paths (`GoldPaths::recorded_train`, which the cold start
/// plays instead of asking a JVM under `[coldstart] recorded_gold_paths`) cover every
/// training variation as the cold start asks for it (whole paths that fit in 30 steps, the
/// 30-action openings of the others), and play as generated ones do: on the first training
/// variation of every task, a playing simulator replaying the recorded path and the path a
/// fresh gold JVM generates reaches the same score. (The paths are not compared action by
/// action: the conductivity tasks' wires and some searches' order of containers, hence
/// their length, come from a random stream that every generation in a JVM advances. Nor do
/// all whole paths win: the simulator's own life-stages paths focus on a stage before it
/// comes.)
#[test]
fn recorded_gold_paths_cover_the_training_split_and_score_as_generated_ones() {
    let mut config = EnvConfig::from_default_jar().expect("the scienceworld jar");
    config.valid_actions = false;
    let recorded = sciworld::GoldPaths::recorded_train();
    let simplifications = config.simplifications.clone();
    let lengths = sciworld::GoldLengths::recorded_train();
    let mut missing = Vec::new();
    for task in tasks() {
        for variation in task.split(OfficialSplit::Train) {
            let cut = (lengths.get(task.name, variation).unwrap() >= 30).then_some(30);
            if !recorded.contains(&simplifications, task.name, variation, cut) {
                missing.push(format!("{} {variation}", task.name));
            }
        }
    }
    assert!(missing.is_empty(), "{} not recorded: {:?}", missing.len(), &missing[..missing.len().min(10)]);

    let mut oracle = GoldOracle::new(&config).unwrap();
    let mut env = SciWorldEnv::new(config).unwrap();
    let mut score = |task: &str, variation: usize, path: &[String]| {
        env.reset_to(task, variation).unwrap();
        path.iter().map(|action| env.step_command(action).unwrap().score).last().unwrap()
    };
    let mut won = 0;
    for task in tasks() {
        let variation = task.split(OfficialSplit::Train).next().unwrap();
        let saved = recorded.get(&simplifications, task.name, variation, Some(30)).expect("recorded");
        let generated = oracle.playable_path(task.name, variation, Some(30)).unwrap();
        let saved_score = score(task.name, variation, &saved.path);
        assert_eq!(saved_score, score(task.name, variation, &generated.path), "{} {variation}", task.name);
        won += usize::from(saved_score == 100);
    }
    assert!(won >= 10, "only {won} recorded paths win");
}
