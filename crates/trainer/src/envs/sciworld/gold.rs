//! ScienceWorld's expert: the simulator's gold action sequence of the variation as an agent
//! plays it ([`GoldOracle::playable_path`]: door openings left out, under the "easy"
//! simplifications each walk through rooms made one teleport, objects named as the room
//! shows them), generated in gold-path JVMs of its own or, if asked, read from the committed
//! recording ([`GoldPaths::recorded_train`]) where it has them; one action per turn, tagged and
//! reasoned by [`super::annotate`] like ALFWorld's demonstrations: a plan naming the
//! subgoals, exploration of unseen rooms, monitoring.
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
use sciworld::{EnvConfig, GoldOracle, GoldPaths, PlayablePath};

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
    /// Up to [`GOLD_JVMS`] of them, started when a path is first missing from `recorded`.
    oracles: Vec<GoldOracle>,
    /// Recorded paths, read before any JVM is asked.
    recorded: Option<&'static GoldPaths>,
    config: EnvConfig,
    mistake_fraction: f64,
    style: OutputStyle,
    slots: HashMap<usize, Slot>,
    /// The cold start's step limit: episodes whose gold path is this long are given up.
    give_up_at: Option<usize>,
    paths: PathOptions,
}

/// How a gold path is played.
#[derive(Debug, Clone, Copy, Default)]
struct PathOptions {
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
    /// Generates its paths in gold-path JVMs (the cached jar, "easy" simplifications),
    /// started when first needed; a seeded `mistake_fraction` of the episodes get one
    /// recoverable mistake.
    pub fn new(mistake_fraction: f64) -> Result<GoldPolicy> {
        Ok(GoldPolicy {
            oracles: Vec::new(),
            recorded: None,
            config: EnvConfig::from_default_jar()?,
            mistake_fraction: mistake_fraction.clamp(0.0, 1.0),
            style: OutputStyle::Tagged,
            slots: HashMap::new(),
            give_up_at: None,
            paths: PathOptions::default(),
        })
    }

    /// Reads paths from `recorded` (e.g. [`GoldPaths::recorded_train`]) before asking a JVM
    /// (`None`, the default: generates every path).
    pub fn reading(mut self, recorded: Option<&'static GoldPaths>) -> Self {
        self.recorded = recorded;
        self
    }

    /// Gold-path JVMs started so far.
    pub fn jvms(&self) -> usize {
        self.oracles.len()
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
        self.start_episodes(&[(slot, spec)]).pop().unwrap_or_else(|| Err(TrainerError::Invalid("no episode started".into())))
    }

    /// The wave's paths from the recording where it has them; the others from up to
    /// [`GOLD_JVMS`] JVMs side by side: the `i`th missing path from JVM `i % GOLD_JVMS`, so
    /// the paths and what follows do not depend on timing.
    fn start_episodes(&mut self, starts: &[(usize, &EpisodeSpec)]) -> Vec<Result<()>> {
        let mut paths: Vec<Option<Result<PlayablePath>>> =
            starts.iter().map(|&(_, spec)| self.recorded_path(spec).map(Ok)).collect();
        let missing: Vec<usize> = (0..starts.len()).filter(|&i| paths[i].is_none()).collect();
        if let Err(e) = self.start_oracles(GOLD_JVMS.min(missing.len())) {
            let message = format!("a gold-path JVM could not start: {e}");
            return starts.iter().map(|_| Err(TrainerError::Invalid(message.clone()))).collect();
        }
        let n = self.oracles.len();
        let cut_at = self.paths.cut_at;
        std::thread::scope(|scope| {
            let workers: Vec<_> = self
                .oracles
                .iter_mut()
                .enumerate()
                .map(|(k, oracle)| {
                    let missing = &missing;
                    scope.spawn(move || {
                        missing
                            .iter()
                            .skip(k)
                            .step_by(n)
                            .map(|&i| (i, generated_path(oracle, starts[i].1, cut_at)))
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
                let path = played_path(spec, path, self.paths)?;
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

/// The episode's gold path as an agent plays it, generated in `oracle`
/// ([`GoldOracle::playable_path`]; with `cut_at` a longer path cut to its opening).
fn generated_path(oracle: &mut GoldOracle, spec: &EpisodeSpec, cut_at: Option<usize>) -> Result<PlayablePath> {
    let (task, variation) = parse_game(&spec.task.game)?;
    oracle
        .playable_path(&task, variation, cut_at)
        .map_err(|e| TrainerError::context(format!("gold path of {task} {variation}"), e))
}

/// `playable` as the expert plays it: with `alias_wires` a circuit's wires named by their
/// aliases, with `alias` a conductivity task's tested object named by its alias.
fn played_path(spec: &EpisodeSpec, playable: PlayablePath, options: PathOptions) -> Result<Vec<String>> {
    let (task, _) = parse_game(&spec.task.game)?;
    let mut path = playable.path;
    if options.alias_wires && super::rename::is_conductivity_task(&task) {
        let aliases = super::rename::wire_aliases(&path.join("\n"));
        path = path.iter().map(|action| rename_all(action, &aliases)).collect();
    }
    if !options.alias {
        return Ok(path);
    }
    let aliases: Vec<_> = super::rename::tested_object_alias(&playable.description).into_iter().collect();
    Ok(path.iter().map(|action| rename_all(action, &aliases)).collect())
}

impl GoldPolicy {
    /// The recorded path of the episode's variation, if the recording has it for these
    /// simplifications and this cut (and the JVMs would run under the flags it was
    /// recorded under, which make the simulator deterministic).
    fn recorded_path(&self, spec: &EpisodeSpec) -> Option<PlayablePath> {
        if self.config.jvm.flags != sciworld::JvmConfig::DEFAULT_FLAGS {
            return None;
        }
        let (task, variation) = parse_game(&spec.task.game).ok()?;
        self.recorded?.get(&self.config.simplifications, &task, variation, self.paths.cut_at)
    }

    /// Starts gold-path JVMs until `wanted` run.
    fn start_oracles(&mut self, wanted: usize) -> Result<()> {
        while self.oracles.len() < wanted {
            self.oracles.push(GoldOracle::new(&self.config)?);
        }
        Ok(())
    }

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
