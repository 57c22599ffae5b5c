//! The hand-coded expert on the shared ALFWorld data: a few games of every task
//! type, then whole validation splits (≥ 99% wins within 50 steps).

use std::path::PathBuf;
use std::sync::Arc;

use alfworld::expert::{evaluate, parse_task, play_game, run_episode, Expert, ExpertReport, APPLIANCE_KINDS};
use alfworld::{load_game, AlfworldData, AlfworldEnv, Split, TaskType};
use rlvmr_core::Env;

const MAX_STEPS: usize = 50;

fn shared_zip() -> PathBuf {
    testkit::alfworld_data()
}

fn data() -> AlfworldData {
    AlfworldData::open(&shared_zip()).expect("the shared ALFWorld zip")
}

#[test]
fn wins_a_few_games_of_every_task_type() {
    let data = data();
    let games = data.split(Split::ValidSeen);
    for task_type in TaskType::ALL {
        let of_type: Vec<_> = games.iter().filter(|g| g.task_type == task_type).take(4).collect();
        assert!(!of_type.is_empty(), "no {task_type} games in valid_seen");
        for game in of_type {
            let outcome = play_game(&data, &game.path, &game.task_dir, MAX_STEPS).expect("the game plays");
            assert!(outcome.won, "{task_type}: {} not won: {:?}", game.path, outcome.commands);
            assert!(!outcome.fallback, "{}: the task sentence did not parse", game.path);
            assert!(outcome.steps <= MAX_STEPS);
        }
    }
}

#[test]
fn plays_through_the_env_and_is_deterministic() {
    let data = data();
    let game = data.split(Split::ValidUnseen).into_iter().find(|g| g.task_type == TaskType::PickTwo).expect("a pick_two game");
    let text = data.read(&game.path).expect("the game file");
    let game = Arc::new(load_game(&text).expect("the game loads"));
    let mut env = AlfworldEnv::new(game.clone());
    let first = run_episode(&mut env, MAX_STEPS).expect("an episode");
    let second = run_episode(&mut AlfworldEnv::new(game.clone()), MAX_STEPS).expect("an episode");
    assert!(first.won);
    assert_eq!(first, second);

    // Driving the expert by hand gives the same commands, each one admissible.
    let (commands, won) = play_with(&text, |intro| {
        let expert = Expert::new(intro).expect("the intro parses");
        assert_eq!(expert.task().kind, TaskType::PickTwo);
        expert
    });
    assert!(won);
    assert_eq!(commands, first.commands);
}

/// Plays the game in `game_text` with the expert `make` builds from the intro, checking that
/// every command is admissible; the commands and whether it won.
fn play_with(game_text: &str, make: impl Fn(&str) -> Expert) -> (Vec<String>, bool) {
    let mut env = AlfworldEnv::new(Arc::new(load_game(game_text).expect("the game loads")));
    let mut result = env.reset().expect("reset");
    let mut expert = make(&result.observation);
    let mut commands = Vec::new();
    while !result.done && commands.len() < MAX_STEPS {
        let admissible = result.admissible_actions.clone().unwrap_or_default();
        let command = expert.act(&result.observation, &admissible);
        assert!(admissible.contains(&command), "{command:?} is not admissible");
        result = env.step(&command).expect("a step");
        commands.push(command);
    }
    (commands, result.won)
}

#[test]
fn an_expert_searching_for_its_appliance_tries_the_kinds_in_order_and_still_wins() {
    let data = data();
    let games = data.split(Split::Train);
    for (task_type, verb, appliance) in
        [(TaskType::PickHeat, "heat", "microwave"), (TaskType::PickClean, "clean", "sinkbasin"), (TaskType::PickCool, "cool", "fridge")]
    {
        for game in games.iter().filter(|g| g.task_type == task_type).take(3) {
            let game = data.read(&game.path).expect("the game file");
            let (direct, won) = play_with(&game, |intro| Expert::new(intro).expect("the intro parses"));
            assert!(won, "{direct:?}");
            // The appliance last: every other kind the room has is visited first, once.
            let mut order: Vec<String> = APPLIANCE_KINDS.iter().filter(|k| **k != appliance).map(|k| k.to_string()).collect();
            order.push(appliance.to_string());
            let (searching, won) =
                play_with(&game, |intro| Expert::new(intro).expect("the intro parses").searching_appliance(order.clone()));
            assert!(won, "{searching:?}");
            let processed = searching.iter().position(|c| c.starts_with(&format!("{verb} "))).expect("the task's command");
            assert!(searching[processed].contains(&format!(" with {appliance} ")), "{searching:?}");
            let took = searching.iter().position(|c| c.starts_with("take ")).expect("a take");
            let visited: Vec<&str> = searching[took + 1..processed]
                .iter()
                .filter_map(|c| c.strip_prefix("go to "))
                .map(|place| place.split(' ').next().unwrap_or(""))
                .collect();
            let expected: Vec<&str> = order.iter().map(String::as_str).filter(|k| visited.contains(k)).collect();
            assert_eq!(visited, expected, "kinds in the search's order, each once: {searching:?}");
            let detours = visited.iter().filter(|k| **k != appliance).count();
            assert_eq!(searching.len(), direct.len() + detours, "a step a kind tried: {searching:?} against {direct:?}");
            // The appliance first: the search is the direct path.
            let (first, won) = play_with(&game, |intro| {
                Expert::new(intro).expect("the intro parses").searching_appliance(vec![appliance.to_string()])
            });
            assert!(won);
            assert_eq!(first, direct);
        }
    }
}

#[test]
fn stops_at_the_step_limit() {
    let data = data();
    let game = data.split(Split::ValidSeen).into_iter().find(|g| g.task_type == TaskType::PickTwo).expect("a pick_two game");
    let outcome = play_game(&data, &game.path, &game.task_dir, 2).expect("the game plays");
    assert!(!outcome.won);
    assert_eq!(outcome.steps, 2);
}

#[test]
fn every_task_sentence_of_the_data_parses() {
    let data = data();
    for split in [Split::ValidSeen, Split::ValidUnseen] {
        for game in data.split(split) {
            let text = data.read(&game.path).expect("the game file");
            let game_data = load_game(&text).expect("the game loads");
            let mut env = AlfworldEnv::new(Arc::new(game_data));
            let intro = env.reset().expect("reset").observation;
            let task = parse_task(env.task()).unwrap_or_else(|| panic!("{}: {:?} does not parse", game.path, env.task()));
            let spec = alfworld::TaskSpec::from_task_dir(&game.task_dir).expect("a task folder name");
            assert_eq!(task.kind, spec.task_type, "{}", game.path);
            assert_eq!(task.object, spec.object.to_lowercase(), "{}", game.path);
            assert_eq!(task.target, spec.parent.to_lowercase(), "{}", game.path);
            assert!(Expert::new(&intro).is_ok());
        }
    }
}

fn check_split(split: Split) -> ExpertReport {
    let report = evaluate(&data(), split, MAX_STEPS).expect("the split plays");
    eprintln!("{split}: fallbacks {}\n{}", report.fallbacks, report.table());
    assert_eq!(report.fallbacks, 0, "task sentences that did not parse");
    assert!(report.all.success() >= 0.99, "{split}: {:.1}% won; failures: {:?}", 100.0 * report.all.success(), report.failures);
    for (task_type, stats) in &report.per_type {
        assert!(stats.games > 0, "{split}: no {task_type} games");
        assert!(stats.success() >= 0.95, "{split} {task_type}: {:.1}% won; failures: {:?}", 100.0 * stats.success(), report.failures);
    }
    report
}

#[test]
fn wins_valid_seen() {
    let report = check_split(Split::ValidSeen);
    assert_eq!(report.all.games, 140);
}

#[test]
fn wins_valid_unseen() {
    let report = check_split(Split::ValidUnseen);
    assert_eq!(report.all.games, 134);
}

/// The whole train split (3553 games): a few seconds in release.
#[test]
fn wins_train() {
    let report = check_split(Split::Train);
    assert_eq!(report.all.games, 3553);
}
