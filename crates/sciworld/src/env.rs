//! The ScienceWorld environment, with the official Python client's step semantics.

use std::time::Duration;

use rlvmr_core::{Env, EnvError, StepResult};

use crate::error::{Result, SciError};
use crate::jvm::JvmConfig;
use crate::sim::{RawStep, Simulator};
use crate::tasks::{check_variation, resolve_task, TaskInfo};

/// The official client's default step limit.
pub const DEFAULT_STEP_LIMIT: i64 = 100;
/// RLVMR's default simplifications (teleport, no electrical actions except on electrical
/// tasks, open doors, self-watering pots).
pub const DEFAULT_SIMPLIFICATIONS: &str = "easy";

/// How environments are set up.
#[derive(Debug, Clone)]
pub struct EnvConfig {
    pub jvm: JvmConfig,
    /// Comma-separated simplifications passed to `load` ("" for none).
    pub simplifications: String,
    /// Done once the simulator's move count exceeds this (moves > limit, as the official client).
    pub step_limit: i64,
    /// Fetch the valid actions after every reset and step (needed for prompts; 20-30 ms each).
    pub valid_actions: bool,
}

impl EnvConfig {
    /// Defaults: "easy", step limit 100, valid actions on, the cached jar (fetched if missing).
    pub fn from_default_jar() -> Result<EnvConfig> {
        Ok(EnvConfig::new(JvmConfig::new(crate::assets::jar_path()?)))
    }

    pub fn new(jvm: JvmConfig) -> EnvConfig {
        EnvConfig {
            jvm,
            simplifications: DEFAULT_SIMPLIFICATIONS.to_string(),
            step_limit: DEFAULT_STEP_LIMIT,
            valid_actions: true,
        }
    }
}

/// A simulator that is started on demand and thrown away (killed) when it breaks, so the next
/// use starts a fresh one.
pub(crate) struct SimSlot {
    config: JvmConfig,
    sim: Option<Simulator>,
    /// JVMs started after a failure.
    restarts: usize,
}

impl SimSlot {
    pub(crate) fn start(config: JvmConfig) -> Result<SimSlot> {
        let sim = Simulator::start(&config)?;
        Ok(SimSlot {
            config,
            sim: Some(sim),
            restarts: 0,
        })
    }

    /// Run `f` on the simulator (starting one if the last one broke). A broken JVM (crash,
    /// timeout, garbled answer) is killed and forgotten; the error is passed on.
    pub(crate) fn with<T>(&mut self, f: impl FnOnce(&mut Simulator) -> Result<T>) -> Result<T> {
        if self.sim.is_none() {
            self.sim = Some(Simulator::start(&self.config)?);
            self.restarts += 1;
        }
        let sim = self.sim.as_mut().ok_or(SciError::NoTask)?;
        let result = f(sim);
        if let Err(e) = &result {
            if e.jvm_is_broken() {
                if let Some(mut sim) = self.sim.take() {
                    sim.kill();
                }
            }
        }
        result
    }

    pub(crate) fn pid(&self) -> Option<u32> {
        self.sim.as_ref().map(Simulator::pid)
    }

    pub(crate) fn restarts(&self) -> usize {
        self.restarts
    }
}

/// One step as the official client reports it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SciStep {
    pub observation: String,
    /// The official score, 0-100 (`round(100 * getScore())`; negative when the task failed).
    pub score: i64,
    /// Score change since the previous step (the official reward).
    pub reward: i64,
    /// Task completed, score negative, or moves past the step limit.
    pub done: bool,
    /// Score 100.
    pub won: bool,
    /// The simulator's move count.
    pub moves: i64,
    /// Valid actions, sorted, when the config asks for them.
    pub valid_actions: Option<Vec<String>>,
}

/// The episode being played.
struct Episode {
    task: TaskInfo,
    variation: usize,
    description: String,
    last_score: i64,
    last_observation: String,
}

/// A ScienceWorld environment: one simulator in its own JVM.
pub struct SciWorldEnv {
    config: EnvConfig,
    slot: SimSlot,
    episode: Option<Episode>,
    /// The last game asked for; kept when an episode fails, so `Env::reset` can start it again.
    game: Option<(TaskInfo, usize)>,
}

impl SciWorldEnv {
    /// Start the JVM (about 2 s).
    pub fn new(config: EnvConfig) -> Result<SciWorldEnv> {
        let slot = SimSlot::start(config.jvm.clone())?;
        Ok(SciWorldEnv {
            config,
            slot,
            episode: None,
            game: None,
        })
    }

    /// Load a task ("boil" or "0") and variation and play the official reset ("look around").
    pub fn reset_to(&mut self, task: &str, variation: usize) -> Result<SciStep> {
        let task = resolve_task(task)?;
        check_variation(&task, variation)?;
        self.episode = None;
        self.game = Some((task, variation));
        let simplifications = self.config.simplifications.clone();
        let with_valid = self.config.valid_actions;
        let (description, raw) = self.slot.with(|sim| {
            sim.load(task.name, variation, &simplifications, false)?;
            let description = sim.task_description()?;
            let raw = sim.step("look around", with_valid)?;
            Ok((description, raw))
        })?;
        let mut episode = Episode {
            task,
            variation,
            description,
            last_score: 0,
            last_observation: String::new(),
        };
        let step = official_step(&mut episode, raw, self.config.step_limit);
        self.episode = Some(episode);
        Ok(step)
    }

    /// Play one command (any text; the simulator answers unknown input with
    /// "No known action matches that input."). A JVM failure ends the episode with an error;
    /// the next reset starts a fresh JVM.
    pub fn step_command(&mut self, command: &str) -> Result<SciStep> {
        let mut episode = self.episode.take().ok_or(SciError::NoTask)?;
        let with_valid = self.config.valid_actions;
        let raw = self.slot.with(|sim| sim.step(command, with_valid))?;
        let step = official_step(&mut episode, raw, self.config.step_limit);
        self.episode = Some(episode);
        Ok(step)
    }

    /// The loaded task and variation.
    pub fn current(&self) -> Option<(TaskInfo, usize)> {
        self.episode.as_ref().map(|e| (e.task, e.variation))
    }

    /// The task description of the loaded variation.
    pub fn task_description(&self) -> Option<&str> {
        self.episode.as_ref().map(|e| e.description.as_str())
    }

    /// Valid actions of the current state, sorted.
    pub fn valid_actions(&mut self) -> Result<Vec<String>> {
        self.require_episode()?;
        self.slot.with(Simulator::valid_actions)
    }

    /// Action templates ("open OBJ", ...), for prompts.
    pub fn action_templates(&mut self) -> Result<Vec<String>> {
        self.require_episode()?;
        self.slot.with(Simulator::possible_actions)
    }

    /// Objects the agent can name now, for prompts.
    pub fn objects(&mut self) -> Result<Vec<String>> {
        self.require_episode()?;
        self.slot.with(Simulator::possible_objects)
    }

    /// "look around" without spending a move.
    pub fn look(&mut self) -> Result<String> {
        self.require_episode()?;
        self.slot.with(Simulator::look)
    }

    /// The inventory without spending a move.
    pub fn inventory(&mut self) -> Result<String> {
        self.require_episode()?;
        self.slot.with(Simulator::inventory)
    }

    fn require_episode(&self) -> Result<()> {
        self.episode.as_ref().map(|_| ()).ok_or(SciError::NoTask)
    }

    /// The current JVM's pid (None right after a failure, until the next reset).
    pub fn jvm_pid(&self) -> Option<u32> {
        self.slot.pid()
    }

    /// JVMs started to replace broken ones.
    pub fn restarts(&self) -> usize {
        self.slot.restarts()
    }

    /// Change the per-call timeout (a hung JVM is detected after this long).
    pub fn set_call_timeout(&mut self, timeout: Duration) {
        self.config.jvm.call_timeout = timeout;
        self.slot.config.call_timeout = timeout;
        if let Some(sim) = self.slot.sim.as_mut() {
            sim.set_call_timeout(timeout);
        }
    }
}

/// The official client's bookkeeping: score x100 rounded, reward = score change, done on
/// completion, negative score or moves past the limit.
fn official_step(episode: &mut Episode, raw: RawStep, step_limit: i64) -> SciStep {
    let score = (100.0 * raw.score).round() as i64;
    let reward = score - episode.last_score;
    episode.last_score = score;
    episode.last_observation = raw.observation.clone();
    SciStep {
        done: raw.completed || raw.moves > step_limit || score < 0,
        won: score >= 100,
        observation: raw.observation,
        score,
        reward,
        moves: raw.moves,
        valid_actions: raw.valid_actions,
    }
}

impl SciStep {
    /// The core crate's view: score mapped to [0, 1] (a failed task's negative score gives 0).
    pub fn to_step_result(&self) -> StepResult {
        StepResult {
            observation: self.observation.clone(),
            admissible_actions: self.valid_actions.clone(),
            won: self.won,
            done: self.done,
            score: (self.score.max(0) as f64) / 100.0,
        }
    }
}

fn env_error(e: SciError) -> EnvError {
    EnvError(e.to_string())
}

impl Env for SciWorldEnv {
    /// Start the last game asked for again (also after a failed episode; an error if none was).
    fn reset(&mut self) -> std::result::Result<StepResult, EnvError> {
        let (task, variation) = self.game.ok_or_else(|| env_error(SciError::NoTask))?;
        self.reset_to(task.name, variation)
            .map(|s| s.to_step_result())
            .map_err(env_error)
    }

    fn step(&mut self, command: &str) -> std::result::Result<StepResult, EnvError> {
        self.step_command(command)
            .map(|s| s.to_step_result())
            .map_err(env_error)
    }

    fn task(&self) -> &str {
        self.task_description().unwrap_or("")
    }

    fn fetch_admissible(&mut self, wanted: bool) {
        self.config.valid_actions = wanted;
    }

    fn templates_and_objects(&mut self) -> std::result::Result<(Vec<String>, Vec<String>), EnvError> {
        let templates = self.action_templates().map_err(env_error)?;
        let objects = self.objects().map_err(env_error)?;
        Ok((templates, objects))
    }

    fn room_and_inventory(&mut self) -> std::result::Result<(String, String), EnvError> {
        let room = self.look().map_err(env_error)?;
        let inventory = self.inventory().map_err(env_error)?;
        Ok((room, inventory))
    }

    /// The last observation text.
    fn anchor(&self) -> String {
        self.episode
            .as_ref()
            .map(|e| e.last_observation.clone())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn episode() -> Episode {
        Episode {
            task: resolve_task("boil").unwrap(),
            variation: 0,
            description: String::new(),
            last_score: 0,
            last_observation: String::new(),
        }
    }

    fn raw(score: f64, completed: bool, moves: i64) -> RawStep {
        RawStep {
            observation: "o".into(),
            score,
            completed,
            moves,
            valid_actions: None,
        }
    }

    #[test]
    fn rewards_are_score_changes_and_done_follows_the_official_rules() {
        let mut ep = episode();
        let s = official_step(&mut ep, raw(0.0, false, 0), 100);
        assert_eq!((s.score, s.reward, s.done, s.won), (0, 0, false, false));
        let s = official_step(&mut ep, raw(0.333, false, 1), 100);
        assert_eq!((s.score, s.reward, s.done), (33, 33, false));
        let s = official_step(&mut ep, raw(0.5, false, 100), 100);
        assert_eq!(
            (s.score, s.reward, s.done),
            (50, 17, false),
            "moves == limit is not done"
        );
        let s = official_step(&mut ep, raw(0.5, false, 101), 100);
        assert!(s.done && !s.won, "moves past the limit");
        let s = official_step(&mut ep, raw(-1.0, false, 3), 100);
        assert!(s.done && !s.won && s.score == -100 && s.reward == -150);
        assert_eq!(s.to_step_result().score, 0.0);
        let s = official_step(&mut ep, raw(1.0, true, 4), 100);
        assert!(s.done && s.won);
        assert_eq!(s.to_step_result().score, 1.0);
    }
}
