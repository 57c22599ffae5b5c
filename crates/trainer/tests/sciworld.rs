//! ScienceWorld through the collector with the real simulator: the level's task lists, the
//! gold expert winning a test variation, a random player running, and bad game keys.

use std::collections::BTreeSet;
use std::collections::HashSet;

use rlvmr_core::Tag;
use trainer::envs::{open_env, EnvProvider, Protocol};
use trainer::coldstart::{coldstart, Detours, FocusCopies};
use trainer::envs::sciworld::gold::GoldPolicy;
use trainer::policies::RandomPolicy;
use trainer::{collect, grouped_specs, AdmissibleLists, CollectorOptions, TaskRef};

fn options(max_steps: usize) -> CollectorOptions {
    CollectorOptions {
        max_steps,
        ..CollectorOptions::default()
    }
}

fn types(tasks: &[TaskRef]) -> HashSet<String> {
    tasks.iter().map(|t| t.task_type.clone()).collect()
}

/// The level's first test variation of `task_type`.
fn first_test_task(provider: &dyn EnvProvider, task_type: &str) -> TaskRef {
    provider.test_tasks().into_iter().find(|t| t.task_type == task_type).unwrap()
}

#[test]
fn levels_split_tasks_like_the_paper() {
    let l2 = open_env("sciworld", "L2", None, false).unwrap();
    let (train, test) = (types(&l2.train_tasks()), types(&l2.test_tasks()));
    assert_eq!((train.len(), test.len()), (19, 10));
    assert!(train.is_disjoint(&test), "L2 never trains on a held-out task");
    assert!(test.contains("find-plant") && !train.contains("find-plant"));
    let l0 = open_env("sciworld", "L0", None, false).unwrap();
    assert_eq!(types(&l0.train_tasks()).len(), 29, "use-thermometer is unused");
    let l1 = open_env("sciworld", "L1", None, false).unwrap();
    let (dev, test): (HashSet<_>, HashSet<_>) = (
        l0.test_tasks().into_iter().map(|t| t.game).collect(),
        l1.test_tasks().into_iter().map(|t| t.game).collect(),
    );
    assert!(dev.is_disjoint(&test), "L0 tests on dev variations, L1 on test ones");
    assert!(open_env("sciworld", "L9", None, false).is_err());
}

#[test]
fn the_protocols_choose_the_cold_starts_tasks_and_long_gold_paths_are_never_drawn() {
    let l2 = open_env("sciworld", "L2", None, false).unwrap();
    let held_out = types(&l2.test_tasks());
    let published = types(&l2.coldstart_tasks(Protocol::Published));
    let strict = types(&l2.coldstart_tasks(Protocol::Strict));
    assert_eq!(published.len(), 29, "published: every task's training variations");
    assert!(held_out.is_subset(&published));
    assert_eq!(strict, types(&l2.train_tasks()), "strict: the level's training tasks");
    assert!(held_out.is_disjoint(&strict));
    // Recorded lengths: mendelian genetics' gold paths run about 130 actions, find-animal's 3-12.
    let game = |game: &str| TaskRef { game: game.into(), task_type: String::new() };
    assert!(!l2.expert_may_fit(&game("mendelian-genetics-known-plant/0"), 30));
    assert!(l2.expert_may_fit(&game("mendelian-genetics-known-plant/0"), 200));
    assert!(l2.expert_may_fit(&game("find-animal/0"), 30));
    assert!(l2.expert_may_fit(&game("not a game"), 30), "unknown: generated and judged then");
}

#[test]
fn the_gold_expert_wins_and_a_random_player_plays_through_the_collector() {
    let provider = open_env("sciworld", "L2", None, false).unwrap();
    let task = first_test_task(provider.as_ref(), "find-plant");
    let run = collect(
        provider.as_ref(),
        &mut GoldPolicy::new(0.0).unwrap(),
        &grouped_specs(std::slice::from_ref(&task), 1, 0),
        &options(30),
    )
    .unwrap();
    let episode = &run.episodes[0];
    assert!(episode.won && episode.error.is_none(), "{:?}", episode.error);
    assert!(episode.steps.iter().all(|s| s.format_valid && s.tag.is_some()));
    assert!(episode.steps[0].output.starts_with("<planning>"));
    // Prompts show the action templates and objects, not the hundreds of valid actions.
    let prompt = &episode.steps[1].prompt;
    assert!(prompt.contains("Action templates") && prompt.contains("OBJ"), "{prompt}");
    assert!(prompt.len() < 6000, "{} characters", prompt.len());

    // The simulator the expert used went back to the pool and serves the next episodes.
    let run = collect(
        provider.as_ref(),
        &mut RandomPolicy::new(),
        &grouped_specs(std::slice::from_ref(&task), 2, 0),
        &options(5),
    )
    .unwrap();
    assert_eq!(run.episodes.len(), 2);
    for e in &run.episodes {
        assert!(e.error.is_none(), "{:?}", e.error);
        assert_eq!(e.steps.len(), 5);
        assert!(e.steps.iter().all(|s| s.admissible == Some(true)));
    }

    let bad = TaskRef {
        game: "no-such-task/3".into(),
        task_type: "x".into(),
    };
    let run = collect(
        provider.as_ref(),
        &mut RandomPolicy::new(),
        &grouped_specs(&[bad], 1, 0),
        &options(5),
    )
    .unwrap();
    let error = run.episodes[0].error.clone().unwrap_or_default();
    assert!(error.contains("no-such-task"), "{error}");
}

#[test]
fn cold_start_openings_play_long_gold_paths_up_to_the_step_limit() {
    let provider = open_env("sciworld", "L2", None, false).unwrap();
    let held_out = types(&provider.test_tasks());
    let limit = 8;
    let run = coldstart(provider.as_ref(), 1, 2, Detours::mistakes(0.0), Protocol::Strict, 5, &options(limit), None).unwrap();
    assert_eq!(run.episodes.len(), 3);
    let (won, openings): (Vec<_>, Vec<_>) = run.episodes.iter().partition(|e| e.won);
    assert_eq!((won.len(), openings.len()), (1, 2));
    assert!(won[0].steps.len() < limit);
    for e in &openings {
        let task = TaskRef { game: e.game.clone(), task_type: e.task_type.clone() };
        assert!(!provider.expert_may_fit(&task, limit), "{} fits in {limit} steps", e.game);
        assert!(!held_out.contains(&e.task_type), "{} is held out", e.task_type);
        assert!(e.error.is_none(), "{:?}", e.error);
        assert_eq!(e.steps.len(), limit, "{}: the opening runs to the step limit", e.game);
        assert_eq!(e.steps[0].tag, Some(Tag::Planning));
        // The gold path's opening: the simulator understands every action.
        for s in &e.steps {
            assert!(!s.next_observation.contains("No known action"), "{}: {} -> {}", e.game, s.action, s.next_observation);
        }
    }
    let steps: usize = run.episodes.iter().map(|e| e.steps.len()).sum();
    assert_eq!(run.samples.len(), steps, "no mistakes planted: every step is a sample");
    assert_eq!(run.openings, 2);
    assert!(run.summary().contains("2 openings of longer tasks"), "{}", run.summary());
    // The same seed draws the same openings.
    let again = coldstart(provider.as_ref(), 1, 2, Detours::mistakes(0.0), Protocol::Strict, 5, &options(limit), None).unwrap();
    let games = |r: &trainer::coldstart::Coldstart| r.episodes.iter().map(|e| e.game.clone()).collect::<Vec<_>>();
    assert_eq!(games(&again), games(&run));
}

#[test]
fn cold_start_demonstrations_come_from_gold_paths_of_training_tasks() {
    let provider = open_env("sciworld", "L2", None, false).unwrap();
    let held_out = types(&provider.test_tasks());
    // Every demonstration gets a planted mistake.
    let run = coldstart(provider.as_ref(), 3, 0, Detours::mistakes(1.0), Protocol::Strict, 3, &options(30), None).unwrap();
    assert_eq!(run.episodes.len(), 3);
    for e in &run.episodes {
        assert!(e.won && e.steps.len() < 30);
        assert!(!held_out.contains(&e.task_type), "{} is held out", e.task_type);
        let mistakes: Vec<usize> = e.steps.iter().filter(|s| s.mistake).map(|s| s.step).collect();
        let actions: Vec<&str> = e.steps.iter().map(|s| s.action.as_str()).collect();
        assert_eq!(mistakes.len(), 1, "one recoverable mistake in {}: {actions:?}", e.game);
        let (slip, fix) = (&e.steps[mistakes[0]], &e.steps[mistakes[0] + 1]);
        let failed = slip.next_observation.contains("No known action")
            || slip.next_observation.contains("not clear how to get there");
        let wrong_turn = slip.next_observation.starts_with("You move to the");
        assert!(failed || wrong_turn, "{}: {}", slip.action, slip.next_observation);
        assert_eq!(fix.tag, Some(Tag::Reflection), "{}", fix.output);
        assert!(fix.output.contains(slip.action.trim_start_matches("go to ")) || wrong_turn, "{}", fix.output);
    }
    let steps: Vec<_> = run.episodes.iter().flat_map(|e| &e.steps).collect();
    assert!(steps.iter().any(|s| s.tag == Some(Tag::Explore)), "searching explores");
    assert!(steps.iter().any(|s| s.tag == Some(Tag::Monitor)));
    // The mistakes stay in the trajectories, never in the training samples.
    assert_eq!(run.samples.len(), steps.len() - run.episodes.len());
    assert!(run.samples.iter().all(|s| !s.response.contains(&steps.iter().find(|s| s.mistake).unwrap().output)));
    assert!(run.samples.iter().any(|s| s.response.starts_with("<reflection>")));
    assert!(run.samples[0].response.starts_with("<planning>"));
    assert!(run.samples[0].prompt.contains("Action templates"));

    // Fetching the valid actions only where the expert may plant its mistake changes
    // nothing but the lists the records keep: the simulator's states, the demonstrations and
    // the samples are the same.
    let where_read = CollectorOptions { admissible: AdmissibleLists::WhereRead, ..options(30) };
    let lean = coldstart(provider.as_ref(), 3, 0, Detours::mistakes(1.0), Protocol::Strict, 3, &where_read, None).unwrap();
    assert_eq!(lean.samples, run.samples);
    let without_lists = |c: &trainer::coldstart::Coldstart| {
        let mut episodes = c.episodes.clone();
        episodes.iter_mut().flat_map(|e| &mut e.steps).for_each(|s| (s.admissible_actions, s.admissible) = (None, None));
        episodes
    };
    assert_eq!(without_lists(&lean), without_lists(&run));
    let lists = |c: &trainer::coldstart::Coldstart| c.episodes.iter().flat_map(|e| &e.steps).filter(|s| s.admissible_actions.is_some()).count();
    assert_eq!(lists(&run), steps.len());
    assert!(lists(&lean) >= run.episodes.len() && lists(&lean) < steps.len() / 2, "{} of {}", lists(&lean), steps.len());

    // Renamed demonstrations: the conductivity tasks among these (a book, whose name the
    // commands shorten, excepted) get a made-up name for their object, the find tasks of
    // animals, plants or living things a permutation of species; posed as a conductivity
    // task about a word every prompt holds, every sample calls it by a made-up name, while
    // the trajectories keep the played one.
    let mut renamed = run.clone();
    renamed.rename_objects(provider.as_ref(), 1.0, FocusCopies::NONE, 0);
    let finds_species = |task: &str| ["animal", "plant", "living thing"].iter().any(|kind| task.contains(&format!("find a(n) {kind}")));
    let renameable = run
        .episodes
        .iter()
        .filter(|e| (e.task.contains("is electrically conductive") && !e.task.contains("book (")) || finds_species(&e.task))
        .count();
    assert_eq!(renamed.renamed, renameable);
    let room = ["inventory", "agent"]
        .into_iter()
        .find(|word| run.samples.iter().all(|s| s.prompt.contains(word)))
        .expect("a word in every prompt");
    for e in &mut renamed.episodes {
        e.task = format!("Your task is to determine if {room} is electrically conductive.");
    }
    let played = renamed.episodes.clone();
    renamed.rename_objects(provider.as_ref(), 1.0, FocusCopies::NONE, 0);
    assert_eq!(renamed.renamed, 3);
    assert_eq!(renamed.samples.len(), run.samples.len());
    assert!(renamed.samples.iter().all(|s| !s.prompt.contains(room) && !s.response.contains(room)));
    assert_eq!(renamed.episodes, played);
    renamed.rename_objects(provider.as_ref(), 0.0, FocusCopies::NONE, 0);
    assert_eq!((renamed.renamed, &renamed.samples), (0, &run.samples));

    // Posed as find tasks with one focus step each, the focus steps come again under other
    // permutations of the species: the room and the reply name the same animal each time,
    // and the samples without copies are unchanged.
    let mut find = run.clone();
    for e in &mut find.episodes {
        e.task = "Your task is to find a(n) animal. First, focus on the thing.".into();
        for s in e.steps.iter_mut().filter(|s| s.action.starts_with("focus on ")) {
            s.action = "look around".into();
        }
        let s = e.steps.iter_mut().find(|s| !s.mistake).unwrap();
        s.action = "focus on dove egg".into();
        s.prompt = "Room: axe | dove egg | ground".into();
        s.output = "<monitor>The dove egg is what the task is about.</monitor>\n<action>focus on dove egg</action>".into();
    }
    find.rename_objects(provider.as_ref(), 1.0, FocusCopies::NONE, 0);
    let plain = find.samples.clone();
    find.rename_objects(provider.as_ref(), 1.0, FocusCopies { copies: 4, steps: 1 }, 0);
    assert_eq!(find.focus_copies, 4 * find.episodes.len());
    assert_eq!(find.samples.len(), plain.len() + find.focus_copies);
    let copies: Vec<_> = find.samples.iter().filter(|s| !plain.contains(s)).collect();
    assert!(!copies.is_empty() && copies.len() <= find.focus_copies);
    let named: BTreeSet<String> = copies
        .iter()
        .map(|s| {
            let action = s.response.split("<action>focus on ").nth(1).unwrap().trim_end_matches("</action>");
            assert!(s.prompt.contains(action), "{} / {}", s.prompt, s.response);
            action.to_string()
        })
        .collect();
    assert!(named.len() > 2, "other animals each time: {named:?}");
    assert!(find.summary().contains("more samples of their focus steps"), "{}", find.summary());
    // Copies of two steps hold the step after each focus too; the focus steps are drawn as before.
    let single = find.samples.clone();
    find.rename_objects(provider.as_ref(), 1.0, FocusCopies { copies: 4, steps: 2 }, 0);
    assert_eq!(find.focus_copies, 4 * 2 * find.episodes.len());
    assert_eq!(find.samples.len(), plain.len() + find.focus_copies);
    assert!(single.iter().all(|s| find.samples.contains(s)), "the focus steps' copies are drawn as before");
}

#[test]
fn at_most_eight_simulators_run_and_a_missing_gold_path_fails_one_episode() {
    use trainer::envs::sciworld::{SciworldProvider, MAX_SIMULATORS};
    let provider = SciworldProvider::open("L2").unwrap();
    let task = provider
        .test_tasks()
        .into_iter()
        .find(|t| t.task_type == "find-plant")
        .unwrap();
    let specs = grouped_specs(std::slice::from_ref(&task), MAX_SIMULATORS + 2, 0);
    let run = collect(&provider, &mut RandomPolicy::new(), &specs, &options(1)).unwrap();
    assert_eq!(run.episodes.len(), MAX_SIMULATORS + 2);
    assert!(run.episodes.iter().all(|e| e.error.is_none() && e.steps.len() == 1));
    assert!(
        provider.idle_simulators() <= MAX_SIMULATORS,
        "{} simulators started",
        provider.idle_simulators()
    );

    let bad = TaskRef {
        game: format!("{}/99999", task_game_task(&task)),
        task_type: task.task_type.clone(),
    };
    let run = collect(
        &provider,
        &mut GoldPolicy::new(0.0).unwrap(),
        &grouped_specs(&[bad, task.clone()], 1, 0),
        &options(30),
    )
    .unwrap();
    assert!(run.episodes[0].error.is_some());
    assert!(run.episodes[1].error.is_none() && run.episodes[1].won);
}

/// The task name of a `task/variation` game key.
fn task_game_task(task: &TaskRef) -> String {
    task.game.rsplit_once('/').unwrap().0.to_string()
}

#[test]
fn an_aliased_tested_object_is_shown_and_commanded_by_its_alias_and_the_expert_still_wins() {
    let provider = open_env("sciworld", "L0", None, true).unwrap();
    let task = first_test_task(provider.as_ref(), "test-conductivity");
    let mut expert = provider.expert(Detours::default(), rlvmr_core::OutputStyle::Tagged).unwrap();
    let run = collect(provider.as_ref(), expert.as_mut(), &grouped_specs(std::slice::from_ref(&task), 1, 0), &options(30)).unwrap();
    let episode = &run.episodes[0];
    assert!(episode.won && episode.error.is_none(), "{:?}", episode.error);
    assert!(episode.task.contains("determine if tested object is electrically conductive"), "{}", episode.task);
    let actions: Vec<&str> = episode.steps.iter().map(|s| s.action.as_str()).collect();
    assert!(actions.contains(&"focus on tested object"), "{actions:?}");
    assert!(episode.steps.iter().any(|s| s.next_observation.contains("You move the tested object")), "{actions:?}");
    // The valid actions are shown with the alias too.
    let pick_up = episode.steps.iter().find(|s| s.action == "pick up tested object").unwrap();
    assert_eq!(pick_up.admissible, Some(true), "{actions:?}");
    // The real name (what the unaliased simulator calls it) is nowhere in what the agent saw.
    let plain = open_env("sciworld", "L0", None, false).unwrap();
    let mut env = plain.make(&task, 0, 30).unwrap();
    env.reset().unwrap();
    let (name, alias) = trainer::envs::sciworld::rename::tested_object_alias(env.task()).unwrap();
    assert_ne!(name, alias);
    for step in &episode.steps {
        assert!(!step.prompt.contains(&name) && !step.next_observation.contains(&name), "{name} in step {}", step.step);
    }
}

/// With the wires aliased, the conductivity tasks' wires are `left wire`, `middle wire` and
/// `right wire` in everything the agent reads once the workshop is in view, the expert's
/// circuit takes them up in that order, every connection is made and the episode is won.
#[test]
fn aliased_wires_are_shown_and_commanded_by_their_aliases_and_close_the_circuit() {
    let aliasing = trainer::envs::SciworldOptions { alias_tested_object: true, alias_wires: true, recorded_gold_paths: false };
    let provider = trainer::envs::open_env_with("sciworld", "L0", None, aliasing).unwrap();
    let task = first_test_task(provider.as_ref(), "test-conductivity");
    let mut expert = provider.expert(Detours::default(), rlvmr_core::OutputStyle::Tagged).unwrap();
    let run = collect(provider.as_ref(), expert.as_mut(), &grouped_specs(std::slice::from_ref(&task), 1, 0), &options(30)).unwrap();
    let episode = &run.episodes[0];
    assert!(episode.won && episode.error.is_none(), "{:?}", episode.error);
    let actions: Vec<&str> = episode.steps.iter().map(|s| s.action.as_str()).collect();
    let connections: Vec<_> = episode.steps.iter().filter(|s| s.action.starts_with("connect ")).collect();
    assert_eq!(connections.len(), 6, "{actions:?}");
    assert!(connections.iter().all(|s| s.next_observation.contains("now connected")), "{actions:?}");
    assert!(connections[0].action.contains("left wire") && connections[1].action.contains("middle wire"), "{actions:?}");
    assert!(connections[3].action.contains("right wire"), "{actions:?}");
    // No colour of a wire anywhere the agent reads.
    let colours = ["black", "blue", "green", "orange", "red", "violet", "yellow"].map(|c| format!("{c} wire"));
    for step in &episode.steps {
        let admissible = step.admissible_actions.as_deref().unwrap_or(&[]).join("\n");
        for text in [&step.prompt, &step.next_observation, &admissible] {
            assert!(!colours.iter().any(|c| text.contains(c.as_str())), "step {}: {text}", step.step);
        }
    }
    assert!(episode.steps.iter().any(|s| s.prompt.contains("a left wire, a middle wire")), "the table's wires are not shown aliased");
}

#[test]
fn rl_draws_every_training_variation_or_only_those_whose_gold_path_fits() {
    use trainer::config::RlGames;
    let l0 = open_env("sciworld", "L0", None, false).unwrap();
    let mut config = trainer::RunConfig::default();
    config.env.max_steps = 30;
    let all = trainer::rl::training_tasks(l0.as_ref(), &config);
    assert_eq!(all, l0.train_tasks(), "all: the authors' draw");
    config.rl.games = RlGames::Fitting;
    let fitting = trainer::rl::training_tasks(l0.as_ref(), &config);
    // docs/sciworld.md: 1814 of the 3322 training variations have a gold path under 30 steps.
    assert_eq!((all.len(), fitting.len()), (3322, 1814));
    assert!(fitting.iter().all(|t| l0.expert_may_fit(t, 30)));
    let kept = types(&fitting);
    assert!(kept.contains("find-animal") && kept.contains("test-conductivity"));
    assert!(!kept.iter().any(|t| t.starts_with("inclined-plane") || t.starts_with("mendelian-genetics")));
    config.env.max_steps = 1;
    assert!(trainer::rl::training_tasks(l0.as_ref(), &config).is_empty());
}

/// Asked to, the expert reads its paths from the committed recording (`sciworld::GoldPaths`)
/// and starts no gold-path JVM for them; for tasks whose gold path draws nothing at random
/// (unlike the conductivity tasks' order of wires) it plays what it plays from paths
/// generated in a JVM: a whole path (find-plant, won) and an opening cut at the step limit
/// (boil).
#[test]
fn the_expert_plays_recorded_gold_paths_without_a_jvm_as_it_plays_generated_ones() {
    let provider = open_env("sciworld", "L2", None, false).unwrap();
    let train_game = |name: &str| {
        let task = sciworld::resolve_task(name).unwrap();
        let variation = task.split(sciworld::OfficialSplit::Train).next().unwrap();
        TaskRef { game: format!("{name}/{variation}"), task_type: name.to_string() }
    };
    let games = [train_game("find-plant"), train_game("boil")];
    let specs = grouped_specs(&games, 1, 0);
    let mut recorded = GoldPolicy::new(0.0).unwrap().cutting_at(Some(30)).reading(Some(sciworld::GoldPaths::recorded_train()));
    let from_recording = collect(provider.as_ref(), &mut recorded, &specs, &options(30)).unwrap();
    assert_eq!(recorded.jvms(), 0, "every path was recorded");
    let mut generating = GoldPolicy::new(0.0).unwrap().cutting_at(Some(30)).reading(None);
    let generated = collect(provider.as_ref(), &mut generating, &specs, &options(30)).unwrap();
    assert!(generating.jvms() > 0);
    let actions = |e: &trainer::EpisodeRecord| e.steps.iter().map(|s| s.action.clone()).collect::<Vec<_>>();
    for (a, b) in from_recording.episodes.iter().zip(&generated.episodes) {
        assert!(a.error.is_none() && b.error.is_none(), "{:?} {:?}", a.error, b.error);
        assert_eq!(actions(a), actions(b), "{}", a.game);
        assert_eq!(a.steps.iter().map(|s| &s.output).collect::<Vec<_>>(), b.steps.iter().map(|s| &s.output).collect::<Vec<_>>());
    }
    let won: Vec<bool> = from_recording.episodes.iter().map(|e| e.won).collect();
    assert_eq!(won, [true, false], "the find task won, the boil opening cut at 30 steps");
    assert_eq!(from_recording.episodes[1].steps.len(), 30);
}

/// `[coldstart] recorded_gold_paths` reaches the expert: a cold start of six demonstrations
/// through a provider opened with it plays each game's recorded path, action for action, up
/// to the win (no mistakes planted, no aliases).
#[test]
fn a_cold_start_with_recorded_gold_paths_plays_the_recording() {
    let settings = trainer::envs::SciworldOptions { recorded_gold_paths: true, ..Default::default() };
    let provider = trainer::envs::open_env_with("sciworld", "L0", None, settings).unwrap();
    let run = coldstart(provider.as_ref(), 6, 0, Detours::mistakes(0.0), Protocol::Published, 11, &options(30), None).unwrap();
    let recording = sciworld::GoldPaths::recorded_train();
    assert_eq!(run.episodes.len(), 6);
    for e in &run.episodes {
        let (task, variation) = e.game.rsplit_once('/').unwrap();
        let recorded = recording.get("easy", task, variation.parse().unwrap(), None).expect("recorded");
        let played: Vec<String> = e.steps.iter().map(|s| s.action.clone()).collect();
        // Won as soon as the simulator says so: a path may hold a step more.
        assert!(e.won, "{}", e.game);
        assert!(recorded.path.starts_with(&played), "{}: {played:?} against {:?}", e.game, recorded.path);
    }
}
