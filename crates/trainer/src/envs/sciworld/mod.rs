//! ScienceWorld behind [`EnvProvider`]: a level's (task, variation) games as tasks, and
//! simulators (one JVM each) kept in a pool between episodes, since starting a JVM takes
//! seconds and a reset is cheap.

pub mod annotate;
pub mod game_key;
pub mod gold;
pub mod rename;

use std::sync::{Arc, Mutex};

use rlvmr_core::{Env, EnvError, OutputStyle, PromptEnv, StepResult};
use sciworld::{EnvConfig, GoldLengths, Level, Phase, SciWorldEnv, TaskVariation};

use crate::agent::Policy;
use crate::envs::provider::{Detours, EnvProvider, Protocol};
use crate::error::{Result, TrainerError};
use crate::record::TaskRef;

pub use game_key::{game_name, parse_game};
use gold::GoldPolicy;

/// The most simulators (JVMs) a collection keeps running at once.
pub const MAX_SIMULATORS: usize = 8;

/// Simulators not playing an episode right now.
type Idle = Arc<Mutex<Vec<SciWorldEnv>>>;

/// ScienceWorld at one level.
pub struct SciworldProvider {
    level: Level,
    config: EnvConfig,
    idle: Idle,
}

impl SciworldProvider {
    /// The level `split` (`L0`, `L1`, `L2`) with the cached jar (fetched on first use).
    pub fn open(split: &str) -> Result<SciworldProvider> {
        let level = Level::from_name(split).ok_or_else(|| TrainerError::UnknownSplit {
            env: "sciworld".into(),
            split: split.into(),
        })?;
        let config =
            EnvConfig::from_default_jar()?;
        Ok(SciworldProvider {
            level,
            config,
            idle: Arc::new(Mutex::new(Vec::new())),
        })
    }

    /// Simulators idle in the pool (after a collection: every one it started).
    pub fn idle_simulators(&self) -> usize {
        self.idle
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .len()
    }

    fn tasks(games: Vec<TaskVariation>) -> Vec<TaskRef> {
        games
            .into_iter()
            .map(|g| TaskRef {
                game: game_name(g.task.name, g.variation),
                task_type: g.task.name.to_string(),
            })
            .collect()
    }
}

impl EnvProvider for SciworldProvider {
    fn name(&self) -> &'static str {
        "sciworld"
    }

    fn prompt_env(&self) -> PromptEnv {
        PromptEnv::ScienceWorld
    }

    fn train_tasks(&self) -> Vec<TaskRef> {
        Self::tasks(self.level.games(Phase::Train))
    }

    fn test_tasks(&self) -> Vec<TaskRef> {
        Self::tasks(self.level.games(Phase::Test))
    }

    /// `published`: the training variations of all 29 tasks (L0's, whatever the level), as
    /// the authors' cold start takes expert trajectories of any task; `strict`: the level's.
    fn coldstart_tasks(&self, protocol: Protocol) -> Vec<TaskRef> {
        match protocol {
            Protocol::Published => Self::tasks(Level::L0.games(Phase::Train)),
            Protocol::Strict => self.train_tasks(),
        }
    }

    /// ScienceWorld's recorded gold-path lengths (`sciworld::GoldLengths::recorded_train`):
    /// a gold path of `max_steps` actions or more cannot make a kept demonstration, and
    /// generating it costs up to seconds (mendelian genetics: about 130 actions).
    fn expert_may_fit(&self, task: &TaskRef, max_steps: usize) -> bool {
        let Ok((name, variation)) = parse_game(&task.game) else { return true };
        GoldLengths::recorded_train()
            .get(&name, variation)
            .map_or(true, |actions| actions < max_steps)
    }

    /// The conductivity tasks' tested object renamed, the find tasks' species permuted
    /// ([`rename::renamings`]): the test variations name other objects and letters, and
    /// hold other species in other proportions.
    fn demo_renamings(&self, description: &str, rng: &mut rand_chacha::ChaCha8Rng) -> Vec<(String, String)> {
        rename::renamings(description, rng)
    }

    /// Each episode holds a simulator JVM (~220 MB): at most [`MAX_SIMULATORS`] at once.
    fn max_parallel(&self) -> Option<usize> {
        Some(MAX_SIMULATORS)
    }

    /// The gold paths (a gold-path JVM of its own); ScienceWorld has no appliance search.
    fn expert(&self, detours: Detours, style: OutputStyle) -> Result<Box<dyn Policy>> {
        Ok(Box::new(
            GoldPolicy::new(detours.mistake_fraction)?
                .giving_up_at(detours.give_up_at)
                .replying(style),
        ))
    }

    /// A pooled simulator set to the game; the collector ends episodes at its step limit.
    fn make(
        &self,
        task: &TaskRef,
        _env_seed: u64,
        _max_steps: usize,
    ) -> Result<Box<dyn Env + Send>, EnvError> {
        let (name, variation) = parse_game(&task.game)?;
        let pooled = self
            .idle
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .pop();
        let env = match pooled {
            Some(env) => env,
            None => SciWorldEnv::new(self.config.clone()).map_err(|e| EnvError(e.to_string()))?,
        };
        Ok(Box::new(PooledEnv {
            env: Some(env),
            idle: self.idle.clone(),
            task: name,
            variation,
        }))
    }
}

/// One episode's simulator; it goes back to the pool when the episode is dropped.
struct PooledEnv {
    env: Option<SciWorldEnv>,
    idle: Idle,
    task: String,
    variation: usize,
}

impl PooledEnv {
    fn env(&mut self) -> Result<&mut SciWorldEnv, EnvError> {
        self.env
            .as_mut()
            .ok_or_else(|| EnvError("the simulator is gone".into()))
    }
}

impl Env for PooledEnv {
    fn reset(&mut self) -> Result<StepResult, EnvError> {
        let (task, variation) = (self.task.clone(), self.variation);
        self.env()?
            .reset_to(&task, variation)
            .map(|s| s.to_step_result())
            .map_err(|e| EnvError(e.to_string()))
    }

    fn step(&mut self, command: &str) -> Result<StepResult, EnvError> {
        self.env()?.step(command)
    }

    fn task(&self) -> &str {
        self.env.as_ref().map(|e| e.task()).unwrap_or("")
    }

    fn anchor(&self) -> String {
        self.env.as_ref().map(|e| e.anchor()).unwrap_or_default()
    }

    fn templates_and_objects(&mut self) -> Result<(Vec<String>, Vec<String>), EnvError> {
        self.env()?.templates_and_objects()
    }

    fn room_and_inventory(&mut self) -> Result<(String, String), EnvError> {
        self.env()?.room_and_inventory()
    }
}

impl Drop for PooledEnv {
    fn drop(&mut self) {
        if let Some(env) = self.env.take() {
            self.idle
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .push(env);
        }
    }
}
