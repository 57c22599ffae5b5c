//! Gold actions that name objects as the room shows them.
//!
//! The simulator's gold paths name objects by its internal referents: `move egg blue jay egg
//! in inventory to purple box`, `focus on adult peach tree`, `pick up baby baby wolf`, while
//! the room reads "a blue jay egg", "flower pot 7 (containing a peach tree in the adult
//! stage, soil)", "a baby wolf". The parser accepts the visible names too (`move blue jay egg
//! to purple box`), so a demonstration that uses them asks a small model to copy what it sees
//! instead of guessing a referent. [`name_candidates`] proposes the visible forms of one
//! action (pure); [`crate::GoldOracle::with_plain_names`] plays them in the simulator and
//! keeps a rewritten path only if it still wins.
//!
//! A container that holds what the path focused on is named by that thing: find-plant's
//! gold path focuses on `peach tree` and then carries `flower pot 7 containing peach tree
//! and soil`; the simulator takes `pick up peach tree` and `move peach tree to red box` as
//! well, and the winning path then names one thing throughout instead of asking the model
//! to read which pot number stands before the plant's name in the room.

use std::collections::BTreeSet;

/// Verbs whose objects are rewritten, and the prepositions between their two objects.
/// Wiring (`connect battery anode to blue wire terminal 1`) names terminals the room does
/// not list and is left as the simulator names it; so is pouring, whose `in` is both a
/// preposition and part of a referent.
const ONE_OBJECT: &[&str] = &[
    "focus on ", "pick up ", "put down ", "drop ", "open ", "close ", "activate ",
    "deactivate ", "look at ", "look in ", "read ", "eat ", "mix ", "flush ",
];
const TWO_OBJECTS: &[(&str, &str)] = &[("move ", " to "), ("use ", " on "), ("dunk ", " into ")];

/// Words a visible name neither starts nor ends with.
const GLUE: &[&str] = &[
    "a", "an", "the", "in", "on", "and", "of", "to", "containing", "called", "is", "which", "that",
    "with", "by", "for", "at",
];

/// Object phrases tried per slot, at most.
const PER_SLOT: usize = 4;

/// The forms of `action` to try, best first, the action itself last: each object phrase
/// replaced by the name under which `scene` (the room and the inventory as the simulator
/// describes them) shows it; a phrase for a container holding `focused` (the object of the
/// path's last `focus on`, as played) is tried as `focused` first. Actions this does not
/// rewrite give only themselves.
pub fn name_candidates(action: &str, scene: &str, focused: Option<&str>) -> Vec<String> {
    let scene = SceneWords::new(scene).focused_on(focused);
    let mut out: Vec<String> = Vec::new();
    let mut push = |candidate: String| {
        if !out.contains(&candidate) {
            out.push(candidate);
        }
    };
    if let Some((verb, object)) = ONE_OBJECT
        .iter()
        .find_map(|v| action.strip_prefix(v).map(|rest| (*v, rest)))
    {
        for name in scene.names_for(object) {
            push(format!("{verb}{name}"));
        }
    } else if let Some((verb, preposition, first, second)) = TWO_OBJECTS.iter().find_map(|(v, p)| {
        let rest = action.strip_prefix(v)?;
        let (first, second) = rest.split_once(p)?;
        Some((*v, *p, first, second))
    }) {
        let firsts = scene.names_for(first);
        let seconds = scene.names_for(second);
        // Pairs in order of how far down each list they reach: the best pair first.
        let mut pairs: Vec<(usize, usize)> = (0..firsts.len())
            .flat_map(|i| (0..seconds.len()).map(move |j| (i, j)))
            .collect();
        pairs.sort_by_key(|&(i, j)| (i.max(j), i + j));
        for (i, j) in pairs {
            push(format!("{verb}{}{preposition}{}", firsts[i], seconds[j]));
        }
    }
    push(action.to_string());
    // The gold action is understood: nothing after it would be played.
    if let Some(at) = out.iter().position(|c| c == action) {
        out.truncate(at + 1);
    }
    out
}

/// The scene's word runs (between punctuation), for looking names up, its lines' words,
/// and the focused object's words.
struct SceneWords {
    runs: Vec<Vec<String>>,
    lines: Vec<Vec<String>>,
    focused: Vec<String>,
}

impl SceneWords {
    fn new(scene: &str) -> SceneWords {
        let is_word_char = |c: char| c.is_alphanumeric() || c == ' ' || c == '-' || c == '\'';
        let runs = scene
            .split(|c: char| !is_word_char(c))
            .map(words)
            .filter(|run| !run.is_empty())
            .collect();
        let lines = scene
            .lines()
            .map(|line| words(&line.replace(|c: char| !is_word_char(c), " ")))
            .collect();
        SceneWords { runs, lines, focused: Vec::new() }
    }

    fn focused_on(mut self, focused: Option<&str>) -> SceneWords {
        self.focused = focused.map(words).unwrap_or_default();
        self
    }

    /// Whether `phrase` names a container holding the focused object, by what the phrase says
    /// it contains (`flower pot 7 containing peach tree and soil in inventory` while `peach
    /// tree` is in focus) or by what the scene says (`pick up flower pot 7` where the room
    /// shows "flower pot 7 (containing a peach tree ...)").
    fn holds_focused(&self, phrase: &str) -> bool {
        let focused = self.focused.as_slice();
        if focused.is_empty() {
            return false;
        }
        let has_focused = |contents: &[String]| contents.windows(focused.len()).any(|w| w == focused);
        if let Some((_, contents)) = phrase.split_once(" containing ") {
            return has_focused(&words(contents));
        }
        let head = words(head_of(phrase));
        if head.is_empty() || head == focused {
            return false;
        }
        self.lines.iter().any(|line| {
            line.windows(head.len()).enumerate().any(|(at, w)| {
                let after = &line[at + head.len()..];
                w == head.as_slice()
                    && after.first().is_some_and(|w| w == "containing")
                    && has_focused(after)
            })
        })
    }

    /// Whether `name` (words) appears in one run, word for word.
    fn shows(&self, name: &[String]) -> bool {
        !name.is_empty()
            && self
                .runs
                .iter()
                .any(|run| run.windows(name.len()).any(|w| w == name))
    }

    /// The whole name a shown `name` is part of: the run around it, stretched over words
    /// that are not glue (`blue jay` in "a blue jay egg" is `blue jay egg`).
    fn whole_name(&self, name: &[String]) -> Option<Vec<String>> {
        if name.is_empty() {
            return None;
        }
        self.runs.iter().find_map(|run| {
            let at = run.windows(name.len()).position(|w| w == name)?;
            let is_glue = |w: &String| GLUE.contains(&w.as_str());
            let start = run[..at].iter().rposition(is_glue).map_or(0, |g| g + 1);
            let end = run[at + name.len()..]
                .iter()
                .position(is_glue)
                .map_or(run.len(), |g| at + name.len() + g);
            Some(run[start..end].to_vec())
        })
    }

    /// A run of the scene made of exactly the words of `name` in another order, if any
    /// (the referent `egg blue jay egg` is the room's `blue jay egg`).
    fn reordered(&self, name: &[String]) -> Option<Vec<String>> {
        let wanted: BTreeSet<&String> = name.iter().collect();
        (1..=wanted.len()).rev().find_map(|len| {
            self.runs.iter().find_map(|run| {
                run.windows(len)
                    .find(|w| w.iter().collect::<BTreeSet<_>>() == wanted && bare(w))
                    .map(<[String]>::to_vec)
            })
        })
    }

    /// The names to try for an object phrase, best first, the phrase itself last: the
    /// focused object if the phrase holds it, the phrase without what it contains or where
    /// it is (`flower pot 7 containing peach tree and soil in inventory` is `flower pot 7`)
    /// as the scene shows it, the same words in the scene's order, the longest end of it the
    /// scene shows (`adult peach tree`: `peach tree`), the bare head unseen.
    fn names_for(&self, phrase: &str) -> Vec<String> {
        let head = words(head_of(phrase));
        let mut names: Vec<Vec<String>> = Vec::new();
        if self.holds_focused(phrase) {
            names.push(self.focused.clone());
        }
        if let Some(whole) = self.whole_name(&head) {
            names.push(whole);
        }
        if self.shows(&head) {
            names.push(head.clone());
        }
        if let Some(reordered) = self.reordered(&head) {
            names.push(reordered);
        }
        if let Some(tail) = (1..head.len())
            .map(|start| head[start..].to_vec())
            .find(|tail| bare(tail) && self.shows(tail))
        {
            names.push(tail);
        }
        if !head.is_empty() {
            names.push(head);
        }
        let mut out: Vec<String> = Vec::new();
        for name in names.into_iter().map(|n| n.join(" ")).chain([phrase.to_string()]) {
            if !out.contains(&name) {
                out.push(name);
            }
        }
        out.truncate(PER_SLOT);
        out
    }
}

/// The phrase up to what it contains or where it is.
fn head_of(phrase: &str) -> &str {
    [" containing ", " in "]
        .iter()
        .filter_map(|sep| phrase.find(sep))
        .min()
        .map_or(phrase, |end| &phrase[..end])
}

fn words(text: &str) -> Vec<String> {
    text.split_whitespace().map(str::to_lowercase).collect()
}

/// Neither starts nor ends with a glue word.
fn bare(name: &[String]) -> bool {
    let glue = |w: Option<&String>| w.is_some_and(|w| GLUE.contains(&w.as_str()));
    !name.is_empty() && !glue(name.first()) && !glue(name.last())
}

/// An answer to "Ambiguous request: Please enter the number ...".
pub fn is_choice(action: &str) -> bool {
    !action.is_empty() && action.chars().all(|c| c.is_ascii_digit())
}

/// Whether the simulator took a command: not unparsed, not asking which object was meant.
pub fn was_understood(observation: &str) -> bool {
    let observation = observation.trim_start();
    !observation.starts_with("No known action matches that input")
        && !observation.starts_with("Ambiguous request")
}

#[cfg(test)]
mod tests {
    use super::*;

    const OUTSIDE: &str = "This outside location is called the outside. Here you see: \n\tthe agent\n\ta substance called air\n\tan axe\n\ta blue jay egg\n\ta dove egg\n\ta baby wolf\n\tthe ground\nYou also see:\n\tA door to the kitchen (that is open)\nIn your inventory, you see:\n\tan orange\n";
    const GREENHOUSE: &str = "This room is called the greenhouse. In it, you see: \n\tthe agent\n\ta flower pot 7 (containing a peach tree in the adult stage, soil)\n\ta flower pot 2 (containing a substance called water)\nIn your inventory, you see:\n\tan orange\n";

    #[test]
    fn referents_become_the_names_the_room_shows() {
        let cases = [
            ("focus on egg blue jay", OUTSIDE, "focus on blue jay egg"),
            ("pick up baby baby wolf", OUTSIDE, "pick up baby wolf"),
            ("pick up blue jay", OUTSIDE, "pick up blue jay egg"),
            ("move egg dove egg in inventory to purple box", OUTSIDE, "move dove egg to purple box"),
            ("focus on adult peach tree", GREENHOUSE, "focus on peach tree"),
            (
                "move flower pot 7 containing peach tree and soil in inventory to red box",
                GREENHOUSE,
                "move flower pot 7 to red box",
            ),
        ];
        for (action, scene, best) in cases {
            let candidates = name_candidates(action, scene, None);
            assert_eq!(candidates[0], best, "{action}: {candidates:?}");
            assert_eq!(candidates.last().map(String::as_str), Some(action));
        }
    }

    #[test]
    fn a_container_of_the_focused_object_is_named_by_it() {
        let pick = "pick up flower pot 7 containing peach tree and soil";
        let moved = "move flower pot 7 containing peach tree and soil in inventory to red box";
        assert_eq!(name_candidates(pick, GREENHOUSE, Some("peach tree"))[..2], ["pick up peach tree", "pick up flower pot 7"]);
        assert_eq!(name_candidates(moved, GREENHOUSE, Some("peach tree"))[0], "move peach tree to red box");
        // Another focus, or a pot of water, keeps the pot's name first.
        assert_eq!(name_candidates(pick, GREENHOUSE, Some("apple tree"))[0], "pick up flower pot 7");
        assert_eq!(name_candidates("pick up flower pot 2 containing water", GREENHOUSE, Some("peach tree"))[0], "pick up flower pot 2");
        // The room says what the pot holds when the command does not.
        assert_eq!(name_candidates("pick up flower pot 7", GREENHOUSE, Some("peach tree"))[0], "pick up peach tree");
        assert_eq!(name_candidates("pick up flower pot 2", GREENHOUSE, Some("peach tree"))[0], "pick up flower pot 2");
        // The focused object itself is not a container of itself.
        assert_eq!(name_candidates("pick up peach tree", GREENHOUSE, Some("peach tree")), ["pick up peach tree"]);
    }

    #[test]
    fn wiring_moves_and_unknown_verbs_are_kept() {
        for action in ["connect battery anode to blue wire terminal 1", "teleport to kitchen", "look around", "wait1", "0"] {
            assert_eq!(name_candidates(action, OUTSIDE, None), vec![action.to_string()]);
        }
    }

    #[test]
    fn a_name_the_scene_shows_already_stays_first() {
        let candidates = name_candidates("pick up axe", OUTSIDE, None);
        assert_eq!(candidates, vec!["pick up axe".to_string()]);
    }

    #[test]
    fn names_never_start_or_end_with_glue() {
        // "tree in" is a run of the greenhouse, but not a name.
        let candidates = name_candidates("focus on tree in pot", GREENHOUSE, None);
        assert!(candidates.iter().all(|c| !c.ends_with(" in")), "{candidates:?}");
    }

    proptest::proptest! {
        /// Whatever the action, scene and focus: the action itself comes last, no candidate
        /// repeats, and each slot tries at most PER_SLOT names.
        #[test]
        fn candidates_end_with_the_action_and_repeat_nothing(
            action in "(pick up |focus on |move |look at )?[a-z0-9 ]{0,16}( containing [a-z ]{0,12})?( in [a-z ]{0,8})?( to [a-z0-9 ]{0,10})?",
            scene in "([a-z0-9 ]{0,16}( \\(containing [a-z ]{0,14}\\))?\n){0,5}",
            focused in proptest::option::of("[a-z ]{0,12}"),
        ) {
            let candidates = name_candidates(&action, &scene, focused.as_deref());
            proptest::prop_assert_eq!(candidates.last(), Some(&action));
            for (i, candidate) in candidates.iter().enumerate() {
                proptest::prop_assert!(!candidates[..i].contains(candidate), "{:?}", candidates);
            }
            proptest::prop_assert!(candidates.len() <= PER_SLOT * PER_SLOT + 1);
        }
    }

    #[test]
    fn understood_means_neither_unparsed_nor_ambiguous() {
        assert!(!was_understood("No known action matches that input."));
        assert!(!was_understood("Ambiguous request: Please enter the number for the action you intended (or blank to cancel):\n0: ..."));
        assert!(was_understood("You move the blue jay to the inventory."));
    }
}
