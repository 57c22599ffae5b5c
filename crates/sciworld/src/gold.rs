//! Gold action sequences, generated in a JVM of their own: a load that asks for the gold path
//! makes every later plain `reset()` of that simulator regenerate it (up to 14 s), so playing
//! environments never ask for one.

use std::collections::HashMap;

use crate::env::{EnvConfig, SimSlot};
use crate::error::Result;
use crate::plain::{is_choice, name_candidates, was_understood};
use crate::tasks::{check_variation, resolve_task};

/// Heap for the gold JVM: generating a gold path runs out of a 128 MB heap on the
/// change-of-state tasks (boil, melt, freeze, ...). One gold JVM serves many playing ones.
pub const GOLD_HEAP_MB: u32 = 1024;

/// Hands out gold action sequences (cached per task and variation).
pub struct GoldOracle {
    slot: SimSlot,
    simplifications: String,
    /// Per (task, variation): the gold path and the task description.
    cache: HashMap<(usize, usize), (Vec<String>, String)>,
}

impl GoldOracle {
    /// Start the oracle's JVM. Gold paths follow `config.simplifications` (under "easy" they
    /// teleport), so use the playing environments' config.
    pub fn new(config: &EnvConfig) -> Result<GoldOracle> {
        let mut jvm = config.jvm.clone();
        jvm.max_heap_mb = jvm.max_heap_mb.max(GOLD_HEAP_MB);
        Ok(GoldOracle {
            slot: SimSlot::start(jvm)?,
            simplifications: config.simplifications.clone(),
            cache: HashMap::new(),
        })
    }

    /// The gold action sequence of a task ("boil" or "0") and variation; replayed from a reset
    /// it reaches score 100.
    pub fn gold_actions(&mut self, task: &str, variation: usize) -> Result<Vec<String>> {
        Ok(self.generated(task, variation)?.0.clone())
    }

    /// The task description of a task and variation (as the playing simulator gives it).
    pub fn task_description(&mut self, task: &str, variation: usize) -> Result<String> {
        Ok(self.generated(task, variation)?.1.clone())
    }

    /// The cached gold path and description of a variation, generated on first use.
    fn generated(&mut self, task: &str, variation: usize) -> Result<&(Vec<String>, String)> {
        let task = resolve_task(task)?;
        check_variation(&task, variation)?;
        let key = (task.index, variation);
        if !self.cache.contains_key(&key) {
            let simplifications = self.simplifications.clone();
            let generated = self.slot.with(|sim| {
                sim.load(task.name, variation, &simplifications, true)?;
                Ok((sim.gold_action_sequence()?, sim.task_description()?))
            })?;
            self.cache.insert(key, generated);
        }
        Ok(&self.cache[&key])
    }

    /// `path` (a playable gold path of the task's variation) with objects named as the room
    /// and the inventory show them ([`crate::plain`]): played in a fresh load, each action
    /// takes the first of its [`name_candidates`] the simulator understands (an action
    /// followed by a numbered choice is kept: its ambiguity is part of the path), a container
    /// of the focused object named by that object. The rewritten path is returned only if it
    /// reaches score 100 as `path` does (tried once more without naming containers by their
    /// contents if that lost); otherwise `path` itself, and `false`.
    pub fn with_plain_names(&mut self, task: &str, variation: usize, path: Vec<String>) -> Result<(Vec<String>, bool)> {
        let task = checked_task_name(task, variation)?;
        self.plain_reaching(task, variation, path, 1.0)
    }

    /// The same for `opening`, the first actions of a gold path too long to play whole: the
    /// rewritten opening is returned only if it reaches the score the opening as written
    /// reaches (the subgoals it completes), else `opening` itself, and `false`.
    pub fn opening_with_plain_names(&mut self, task: &str, variation: usize, opening: Vec<String>) -> Result<(Vec<String>, bool)> {
        let task = checked_task_name(task, variation)?;
        let as_written = self.replay_as_written(task, variation, &opening)?;
        self.plain_reaching(task, variation, opening, as_written)
    }

    /// `path` rewritten with plain names if the rewrite reaches `goal` (tried with and
    /// without naming containers by their contents), else `path` and `false`.
    fn plain_reaching(&mut self, task: &str, variation: usize, path: Vec<String>, goal: f64) -> Result<(Vec<String>, bool)> {
        for carry_focus in [true, false] {
            let (plain, score) = self.replay_plain(task, variation, &path, carry_focus)?;
            if score >= goal {
                return Ok((plain, true));
            }
        }
        Ok((path, false))
    }

    /// The score `path` reaches played as written from a fresh load.
    fn replay_as_written(&mut self, task: &str, variation: usize, path: &[String]) -> Result<f64> {
        let simplifications = self.simplifications.clone();
        self.slot.with(|sim| {
            sim.load(task, variation, &simplifications, false)?;
            let mut score = 0.0;
            for action in path {
                score = sim.step(action, false)?.score;
            }
            Ok(score)
        })
    }

    /// `path` played with plain names, and the score it reached.
    fn replay_plain(&mut self, task: &str, variation: usize, path: &[String], carry_focus: bool) -> Result<(Vec<String>, f64)> {
        let simplifications = self.simplifications.clone();
        self.slot.with(|sim| {
            sim.load(task, variation, &simplifications, false)?;
            let mut plain: Vec<String> = Vec::with_capacity(path.len());
            let mut score = 0.0;
            for (i, action) in path.iter().enumerate() {
                let chosen_next = path.get(i + 1).is_some_and(|next| is_choice(next));
                let candidates = if chosen_next {
                    vec![action.clone()]
                } else {
                    let focused = carry_focus
                        .then(|| plain.iter().rev().find_map(|a| a.strip_prefix("focus on ")))
                        .flatten();
                    let scene = format!("{}\n{}", sim.look()?, sim.inventory()?);
                    name_candidates(action, &scene, focused)
                };
                let mut played = None;
                for candidate in candidates {
                    let step = sim.step(&candidate, false)?;
                    score = step.score;
                    if was_understood(&step.observation) || candidate == *action {
                        played = Some(candidate);
                        break;
                    }
                }
                plain.push(played.unwrap_or_else(|| action.clone()));
            }
            Ok((plain, score))
        })
    }

    /// Whether the simplifications let an agent teleport ("easy" or `teleportAction`), so
    /// [`GoldOracle::playable_path`] makes walks teleports.
    pub fn teleports(&self) -> bool {
        self.simplifications.contains("easy") || self.simplifications.contains("teleportAction")
    }

    /// The simplifications the oracle's paths follow.
    pub fn simplifications(&self) -> &str {
        &self.simplifications
    }

    /// The gold path of a task's variation as an agent plays it: door openings left out
    /// ([`without_door_openings`]), walks made teleports where the simplifications allow
    /// them ([`with_teleports`]), with `cut_at` a longer path cut to its first `cut_at`
    /// actions, and objects named as the room shows them where the path still wins (an
    /// opening: still scores what it scored) so ([`GoldOracle::with_plain_names`]); with the
    /// task description.
    pub fn playable_path(&mut self, task: &str, variation: usize, cut_at: Option<usize>) -> Result<PlayablePath> {
        let task = checked_task_name(task, variation)?;
        let mut path = without_door_openings(self.gold_actions(task, variation)?);
        if self.teleports() {
            path = with_teleports(path);
        }
        let (path, whole) = match cut_at.filter(|&limit| path.len() > limit) {
            Some(limit) => {
                path.truncate(limit);
                (self.opening_with_plain_names(task, variation, path)?.0, false)
            }
            None => (self.with_plain_names(task, variation, path)?.0, true),
        };
        let description = self.task_description(task, variation)?;
        Ok(PlayablePath { path, whole, description })
    }

    /// The oracle JVM's pid.
    pub fn jvm_pid(&self) -> Option<u32> {
        self.slot.pid()
    }
}

/// A gold path as an agent plays it ([`GoldOracle::playable_path`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlayablePath {
    pub path: Vec<String>,
    /// The whole gold path, not an opening cut from a longer one.
    pub whole: bool,
    /// The variation's task description.
    pub description: String,
}

/// What replaying one gold path gave.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct GoldCheck {
    pub task: &'static str,
    pub variation: usize,
    /// Gold path length.
    pub actions: usize,
    /// Official score after the last action.
    pub score: i64,
    pub done: bool,
}

/// The simulator's name of a task ("boil" or "0"), if the variation is one of its own.
fn checked_task_name(task: &str, variation: usize) -> Result<&'static str> {
    let task = resolve_task(task)?;
    check_variation(&task, variation)?;
    Ok(task.name)
}

/// Generate the gold path in `oracle` and replay it in `env` from a reset.
pub fn replay_gold(
    oracle: &mut GoldOracle,
    env: &mut crate::env::SciWorldEnv,
    task: &str,
    variation: usize,
) -> Result<GoldCheck> {
    let info = resolve_task(task)?;
    let actions = oracle.gold_actions(info.name, variation)?;
    let mut last = env.reset_to(info.name, variation)?;
    for action in &actions {
        last = env.step_command(action)?;
    }
    Ok(GoldCheck {
        task: info.name,
        variation,
        actions: actions.len(),
        score: last.score,
        done: last.done,
    })
}

/// The gold path as an agent plays it under the "easy" simplifications (the default): the
/// gold paths open every door on the way, but there every door is already open and those
/// steps only answer "The door is already open.", so they are left out.
pub fn without_door_openings(path: Vec<String>) -> Vec<String> {
    path.into_iter()
        .filter(|a| !a.starts_with("open door to "))
        .collect()
}

/// The gold path with every run of consecutive `go to ROOM` moves replaced by one
/// `teleport to LAST_ROOM`: the gold paths walk from room to room, which asks an agent to
/// know the house's map, while the "easy" simplifications (`teleportAction`) let it go
/// straight to the room the task names. The other actions are kept, in order.
pub fn with_teleports(path: Vec<String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(path.len());
    let mut walking = false;
    for action in path {
        match action.strip_prefix("go to ") {
            Some(room) => {
                if walking {
                    out.pop();
                }
                out.push(format!("teleport to {room}"));
                walking = true;
            }
            None => {
                out.push(action);
                walking = false;
            }
        }
    }
    out
}

/// Playable gold-path lengths ([`without_door_openings`]) per (task index, variation), as
/// `rlvmr sciworld gold-lengths` records them: lines `task<TAB>variation<TAB>actions` under
/// a header line.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GoldLengths {
    lengths: HashMap<(usize, usize), usize>,
}

/// The header line of a gold-lengths file.
pub const GOLD_LENGTHS_HEADER: &str = "task\tvariation\tactions";

/// The recording committed with this crate: every training variation of the 30 tasks under
/// the "easy" simplifications.
const RECORDED_TRAIN: &[u8] = include_bytes!("../data/gold_lengths_train.tsv.gz");

impl GoldLengths {
    /// Parses a gold-lengths text; an error names the line and what was wrong with it.
    pub fn parse(text: &str) -> std::result::Result<GoldLengths, String> {
        let mut lengths = HashMap::new();
        for (i, line) in text.lines().enumerate() {
            if (i == 0 && line == GOLD_LENGTHS_HEADER) || line.trim().is_empty() {
                continue;
            }
            let bad = |what: &str| format!("line {}: {what}: {line:?}", i + 1);
            let fields: Vec<&str> = line.split('\t').collect();
            let [task, variation, actions] = fields[..] else {
                return Err(bad("not three tab-separated fields"));
            };
            let task = resolve_task(task).map_err(|e| bad(&e.to_string()))?;
            let variation: usize = variation.parse().map_err(|_| bad("variation is not a number"))?;
            check_variation(&task, variation).map_err(|e| bad(&e.to_string()))?;
            let actions: usize = actions.parse().map_err(|_| bad("actions is not a number"))?;
            lengths.insert((task.index, variation), actions);
        }
        Ok(GoldLengths { lengths })
    }

    /// The committed recording of the training variations.
    pub fn recorded_train() -> &'static GoldLengths {
        static RECORDED: std::sync::OnceLock<GoldLengths> = std::sync::OnceLock::new();
        RECORDED.get_or_init(|| GoldLengths::parse(&gunzipped(RECORDED_TRAIN)).expect("the committed recording parses"))
    }

    /// The playable length of a task's (name or index) variation's gold path, if recorded.
    pub fn get(&self, task: &str, variation: usize) -> Option<usize> {
        let task = resolve_task(task).ok()?;
        self.lengths.get(&(task.index, variation)).copied()
    }

    /// Every recorded ((task index, variation), actions), in no particular order.
    pub fn entries(&self) -> impl Iterator<Item = ((usize, usize), usize)> + '_ {
        self.lengths.iter().map(|(&key, &actions)| (key, actions))
    }

    /// Recorded variations.
    pub fn len(&self) -> usize {
        self.lengths.len()
    }

    pub fn is_empty(&self) -> bool {
        self.lengths.is_empty()
    }
}

/// The text of a gzipped recording committed with this crate.
pub(crate) fn gunzipped(bytes: &[u8]) -> String {
    let mut text = String::new();
    let mut gz = flate2::read::GzDecoder::new(bytes);
    std::io::Read::read_to_string(&mut gz, &mut text).expect("a committed recording is gzip text");
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn door_openings_are_left_out() {
        let path = ["open door to kitchen", "go to kitchen", "open fridge"].map(String::from);
        assert_eq!(without_door_openings(path.to_vec()), ["go to kitchen", "open fridge"]);
    }

    #[test]
    fn walks_become_teleports() {
        let path = ["go to hallway", "go to kitchen", "pick up pot", "go to hallway", "look around", "go to art studio"]
            .map(String::from);
        assert_eq!(
            with_teleports(path.to_vec()),
            ["teleport to kitchen", "pick up pot", "teleport to hallway", "look around", "teleport to art studio"]
        );
        assert!(with_teleports(Vec::new()).is_empty());
    }

    #[test]
    fn gold_lengths_parse_and_name_bad_lines() {
        let text = format!("{GOLD_LENGTHS_HEADER}\nboil\t3\t41\n5\t0\t9\n");
        let lengths = GoldLengths::parse(&text).unwrap();
        assert_eq!(lengths.get("boil", 3), Some(41));
        assert_eq!(lengths.get("find-animal", 0), Some(9));
        assert_eq!(lengths.get("0", 3), Some(41));
        assert_eq!(lengths.get("boil", 4), None);
        for (bad, says) in [
            ("boil\t3\n", "line 2: not three tab-separated fields"),
            ("boyl\t3\t4\n", "line 2: unknown task"),
            ("boil\tx\t4\n", "line 2: variation is not a number"),
            ("boil\t30\t4\n", "line 2:"),
            ("boil\t3\t-4\n", "line 2: actions is not a number"),
        ] {
            let err = GoldLengths::parse(&format!("{GOLD_LENGTHS_HEADER}\n{bad}")).unwrap_err();
            assert!(err.starts_with(says), "{bad:?}: {err}");
        }
    }

    #[test]
    fn the_recorded_training_lengths_cover_every_training_variation() {
        let recorded = GoldLengths::recorded_train();
        for task in crate::tasks() {
            for variation in task.split(crate::OfficialSplit::Train) {
                assert!(recorded.get(task.name, variation).is_some(), "{} {variation}", task.name);
            }
        }
    }
}
