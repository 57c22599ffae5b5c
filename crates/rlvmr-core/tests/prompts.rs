//! Snapshots of rendered prompts, on realistic ALFWorld and ScienceWorld text.
//!
//! Review a changed prompt with `INSTA_UPDATE=always cargo test -p rlvmr-core --test prompts`
//! (or `cargo insta review`), then read the `.snap` files under `tests/snapshots/`.

use rlvmr_core::prompt::{
    carried_plan, render, HistoryEntry, HistoryWindow, PromptConfig, PromptEnv, PromptInput,
    BoxLine, PromptStyle, TaskLine,
};

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

/// One past step: (observation seen, action taken, tag, reason).
type Step = (&'static str, &'static str, &'static str, &'static str);

/// The raw reply a model of `style` wrote at a step: think-style baselines wrap the same
/// reason in `<think>`.
fn reply(style: PromptStyle, &(_, action, tag, reason): &Step) -> String {
    let tag = match style {
        PromptStyle::Tagged => tag,
        PromptStyle::Think => "think",
    };
    format!("<{tag}>{reason}</{tag}>\n<action>{action}</action>")
}

/// The replies of every step, and the plan after them, carried as the rollout loop does.
fn replies_and_plan(style: PromptStyle, steps: &[Step]) -> (Vec<String>, Option<String>) {
    let replies: Vec<String> = steps.iter().map(|step| reply(style, step)).collect();
    let plan = replies.iter().fold(None, |plan: Option<String>, r| {
        carried_plan(plan.as_deref(), r)
    });
    (replies, plan)
}

fn history<'a>(steps: &[Step], replies: &'a [String]) -> Vec<HistoryEntry<'a>> {
    steps
        .iter()
        .zip(replies)
        .map(|(&(observation, action, _, _), output)| HistoryEntry {
            observation,
            action,
            output,
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// ALFWorld: "put a clean lettuce in diningtable", seven steps in.

const ALF_TASK: &str = "put a clean lettuce in diningtable.";

const ALF_OBS0: &str = "-= Welcome to TextWorld, ALFRED! =-\n\nYou are in the middle of a room. \
Looking quickly around you, you see a cabinet 2, a cabinet 1, a countertop 1, a diningtable 1, \
a fridge 1, a garbagecan 1, a sinkbasin 1, and a stoveburner 1.\n\nYour task is to: put a clean \
lettuce in diningtable.";

/// Steps 1..=7.
const ALF_STEPS: [Step; 7] = [
    (
        ALF_OBS0,
        "go to fridge 1",
        "planning",
        "1. Find a lettuce: the fridge and the countertop are the likely places. 2. Clean it at the sinkbasin. 3. Put it on the diningtable.",
    ),
    (
        "You arrive at fridge 1. The fridge 1 is closed.",
        "open fridge 1",
        "explore",
        "The fridge is closed, so I cannot see inside; opening it shows whether the lettuce is there.",
    ),
    (
        "You open the fridge 1. The fridge 1 is open. In it, you see a egg 1, and a tomato 1.",
        "go to countertop 1",
        "reflection",
        "The fridge holds no lettuce; I should try the countertop next instead of searching the fridge again.",
    ),
    (
        "You arrive at countertop 1. On the countertop 1, you see a lettuce 1, and a knife 1.",
        "take lettuce 1 from countertop 1",
        "monitor",
        "Sub-goal 1: the lettuce is here, so I take it.",
    ),
    (
        "You pick up the lettuce 1 from the countertop 1.",
        "go to sinkbasin 1",
        "monitor",
        "I hold the lettuce; sub-goal 2 is cleaning it at the sinkbasin.",
    ),
    (
        "You arrive at sinkbasin 1. On the sinkbasin 1, you see nothing.",
        "clean lettuce 1 with sinkbasin 1",
        "monitor",
        "At the sinkbasin with the lettuce: clean it.",
    ),
    (
        "You clean the lettuce 1 using the sinkbasin 1.",
        "go to diningtable 1",
        "monitor",
        "The lettuce is clean; sub-goal 3 is the diningtable.",
    ),
];

const ALF_OBS7: &str =
    "You arrive at diningtable 1. On the diningtable 1, you see a bread 1, a fork 1, and a plate 1.";

fn alf_admissible_start() -> Vec<String> {
    strings(&[
        "go to cabinet 1",
        "go to cabinet 2",
        "go to countertop 1",
        "go to diningtable 1",
        "go to fridge 1",
        "go to garbagecan 1",
        "go to sinkbasin 1",
        "go to stoveburner 1",
        "help",
        "inventory",
        "look",
    ])
}

fn alf_admissible_step7() -> Vec<String> {
    strings(&[
        "examine diningtable 1",
        "examine lettuce 1",
        "go to cabinet 1",
        "go to cabinet 2",
        "go to countertop 1",
        "go to fridge 1",
        "go to garbagecan 1",
        "go to sinkbasin 1",
        "go to stoveburner 1",
        "help",
        "inventory",
        "look",
        "move lettuce 1 to diningtable 1",
    ])
}

fn alf_first(cfg: &PromptConfig) -> String {
    let admissible = alf_admissible_start();
    render(
        cfg,
        &PromptInput {
            task: ALF_TASK,
            step: 0,
            observation: ALF_OBS0,
            admissible: &admissible,
            ..Default::default()
        },
    )
}

fn alf_step7(cfg: &PromptConfig) -> String {
    let (replies, plan) = replies_and_plan(cfg.style, &ALF_STEPS);
    let history = history(&ALF_STEPS, &replies);
    let admissible = alf_admissible_step7();
    render(
        cfg,
        &PromptInput {
            task: ALF_TASK,
            step: 7,
            history: &history,
            observation: ALF_OBS7,
            admissible: &admissible,
            plan: plan.as_deref(),
            ..Default::default()
        },
    )
}

#[test]
fn alfworld_first_step() {
    insta::assert_snapshot!("alfworld_first_step", alf_first(&PromptConfig::default()));
}

#[test]
fn alfworld_step7_window3() {
    let cfg = PromptConfig {
        history: HistoryWindow::Last(3),
        ..PromptConfig::default()
    };
    insta::assert_snapshot!("alfworld_step7_window3", alf_step7(&cfg));
}

#[test]
fn alfworld_step7_history_all() {
    let cfg = PromptConfig {
        history: HistoryWindow::All,
        ..PromptConfig::default()
    };
    insta::assert_snapshot!("alfworld_step7_history_all", alf_step7(&cfg));
}

#[test]
fn alfworld_cold_start() {
    let cfg = PromptConfig {
        cold_start: true,
        ..PromptConfig::default()
    };
    insta::assert_snapshot!("alfworld_cold_start_first_step", alf_first(&cfg));
    insta::assert_snapshot!("alfworld_cold_start_step7", alf_step7(&cfg));
}

#[test]
fn alfworld_think_baseline() {
    let cfg = PromptConfig {
        style: PromptStyle::Think,
        ..PromptConfig::default()
    };
    insta::assert_snapshot!("alfworld_think_first_step", alf_first(&cfg));
    insta::assert_snapshot!("alfworld_think_step7", alf_step7(&cfg));
}

#[test]
fn alfworld_compact() {
    let small = PromptConfig::small();
    insta::assert_snapshot!("alfworld_compact_first_step", alf_first(&small));
    let step7 = alf_step7(&small);
    insta::assert_snapshot!("alfworld_compact_step7", step7);
    // A few hundred tokens: about 4 characters a token in English text.
    assert!(step7.len() < 1800, "{} characters", step7.len());
    assert!(step7.len() < alf_step7(&PromptConfig::default()).len() / 2);
}

// ---------------------------------------------------------------------------------------------
// ScienceWorld: boil water, a few steps in.

const SCI_TASK: &str = "Your task is to boil water. For compounds without a boiling point, \
combining that substance with heat is sufficient. First, focus on the substance. Then, take \
actions that will cause it to change its state of matter.";

const SCI_OBS0: &str = "This room is called the hallway. In it, you see: \n\tthe agent\n\ta \
substance called air\n\ta picture\nYou also see:\n\tA door to the art studio (that is open)\n\tA \
door to the bedroom (that is open)\n\tA door to the greenhouse (that is open)\n\tA door to the \
kitchen (that is open)\n\tA door to the living room (that is open)\n\tA door to the workshop \
(that is open)";

const SCI_OBS3: &str = "This room is called the kitchen. In it, you see: \n\tthe agent\n\ta \
substance called air\n\ta chair. On the chair is: nothing.\n\ta counter. On the counter is: a \
bowl (containing a red apple, a banana, an orange, a potato), a drawer.\n\ta cupboard. The \
cupboard door is open. In the cupboard is: a tin cup (containing nothing), a ceramic cup \
(containing nothing), a drawer.\n\ta freezer. The freezer door is closed. \n\ta fridge. The \
fridge door is closed. \n\ta glass jar (containing a substance called sodium chloride)\n\ta \
lighter\n\ta oven, which is turned off. The oven door is closed. \n\ta painting\n\ta sink, \
which is turned off. In the sink is: nothing.\n\ta stove, which is turned off. On the stove is: \
nothing.\n\ta table. On the table is: a glass cup (containing nothing).\n\ta thermometer, \
currently reading a temperature of 10 degrees celsius\nYou also see:\n\tA door to the \
bathroom (that is open)\n\tA door to the hallway (that is open)\n\tA door to the outside (that \
is open)";

const SCI_STEPS: [Step; 3] = [
    (
        SCI_OBS0,
        "teleport to kitchen",
        "planning",
        "1. Go to the kitchen. 2. Fill a metal pot with water at the sink. 3. Focus on the water. 4. Heat it on the stove until it boils.",
    ),
    (
        "You teleport to the kitchen.",
        "pick up metal pot",
        "monitor",
        "In the kitchen; next I need a container for the water.",
    ),
    (
        "No known action matches that input.",
        "look around",
        "reflection",
        "There is no metal pot in view; I should look at what the kitchen holds before choosing a container.",
    ),
];

fn sci_templates() -> Vec<String> {
    strings(&[
        "activate OBJ",
        "close OBJ",
        "connect OBJ to OBJ",
        "deactivate OBJ",
        "disconnect OBJ",
        "dunk OBJ into OBJ",
        "eat OBJ",
        "flush OBJ",
        "focus on OBJ",
        "go to LOC",
        "inventory",
        "look around",
        "look at OBJ",
        "look in OBJ",
        "mix OBJ",
        "move OBJ to OBJ",
        "open OBJ",
        "pick up OBJ",
        "pour OBJ into OBJ",
        "put down OBJ",
        "read OBJ",
        "task",
        "teleport to LOC",
        "use OBJ [on OBJ]",
        "wait",
        "wait1",
    ])
}

fn sci_objects_hallway() -> Vec<String> {
    strings(&[
        "agent",
        "air",
        "art studio",
        "bedroom",
        "greenhouse",
        "hallway",
        "kitchen",
        "living room",
        "picture",
        "workshop",
    ])
}

fn sci_objects_kitchen() -> Vec<String> {
    strings(&[
        "agent",
        "air",
        "banana",
        "bathroom",
        "bowl",
        "ceramic cup",
        "chair",
        "counter",
        "cupboard",
        "drawer",
        "freezer",
        "fridge",
        "glass cup",
        "glass jar",
        "hallway",
        "kitchen",
        "lighter",
        "orange",
        "outside",
        "oven",
        "painting",
        "potato",
        "red apple",
        "sink",
        "sodium chloride",
        "stove",
        "table",
        "thermometer",
        "tin cup",
    ])
}

fn sci_first(cfg: &PromptConfig) -> String {
    let templates = sci_templates();
    let objects = sci_objects_hallway();
    render(
        cfg,
        &PromptInput {
            task: SCI_TASK,
            step: 0,
            observation: SCI_OBS0,
            templates: &templates,
            objects: &objects,
            ..Default::default()
        },
    )
}

fn sci_step3(cfg: &PromptConfig) -> String {
    let (replies, plan) = replies_and_plan(cfg.style, &SCI_STEPS);
    let history = history(&SCI_STEPS, &replies);
    let templates = sci_templates();
    let objects = sci_objects_kitchen();
    render(
        cfg,
        &PromptInput {
            task: SCI_TASK,
            step: 3,
            history: &history,
            observation: SCI_OBS3,
            plan: plan.as_deref(),
            templates: &templates,
            objects: &objects,
            ..Default::default()
        },
    )
}

fn sci_cfg() -> PromptConfig {
    PromptConfig {
        env: PromptEnv::ScienceWorld,
        ..PromptConfig::default()
    }
}

#[test]
fn scienceworld_first_step() {
    insta::assert_snapshot!("scienceworld_first_step", sci_first(&sci_cfg()));
}

#[test]
fn scienceworld_step3() {
    insta::assert_snapshot!("scienceworld_step3", sci_step3(&sci_cfg()));
}

#[test]
fn scienceworld_compact_step3() {
    let cfg = PromptConfig {
        env: PromptEnv::ScienceWorld,
        ..PromptConfig::small()
    };
    insta::assert_snapshot!("scienceworld_compact_step3", sci_step3(&cfg));
}

const SCI_INVENTORY: &str = "In your inventory, you see:\n\ta metal pot (containing nothing)\n";

/// The room view of the main ScienceWorld preset: the room and inventory instead of
/// templates and objects, a room description in the history named by its room only.
fn sci_room_step(observation: &str) -> String {
    sci_room_step_with(&sci_room_cfg(), observation)
}

fn sci_room_cfg() -> PromptConfig {
    PromptConfig {
        env: PromptEnv::ScienceWorld,
        room: true,
        instructions: false,
        ..PromptConfig::small()
    }
}

fn sci_room_step_with(cfg: &PromptConfig, observation: &str) -> String {
    let (replies, plan) = replies_and_plan(cfg.style, &SCI_STEPS);
    let history = history(&SCI_STEPS, &replies);
    render(
        cfg,
        &PromptInput {
            task: SCI_TASK,
            step: 3,
            history: &history,
            observation,
            plan: plan.as_deref(),
            room: SCI_OBS3,
            inventory: SCI_INVENTORY,
            ..Default::default()
        },
    )
}

#[test]
fn scienceworld_room_step3() {
    insta::assert_snapshot!("scienceworld_room_step3", sci_room_step("You move the metal pot to the sink."));
    // After a look around the observation is the room: it is not shown twice.
    let looked = sci_room_step(SCI_OBS3);
    assert!(looked.contains("Now: In the kitchen: chair. On the chair is: nothing | "), "{looked}");
    assert!(!looked.contains("Room: "), "{looked}");
    assert!(!looked.contains("Templates") && !looked.contains("Focus only"), "{looked}");
}

#[test]
fn scienceworld_room_step3_task_moved() {
    let first = sci_room_step("You move the metal pot to the sink.");
    let first_lines: Vec<&str> = first.lines().collect();
    let task_line = format!("Task: {SCI_TASK}");
    assert_eq!(first_lines[0], format!("Text science game. {task_line}"));
    for (placement, name) in [(TaskLine::BeforeNow, "before_now"), (TaskLine::Last, "last")] {
        let cfg = PromptConfig { task_line: placement, ..sci_room_cfg() };
        let moved = sci_room_step_with(&cfg, "You move the metal pot to the sink.");
        insta::assert_snapshot!(format!("scienceworld_room_step3_task_{name}"), moved);
        // The task-first prompt's lines, the task's moved from the first line.
        let mut lines: Vec<&str> = moved.lines().collect();
        assert_eq!(lines[0], "Text science game.");
        let at = lines.iter().position(|l| *l == task_line).expect("a task line");
        let now = first_lines.iter().position(|l| l.starts_with("Now: ")).unwrap();
        assert_eq!(at, if placement == TaskLine::Last { lines.len() - 1 } else { now });
        lines.remove(at);
        assert_eq!(first_lines[1..], lines[1..]);
    }
}

#[test]
fn scienceworld_box_line_repeats_the_sentences_naming_a_box() {
    const CONDUCTIVITY: &str = "Your task is to determine if tested object is electrically conductive. \
        The tested object is located around the kitchen. First, focus on the tested object. \
        If it is electrically conductive, place it in the green box. If it is electrically \
        nonconductive, place it in the blue box.";
    let render_task = |task: &str, box_line: BoxLine| {
        let cfg = PromptConfig { box_line, ..sci_room_cfg() };
        render(
            &cfg,
            &PromptInput { task, observation: "You teleport to the kitchen.", room: SCI_OBS3, inventory: SCI_INVENTORY, ..Default::default() },
        )
    };
    let with = render_task(CONDUCTIVITY, BoxLine::Any);
    let without = render_task(CONDUCTIVITY, BoxLine::None);
    assert_eq!(render_task(CONDUCTIVITY, BoxLine::Choice), with);
    assert_eq!(
        with,
        format!(
            "{without}\nBoxes: If it is electrically conductive, place it in the green box. \
             If it is electrically nonconductive, place it in the blue box."
        )
    );
    let find = "Your task is to find a(n) animal. First, focus on the thing. Then, move it to the red box in the kitchen.";
    assert!(render_task(find, BoxLine::Any).ends_with("\nBoxes: Then, move it to the red box in the kitchen."));
    // One box is no choice between boxes.
    assert_eq!(render_task(find, BoxLine::Choice), render_task(find, BoxLine::None));
    // A task that names no box (nor a boxer) gets no line.
    for task in [SCI_TASK, "Focus on the boxer."] {
        assert_eq!(render_task(task, BoxLine::Any), render_task(task, BoxLine::None));
    }
}
