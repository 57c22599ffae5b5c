//! A hand-coded ALFWorld expert that plays from what a player observes.
//!
//! The expert reads the intro (the receptacles of the room and the task
//! sentence), then each step's feedback and admissible commands. It never
//! looks at the game's PDDL state, its walkthrough or its file. Like ALFWorld's
//! hand-coded expert it works through subgoals per task type:
//!
//! * pick: find the object, take it, bring it to a receptacle of the goal type
//!   (opening that first when it is closed) and put it there;
//! * clean / heat / cool: the same, with a stop at a sinkbasin / microwave /
//!   fridge on the way;
//! * pick_two: the same twice, both objects into one receptacle;
//! * look: find the object, take it, find a lamp of the named type, turn it on.
//!
//! Finding visits receptacles most likely first, by a small prior of where
//! each object type usually lies ([`PRIORS`]), weighed against the steps a
//! visit costs (going there, opening it). It remembers everything seen:
//! which objects lie where (from the feedback and from the `take` commands
//! admissible at a location), which receptacles are searched, which objects
//! it already picked up or placed, which receptacles share its location (those
//! `go to` is not admissible for) and where the lamps are.

use std::path::Path;
use std::sync::Arc;

use rlvmr_core::{Env, EnvError};

use crate::data::{AlfworldData, DataError};
use crate::env::{load_game, AlfworldEnv};
use crate::task::{Split, TaskSpec, TaskType};

/// A parsed task: what to do with which object type, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Task {
    pub kind: TaskType,
    /// The object type, as the game names objects (`alarmclock`).
    pub object: String,
    /// The goal receptacle type (`diningtable`); for look tasks the lamp type (`desklamp`).
    pub target: String,
}

impl Task {
    /// The task a folder name gives (the fallback when the sentence does not parse).
    pub fn from_spec(spec: &TaskSpec) -> Task {
        Task { kind: spec.task_type, object: spec.object.to_lowercase(), target: spec.parent.to_lowercase() }
    }

    /// The receptacle type that heats, cools or cleans, for the task types that need one.
    fn appliance(&self) -> Option<(&'static str, &'static [&'static str])> {
        match self.kind {
            TaskType::PickHeat => Some(("heat", &["microwave"])),
            TaskType::PickCool => Some(("cool", &["fridge"])),
            TaskType::PickClean => Some(("clean", &["sinkbasin", "sink"])),
            _ => None,
        }
    }

    fn needed(&self) -> usize {
        if self.kind == TaskType::PickTwo {
            2
        } else {
            1
        }
    }
}

/// Parses an ALFWorld task sentence (with or without `Your task is to: `).
///
/// The templates (ALFWorld's, all of them found in the 2.1.1 data):
/// * pick: `put a {o} in {r}.`, `put some {o} on {r}.`
/// * clean: `put a clean {o} in {r}.`, `clean some {o} and put it in {r}.`
/// * heat: `put a hot {o} in {r}.`, `heat some {o} and put it in {r}.`
/// * cool: `put a cool {o} in {r}.`, `cool some {o} and put it in {r}.`
/// * pick_two: `put two {o} in {r}.`, `find two {o} and put them in {r}.`
/// * look: `look at {o} under the {lamp}.`, `examine the {o} with the {lamp}.`
///
/// Articles (`a`, `an`, `some`, `the`) and the prepositions `in`/`on` are
/// accepted in every template.
pub fn parse_task(sentence: &str) -> Option<Task> {
    let s = sentence.rsplit("Your task is to:").next().unwrap_or(sentence);
    let s = s.trim().trim_end_matches('.').trim().to_lowercase();
    let words: Vec<&str> = s.split_whitespace().collect();
    let s = words.join(" ");
    let task = |kind: TaskType, object: &str, target: &str| -> Option<Task> {
        let object = strip_article(object.trim());
        let target = strip_article(target.trim());
        if object.is_empty() || target.is_empty() {
            return None;
        }
        Some(Task { kind, object: object.to_string(), target: target.to_string() })
    };
    let split_in = |rest: &str| -> Option<(String, String)> {
        let idx = rest.rfind(" in ").map(|i| (i, 4)).or_else(|| rest.rfind(" on ").map(|i| (i, 4)))?;
        Some((rest[..idx.0].to_string(), rest[idx.0 + idx.1..].to_string()))
    };
    // look tasks
    if let Some(rest) = s.strip_prefix("look at ") {
        let (o, l) = rest.split_once(" under ")?;
        return task(TaskType::LookAtInLight, o, l);
    }
    if let Some(rest) = s.strip_prefix("examine ") {
        let (o, l) = rest.split_once(" with ")?;
        return task(TaskType::LookAtInLight, o, l);
    }
    // "<verb> some {o} and put it in {r}" / "find two {o} and put them in {r}"
    for (verb, kind) in [("clean", TaskType::PickClean), ("heat", TaskType::PickHeat), ("cool", TaskType::PickCool), ("find", TaskType::PickTwo)] {
        if let Some(rest) = s.strip_prefix(verb).and_then(|r| r.strip_prefix(' ')) {
            let (o, r) = rest.split_once(" and put ")?;
            let r = r.strip_prefix("it ").or_else(|| r.strip_prefix("them ")).unwrap_or(r);
            let r = r.strip_prefix("in ").or_else(|| r.strip_prefix("on ")).unwrap_or(r);
            if kind == TaskType::PickTwo {
                let o = o.strip_prefix("two ")?;
                return task(kind, o, r);
            }
            return task(kind, o, r);
        }
    }
    // "put ..." forms
    let rest = s.strip_prefix("put ")?;
    let (o, r) = split_in(rest)?;
    if let Some(o) = o.strip_prefix("two ") {
        return task(TaskType::PickTwo, o, &r);
    }
    let o = strip_article(&o);
    for (adj, kind) in [("clean ", TaskType::PickClean), ("hot ", TaskType::PickHeat), ("cool ", TaskType::PickCool), ("cold ", TaskType::PickCool)] {
        if let Some(o) = o.strip_prefix(adj) {
            return task(kind, o, &r);
        }
    }
    task(TaskType::PickAndPlace, o, &r)
}

fn strip_article(s: &str) -> &str {
    for a in ["a ", "an ", "some ", "the "] {
        if let Some(rest) = s.strip_prefix(a) {
            return rest.trim();
        }
    }
    s.trim()
}

/// The type of an object or receptacle name: `cabinet 12` → `cabinet`.
pub fn kind_of(name: &str) -> &str {
    match name.rsplit_once(' ') {
        Some((head, num)) if !num.is_empty() && num.chars().all(|c| c.is_ascii_digit()) => head,
        _ => name.trim_end(),
    }
}

/// The number of a name: `cabinet 12` → 12 (0 when it has none).
fn number_of(name: &str) -> u32 {
    name.rsplit_once(' ').and_then(|(_, n)| n.parse().ok()).unwrap_or(0)
}

/// Where object types usually lie: object type → (receptacle type, percent
/// chance that one receptacle of that type holds one). Written from a study of
/// the train split's initial states (the share of receptacles of each type
/// holding the task object, smoothed); `desklamp` is the lamp of look tasks.
/// Receptacle types not listed get [`UNLISTED`].
#[rustfmt::skip]
pub const PRIORS: &[(&str, &[(&str, u8)])] = &[
    ("alarmclock", &[("desk", 51), ("sidetable", 49), ("dresser", 42), ("diningtable", 17), ("shelf", 14)]),
    ("apple", &[("sidetable", 47), ("diningtable", 45), ("garbagecan", 29), ("countertop", 26), ("fridge", 22), ("microwave", 21), ("sinkbasin", 14)]),
    ("book", &[("bed", 60), ("desk", 47), ("coffeetable", 38), ("dresser", 36), ("diningtable", 31), ("armchair", 18), ("cabinet", 16), ("sidetable", 12), ("sofa", 8), ("drawer", 3), ("shelf", 2)]),
    ("bowl", &[("desk", 56), ("diningtable", 44), ("dresser", 35), ("tvstand", 25), ("countertop", 24), ("shelf", 19), ("sidetable", 17), ("fridge", 15), ("microwave", 8), ("cabinet", 6), ("sinkbasin", 4)]),
    ("box", &[("sofa", 36), ("coffeetable", 33), ("diningtable", 24), ("tvstand", 19), ("dresser", 10), ("sidetable", 7), ("cabinet", 6), ("armchair", 2)]),
    ("bread", &[("diningtable", 57), ("countertop", 40), ("fridge", 10), ("garbagecan", 8), ("microwave", 2)]),
    ("butterknife", &[("countertop", 46), ("diningtable", 35), ("sidetable", 12), ("sinkbasin", 3), ("drawer", 2)]),
    ("candle", &[("countertop", 66), ("toilet", 53), ("sidetable", 25), ("shelf", 22), ("dresser", 17), ("cabinet", 7), ("drawer", 7)]),
    ("cd", &[("diningtable", 72), ("desk", 61), ("dresser", 58), ("sidetable", 28), ("armchair", 24), ("cabinet", 17), ("garbagecan", 13), ("drawer", 6), ("safe", 5), ("shelf", 3)]),
    ("cellphone", &[("coffeetable", 64), ("desk", 43), ("bed", 42), ("dresser", 40), ("diningtable", 37), ("armchair", 27), ("sofa", 23), ("sidetable", 21), ("safe", 10), ("shelf", 8), ("cabinet", 2), ("drawer", 2)]),
    ("cloth", &[("bathtubbasin", 60), ("countertop", 57), ("dresser", 40), ("cart", 33), ("cabinet", 25), ("shelf", 20), ("toilet", 11), ("drawer", 5), ("sinkbasin", 3)]),
    ("creditcard", &[("dresser", 51), ("tvstand", 46), ("desk", 40), ("diningtable", 38), ("sidetable", 38), ("sofa", 37), ("coffeetable", 34), ("countertop", 22), ("armchair", 13), ("drawer", 6), ("shelf", 6)]),
    ("cup", &[("diningtable", 45), ("fridge", 37), ("countertop", 22), ("sinkbasin", 20), ("sidetable", 18), ("microwave", 12), ("shelf", 6), ("cabinet", 4)]),
    ("desklamp", &[("dresser", 43), ("sidetable", 42), ("desk", 37), ("coffeetable", 10), ("shelf", 4)]),
    ("dishsponge", &[("diningtable", 50), ("bathtubbasin", 47), ("countertop", 46), ("toilet", 27), ("cart", 24), ("garbagecan", 22), ("shelf", 21), ("drawer", 6), ("sinkbasin", 6), ("cabinet", 2)]),
    ("egg", &[("diningtable", 47), ("sidetable", 31), ("sinkbasin", 27), ("countertop", 26), ("garbagecan", 25), ("fridge", 24), ("microwave", 11)]),
    ("fork", &[("diningtable", 68), ("countertop", 37), ("sidetable", 29), ("drawer", 5)]),
    ("glassbottle", &[("diningtable", 31), ("countertop", 25), ("sinkbasin", 21), ("garbagecan", 14), ("shelf", 9), ("fridge", 7), ("cabinet", 5)]),
    ("handtowel", &[("handtowelholder", 82), ("countertop", 6)]),
    ("kettle", &[("diningtable", 34), ("stoveburner", 21), ("countertop", 20), ("cabinet", 3), ("sinkbasin", 2)]),
    ("keychain", &[("coffeetable", 51), ("diningtable", 41), ("dresser", 33), ("sidetable", 33), ("tvstand", 29), ("desk", 24), ("armchair", 20), ("safe", 19), ("ottoman", 17), ("shelf", 9), ("sofa", 9), ("drawer", 3), ("cabinet", 2)]),
    ("knife", &[("diningtable", 41), ("countertop", 39), ("sidetable", 27), ("drawer", 3)]),
    ("ladle", &[("diningtable", 68), ("countertop", 39), ("cabinet", 4), ("drawer", 3)]),
    ("laptop", &[("bed", 67), ("sofa", 43), ("diningtable", 38), ("coffeetable", 29), ("desk", 27), ("countertop", 25), ("dresser", 13), ("sidetable", 6), ("armchair", 2)]),
    ("lettuce", &[("diningtable", 59), ("sidetable", 30), ("countertop", 27), ("fridge", 14), ("garbagecan", 7), ("sinkbasin", 6)]),
    ("mug", &[("coffeemachine", 49), ("desk", 46), ("diningtable", 34), ("countertop", 29), ("sidetable", 27), ("dresser", 25), ("fridge", 21), ("sinkbasin", 12), ("microwave", 11), ("shelf", 10), ("cabinet", 3)]),
    ("newspaper", &[("diningtable", 54), ("dresser", 45), ("coffeetable", 34), ("sofa", 28), ("sidetable", 24), ("armchair", 21), ("shelf", 16), ("tvstand", 14), ("ottoman", 9), ("drawer", 1)]),
    ("pan", &[("stoveburner", 29), ("countertop", 21), ("fridge", 7), ("diningtable", 3), ("cabinet", 1)]),
    ("pen", &[("diningtable", 80), ("desk", 58), ("dresser", 44), ("coffeetable", 40), ("countertop", 40), ("sidetable", 32), ("shelf", 12), ("garbagecan", 7), ("drawer", 2)]),
    ("pencil", &[("diningtable", 50), ("dresser", 50), ("desk", 48), ("sidetable", 47), ("shelf", 11), ("garbagecan", 9), ("drawer", 4)]),
    ("peppershaker", &[("countertop", 35), ("diningtable", 34), ("shelf", 7), ("cabinet", 4), ("drawer", 3)]),
    ("pillow", &[("bed", 96), ("sofa", 69), ("armchair", 16)]),
    ("plate", &[("diningtable", 50), ("countertop", 26), ("dresser", 20), ("fridge", 20), ("tvstand", 20), ("sidetable", 15), ("sinkbasin", 9), ("coffeetable", 8), ("cabinet", 5), ("shelf", 3), ("microwave", 1)]),
    ("pot", &[("stoveburner", 32), ("diningtable", 16), ("countertop", 7), ("fridge", 4), ("sinkbasin", 3), ("shelf", 1), ("cabinet", 1)]),
    ("potato", &[("diningtable", 48), ("sidetable", 35), ("countertop", 34), ("fridge", 28), ("sinkbasin", 18), ("microwave", 17), ("garbagecan", 16)]),
    ("remotecontrol", &[("diningtable", 49), ("coffeetable", 46), ("tvstand", 36), ("dresser", 35), ("sofa", 34), ("countertop", 20), ("sidetable", 19), ("armchair", 10), ("drawer", 2), ("shelf", 2)]),
    ("saltshaker", &[("countertop", 45), ("diningtable", 31), ("sidetable", 30), ("cabinet", 8), ("shelf", 5), ("drawer", 1)]),
    ("soapbar", &[("sidetable", 70), ("countertop", 49), ("toilet", 45), ("bathtubbasin", 40), ("garbagecan", 23), ("cart", 20), ("shelf", 13), ("cabinet", 12), ("drawer", 6), ("sinkbasin", 6)]),
    ("soapbottle", &[("countertop", 53), ("dresser", 43), ("toilet", 39), ("shelf", 34), ("diningtable", 33), ("sidetable", 29), ("garbagecan", 18), ("cabinet", 15)]),
    ("spatula", &[("diningtable", 65), ("countertop", 41), ("sinkbasin", 5), ("drawer", 1)]),
    ("spoon", &[("diningtable", 45), ("countertop", 41), ("sidetable", 23), ("sinkbasin", 6), ("drawer", 4)]),
    ("spraybottle", &[("sidetable", 67), ("countertop", 56), ("toilet", 46), ("cart", 25), ("garbagecan", 20), ("shelf", 18), ("cabinet", 12), ("dresser", 8)]),
    ("statue", &[("desk", 60), ("diningtable", 55), ("sidetable", 33), ("coffeetable", 26), ("shelf", 23), ("dresser", 20), ("tvstand", 9)]),
    ("tissuebox", &[("countertop", 88), ("diningtable", 50), ("desk", 43), ("coffeetable", 31), ("tvstand", 17), ("dresser", 15), ("shelf", 12), ("toilet", 12), ("sidetable", 11), ("cabinet", 10), ("drawer", 6), ("garbagecan", 6)]),
    ("toiletpaper", &[("dresser", 60), ("countertop", 58), ("toilet", 48), ("sidetable", 30), ("shelf", 27), ("garbagecan", 25), ("toiletpaperhanger", 21), ("cart", 14), ("cabinet", 7), ("drawer", 4)]),
    ("tomato", &[("diningtable", 51), ("fridge", 35), ("sidetable", 33), ("countertop", 29), ("garbagecan", 24), ("sinkbasin", 10)]),
    ("vase", &[("dresser", 58), ("diningtable", 36), ("coffeetable", 31), ("tvstand", 31), ("shelf", 28), ("desk", 22), ("sidetable", 15), ("cabinet", 12)]),
    ("watch", &[("tvstand", 50), ("diningtable", 39), ("sidetable", 31), ("dresser", 25), ("coffeetable", 24), ("desk", 14), ("drawer", 6), ("shelf", 6)]),
    ("wateringcan", &[("coffeetable", 60)]),
    ("winebottle", &[("diningtable", 47), ("countertop", 30), ("garbagecan", 26), ("shelf", 7), ("fridge", 3), ("cabinet", 2)]),
];

/// The chance, in percent, given to receptacle types a prior does not list.
pub const UNLISTED: f64 = 0.5;

/// The prior for object types [`PRIORS`] does not know: open surfaces first.
const GENERIC: &[(&str, u8)] = &[
    ("diningtable", 30),
    ("countertop", 30),
    ("desk", 30),
    ("sidetable", 30),
    ("dresser", 30),
    ("coffeetable", 30),
    ("tvstand", 20),
    ("shelf", 10),
    ("bed", 10),
    ("sofa", 10),
    ("armchair", 10),
];

/// The receptacle kinds an expert searching for its appliance tries
/// ([`Expert::searching_appliance`]): the fixed appliances and basins of ALFWorld's rooms,
/// the three that heat, cool and clean among them.
pub const APPLIANCE_KINDS: &[&str] =
    &["microwave", "fridge", "sinkbasin", "stoveburner", "toaster", "coffeemachine", "bathtubbasin"];

/// Receptacle types that are usually closed (opening one costs a step).
const OPENABLE: &[&str] = &["cabinet", "drawer", "fridge", "microwave", "safe", "box"];

fn prior(object: &str, receptacle: &str) -> f64 {
    let table = PRIORS.iter().find(|(o, _)| *o == object).map(|(_, t)| *t).unwrap_or(GENERIC);
    table.iter().find(|(r, _)| *r == receptacle).map(|&(_, p)| f64::from(p)).unwrap_or(UNLISTED)
}

/// What the expert knows about one receptacle.
#[derive(Debug, Clone)]
struct Rec {
    name: String,
    kind: String,
    /// `Some(true)` when seen closed, `Some(false)` when seen open (or never closed).
    closed: Option<bool>,
    /// The objects last seen in it; `None` until seen.
    contents: Option<Vec<String>>,
    /// Its contents are known (or it was given up on).
    searched: bool,
}

/// Why an expert could not start.
#[derive(Debug, thiserror::Error)]
pub enum ExpertError {
    #[error("the intro has no task sentence the expert understands: {0:?}")]
    UnknownTask(String),
    #[error("the intro lists no receptacles")]
    NoReceptacles,
    #[error("environment: {0}")]
    Env(#[from] EnvError),
    #[error("data: {0}")]
    Data(#[from] DataError),
    #[error("game {path}: {source}")]
    Game {
        path: String,
        #[source]
        source: textworld::GameError,
    },
}

/// The hand-coded expert for one episode. Feed it every observation with
/// [`Expert::act`]; it answers the next command.
#[derive(Debug, Clone)]
pub struct Expert {
    task: Task,
    recs: Vec<Rec>,
    /// Receptacles at the agent's location (those `go to` is not admissible for).
    here: Vec<usize>,
    holding: Option<String>,
    /// The held object has been heated / cooled / cleaned.
    processed: bool,
    /// Objects of the task type now in the goal receptacle.
    placed: Vec<String>,
    /// The goal receptacle once chosen (pick_two: where the first object went).
    goal_rec: Option<usize>,
    /// Every object picked up so far (never taken again, wherever else it is listed).
    taken: Vec<String>,
    /// Receptacles where a lamp of the task's type was seen.
    lamps: Vec<usize>,
    /// Receptacles at whose location a lamp was turned on.
    lamp_on_at: Vec<usize>,
    /// A receptacle the expert went to in order to search it, to open next.
    pending_open: Option<usize>,
    /// Receptacles the expert failed to act on (never chosen again as a goal).
    bad_goal: Vec<usize>,
    last: Option<String>,
    resets: usize,
    /// Set when the expert searches for its task's appliance instead of knowing it: the
    /// receptacle kinds to try, in order ([`Expert::searching_appliance`]).
    appliance_order: Option<Vec<String>>,
    /// Receptacle kinds where the held object stood without the task's command admissible.
    appliances_tried: Vec<String>,
}

impl Expert {
    /// Starts an episode from the intro text (the receptacle list and the task sentence).
    pub fn new(intro: &str) -> Result<Expert, ExpertError> {
        let sentence = intro.rsplit("Your task is to:").next().filter(|_| intro.contains("Your task is to:")).unwrap_or("");
        let task = parse_task(sentence).ok_or_else(|| ExpertError::UnknownTask(sentence.trim().to_string()))?;
        Expert::with_task(intro, task)
    }

    /// Starts an episode with a task given from elsewhere (the folder name's fallback).
    pub fn with_task(intro: &str, task: Task) -> Result<Expert, ExpertError> {
        let names = intro_receptacles(intro);
        if names.is_empty() {
            return Err(ExpertError::NoReceptacles);
        }
        let recs = names.into_iter().map(|name| Rec { kind: kind_of(&name).to_string(), name, closed: None, contents: None, searched: false }).collect();
        Ok(Expert {
            task,
            recs,
            here: Vec::new(),
            holding: None,
            processed: false,
            placed: Vec::new(),
            goal_rec: None,
            taken: Vec::new(),
            lamps: Vec::new(),
            lamp_on_at: Vec::new(),
            pending_open: None,
            bad_goal: Vec::new(),
            last: None,
            resets: 0,
            appliance_order: None,
            appliances_tried: Vec::new(),
        })
    }

    /// Makes a heat, cool or clean expert search for the appliance as it searches for the
    /// object: holding the object, it goes to receptacles of the kinds in `order`, kind by
    /// kind, until the task's command (`heat apple 1 with ...`) is admissible where it
    /// stands, and only then falls back to the appliance it knows. Demonstrations of that
    /// search show a step a model can carry to a task whose appliance it never saw.
    pub fn searching_appliance(mut self, order: Vec<String>) -> Expert {
        self.appliance_order = Some(order);
        self
    }

    pub fn task(&self) -> &Task {
        &self.task
    }

    /// The next command, given the latest observation (the intro on the first
    /// call) and the admissible commands. Always one of `admissible` when that
    /// list is not empty.
    pub fn act(&mut self, observation: &str, admissible: &[String]) -> String {
        self.observe(observation, admissible);
        let command = self.decide(admissible);
        let command = if admissible.is_empty() || admissible.contains(&command) {
            command
        } else {
            // Should not happen: every choice is checked against the list.
            admissible.iter().find(|a| a.as_str() == "look").or(admissible.first()).cloned().unwrap_or(command)
        };
        self.last = Some(command.clone());
        command
    }

    fn rec_index(&self, name: &str) -> Option<usize> {
        let name = name.trim();
        self.recs.iter().position(|r| r.name == name)
    }

    fn is_task_object(&self, name: &str) -> bool {
        kind_of(name) == self.task.object
    }

    fn set_contents(&mut self, r: usize, objects: Vec<String>) {
        let task_kind = self.task.kind;
        let is_goal_kind = self.recs[r].kind == self.task.target;
        for o in &objects {
            if kind_of(o) == self.task.target && task_kind == TaskType::LookAtInLight && !self.lamps.contains(&r) {
                self.lamps.push(r);
            }
        }
        // pick_two: an object of the task type already in a goal-type receptacle counts.
        if task_kind == TaskType::PickTwo && is_goal_kind && self.goal_rec.is_none() && !self.bad_goal.contains(&r) {
            if let Some(o) = objects.iter().find(|o| self.is_task_object(o) && !self.taken.contains(o)) {
                self.goal_rec = Some(r);
                self.placed.push(o.clone());
            }
        }
        let rec = &mut self.recs[r];
        rec.contents = Some(objects);
        rec.searched = true;
    }

    fn observe(&mut self, obs: &str, admissible: &[String]) {
        let failed = obs.trim() == "Nothing happens.";
        let last = self.last.clone().unwrap_or_default();

        // Where we are: the receptacles `go to` is not admissible for.
        if !admissible.is_empty() {
            self.here = (0..self.recs.len()).filter(|&i| !admissible.iter().any(|a| a.strip_prefix("go to ") == Some(self.recs[i].name.as_str()))).collect();
        }

        if !failed {
            // Views of receptacles in the feedback.
            for (name, view) in receptacle_views(obs) {
                let Some(r) = self.rec_index(&name) else { continue };
                match view {
                    View::Closed => {
                        self.recs[r].closed = Some(true);
                    }
                    View::Open(objects) => {
                        self.recs[r].closed = Some(false);
                        self.set_contents(r, objects);
                    }
                    View::Surface(objects) => {
                        self.recs[r].closed = Some(false);
                        self.set_contents(r, objects);
                    }
                }
            }
            if let Some(rest) = obs.strip_prefix("You pick up the ") {
                if let Some((o, r)) = rest.trim_end_matches('.').split_once(" from the ") {
                    self.holding = Some(o.to_string());
                    self.processed = false;
                    if !self.taken.iter().any(|t| t == o) {
                        self.taken.push(o.to_string());
                    }
                    if let Some(r) = self.rec_index(r) {
                        if let Some(c) = self.recs[r].contents.as_mut() {
                            c.retain(|x| x != o);
                        }
                    }
                }
            } else if let Some(rest) = obs.strip_prefix("You move the ") {
                if let Some((o, r)) = rest.trim_end_matches('.').split_once(" to the ") {
                    self.holding = None;
                    if let Some(r) = self.rec_index(r) {
                        if let Some(c) = self.recs[r].contents.as_mut() {
                            c.push(o.to_string());
                        }
                        if self.recs[r].kind == self.task.target && kind_of(o) == self.task.object {
                            if self.goal_rec.is_none() {
                                self.goal_rec = Some(r);
                            }
                            if self.goal_rec == Some(r) && !self.placed.iter().any(|p| p == o) {
                                self.placed.push(o.to_string());
                            }
                        }
                    }
                }
            } else if obs.starts_with("You heat the ") || obs.starts_with("You cool the ") || obs.starts_with("You clean the ") {
                self.processed = true;
            } else if obs.starts_with("You turn on the ") {
                for &r in &self.here.clone() {
                    if !self.lamp_on_at.contains(&r) {
                        self.lamp_on_at.push(r);
                    }
                }
            } else if let Some(rest) = obs.strip_prefix("You close the ") {
                if let Some(r) = self.rec_index(rest.trim_end_matches('.')) {
                    self.recs[r].closed = Some(true);
                }
            }
        } else if let Some(name) = last.strip_prefix("go to ") {
            // Could not go: treat it as here.
            if let Some(r) = self.rec_index(name) {
                if !self.here.contains(&r) {
                    self.here.push(r);
                }
            }
        }

        // What the admissible commands tell about this location.
        let hands_empty = self.holding.is_none();
        let here = self.here.clone();
        for r in here {
            let name = self.recs[r].name.clone();
            let can_open = admissible.iter().any(|a| a.strip_prefix("open ") == Some(name.as_str()));
            if can_open {
                self.recs[r].closed = Some(true);
                continue;
            }
            if admissible.iter().any(|a| a.strip_prefix("close ") == Some(name.as_str())) {
                self.recs[r].closed = Some(false);
            }
            if hands_empty && !admissible.is_empty() {
                // Every pickable object of an accessible receptacle here has a `take` command.
                let suffix = format!(" from {name}");
                let takeable: Vec<String> =
                    admissible.iter().filter_map(|a| a.strip_prefix("take ").and_then(|t| t.strip_suffix(suffix.as_str()))).map(str::to_string).collect();
                let mut objects: Vec<String> = self.recs[r].contents.clone().unwrap_or_default();
                // Drop task objects that are not takeable after all; add the ones listed.
                objects.retain(|o| !self.is_task_object(o) || takeable.contains(o));
                for t in takeable {
                    if !objects.contains(&t) {
                        objects.push(t);
                    }
                }
                self.set_contents(r, objects);
            }
        }
        // Lamps usable here.
        let lamp_prefix = format!("use {} ", self.task.target);
        if self.task.kind == TaskType::LookAtInLight && admissible.iter().any(|a| a.starts_with(lamp_prefix.as_str())) {
            if let Some(&r) = self.here.first() {
                if !self.lamps.iter().any(|l| self.here.contains(l)) {
                    self.lamps.push(r);
                }
            }
        }
        if self.pending_open.is_some_and(|r| !self.here.contains(&r) || self.recs[r].closed != Some(true)) {
            self.pending_open = None;
        }
    }

    fn has(admissible: &[String], command: &str) -> bool {
        admissible.iter().any(|a| a == command)
    }

    fn decide(&mut self, admissible: &[String]) -> String {
        if let Some(c) = self.decide_inner(admissible) {
            return c;
        }
        // Nothing left to search: search everything again once or twice.
        if self.resets < 2 {
            self.resets += 1;
            for r in &mut self.recs {
                r.searched = false;
            }
            self.bad_goal.clear();
            if let Some(c) = self.decide_inner(admissible) {
                return c;
            }
        }
        "look".to_string()
    }

    fn decide_inner(&mut self, admissible: &[String]) -> Option<String> {
        let task = self.task.clone();
        if let Some(held) = self.holding.clone() {
            if !self.is_task_object(&held) {
                // Not ours (should not happen): put it down anywhere here.
                if let Some(c) = admissible.iter().find(|a| a.starts_with(&format!("move {held} to "))) {
                    return Some(c.clone());
                }
                return self.search_step(admissible, "", false);
            }
            if task.kind == TaskType::LookAtInLight {
                return self.look_with(admissible);
            }
            if let Some((verb, appliances)) = task.appliance() {
                if !self.processed {
                    let prefix = format!("{verb} {held} with ");
                    if let Some(c) = admissible.iter().find(|a| a.starts_with(prefix.as_str())) {
                        return Some(c.clone());
                    }
                    if let Some(go) = self.next_appliance_to_try(admissible) {
                        return Some(go);
                    }
                    let go = (0..self.recs.len())
                        .filter(|&i| appliances.contains(&self.recs[i].kind.as_str()))
                        .map(|i| format!("go to {}", self.recs[i].name))
                        .find(|c| Self::has(admissible, c));
                    if go.is_some() {
                        return go;
                    }
                    // No appliance: try the goal anyway.
                }
            }
            return self.place(admissible, &held);
        }

        // Hands empty.
        if self.placed.len() >= task.needed() && task.kind != TaskType::LookAtInLight {
            // Done by our count but not won: forget the goal and try again.
            self.placed.clear();
            if let Some(g) = self.goal_rec.take() {
                self.bad_goal.push(g);
            }
        }
        if task.kind == TaskType::LookAtInLight {
            // Turn a lamp on while passing by.
            if self.lamp_on_at.is_empty() {
                let prefix = format!("use {} ", task.target);
                if let Some(c) = admissible.iter().find(|a| a.starts_with(prefix.as_str())) {
                    return Some(c.clone());
                }
            }
        }
        // Take a task object here.
        let goal = self.goal_rec;
        for a in admissible {
            let Some(rest) = a.strip_prefix("take ") else { continue };
            let Some((o, r)) = rest.split_once(" from ") else { continue };
            if !self.is_task_object(o) || self.taken.iter().any(|t| t == o) || self.placed.iter().any(|p| p == o) {
                continue;
            }
            if goal.is_some() && self.rec_index(r) == goal {
                continue;
            }
            return Some(a.clone());
        }
        // A task object seen elsewhere.
        if let Some(r) = self.known_object_location() {
            if self.here.contains(&r) {
                if self.recs[r].closed == Some(true) {
                    let c = format!("open {}", self.recs[r].name);
                    if Self::has(admissible, &c) {
                        return Some(c);
                    }
                }
                // Not takeable after all.
                let object = self.task.object.clone();
                if let Some(c) = self.recs[r].contents.as_mut() {
                    c.retain(|o| kind_of(o) != object);
                }
            } else {
                let c = format!("go to {}", self.recs[r].name);
                if Self::has(admissible, &c) {
                    return Some(c);
                }
            }
        }
        let object = task.object.clone();
        self.search_step(admissible, &object, true)
    }

    /// Searching for the appliance: the `go to` of the first receptacle of the next kind
    /// not tried yet (the kinds standing here did not offer the task's command; one
    /// receptacle of a kind answers for all of them).
    fn next_appliance_to_try(&mut self, admissible: &[String]) -> Option<String> {
        let order = self.appliance_order.as_ref()?;
        for &r in &self.here {
            if !self.appliances_tried.contains(&self.recs[r].kind) {
                self.appliances_tried.push(self.recs[r].kind.clone());
            }
        }
        order
            .iter()
            .filter(|kind| !self.appliances_tried.contains(kind))
            .filter_map(|kind| self.recs.iter().filter(|r| r.kind == *kind).min_by_key(|r| number_of(&r.name)))
            .map(|r| format!("go to {}", r.name))
            .find(|c| Self::has(admissible, c))
    }

    /// A receptacle where an untaken task object was seen.
    fn known_object_location(&self) -> Option<usize> {
        let mut best: Option<(f64, usize)> = None;
        for (i, rec) in self.recs.iter().enumerate() {
            if Some(i) == self.goal_rec {
                continue;
            }
            let Some(c) = &rec.contents else { continue };
            let n = c.iter().filter(|o| self.is_task_object(o) && !self.taken.contains(o) && !self.placed.contains(o)).count();
            if n == 0 {
                continue;
            }
            let cost = self.visit_cost(i);
            let score = -cost;
            if best.is_none_or(|(s, _)| score > s) {
                best = Some((score, i));
            }
        }
        best.map(|(_, i)| i)
    }

    /// Steps to see inside receptacle `r`: going there and opening it.
    fn visit_cost(&self, r: usize) -> f64 {
        let rec = &self.recs[r];
        let travel = if self.here.contains(&r) { 0.0 } else { 1.0 };
        let open = match rec.closed {
            Some(true) => 1.0,
            Some(false) => 0.0,
            None => {
                if OPENABLE.contains(&rec.kind.as_str()) {
                    1.0
                } else {
                    0.0
                }
            }
        };
        f64::max(travel + open, 0.5)
    }

    /// One step of searching for `what` (an object type or a lamp type).
    fn search_step(&mut self, admissible: &[String], what: &str, for_object: bool) -> Option<String> {
        if let Some(r) = self.pending_open {
            let c = format!("open {}", self.recs[r].name);
            self.pending_open = None;
            if Self::has(admissible, &c) {
                return Some(c);
            }
        }
        let hands_full = self.holding.is_some();
        let mut best: Option<(f64, u32, usize)> = None;
        for i in 0..self.recs.len() {
            let rec = &self.recs[i];
            if rec.searched {
                continue;
            }
            let mut p = prior(what, &rec.kind);
            if for_object && rec.kind == self.task.target && self.task.kind != TaskType::PickTwo {
                // A goal-type receptacle never holds the object at the start of pick tasks.
                p *= if self.task.kind == TaskType::PickAndPlace { 0.05 } else { 0.5 };
            }
            let score = p / self.visit_cost(i);
            // Ties go to the lowest-numbered receptacle.
            let number = number_of(&rec.name);
            if best.is_none_or(|(s, n, _)| score > s || score == s && number < n) {
                best = Some((score, number, i));
            }
        }
        let (_, _, r) = best?;
        let name = self.recs[r].name.clone();
        if self.here.contains(&r) {
            let open = format!("open {name}");
            if Self::has(admissible, &open) {
                return Some(open);
            }
            let examine = format!("examine {name}");
            if hands_full && Self::has(admissible, &examine) && self.recs[r].contents.is_none() {
                self.recs[r].searched = true;
                return Some(examine);
            }
            // Nothing more to learn here.
            self.recs[r].searched = true;
            return self.search_step(admissible, what, for_object);
        }
        let go = format!("go to {name}");
        if Self::has(admissible, &go) {
            if self.recs[r].closed != Some(false) && OPENABLE.contains(&self.recs[r].kind.as_str()) || self.recs[r].closed == Some(true) {
                self.pending_open = Some(r);
            }
            return Some(go);
        }
        self.recs[r].searched = true;
        self.search_step(admissible, what, for_object)
    }

    /// Holding the task object: bring it to the goal receptacle.
    fn place(&mut self, admissible: &[String], held: &str) -> Option<String> {
        let target = self.task.target.clone();
        // Put it here when possible.
        let mut choices: Vec<usize> = Vec::new();
        if let Some(g) = self.goal_rec {
            choices.push(g);
        } else {
            choices.extend((0..self.recs.len()).filter(|&i| self.recs[i].kind == target && !self.bad_goal.contains(&i)));
        }
        for &r in &choices {
            let c = format!("move {held} to {}", self.recs[r].name);
            if Self::has(admissible, &c) {
                return Some(c);
            }
        }
        // A goal receptacle here that is closed.
        for &r in &choices {
            if self.here.contains(&r) {
                let c = format!("open {}", self.recs[r].name);
                if Self::has(admissible, &c) {
                    return Some(c);
                }
                // Here, open, yet no move: give it up.
                if self.goal_rec == Some(r) {
                    self.goal_rec = None;
                    self.placed.clear();
                }
                self.bad_goal.push(r);
            }
        }
        choices.retain(|r| !self.bad_goal.contains(r));
        let best = choices.iter().copied().min_by(|&a, &b| {
            let ca = self.visit_cost(a);
            let cb = self.visit_cost(b);
            ca.partial_cmp(&cb).unwrap_or(std::cmp::Ordering::Equal)
        });
        if let Some(r) = best {
            let c = format!("go to {}", self.recs[r].name);
            if Self::has(admissible, &c) {
                return Some(c);
            }
            self.bad_goal.push(r);
            return self.place(admissible, held);
        }
        None
    }

    /// Look tasks, holding the object: turn on a lamp here, or go to one.
    fn look_with(&mut self, admissible: &[String]) -> Option<String> {
        let prefix = format!("use {} ", self.task.target);
        let lamp_on_here = self.lamp_on_at.iter().any(|r| self.here.contains(r));
        if !lamp_on_here {
            if let Some(c) = admissible.iter().find(|a| a.starts_with(prefix.as_str())) {
                return Some(c.clone());
            }
        }
        // A lamp turned on earlier, else one seen.
        let known = self.lamp_on_at.iter().chain(self.lamps.iter()).copied().find(|r| !self.here.contains(r));
        if let Some(r) = known {
            let c = format!("go to {}", self.recs[r].name);
            if Self::has(admissible, &c) {
                return Some(c);
            }
        }
        let lamp = self.task.target.clone();
        self.search_step(admissible, &lamp, false)
    }
}

/// The receptacle names the intro lists (`you see a cabinet 2, ..., and a toaster 1.`).
pub fn intro_receptacles(intro: &str) -> Vec<String> {
    let Some((_, rest)) = intro.split_once("you see ") else { return Vec::new() };
    let list = rest.split(".\n").next().unwrap_or(rest);
    let list = list.split("\n").next().unwrap_or(list);
    parse_list(list)
}

/// Parses `a cd 1, a pen 2, and a book 1` (or `nothing`) into names.
pub fn parse_list(list: &str) -> Vec<String> {
    let list = list.trim().trim_end_matches('.').trim();
    if list.is_empty() || list == "nothing" {
        return Vec::new();
    }
    let list = list.replace(", and ", ", ").replace(" and ", ", ");
    list.split(", ").map(|item| strip_article(item.trim()).to_string()).filter(|s| !s.is_empty()).collect()
}

#[derive(Debug, Clone, PartialEq)]
enum View {
    Closed,
    Open(Vec<String>),
    Surface(Vec<String>),
}

/// The receptacle descriptions in a feedback text.
fn receptacle_views(obs: &str) -> Vec<(String, View)> {
    let mut views = Vec::new();
    // "On the R, you see LIST."
    let mut rest = obs;
    while let Some(i) = rest.find("On the ") {
        let after = &rest[i + "On the ".len()..];
        let Some((name, tail)) = after.split_once(", you see ") else { break };
        let list = tail.split('.').next().unwrap_or("");
        views.push((name.to_string(), View::Surface(parse_list(list))));
        rest = tail;
    }
    // "The R is open. In it, you see LIST." / "The R is closed."
    let mut rest = obs;
    while let Some(i) = rest.find("The ") {
        let after = &rest[i + "The ".len()..];
        if let Some(j) = after.find(" is open. In it, you see ") {
            let name = &after[..j];
            if !name.contains('.') {
                let tail = &after[j + " is open. In it, you see ".len()..];
                let list = tail.split('.').next().unwrap_or("");
                views.push((name.to_string(), View::Open(parse_list(list))));
            }
        }
        if let Some(j) = after.find(" is closed.") {
            let name = &after[..j];
            if !name.contains('.') {
                views.push((name.to_string(), View::Closed));
            }
        }
        rest = after;
    }
    views
}

/// How one episode went.
#[derive(Debug, Clone, PartialEq)]
pub struct EpisodeOutcome {
    pub won: bool,
    /// Commands played.
    pub steps: usize,
    pub commands: Vec<String>,
    /// The task came from the folder name, the sentence did not parse.
    pub fallback: bool,
}

/// Plays one episode of `env` with the expert (resetting it first), for at
/// most `max_steps` commands.
pub fn run_episode(env: &mut AlfworldEnv, max_steps: usize) -> Result<EpisodeOutcome, ExpertError> {
    run_episode_with(env, max_steps, None)
}

/// [`run_episode`], falling back to `fallback` when the task sentence does not parse.
pub fn run_episode_with(env: &mut AlfworldEnv, max_steps: usize, fallback: Option<&TaskSpec>) -> Result<EpisodeOutcome, ExpertError> {
    let first = env.reset()?;
    let (mut expert, used_fallback) = match Expert::new(&first.observation) {
        Ok(e) => (e, false),
        Err(ExpertError::UnknownTask(s)) => match fallback {
            Some(spec) => (Expert::with_task(&first.observation, Task::from_spec(spec))?, true),
            None => return Err(ExpertError::UnknownTask(s)),
        },
        Err(e) => return Err(e),
    };
    let mut result = first;
    let mut commands = Vec::new();
    while !result.done && commands.len() < max_steps {
        let admissible = result.admissible_actions.clone().unwrap_or_default();
        let command = expert.act(&result.observation, &admissible);
        result = env.step(&command)?;
        commands.push(command);
    }
    Ok(EpisodeOutcome { won: result.won, steps: commands.len(), commands, fallback: used_fallback })
}

/// One row of an [`ExpertReport`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TypeStats {
    pub games: usize,
    pub wins: usize,
    /// Steps summed over won games.
    pub steps_won: usize,
    /// Steps summed over all games.
    pub steps_all: usize,
}

impl TypeStats {
    pub fn success(&self) -> f64 {
        if self.games == 0 {
            0.0
        } else {
            self.wins as f64 / self.games as f64
        }
    }
    pub fn mean_steps_won(&self) -> f64 {
        if self.wins == 0 {
            0.0
        } else {
            self.steps_won as f64 / self.wins as f64
        }
    }
    pub fn mean_steps_all(&self) -> f64 {
        if self.games == 0 {
            0.0
        } else {
            self.steps_all as f64 / self.games as f64
        }
    }
    fn add(&mut self, o: &EpisodeOutcome) {
        self.games += 1;
        self.steps_all += o.steps;
        if o.won {
            self.wins += 1;
            self.steps_won += o.steps;
        }
    }
}

/// The expert's results on a split.
#[derive(Debug, Clone, PartialEq)]
pub struct ExpertReport {
    pub split: Split,
    pub max_steps: usize,
    /// Per task type, in [`TaskType::ALL`] order.
    pub per_type: Vec<(TaskType, TypeStats)>,
    pub all: TypeStats,
    /// Games whose task came from the folder name.
    pub fallbacks: usize,
    /// Paths of the games not won.
    pub failures: Vec<String>,
}

impl ExpertReport {
    pub fn stats(&self, task_type: TaskType) -> Option<&TypeStats> {
        self.per_type.iter().find(|(t, _)| *t == task_type).map(|(_, s)| s)
    }

    /// A markdown table: type | games | won | success % | mean steps (won) | mean steps (all).
    pub fn table(&self) -> String {
        let mut out = String::from("| type | games | won | success % | mean steps (won) | mean steps (all) |\n|---|---:|---:|---:|---:|---:|\n");
        let row = |name: &str, s: &TypeStats| {
            format!("| {name} | {} | {} | {:.1} | {:.2} | {:.2} |\n", s.games, s.wins, 100.0 * s.success(), s.mean_steps_won(), s.mean_steps_all())
        };
        for (t, s) in &self.per_type {
            out.push_str(&row(t.short(), s));
        }
        out.push_str(&row("all", &self.all));
        out
    }
}

/// Plays every game of `split` with the expert.
pub fn evaluate(data: &AlfworldData, split: Split, max_steps: usize) -> Result<ExpertReport, ExpertError> {
    let mut per_type: Vec<(TaskType, TypeStats)> = TaskType::ALL.iter().map(|&t| (t, TypeStats::default())).collect();
    let mut all = TypeStats::default();
    let mut fallbacks = 0;
    let mut failures = Vec::new();
    for entry in data.split(split) {
        let outcome = play_game(data, &entry.path, &entry.task_dir, max_steps)?;
        if outcome.fallback {
            fallbacks += 1;
        }
        if !outcome.won {
            failures.push(entry.path.clone());
        }
        all.add(&outcome);
        if let Some((_, s)) = per_type.iter_mut().find(|(t, _)| *t == entry.task_type) {
            s.add(&outcome);
        }
    }
    Ok(ExpertReport { split, max_steps, per_type, all, fallbacks, failures })
}

/// Plays one game given its path in the data (see [`crate::GameEntry::path`]).
pub fn play_game(data: &AlfworldData, path: &str, task_dir: &str, max_steps: usize) -> Result<EpisodeOutcome, ExpertError> {
    let text = data.read(path)?;
    let game = load_game(&text).map_err(|e| ExpertError::Game { path: path.to_string(), source: e })?;
    let mut env = AlfworldEnv::new(Arc::new(game)).with_max_steps(max_steps);
    let spec = TaskSpec::from_task_dir(task_dir);
    run_episode_with(&mut env, max_steps, spec.as_ref())
}

/// Evaluates a split of the data at `location` (a folder or the zip).
pub fn evaluate_at(location: &Path, split: Split, max_steps: usize) -> Result<ExpertReport, ExpertError> {
    let data = AlfworldData::open(location)?;
    evaluate(&data, split, max_steps)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(kind: TaskType, o: &str, r: &str) -> Option<Task> {
        Some(Task { kind, object: o.into(), target: r.into() })
    }

    #[test]
    fn every_template_parses() {
        use TaskType::*;
        assert_eq!(parse_task("put a book in sidetable."), t(PickAndPlace, "book", "sidetable"));
        assert_eq!(parse_task("put some spraybottle on toilet."), t(PickAndPlace, "spraybottle", "toilet"));
        assert_eq!(parse_task("put a clean lettuce in diningtable."), t(PickClean, "lettuce", "diningtable"));
        assert_eq!(parse_task("clean some butterknife and put it in countertop."), t(PickClean, "butterknife", "countertop"));
        assert_eq!(parse_task("put a hot apple in fridge."), t(PickHeat, "apple", "fridge"));
        assert_eq!(parse_task("heat some egg and put it in diningtable."), t(PickHeat, "egg", "diningtable"));
        assert_eq!(parse_task("put a cool mug in cabinet."), t(PickCool, "mug", "cabinet"));
        assert_eq!(parse_task("cool some pan and put it in stoveburner."), t(PickCool, "pan", "stoveburner"));
        assert_eq!(parse_task("put two cellphone in sofa."), t(PickTwo, "cellphone", "sofa"));
        assert_eq!(parse_task("find two pillow and put them in sofa."), t(PickTwo, "pillow", "sofa"));
        assert_eq!(parse_task("look at alarmclock under the desklamp."), t(LookAtInLight, "alarmclock", "desklamp"));
        assert_eq!(parse_task("examine the book with the desklamp."), t(LookAtInLight, "book", "desklamp"));
        assert_eq!(parse_task("Your task is to: put a clean lettuce in diningtable."), t(PickClean, "lettuce", "diningtable"));
        assert_eq!(parse_task("dance."), None);
        assert_eq!(parse_task(""), None);
    }

    fn cmds(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn acts_on_receptacles_that_share_its_location() {
        let intro = "-= Welcome to TextWorld, ALFRED! =-\n\nYou are in the middle of a room. Looking quickly around you, you see a drawer 2, a drawer 1, and a garbagecan 1.\n\nYour task is to: put a pen in garbagecan.";
        let mut e = Expert::new(intro).unwrap();
        let start = cmds(&["go to drawer 1", "go to drawer 2", "go to garbagecan 1", "help", "inventory", "look"]);
        // Drawers are likelier than the goal type; ties go to the lowest number.
        assert_eq!(e.act(intro, &start), "go to drawer 1");
        // drawer 2 shares drawer 1's location: no `go to drawer 2`; open it in place.
        let at_drawer = cmds(&["go to garbagecan 1", "open drawer 1", "open drawer 2", "look"]);
        assert_eq!(e.act("You arrive at drawer 1. The drawer 1 is closed.", &at_drawer), "open drawer 1");
        let opened = cmds(&["close drawer 1", "go to garbagecan 1", "open drawer 2", "look"]);
        assert_eq!(e.act("You open the drawer 1. The drawer 1 is open. In it, you see nothing.", &opened), "open drawer 2");
        let found = cmds(&["close drawer 1", "close drawer 2", "go to garbagecan 1", "look", "take pen 1 from drawer 2"]);
        assert_eq!(e.act("You open the drawer 2. The drawer 2 is open. In it, you see a pen 1.", &found), "take pen 1 from drawer 2");
        let holding = cmds(&["close drawer 1", "close drawer 2", "go to garbagecan 1", "look", "move pen 1 to drawer 2"]);
        assert_eq!(e.act("You pick up the pen 1 from the drawer 2.", &holding), "go to garbagecan 1");
        let at_goal = cmds(&["go to drawer 1", "go to drawer 2", "look", "move pen 1 to garbagecan 1"]);
        assert_eq!(e.act("You arrive at garbagecan 1. On the garbagecan 1, you see nothing.", &at_goal), "move pen 1 to garbagecan 1");
    }

    #[test]
    fn lists_and_names() {
        assert_eq!(parse_list("a cd 1, and a creditcard 2."), vec!["cd 1", "creditcard 2"]);
        assert_eq!(parse_list("a cd 1."), vec!["cd 1"]);
        assert_eq!(parse_list("nothing."), Vec::<String>::new());
        assert_eq!(kind_of("cabinet 12"), "cabinet");
        assert_eq!(kind_of("sinkbasin 1"), "sinkbasin");
        let intro = "-= Welcome to TextWorld, ALFRED! =-\n\nYou are in the middle of a room. Looking quickly around you, you see a cabinet 2, a cabinet 1, and a toaster 1.\n\nYour task is to: put a clean lettuce in diningtable.";
        assert_eq!(intro_receptacles(intro), vec!["cabinet 2", "cabinet 1", "toaster 1"]);
        let views = receptacle_views("You open the drawer 3. The drawer 3 is open. In it, you see a cd 1, and a creditcard 2.");
        assert_eq!(views, vec![("drawer 3".to_string(), View::Open(vec!["cd 1".into(), "creditcard 2".into()]))]);
        let views = receptacle_views("You arrive at desk 1. On the desk 1, you see a alarmclock 2, and a pen 1.");
        assert_eq!(views, vec![("desk 1".to_string(), View::Surface(vec!["alarmclock 2".into(), "pen 1".into()]))]);
        assert_eq!(receptacle_views("You arrive at drawer 3. The drawer 3 is closed."), vec![("drawer 3".to_string(), View::Closed)]);
    }
}
