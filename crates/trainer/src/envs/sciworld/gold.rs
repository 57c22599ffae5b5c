//! ScienceWorld's expert: the simulator's gold action sequence of the variation (from a
//! gold-path JVM of its own; door openings left out, see [`without_door_openings`], and
//! under the "easy" simplifications each walk through rooms made one teleport, see
//! [`with_teleports`]; objects named as the room shows them, see
//! [`sciworld::GoldOracle::with_plain_names`]), one action per turn, tagged and reasoned
//! by [`super::annotate`] like ALFWorld's demonstrations: a plan naming the subgoals,
//! exploration of unseen rooms, monitoring.
//!
//! For cold-start data a seeded fraction of episodes carries one recoverable mistake at an
//! early step ([`plant_mistake`]: a command the simulator does not understand, a room
//! through a wall, or a wrong turn), followed by its correction, tagged `reflection`. The
//! mistake's feedback is checked: if the simulator accepted it after all, the episode is
//! abandoned (an error, so the cold start drops it) rather than leave its gold path. When
//! the gold path runs out before the episode ends, the expert looks around.

use std::collections::{HashMap, VecDeque};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sciworld::{with_teleports, without_door_openings, EnvConfig, GoldOracle};

use crate::agent::{act_in_slots, Policy, Reply, Turn};
use crate::error::{Result, TrainerError};
use crate::record::EpisodeSpec;
use super::annotate::{plant_mistake, SciMistake, SciSituation};
use super::game_key::parse_game;
use crate::envs::text::rename_all;

use crate::agent::annotated_reply;
use rlvmr_core::OutputStyle;

/// The last step at which a mistake may first be tried (later steps are tried while none
/// fits, up to [`LAST_MISTAKE_STEP`]).
const FIRST_MISTAKE_STEPS: usize = 5;
const LAST_MISTAKE_STEP: usize = 12;

/// Gold-path JVMs generating side by side (some paths take seconds; one per core here).
pub const GOLD_JVMS: usize = 2;

/// Plays gold paths.
pub struct GoldPolicy {
    /// [`GOLD_JVMS`] of them, started when first needed beyond the first.
    oracles: Vec<GoldOracle>,
    config: EnvConfig,
    mistake_fraction: f64,
    style: OutputStyle,
    slots: HashMap<usize, Slot>,
    /// The cold start's step limit: episodes whose gold path is this long are given up.
    give_up_at: Option<usize>,
    paths: PathOptions,
}

/// How a gold path is made playable.
#[derive(Debug, Clone, Copy, Default)]
struct PathOptions {
    /// Walks become teleports ([`with_teleports`]): the simplifications allow them.
    teleport: bool,
    /// Paths name a conductivity task's tested object by its alias, as an aliasing
    /// environment shows it ([`super::SciworldProvider::alias_tested_object`]).
    alias: bool,
    /// A path longer than this is cut to its first this many actions (an opening).
    cut_at: Option<usize>,
    /// Paths name a conductivity circuit's wires by [`super::rename::WIRE_ALIASES`] in the
    /// order they take them up, as a wire-aliasing environment takes them.
    alias_wires: bool,
}

/// One episode's gold path, annotator and mistake plan.
struct Slot {
    path: Vec<String>,
    /// The next gold action to play.
    next: usize,
    situation: Option<SciSituation>,
    rng: ChaCha8Rng,
    mistake_at: Option<usize>,
    /// The mistake played at the previous step, if any.
    mistake: Option<SciMistake>,
    /// Commands that undo a mistake, played before the gold path goes on.
    corrections: VecDeque<String>,
    last_action: String,
}

impl GoldPolicy {
    /// Starts the gold-path JVM (the cached jar, "easy" simplifications); a seeded
    /// `mistake_fraction` of the episodes get one recoverable mistake.
    pub fn new(mistake_fraction: f64) -> Result<GoldPolicy> {
        let config =
            EnvConfig::from_default_jar()?;
        let oracle = GoldOracle::new(&config)?;
        let simplifications = &config.simplifications;
        let teleport = simplifications.contains("easy") || simplifications.contains("teleportAction");
        Ok(GoldPolicy {
            oracles: vec![oracle],
            config,
            mistake_fraction: mistake_fraction.clamp(0.0, 1.0),
            style: OutputStyle::Tagged,
            slots: HashMap::new(),
            give_up_at: None,
            paths: PathOptions { teleport, ..PathOptions::default() },
        })
    }

    /// Gives up (fails at its start) every episode whose gold path as played (door
    /// openings left out, walks made teleports) has `limit` actions or more. `None`: plays
    /// every path.
    pub fn giving_up_at(mut self, limit: Option<usize>) -> Self {
        self.give_up_at = limit;
        self
    }

    /// Plays the paths with a conductivity task's tested object named by its alias (the
    /// environment shows the alias and turns it back into the name).
    pub fn alias_tested_object(mut self, alias: bool) -> Self {
        self.paths.alias = alias;
        self
    }

    /// Plays the paths with a circuit's wires named by [`super::rename::WIRE_ALIASES`], the
    /// first wire the path takes up `left wire` and so on (the environment turns the aliases
    /// into the wires in the order the room lists them: another choice of the same
    /// interchangeable wires, the same circuit).
    pub fn alias_wires(mut self, alias: bool) -> Self {
        self.paths.alias_wires = alias;
        self
    }

    /// Plays only the first `limit` actions of a longer gold path (the cold start's
    /// openings of tasks too long to win in its step limit; the collector ends the episode
    /// there). `None`: whole paths.
    pub fn cutting_at(mut self, limit: Option<usize>) -> Self {
        self.paths.cut_at = limit;
        self
    }

    /// Replies in `style` (`<think>` demonstrations for the published baselines).
    pub fn replying(mut self, style: OutputStyle) -> Self {
        self.style = style;
        self
    }
}

impl Slot {
    fn new(path: Vec<String>, spec: &EpisodeSpec, mistake_fraction: f64) -> Slot {
        let mut rng = ChaCha8Rng::seed_from_u64(spec.rollout_seed);
        // Early, and inside the path (short paths get theirs before the end).
        let latest = FIRST_MISTAKE_STEPS.min(path.len().saturating_sub(1)).max(1);
        let mistake_at = rng
            .gen_bool(mistake_fraction)
            .then(|| rng.gen_range(1..=latest));
        Slot {
            path,
            next: 0,
            situation: None,
            rng,
            mistake_at,
            mistake: None,
            corrections: VecDeque::new(),
            last_action: String::new(),
        }
    }

    fn act(&mut self, turn: &Turn, style: OutputStyle) -> Result<Reply, String> {
        match self.situation.as_mut() {
            None => self.situation = Some(SciSituation::new(turn.task, turn.observation)),
            Some(situation) => situation.update(&self.last_action, turn.observation),
        }
        let previous = self.mistake.take();
        if let Some(mistake) = &previous {
            if !mistake.went_as_planned(turn.observation) {
                return Err(format!(
                    "the planted mistake '{}' did not go as planned: {}",
                    mistake.command(),
                    turn.observation.trim()
                ));
            }
        }
        let (intended, from_path) = match self.corrections.pop_front() {
            Some(correction) => (correction, false),
            None => match self.path.get(self.next) {
                Some(action) => {
                    self.next += 1;
                    (action.clone(), true)
                }
                None => ("look around".to_string(), false),
            },
        };
        let mut command = intended.clone();
        if from_path && previous.is_none() && self.wants_mistake(turn.step) {
            let room = self.situation.as_ref().and_then(|s| s.room());
            let upcoming = &self.path[self.next..];
            let valid = turn.admissible.unwrap_or(&[]);
            if let Some(mistake) = plant_mistake(&intended, upcoming, valid, room, &mut self.rng) {
                command = mistake.command();
                self.corrections.extend(mistake.undo());
                self.corrections.push_back(intended.clone());
                self.mistake = Some(mistake);
                self.mistake_at = None;
            }
        }
        let situation = self.situation.as_ref().ok_or("no situation")?;
        // A planted mistake is never a training target; it carries the intended step's reason.
        let (tag, reason) = if self.mistake.is_some() {
            situation.annotate(turn.step, &intended, &self.path, self.next, None, &mut self.rng)
        } else {
            let previous = previous.as_ref();
            situation.annotate(turn.step, &command, &self.path, self.next, previous, &mut self.rng)
        };
        self.last_action = command.clone();
        Ok(Reply {
            mistake: self.mistake.is_some(),
            ..Reply::text(annotated_reply(style, tag, &reason, &command))
        })
    }

    fn wants_mistake(&self, step: usize) -> bool {
        self.mistake_at
            .is_some_and(|at| step >= at && step <= LAST_MISTAKE_STEP)
    }
}

impl Policy for GoldPolicy {
    fn name(&self) -> String {
        "expert (gold paths)".into()
    }

    fn start_episode(&mut self, slot: usize, spec: &EpisodeSpec) -> Result<()> {
        let path = gold_path(&mut self.oracles[0], spec, self.paths)?;
        self.start_with(slot, spec, path)
    }

    /// The wave's gold paths come from [`GOLD_JVMS`] JVMs side by side: episode `i` from JVM
    /// `i % GOLD_JVMS`, so the paths and what follows do not depend on timing.
    fn start_episodes(&mut self, starts: &[(usize, &EpisodeSpec)]) -> Vec<Result<()>> {
        let wanted = GOLD_JVMS.min(starts.len());
        while self.oracles.len() < wanted {
            match GoldOracle::new(&self.config) {
                Ok(oracle) => self.oracles.push(oracle),
                Err(e) => {
                    let message = format!("a gold-path JVM could not start: {e}");
                    return starts.iter().map(|_| Err(TrainerError::Invalid(message.clone()))).collect();
                }
            }
        }
        let n = self.oracles.len();
        let options = self.paths;
        let mut paths: Vec<Option<Result<Vec<String>>>> = starts.iter().map(|_| None).collect();
        std::thread::scope(|scope| {
            let workers: Vec<_> = self
                .oracles
                .iter_mut()
                .enumerate()
                .map(|(k, oracle)| {
                    scope.spawn(move || {
                        (k..starts.len())
                            .step_by(n)
                            .map(|i| (i, gold_path(oracle, starts[i].1, options)))
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            for worker in workers {
                let done = worker.join().unwrap_or_default();
                for (i, path) in done {
                    paths[i] = Some(path);
                }
            }
        });
        starts
            .iter()
            .zip(paths)
            .map(|(&(slot, spec), path)| {
                let path = path.unwrap_or_else(|| Err(TrainerError::Invalid("a gold-path worker panicked".into())))?;
                self.start_with(slot, spec, path)
            })
            .collect()
    }

    /// Only where a mistake may be planted: the mistake is chosen among the valid actions.
    fn reads_admissible(&self, slot: usize, step: usize) -> bool {
        self.slots.get(&slot).is_none_or(|s| s.wants_mistake(step))
    }

    fn act(&mut self, turns: &[Turn]) -> Result<Vec<Result<Reply, String>>> {
        let style = self.style;
        Ok(act_in_slots(&mut self.slots, turns, "gold path", |slot, turn| slot.act(turn, style)))
    }
}

/// The episode's gold path as played: door openings left out, with `teleport` (the
/// simplifications allow it) each walk through rooms made one teleport, with `cut_at` a
/// longer path cut to its opening, objects named as the room shows them where the path
/// still wins (an opening: still scores) so ([`GoldOracle::with_plain_names`]), and with
/// `alias` a conductivity task's tested object named by its alias.
fn gold_path(oracle: &mut GoldOracle, spec: &EpisodeSpec, options: PathOptions) -> Result<Vec<String>> {
    let (task, variation) = parse_game(&spec.task.game)?;
    let path = oracle
        .gold_actions(&task, variation)
        .map_err(|e| TrainerError::context(format!("gold path of {task} {variation}"), e))?;
    let mut path = without_door_openings(path);
    if options.teleport {
        path = with_teleports(path);
    }
    let plain = match options.cut_at.filter(|&limit| path.len() > limit) {
        Some(limit) => {
            path.truncate(limit);
            oracle.opening_with_plain_names(&task, variation, path)
        }
        None => oracle.with_plain_names(&task, variation, path),
    };
    let (mut path, _plain) =
        plain.map_err(|e| TrainerError::context(format!("plain names in the gold path of {task} {variation}"), e))?;
    if options.alias_wires && super::rename::is_conductivity_task(&task) {
        let aliases = super::rename::wire_aliases(&path.join("\n"));
        path = path.iter().map(|action| rename_all(action, &aliases)).collect();
    }
    if !options.alias {
        return Ok(path);
    }
    let description = oracle
        .task_description(&task, variation)
        .map_err(|e| TrainerError::context(format!("task description of {task} {variation}"), e))?;
    let aliases: Vec<_> = super::rename::tested_object_alias(&description).into_iter().collect();
    Ok(path.iter().map(|action| rename_all(action, &aliases)).collect())
}

impl GoldPolicy {
    /// Sets `slot` up to play `path`, unless it is too long for the cold start.
    fn start_with(&mut self, slot: usize, spec: &EpisodeSpec, path: Vec<String>) -> Result<()> {
        let game = &spec.task.game;
        if let Some(limit) = self.give_up_at.filter(|&limit| path.len() >= limit) {
            return Err(TrainerError::Invalid(format!(
                "given up: the gold path of {game} has {} actions, the limit is {limit}",
                path.len()
            )));
        }
        self.slots
            .insert(slot, Slot::new(path, spec, self.mistake_fraction));
        Ok(())
    }
}
