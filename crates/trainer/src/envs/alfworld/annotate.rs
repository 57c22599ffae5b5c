//! Offline, deterministic annotation of ALFWorld expert steps with one meta-reasoning tag
//! and a one-sentence reason, read from the expert's own situation (what the player has
//! seen, holds and has done), never from the game's hidden state.
//!
//! The rules, in order:
//! - **planning** at the first step (the plan names the task's concrete subgoals), and again
//!   when the search subgoal failed (every receptacle visited, the object still not found);
//! - **reflection** right after a mistake: a command that did nothing, or a detour the
//!   demonstration made on purpose;
//! - **explore** while searching (the object, or the lamp, is not located yet) for moves
//!   that look somewhere; the reason names places still unseen;
//! - **monitor** otherwise: executing a known subgoal (take, heat, cool, clean, put, use, go
//!   to a known place).
//!
//! Wording varies: each reason is one of several phrasings, chosen by the caller's seeded
//! generator, and always names the objects and receptacles involved.

use std::collections::BTreeSet;

use alfworld::expert::{intro_receptacles, kind_of, parse_list, parse_task, Task};
use alfworld::TaskType;
use rand::Rng;
use rlvmr_core::Tag;

use crate::envs::text::{capitalise, list_some};

/// What the player knows in one ALFWorld episode, updated from each step's feedback.
#[derive(Debug, Clone)]
pub struct Situation {
    task: Option<Task>,
    receptacles: Vec<String>,
    /// Receptacles arrived at or opened.
    visited: BTreeSet<String>,
    holding: Option<String>,
    /// The held object has been heated, cooled or cleaned.
    processed: bool,
    /// Task objects put into a goal-type receptacle.
    placed: usize,
    /// Objects picked up so far.
    taken: Vec<String>,
    /// Where an untaken task object was last seen.
    object_at: Option<String>,
    /// Where a lamp of the task's type was seen (look tasks).
    lamp_at: Option<String>,
    /// The last command and whether it did nothing.
    last_action: Option<String>,
    last_failed: bool,
    /// The search was already re-planned once after running out of places.
    replanned: bool,
    /// The player does not know which appliance heats, cools or cleans, and searches for it
    /// ([`Situation::searching_appliance`]).
    appliance_unknown: bool,
}

/// What kind of mistake preceded the current step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mistake {
    /// The command was not admissible ("Nothing happens.").
    Inadmissible,
    /// An admissible command that did not serve the current subgoal.
    Detour,
}

impl Situation {
    /// Starts from the intro (receptacles and task sentence); `fallback` is used when the
    /// sentence does not parse.
    pub fn new(intro: &str, fallback: Option<Task>) -> Situation {
        Situation {
            task: parse_task(intro).or(fallback),
            receptacles: intro_receptacles(intro),
            visited: BTreeSet::new(),
            holding: None,
            processed: false,
            placed: 0,
            taken: Vec::new(),
            object_at: None,
            lamp_at: None,
            last_action: None,
            last_failed: false,
            replanned: false,
            appliance_unknown: false,
        }
    }

    /// The player of this episode searches for the task's appliance (the expert of
    /// `alfworld::expert::Expert::searching_appliance`): the plan names no appliance, the
    /// moves that carry the object to one are `explore`.
    pub fn searching_appliance(mut self) -> Situation {
        self.appliance_unknown = true;
        self
    }

    /// Takes in one step: the command played and the feedback it got.
    pub fn update(&mut self, action: &str, feedback: &str) {
        self.last_action = Some(action.to_string());
        self.last_failed = feedback.trim() == "Nothing happens.";
        if self.last_failed {
            return;
        }
        let place = action
            .strip_prefix("go to ")
            .or_else(|| action.strip_prefix("open "))
            .map(str::to_string);
        if let Some(place) = &place {
            self.visited.insert(place.clone());
            self.note_contents(place, feedback);
        }
        if let Some(rest) = feedback.strip_prefix("You pick up the ") {
            if let Some((object, from)) = rest.trim_end_matches('.').split_once(" from the ") {
                self.holding = Some(object.to_string());
                self.processed = false;
                self.taken.push(object.to_string());
                if self.object_at.as_deref() == Some(from) {
                    self.object_at = None;
                }
            }
        } else if let Some(rest) = feedback.strip_prefix("You move the ") {
            if let Some((object, to)) = rest.trim_end_matches('.').split_once(" to the ") {
                self.holding = None;
                if let Some(task) = &self.task {
                    if kind_of(object) == task.object && kind_of(to) == task.target {
                        self.placed += 1;
                    }
                }
            }
        } else if ["You heat the ", "You cool the ", "You clean the "]
            .iter()
            .any(|p| feedback.starts_with(p))
        {
            self.processed = true;
        }
    }

    /// Notes task objects and lamps listed in `feedback` as lying at `place`.
    fn note_contents(&mut self, place: &str, feedback: &str) {
        let Some(task) = &self.task else { return };
        let Some((_, list)) = feedback.split_once("you see ") else {
            return;
        };
        let items = parse_list(list.split('.').next().unwrap_or(""));
        let object_here = items
            .iter()
            .any(|o| kind_of(o) == task.object && !self.taken.contains(o));
        let lamp_here = items.iter().any(|o| kind_of(o) == task.target);
        if object_here {
            self.object_at = Some(place.to_string());
        } else if self.object_at.as_deref() == Some(place) {
            self.object_at = None;
        }
        if lamp_here && task.kind == TaskType::LookAtInLight {
            self.lamp_at = Some(place.to_string());
        }
    }

    fn holds_task_object(&self) -> bool {
        match (&self.holding, &self.task) {
            (Some(h), Some(t)) => kind_of(h) == t.object,
            _ => false,
        }
    }

    /// What is being searched for, when something is: the task object, or the lamp.
    fn searching_for(&self) -> Option<String> {
        let task = self.task.as_ref()?;
        if self.holds_task_object() {
            return (task.kind == TaskType::LookAtInLight && self.lamp_at.is_none())
                .then(|| task.target.clone());
        }
        self.object_at.is_none().then(|| task.object.clone())
    }

    /// Receptacles not visited yet, in the intro's order, without `except`.
    fn unseen(&self, except: &str) -> Vec<&str> {
        self.receptacles
            .iter()
            .map(String::as_str)
            .filter(|r| !self.visited.contains(*r) && *r != except)
            .collect()
    }

    /// The tag and one-sentence reason for playing `action` now (step `step`, 0-based).
    /// `mistake` says whether the previous step was a mistake and of which kind.
    pub fn annotate(
        &mut self,
        step: usize,
        action: &str,
        mistake: Option<Mistake>,
        rng: &mut impl Rng,
    ) -> (Tag, String) {
        if step == 0 {
            return (Tag::Planning, self.plan_reason(action, rng));
        }
        let mistake = mistake.or(self.last_failed.then_some(Mistake::Inadmissible));
        if let Some(kind) = mistake {
            return (Tag::Reflection, self.reflection_reason(kind, action, rng));
        }
        let looks = ["go to ", "open ", "examine "]
            .iter()
            .any(|p| action.starts_with(p));
        if let (Some(verb), true) = (self.appliance_sought(), action.starts_with("go to ")) {
            return (Tag::Explore, self.appliance_search_reason(verb, action, rng));
        }
        if let (Some(what), true) = (self.searching_for(), looks) {
            let target = target_of(action);
            if self.unseen(target).is_empty() && !self.visited.is_empty() && !self.replanned {
                self.replanned = true;
                return (Tag::Planning, self.replan_reason(&what, action, rng));
            }
            return (Tag::Explore, self.explore_reason(&what, action, rng));
        }
        (Tag::Monitor, self.monitor_reason(action, rng))
    }

    /// The verb of the task whose appliance is being searched for, while it is: holding the
    /// object, not yet processed, the appliance unknown.
    fn appliance_sought(&self) -> Option<&'static str> {
        let verb = process_verb(self.task.as_ref()?.kind)?;
        (self.appliance_unknown && self.holds_task_object() && !self.processed).then_some(verb)
    }

    fn appliance_search_reason(&self, verb: &str, action: &str, rng: &mut impl Rng) -> String {
        let target = target_of(action);
        let holding = self.holding.clone().unwrap_or_default();
        match rng.gen_range(0..3) {
            0 => format!("I must {verb} {holding} and no command here does that, so I try {target} next."),
            1 => format!("Nothing here lets me {verb} {holding}; I carry it to {target} to see whether I can {verb} it there."),
            _ => format!("I still need a place where I can {verb} {holding}, so I go to {target} and check the actions there."),
        }
    }

    fn plan_reason(&self, action: &str, rng: &mut impl Rng) -> String {
        let Some(task) = &self.task else {
            return format!(
                "I do not recognise the task yet, so I start by {} to learn more.",
                describe(action)
            );
        };
        let goals = match self.appliance_unknown {
            true => subgoals_searching_appliance(task),
            false => subgoals(task),
        };
        let numbered: Vec<String> = goals
            .iter()
            .enumerate()
            .map(|(i, g)| format!("({}) {g}", i + 1))
            .collect();
        let first = describe(action);
        match rng.gen_range(0..3) {
            0 => format!("Plan: {}; I begin by {first}.", numbered.join(", ")),
            1 => format!(
                "To finish the task I must {}, so I start by {first}.",
                join_then(&goals)
            ),
            _ => format!(
                "The task breaks into {} subgoals, {}, and the first move is {first}.",
                goals.len(),
                goals.join(", ")
            ),
        }
    }

    fn replan_reason(&self, what: &str, action: &str, rng: &mut impl Rng) -> String {
        let next = describe(action);
        match rng.gen_range(0..2) {
            0 => format!("Every place I checked came up empty for the {what}, so I revise the plan: search again more carefully, starting by {next}."),
            _ => format!("My search for the {what} failed everywhere I looked, so the new plan is to re-check the likeliest places, beginning with {next}."),
        }
    }

    fn reflection_reason(&self, kind: Mistake, action: &str, rng: &mut impl Rng) -> String {
        let last = self.last_action.clone().unwrap_or_default();
        match kind {
            Mistake::Inadmissible => match rng.gen_range(0..3) {
                0 => format!("My last command '{last}' did nothing because it is not one of the admissible actions, so I use '{action}' instead."),
                1 => format!("'{last}' failed since the game only accepts the listed commands; the correct way is '{action}'."),
                _ => format!("Nothing happened after '{last}', which means the command was malformed, so I switch to the admissible '{action}'."),
            },
            Mistake::Detour => {
                let detour = target_of(&last);
                match rng.gen_range(0..3) {
                    0 => format!("Going to {detour} was a detour that does not serve the current subgoal, so I return to the plan by {}.", describe(action)),
                    1 => format!("{} was the wrong place for what I need right now; I correct course by {}.", capitalise(detour), describe(action)),
                    _ => format!("Visiting {detour} did not move the task forward, so I undo the detour and continue by {}.", describe(action)),
                }
            }
        }
    }

    fn explore_reason(&self, what: &str, action: &str, rng: &mut impl Rng) -> String {
        let target = target_of(action);
        let unseen = self.unseen(target);
        let others = list_some(&unseen, 3);
        let verb = describe(action);
        match (unseen.is_empty(), rng.gen_range(0..3)) {
            (true, _) => format!("No {what} has turned up yet, so I look again by {verb}."),
            (false, 0) => format!("No {what} found yet and {others} are still unseen, so I check {target} next."),
            (false, 1) => format!("I still need {} {what}; places I have not looked at include {others}, and I try {target} now.", article(what)),
            (false, _) => format!("The {what} has not turned up so far, so I search by {verb} while {others} remain unchecked."),
        }
    }

    fn monitor_reason(&self, action: &str, rng: &mut impl Rng) -> String {
        let pick = rng.gen_range(0..2);
        let words: Vec<&str> = action.split_whitespace().collect();
        let task_verb = self.task.as_ref().and_then(|t| process_verb(t.kind));
        if let Some(place) = action.strip_prefix("go to ") {
            let holding = self.holding.clone().unwrap_or_default();
            if self.object_at.as_deref() == Some(place) && !self.holds_task_object() {
                let object = self
                    .task
                    .as_ref()
                    .map(|t| t.object.clone())
                    .unwrap_or_default();
                return [
                    format!(
                        "I saw {} {object} at {place}, so I go there to pick it up.",
                        article(&object)
                    ),
                    format!(
                        "{} holds the {object} I need, so I head there.",
                        capitalise(place)
                    ),
                ][pick]
                    .clone();
            }
            if self.lamp_at.as_deref() == Some(place) {
                return format!("The lamp I need is at {place}, so I carry {holding} there.");
            }
            if let (Some(verb), false, true) = (task_verb, self.processed, self.holds_task_object())
            {
                return [format!("I carry {holding}; it must be {verb}ed next, so I go to {place}."), format!("The next subgoal is to {verb} {holding}, which needs {place}, so I walk there.")][pick].clone();
            }
            if self.holds_task_object() {
                return [format!("{} is ready, so I bring it to {place} to complete the task.", capitalise(&holding)), format!("With {holding} in hand, the last subgoal is to place it, so I go to {place}.")][pick].clone();
            }
            return format!("Following the plan, I move on to {place}.");
        }
        match words.first().copied() {
            Some("take") => {
                let (object, place) = split_from(action, "take ", " from ");
                [
                    format!(
                        "{} is right here in {place}, so I take it as the plan says.",
                        capitalise(object)
                    ),
                    format!("I found {object} in {place}; picking it up completes this subgoal."),
                ][pick]
                    .clone()
            }
            Some(verb @ ("heat" | "cool" | "clean")) if self.appliance_unknown => {
                let (object, place) = split_from(action, &format!("{verb} "), " with ");
                [
                    format!("'{action}' is among the commands here, so {place} can {verb} {object}: I {verb} it now."),
                    format!("The task says {verb} and here I can {verb} {object} with {place}, so I do it."),
                ][pick]
                    .clone()
            }
            Some(verb @ ("heat" | "cool" | "clean")) => {
                let (object, place) = split_from(action, &format!("{verb} "), " with ");
                [
                    format!("I hold {object} at {place}, so I {verb} it now before placing it."),
                    format!(
                        "{} is the right appliance, so I {verb} {object} with it as planned.",
                        capitalise(place)
                    ),
                ][pick]
                    .clone()
            }
            Some("move") => {
                let (object, place) = split_from(action, "move ", " to ");
                let state = match task_verb {
                    Some(v) if self.processed => format!("{v}ed"),
                    _ => "in hand".to_string(),
                };
                [
                    format!(
                        "{} is {state} and {place} is where the task wants it, so I put it there.",
                        capitalise(object)
                    ),
                    format!("Putting {object} in {place} finishes this part of the plan."),
                ][pick]
                    .clone()
            }
            Some("open") => {
                let place = target_of(action);
                let holding = self.holding.clone().unwrap_or_else(|| "the object".into());
                format!(
                    "{} is closed, so I open it to put {holding} inside.",
                    capitalise(place)
                )
            }
            Some("use") => {
                let lamp = target_of(action);
                match &self.holding {
                    Some(object) => [format!("I hold {object} next to {lamp}, so I switch it on to look at it in its light."), format!("Turning on {lamp} while holding {object} completes the look task.")][pick].clone(),
                    None => {
                        let object = self.task.as_ref().map(|t| t.object.clone()).unwrap_or_default();
                        format!("{} is right here, so I switch it on now and will bring {} {object} under it.", capitalise(lamp), article(&object))
                    }
                }
            }
            _ => format!("I check my progress against the plan with '{action}'."),
        }
    }
}

/// The concrete subgoals of a task.
pub fn subgoals(task: &Task) -> Vec<String> {
    let (o, t) = (&task.object, &task.target);
    match task.kind {
        TaskType::PickAndPlace => vec![
            format!("find {} {o}", article(o)),
            "take it".into(),
            format!("put it in {} {t}", article(t)),
        ],
        TaskType::PickTwo => vec![
            format!("find a first {o}"),
            format!("put it in {} {t}", article(t)),
            format!("find a second {o}"),
            format!("put it in the same {t}"),
        ],
        TaskType::LookAtInLight => vec![
            format!("find {} {o}", article(o)),
            "take it".into(),
            format!("find {} {t}", article(t)),
            format!("turn on the {t} while holding the {o}"),
        ],
        kind => {
            let (verb, appliance) = match kind {
                TaskType::PickClean => ("clean", "sinkbasin"),
                TaskType::PickHeat => ("heat", "microwave"),
                _ => ("cool", "fridge"),
            };
            vec![
                format!("find {} {o}", article(o)),
                "take it".into(),
                format!("{verb} it with the {appliance}"),
                format!("put it in {} {t}", article(t)),
            ]
        }
    }
}

/// The subgoals of a task whose appliance the player does not know: a heat, cool or clean
/// task finds it like the object; other tasks are as [`subgoals`] gives them.
pub fn subgoals_searching_appliance(task: &Task) -> Vec<String> {
    let Some(verb) = process_verb(task.kind) else {
        return subgoals(task);
    };
    let (o, t) = (&task.object, &task.target);
    vec![
        format!("find {} {o}", article(o)),
        "take it".into(),
        format!("find where I can {verb} it"),
        format!("{verb} it there"),
        format!("put it in {} {t}", article(t)),
    ]
}

/// `a` or `an` before a lower-case noun.
pub(crate) fn article(noun: &str) -> &'static str {
    if noun.starts_with(['a', 'e', 'i', 'o', 'u']) {
        "an"
    } else {
        "a"
    }
}

fn process_verb(kind: TaskType) -> Option<&'static str> {
    match kind {
        TaskType::PickClean => Some("clean"),
        TaskType::PickHeat => Some("heat"),
        TaskType::PickCool => Some("cool"),
        _ => None,
    }
}

/// `a, then b, then c`.
fn join_then(items: &[String]) -> String {
    items.join(", then ")
}

/// The receptacle or object an action is about: its last `to`/`from`/`with` part, or the
/// text after the verb.
pub fn target_of(action: &str) -> &str {
    for sep in [" to ", " from ", " with "] {
        if let Some((_, rest)) = action.rsplit_once(sep) {
            return rest;
        }
    }
    action.split_once(' ').map_or(action, |(_, rest)| rest)
}

fn split_from<'a>(action: &'a str, prefix: &str, sep: &str) -> (&'a str, &'a str) {
    let rest = action.strip_prefix(prefix).unwrap_or(action);
    rest.split_once(sep).unwrap_or((rest, ""))
}

/// An action as a gerund phrase: `go to desk 1` → `going to desk 1`.
pub fn describe(action: &str) -> String {
    let gerunds = [
        ("go to ", "going to "),
        ("take ", "taking "),
        ("open ", "opening "),
        ("close ", "closing "),
        ("heat ", "heating "),
        ("cool ", "cooling "),
        ("clean ", "cleaning "),
        ("use ", "turning on "),
        ("examine ", "examining "),
    ];
    for (verb, gerund) in gerunds {
        if let Some(rest) = action.strip_prefix(verb) {
            return format!("{gerund}{rest}");
        }
    }
    if let Some(rest) = action.strip_prefix("move ") {
        return format!("putting {}", rest.replacen(" to ", " in ", 1));
    }
    format!("doing '{action}'")
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    const INTRO: &str = "-= Welcome to TextWorld, ALFRED! =-\n\nYou are in the middle of a room. Looking quickly around you, you see a cabinet 1, a countertop 1, a fridge 1, and a microwave 1.\n\nYour task is to: put a cool mug in cabinet.";

    #[test]
    fn tags_follow_the_situation() {
        let mut rng = ChaCha8Rng::seed_from_u64(0);
        let mut s = Situation::new(INTRO, None);
        let (tag, reason) = s.annotate(0, "go to countertop 1", None, &mut rng);
        assert_eq!(tag, Tag::Planning);
        assert!(
            reason.contains("mug") && reason.contains("fridge") && reason.contains("cabinet"),
            "{reason}"
        );
        s.update(
            "go to countertop 1",
            "You arrive at countertop 1. On the countertop 1, you see a apple 1.",
        );
        let (tag, reason) = s.annotate(1, "go to cabinet 1", None, &mut rng);
        assert_eq!(tag, Tag::Explore, "{reason}");
        assert!(
            reason.contains("cabinet 1") && reason.contains("mug"),
            "{reason}"
        );
        s.update(
            "go to cabinet 1",
            "You arrive at cabinet 1. The cabinet 1 is open. In it, you see a mug 2.",
        );
        let (tag, reason) = s.annotate(2, "take mug 2 from cabinet 1", None, &mut rng);
        assert_eq!(tag, Tag::Monitor);
        assert!(
            reason.contains("mug 2") && reason.contains("cabinet 1"),
            "{reason}"
        );
        s.update(
            "take mug 2 from cabinet 1",
            "You pick up the mug 2 from the cabinet 1.",
        );
        s.update("put mug 2 in fridge 1", "Nothing happens.");
        let (tag, reason) = s.annotate(4, "go to fridge 1", None, &mut rng);
        assert_eq!(tag, Tag::Reflection);
        assert!(
            reason.contains("put mug 2 in fridge 1") && reason.contains("go to fridge 1"),
            "{reason}"
        );
        s.update(
            "go to fridge 1",
            "You arrive at fridge 1. The fridge 1 is closed.",
        );
        let (tag, reason) = s.annotate(5, "cool mug 2 with fridge 1", None, &mut rng);
        assert_eq!(tag, Tag::Monitor);
        assert!(
            reason.contains("cool") && reason.contains("mug 2") && reason.contains("fridge 1"),
            "{reason}"
        );
        s.update(
            "go to microwave 1",
            "You arrive at microwave 1. The microwave 1 is closed.",
        );
        let (tag, reason) = s.annotate(6, "go to cabinet 1", Some(Mistake::Detour), &mut rng);
        assert_eq!(tag, Tag::Reflection);
        assert!(
            reason.contains("microwave 1") && reason.contains("cabinet 1"),
            "{reason}"
        );
    }

    #[test]
    fn a_player_searching_for_the_appliance_plans_none_and_explores_with_the_object() {
        for seed in 0..6 {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let mut s = Situation::new(INTRO, None).searching_appliance();
            let (tag, plan) = s.annotate(0, "go to cabinet 1", None, &mut rng);
            assert_eq!(tag, Tag::Planning);
            assert!(plan.contains("where I can cool it") && !plan.contains("fridge"), "{plan}");
            s.update("go to cabinet 1", "You arrive at cabinet 1. The cabinet 1 is open. In it, you see a mug 2.");
            s.update("take mug 2 from cabinet 1", "You pick up the mug 2 from the cabinet 1.");
            let (tag, reason) = s.annotate(2, "go to microwave 1", None, &mut rng);
            assert_eq!(tag, Tag::Explore, "{reason}");
            assert!(reason.contains("cool mug 2") && reason.contains("microwave 1"), "{reason}");
            s.update("go to microwave 1", "You arrive at microwave 1. The microwave 1 is closed.");
            assert_eq!(s.annotate(3, "go to fridge 1", None, &mut rng).0, Tag::Explore);
            s.update("go to fridge 1", "You arrive at fridge 1. The fridge 1 is closed.");
            let (tag, reason) = s.annotate(4, "cool mug 2 with fridge 1", None, &mut rng);
            assert_eq!(tag, Tag::Monitor);
            assert!(reason.contains("cool") && reason.contains("mug 2") && reason.contains("fridge 1"), "{reason}");
            s.update("cool mug 2 with fridge 1", "You cool the mug 2 using the fridge 1.");
            let (tag, reason) = s.annotate(5, "go to cabinet 1", None, &mut rng);
            assert_eq!(tag, Tag::Monitor, "once cooled, the object goes to its place: {reason}");
        }
        // A task without an appliance plans as usual.
        let pick = INTRO.replace("put a cool mug in cabinet", "put a mug in cabinet");
        let mut rng = ChaCha8Rng::seed_from_u64(0);
        let plain = Situation::new(&pick, None).annotate(0, "go to cabinet 1", None, &mut rng);
        let mut rng = ChaCha8Rng::seed_from_u64(0);
        let searching = Situation::new(&pick, None).searching_appliance().annotate(0, "go to cabinet 1", None, &mut rng);
        assert_eq!(plain, searching);
    }

    #[test]
    fn a_search_that_runs_out_of_places_is_replanned_once() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let mut s = Situation::new(INTRO, None);
        for place in ["cabinet 1", "countertop 1", "fridge 1", "microwave 1"] {
            s.update(
                &format!("go to {place}"),
                &format!("You arrive at {place}. On the {place}, you see nothing."),
            );
        }
        assert_eq!(
            s.annotate(5, "go to cabinet 1", None, &mut rng).0,
            Tag::Planning
        );
        assert_eq!(
            s.annotate(6, "go to countertop 1", None, &mut rng).0,
            Tag::Explore
        );
    }

    #[test]
    fn wording_varies_with_the_seed() {
        let reasons: BTreeSet<String> = (0..20)
            .map(|seed| {
                Situation::new(INTRO, None)
                    .annotate(
                        0,
                        "go to countertop 1",
                        None,
                        &mut ChaCha8Rng::seed_from_u64(seed),
                    )
                    .1
            })
            .collect();
        assert!(reasons.len() >= 3, "{reasons:?}");
    }

    #[test]
    fn phrases() {
        assert_eq!(
            describe("move mug 2 to cabinet 1"),
            "putting mug 2 in cabinet 1"
        );
        assert_eq!(target_of("take mug 2 from cabinet 1"), "cabinet 1");
        assert_eq!(target_of("open drawer 3"), "drawer 3");
        assert_eq!(list_some(&["a", "b", "c", "d"], 3), "a, b, c and others");
        assert_eq!(list_some(&["a", "b"], 3), "a and b");
    }
}
