//! Offline, deterministic annotation of ScienceWorld gold-path steps, the counterpart of
//! [`crate::envs::alfworld::annotate`] for ALFWorld: one tag and a one-sentence reason per step, read from
//! what the player has seen (rooms entered, rooms looked at, doors seen) and from the gold
//! path itself, which is the expert's plan.
//!
//! The rules, in order:
//! - **planning** at the first step: the plan names the path's concrete subgoals (the room
//!   to reach, the objects to take, combine, activate and focus on), each object by its
//!   name only if the task or the first observation names it, else by what the task asks
//!   for ("the living thing"); so do the search reasons later;
//! - **reflection** right after a planted mistake (see [`plant_mistake`]);
//! - **explore** for moves into a room not entered before and for the first look around a
//!   room; the reason names what is sought and the rooms still unseen;
//! - **monitor** otherwise: executing the plan (naming the objects), waiting, checking.
//!
//! Wording varies with the caller's seeded generator.

use std::collections::BTreeSet;

use rand::seq::SliceRandom;
use rand::Rng;
use rlvmr_core::Tag;
use sciworld::plain::is_choice;

use crate::envs::text::{capitalise, list_some};

/// Feedback the simulator gives a command it could not carry out.
const FAILURE_FEEDBACK: [&str; 2] = [
    "No known action matches that input.",
    "It's not clear how to get there from here.",
];

/// Whether `feedback` says the command did nothing.
pub fn is_failure(feedback: &str) -> bool {
    FAILURE_FEEDBACK.contains(&feedback.trim())
}

/// A recoverable mistake planted in a demonstration, and what undoes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SciMistake {
    /// A command the simulator does not understand (a wrong verb, a misspelt object, an
    /// article before a room): the correction is the intended command.
    Malformed { wrong: String },
    /// Heading for a room further along the route that is not connected to this one: the
    /// correction is the intended move through the room in between.
    Unreachable { room: String },
    /// A move into the wrong neighbouring room: the correction is going back.
    WrongRoom { room: String, back_to: String },
}

impl SciMistake {
    /// The command played instead of the intended one.
    pub fn command(&self) -> String {
        match self {
            SciMistake::Malformed { wrong } => wrong.clone(),
            SciMistake::Unreachable { room } | SciMistake::WrongRoom { room, .. } => {
                format!("go to {room}")
            }
        }
    }

    /// Commands to play after the mistake, before the intended one.
    pub fn undo(&self) -> Option<String> {
        match self {
            SciMistake::WrongRoom { back_to, .. } => Some(format!("go to {back_to}")),
            _ => None,
        }
    }

    /// Whether `feedback` is what this mistake should get: a failure for a command the
    /// simulator cannot carry out, arriving for a wrong turn. Anything else means the
    /// demonstration left its gold path.
    pub fn went_as_planned(&self, feedback: &str) -> bool {
        match self {
            SciMistake::WrongRoom { room, .. } => {
                feedback.trim() == format!("You move to the {room}.")
            }
            _ => is_failure(feedback),
        }
    }
}

/// The room a movement command goes to.
fn destination(action: &str) -> Option<&str> {
    ["go to ", "walk to ", "teleport to "]
        .iter()
        .find_map(|p| action.strip_prefix(p))
}

fn is_wait(action: &str) -> bool {
    action.starts_with("wait")
}

/// The object an action is mainly about: the words after its verb, up to its preposition.
pub fn main_object(action: &str) -> &str {
    let verbs = [
        "pick up ", "focus on ", "look at ", "look in ", "move ", "connect ", "disconnect ",
        "activate ", "deactivate ", "open ", "close ", "pour ", "mix ", "eat ", "read ",
        "use ", "put down ", "drop ", "dunk ", "flush ", "go to ",
    ];
    let rest = verbs
        .iter()
        .find_map(|v| action.strip_prefix(v))
        .unwrap_or(action);
    [" to ", " into ", " in ", " on ", " with "]
        .iter()
        .filter_map(|sep| rest.find(sep))
        .min()
        .map_or(rest, |end| &rest[..end])
}

/// The first thing the path still has to act on from `from` on (not a move, look, wait or
/// numbered choice), if any.
fn next_target(path: &[String], from: usize) -> Option<&str> {
    path.iter().skip(from).find_map(|a| {
        let passive = destination(a).is_some()
            || a.starts_with("look around")
            || is_wait(a)
            || is_choice(a);
        (!passive).then(|| main_object(a))
    })
}

/// The plan's subgoals read off a gold path: runs of moves become "get to the ROOM", runs of
/// waits "wait", runs of wiring "wire up the circuit"; looks and numbered choices are left
/// out; the first four subgoals and the last one are kept.
pub fn subgoals(path: &[String]) -> Vec<String> {
    named_subgoals(path, &as_named)
}

/// [`subgoals`] with each action's main object as `name` calls it (a plan written before the
/// object was seen calls it by what the task asks for).
fn named_subgoals(path: &[String], name: &dyn Fn(&str) -> String) -> Vec<String> {
    let mut goals: Vec<String> = Vec::new();
    for action in path {
        let goal = if let Some(room) = destination(action) {
            Some(format!("get to the {room}"))
        } else if is_wait(action) {
            Some("wait for the change".to_string())
        } else if action.starts_with("connect ") {
            Some("wire up the circuit".to_string())
        } else if action.starts_with("look around") || is_choice(action) {
            None
        } else {
            Some(phrase(action, name))
        };
        let Some(goal) = goal else { continue };
        let repeats_move = goal.starts_with("get to ")
            && goals.last().is_some_and(|g| g.starts_with("get to "));
        if repeats_move {
            goals.pop();
        } else if goals.last() == Some(&goal) {
            continue;
        }
        goals.push(goal);
    }
    if goals.len() > 5 {
        let last = goals.pop().unwrap_or_default();
        goals.truncate(4);
        goals.push(last);
    }
    goals
}

/// An object called by its own name.
fn as_named(object: &str) -> String {
    object.to_string()
}

/// An action as a plain phrase with articles, its main object as `name` calls it: `move seed
/// in jar to pot` -> `move the seed to the pot`.
fn phrase(action: &str, name: &dyn Fn(&str) -> String) -> String {
    let object = main_object(action);
    if object.is_empty() || object == action {
        return action.to_string();
    }
    let start = action.find(object).unwrap_or(0);
    let verb = &action[..start];
    let rest = &action[start + object.len()..];
    // Where the object goes stays ("to the sink"); where it lies ("in seed jar") is dropped.
    let rest = [" to ", " into ", " on ", " with "]
        .iter()
        .filter_map(|sep| rest.rfind(sep).map(|at| (at, sep)))
        .max()
        .map(|(at, sep)| format!("{sep}the {}", &rest[at + sep.len()..]))
        .unwrap_or_default();
    format!("{verb}the {}{rest}", name(object))
}

/// What the task asks, from the description's first sentence: `grow a apple plant`.
fn task_gist(description: &str) -> Option<&str> {
    let rest = description.trim().strip_prefix("Your task is to ")?;
    Some(rest.split('.').next().unwrap_or(rest).trim())
}

/// What the player knows in one ScienceWorld episode.
#[derive(Debug, Clone, Default)]
pub struct SciSituation {
    task: String,
    room: Option<String>,
    /// Rooms entered (or started in).
    visited: BTreeSet<String>,
    /// Rooms looked around in.
    looked: BTreeSet<String>,
    /// Rooms seen through doors.
    doors: BTreeSet<String>,
    last_action: String,
    last_feedback: String,
    /// Every observation so far, lower-cased: what the player could name.
    seen: String,
}

impl SciSituation {
    /// Starts from the task description and the reset's observation (a look around).
    pub fn new(task: &str, first_observation: &str) -> SciSituation {
        let mut situation = SciSituation {
            task: task.to_string(),
            ..SciSituation::default()
        };
        situation.read_look(first_observation);
        situation.seen = first_observation.to_lowercase();
        situation
    }

    /// Takes in one step: the command played and the feedback it got.
    pub fn update(&mut self, action: &str, feedback: &str) {
        self.last_action = action.to_string();
        self.last_feedback = feedback.trim().to_string();
        self.seen.push('\n');
        self.seen.push_str(&feedback.to_lowercase());
        for prefix in ["You move to the ", "You teleport to the "] {
            if let Some(room) = feedback.trim().strip_prefix(prefix) {
                let room = room.trim_end_matches('.').to_string();
                self.visited.insert(room.clone());
                self.room = Some(room);
            }
        }
        self.read_look(feedback);
    }

    /// A look around names the room and its doors.
    fn read_look(&mut self, text: &str) {
        if let Some(rest) = text.split("This room is called the ").nth(1) {
            let room = rest.split('.').next().unwrap_or(rest).trim().to_string();
            self.visited.insert(room.clone());
            self.looked.insert(room.clone());
            self.room = Some(room);
        }
        for part in text.split("door to the ").skip(1) {
            let room = part.split(" (").next().unwrap_or(part).trim();
            if !room.is_empty() && !room.contains('\n') {
                self.doors.insert(room.to_string());
            }
        }
    }

    /// `object` if the task or an observation so far names it, else what the task asks for
    /// (`find a(n) plant`: "plant"), else "object": an expert's reasons must not name what
    /// the player has not seen, or the model learns to name things before it sees them.
    fn as_known(&self, object: &str) -> String {
        let lower = object.to_lowercase();
        if self.task.to_lowercase().contains(&lower) || self.seen.contains(&lower) {
            return object.to_string();
        }
        self.sought_kind().to_string()
    }

    /// What a find task asks for ("plant", "living thing"; "animal" for the life spans),
    /// else "object".
    fn sought_kind(&self) -> &str {
        let task = self.task.as_str();
        if let Some(rest) = task.split("find a(n) ").nth(1) {
            let end = rest.find(['.', ',']).unwrap_or(rest.len());
            return rest[..end].trim();
        }
        if task.contains("find the animal") {
            return "animal";
        }
        "object"
    }

    /// The current room, if known.
    pub fn room(&self) -> Option<&str> {
        self.room.as_deref()
    }

    /// Rooms seen through a door but never entered, except `except`.
    fn unseen(&self, except: &str) -> Vec<&str> {
        self.doors
            .iter()
            .filter(|r| !self.visited.contains(*r) && r.as_str() != except)
            .map(String::as_str)
            .collect()
    }

    /// The tag and reason for playing `action` (step `step`) while `path[next..]` is what
    /// the gold path still holds after it; `mistake` is the mistake the previous step was.
    pub fn annotate(
        &self,
        step: usize,
        action: &str,
        path: &[String],
        next: usize,
        mistake: Option<&SciMistake>,
        rng: &mut impl Rng,
    ) -> (Tag, String) {
        if step == 0 {
            return (Tag::Planning, self.plan_reason(path, rng));
        }
        if let Some(mistake) = mistake {
            return (Tag::Reflection, self.reflection_reason(mistake, action, rng));
        }
        let sought = next_target(path, next.saturating_sub(1))
            .map_or_else(|| "what the task needs".to_string(), |object| self.as_known(object));
        let sought = sought.as_str();
        if let Some(room) = destination(action) {
            if !self.visited.contains(room) {
                return (Tag::Explore, self.explore_room_reason(room, sought, rng));
            }
            return (Tag::Monitor, self.return_reason(room, sought, rng));
        }
        let here = self.room.as_deref().unwrap_or("room");
        if action == "look around" && !self.looked.contains(here) {
            let reason = match rng.gen_range(0..2) {
                0 => format!("I have not looked around the {here} yet, so I check what it holds before going for the {sought}."),
                _ => format!("To find the {sought} I first see what is in the {here}."),
            };
            return (Tag::Explore, reason);
        }
        let left = path.len().saturating_sub(next);
        (Tag::Monitor, monitor_reason(action, here, left, rng))
    }

    fn plan_reason(&self, path: &[String], rng: &mut impl Rng) -> String {
        let goals = named_subgoals(path, &|object| self.as_known(object));
        let steps = match goals.len() {
            0 => "look around".to_string(),
            1 => goals[0].clone(),
            n => format!("{}, and finally {}", goals[..n - 1].join(", "), goals[n - 1]),
        };
        let gist = task_gist(&self.task);
        match (gist, rng.gen_range(0..3)) {
            (Some(gist), 0) => format!("To {gist}, I will {steps}."),
            (Some(gist), 1) => {
                format!("Plan for the task ({gist}): {steps}, about {} actions.", path.len())
            }
            _ => format!("The task breaks into {} subgoals: {steps}.", goals.len().max(1)),
        }
    }

    fn reflection_reason(&self, mistake: &SciMistake, action: &str, rng: &mut impl Rng) -> String {
        let last = &self.last_action;
        let here = self.room.as_deref().unwrap_or("room");
        match mistake {
            SciMistake::Malformed { .. } => match rng.gen_range(0..3) {
                0 => format!("'{last}' was not understood by the simulator, so I use the proper command '{action}'."),
                1 => format!("My last command '{last}' matched no action; the objects must be named exactly, so I try '{action}'."),
                _ => format!("Nothing came of '{last}' since it is not a valid command, so I correct it to '{action}'."),
            },
            SciMistake::Unreachable { room } => match rng.gen_range(0..2) {
                0 => format!("The {room} cannot be reached from the {here} directly, so I go through the {} first.", destination(action).unwrap_or("next room")),
                _ => format!("'{last}' failed because no door connects the {here} to the {room}; I take the route via the {} instead.", destination(action).unwrap_or("next room")),
            },
            SciMistake::WrongRoom { room, back_to } => match rng.gen_range(0..2) {
                0 => format!("Entering the {room} was a wrong turn that does not help the task, so I go back to the {back_to}."),
                _ => format!("The {room} is not where the plan leads; I correct course by returning to the {back_to}."),
            },
        }
    }

    fn explore_room_reason(&self, room: &str, sought: &str, rng: &mut impl Rng) -> String {
        let unseen = self.unseen(room);
        let others = list_some(&unseen, 3);
        match (unseen.is_empty(), rng.gen_range(0..3)) {
            (true, 0) => format!("I have not been in the {room} yet, and the {sought} may be there or beyond it."),
            (true, _) => format!("Looking for the {sought}, I try the {room}, a room I have not entered."),
            (false, 0) => format!("The {sought} is not in the rooms I know, and the {others} are still unseen, so I try the {room} now."),
            (false, 1) => format!("I still need the {sought}; unseen rooms include the {room} and the {others}, and I enter the {room} first."),
            (false, _) => format!("To find the {sought} I explore the {room}, leaving the {others} for later."),
        }
    }

    fn return_reason(&self, room: &str, sought: &str, rng: &mut impl Rng) -> String {
        let here = self.room.as_deref().unwrap_or("room");
        match rng.gen_range(0..2) {
            0 => format!("The {here} is done for now, so I go back to the {room} on the way to the {sought}."),
            _ => format!("{} leads on toward the {sought}, so I return there from the {here}.", capitalise(&format!("the {room}"))),
        }
    }
}

fn monitor_reason(action: &str, here: &str, left: usize, rng: &mut impl Rng) -> String {
    let object = main_object(action);
    let after = match left {
        0 => "and that should complete the task".to_string(),
        1 => "with one planned action left after it".to_string(),
        n => format!("with {n} planned actions left after it"),
    };
    if is_wait(action) {
        return [
            format!("The change takes time, so I wait and check on it, {after}."),
            format!("Everything is set up, so I let time pass, {after}."),
        ]
        .choose(rng)
        .cloned()
        .unwrap_or_default();
    }
    if action == "look around" {
        return format!("I look around the {here} to see what has changed, {after}.");
    }
    if is_choice(action) {
        return format!("The simulator asks which object I meant; option {action} is the one I want.");
    }
    if action.starts_with("focus on ") {
        return format!("The {object} is what the task is about, so I focus on it as asked.");
    }
    match rng.gen_range(0..3) {
        0 => format!("Following the plan, I {}, {after}.", phrase(action, &as_named)),
        1 => format!("The next subgoal involves the {object}: I {}, {after}.", phrase(action, &as_named)),
        _ => format!("Next I {} in the {here}, {after}.", phrase(action, &as_named)),
    }
}

/// A recoverable mistake to play instead of `intended`, or None when none fits this step
/// (never on a focus, a wait or a numbered choice, where a slip would end or derail the
/// episode). `upcoming` is the gold path after `intended`, `valid` the simulator's valid
/// actions now.
pub fn plant_mistake(
    intended: &str,
    upcoming: &[String],
    valid: &[String],
    here: Option<&str>,
    rng: &mut impl Rng,
) -> Option<SciMistake> {
    if intended.starts_with("focus on") || is_wait(intended) || is_choice(intended) {
        return None;
    }
    if upcoming.first().is_some_and(|a| is_choice(a)) {
        return None;
    }
    let mut options: Vec<SciMistake> = Vec::new();
    if let (Some(target), Some(here)) = (destination(intended), here) {
        // Skipping ahead to the route's next room, through a wall.
        if let Some(further) = upcoming.first().and_then(|a| destination(a)) {
            let direct = format!("go to {further}");
            if further != here && further != target && !valid.contains(&direct) {
                options.push(SciMistake::Unreachable {
                    room: further.to_string(),
                });
            }
        }
        let neighbours: Vec<&str> = valid
            .iter()
            .filter_map(|a| a.strip_prefix("go to "))
            .filter(|r| *r != target && *r != here)
            .collect();
        if let Some(room) = neighbours.choose(rng) {
            options.push(SciMistake::WrongRoom {
                room: room.to_string(),
                back_to: here.to_string(),
            });
        }
    }
    if let Some(wrong) = malformed(intended, rng) {
        if !valid.contains(&wrong) {
            options.push(SciMistake::Malformed { wrong });
        }
    }
    options.choose(rng).cloned()
}

/// A way of writing `intended` the simulator does not understand: an article before a
/// room, an unknown verb, or a letter missing from the object's longest word.
fn malformed(intended: &str, rng: &mut impl Rng) -> Option<String> {
    if let Some(room) = destination(intended) {
        return Some(format!("go to the {room}"));
    }
    if let Some(object) = intended.strip_prefix("pick up ") {
        return Some(format!("grab {object}"));
    }
    // A letter missing from the object's longest word, else from any later word.
    let long_word = |text: &str| {
        text.split_whitespace()
            .filter(|w| w.chars().count() >= 4 && w.is_ascii())
            .max_by_key(|w| w.len())
            .map(str::to_string)
    };
    let after_verb = intended.split_once(' ').map_or("", |(_, rest)| rest);
    let longest = long_word(main_object(intended)).or_else(|| long_word(after_verb))?;
    let cut = rng.gen_range(1..longest.len() - 1);
    let typo = format!("{}{}", &longest[..cut], &longest[cut + 1..]);
    let start = intended.rfind(&longest)?;
    Some(format!(
        "{}{typo}{}",
        &intended[..start],
        &intended[start + longest.len()..]
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    fn list(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    const LOOK: &str = "This room is called the workshop. In it, you see: \n\tthe agent\n\ta table. On the table is: a battery.\nYou also see:\n\tA door to the hallway (that is open)\n\tA door to the art studio (that is open)";

    #[test]
    fn looks_name_the_room_and_its_doors() {
        let mut s = SciSituation::new("Your task is to boil water. First, focus on it.", LOOK);
        assert_eq!(s.room(), Some("workshop"));
        assert_eq!(s.unseen(""), ["art studio", "hallway"]);
        s.update("go to hallway", "You move to the hallway.");
        assert_eq!(s.room(), Some("hallway"));
        assert_eq!(s.unseen(""), ["art studio"]);
        assert_eq!(task_gist(&s.task), Some("boil water"));
    }

    #[test]
    fn objects_and_phrases() {
        assert_eq!(main_object("move apple seed in seed jar to flower pot 1"), "apple seed");
        assert_eq!(main_object("pick up seed jar"), "seed jar");
        assert_eq!(main_object("connect battery anode to red wire terminal 1"), "battery anode");
        assert_eq!(phrase("move jug to sink", &as_named), "move the jug to the sink");
        assert_eq!(phrase("pour jug into flower pot 1", &as_named), "pour the jug into the flower pot 1");
        assert_eq!(phrase("pick up seed jar", &as_named), "pick up the seed jar");
    }

    #[test]
    fn plans_name_rooms_and_objects() {
        let path = list(&[
            "go to hallway", "go to greenhouse", "look around", "pick up seed jar",
            "move apple seed in seed jar to flower pot 1", "0",
            "focus on apple seed in flower pot 1", "connect a to b", "connect c to d", "wait1",
            "wait1", "move jug to sink",
        ]);
        assert_eq!(
            subgoals(&path),
            [
                "get to the greenhouse",
                "pick up the seed jar",
                "move the apple seed to the flower pot 1",
                "focus on the apple seed",
                "move the jug to the sink"
            ]
        );
    }

    #[test]
    fn tags_follow_the_situation() {
        let path = list(&["go to hallway", "go to greenhouse", "look around", "pick up seed jar", "go to hallway"]);
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let mut s = SciSituation::new("Your task is to grow a plant.", LOOK);
        let (tag, reason) = s.annotate(0, &path[0], &path, 1, None, &mut rng);
        assert_eq!(tag, Tag::Planning);
        // The seed jar is not seen yet: the plan and the search call it "object".
        assert!(reason.contains("greenhouse") && reason.contains("the object") && !reason.contains("seed jar"), "{reason}");
        s.update("go to hallway", "You move to the hallway.");
        let (tag, reason) = s.annotate(1, &path[1], &path, 2, None, &mut rng);
        assert_eq!(tag, Tag::Explore);
        assert!(reason.contains("greenhouse") && !reason.contains("seed jar"), "{reason}");
        s.update("go to greenhouse", "You move to the greenhouse.");
        let (tag, reason) = s.annotate(2, &path[2], &path, 3, None, &mut rng);
        assert_eq!(tag, Tag::Explore, "{reason}");
        s.update("look around", "This room is called the greenhouse. In it, you see: a seed jar");
        let (tag, reason) = s.annotate(3, &path[3], &path, 4, None, &mut rng);
        assert_eq!(tag, Tag::Monitor);
        assert!(reason.contains("seed jar"), "{reason}");
        s.update("pick up seed jar", "You move the seed jar to the inventory.");
        let (tag, _) = s.annotate(4, &path[4], &path, 5, None, &mut rng);
        assert_eq!(tag, Tag::Monitor, "going back to a known room");
        let wrong = SciMistake::Malformed { wrong: "grab seed jar".into() };
        s.update("grab seed jar", "No known action matches that input.");
        let (tag, reason) = s.annotate(5, "pick up seed jar", &path, 4, Some(&wrong), &mut rng);
        assert_eq!(tag, Tag::Reflection);
        assert!(reason.contains("grab seed jar") && reason.contains("pick up seed jar"), "{reason}");
    }

    #[test]
    fn plans_name_only_what_was_seen_or_asked_for() {
        let path = list(&["teleport to outside", "look around", "focus on parrot egg", "pick up parrot egg", "teleport to kitchen", "move parrot egg to red box"]);
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let find = SciSituation::new("Your task is to find a(n) living thing. First, focus on the thing. Then, move it to the red box in the kitchen.", LOOK);
        let (_, plan) = find.annotate(0, &path[0], &path, 1, None, &mut rng);
        assert!(plan.contains("focus on the living thing") && plan.contains("red box") && !plan.contains("parrot"), "{plan}");
        let lifespan = SciSituation::new("Your task is to find the animal with the longest life span.", LOOK);
        assert_eq!(lifespan.as_known("parrot egg"), "animal");
        assert_eq!(lifespan.as_known("table"), "table", "the first look shows a table");
        let named = SciSituation::new("Your task is to determine if metal fork is electrically conductive.", LOOK);
        assert_eq!(named.as_known("metal fork"), "metal fork");
        assert_eq!(named.as_known("green box"), "object");
    }

    #[test]
    fn mistakes_are_failures_or_wrong_turns() {
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        let valid = list(&["go to hallway", "go to art studio", "pick up seed jar", "look around"]);
        let upcoming = list(&["go to greenhouse"]);
        let mut kinds = BTreeSet::new();
        for _ in 0..40 {
            let m = plant_mistake("go to hallway", &upcoming, &valid, Some("workshop"), &mut rng).unwrap();
            assert!(!valid.contains(&m.command()) || matches!(m, SciMistake::WrongRoom { .. }), "{m:?}");
            match &m {
                SciMistake::WrongRoom { room, back_to } => {
                    assert_eq!((room.as_str(), back_to.as_str()), ("art studio", "workshop"));
                    assert_eq!(m.undo().as_deref(), Some("go to workshop"));
                    assert!(m.went_as_planned("You move to the art studio."));
                    assert!(!m.went_as_planned("No known action matches that input."));
                }
                SciMistake::Unreachable { room } => assert_eq!(room, "greenhouse"),
                SciMistake::Malformed { wrong } => assert_eq!(wrong, "go to the hallway"),
            }
            kinds.insert(format!("{:?}", std::mem::discriminant(&m)));
        }
        assert_eq!(kinds.len(), 3, "every kind comes up");
        for intended in ["move apple seed to flower pot 1", "activate sink", "pick up jug", "move cup to purple box"] {
            let m = plant_mistake(intended, &[], &valid, Some("kitchen"), &mut rng).unwrap();
            let SciMistake::Malformed { wrong } = &m else { panic!("{m:?}") };
            assert_ne!(wrong, intended);
            assert!(m.went_as_planned("No known action matches that input."));
        }
        for never in ["focus on apple seed", "wait1", "0"] {
            assert_eq!(plant_mistake(never, &[], &valid, Some("kitchen"), &mut rng), None);
        }
        let before_choice = plant_mistake("move seed to pot", &list(&["0"]), &valid, None, &mut rng);
        assert_eq!(before_choice, None, "the numbered choice must follow its command");
    }
}
