//! ScienceWorld behind [`EnvProvider`]: a level's (task, variation) games as tasks, and
//! simulators (one JVM each) kept in a pool between episodes, since starting a JVM takes
//! seconds and a reset is cheap.

pub mod annotate;
pub mod game_key;
pub mod gold;
pub mod rename;

use std::sync::{Arc, Mutex};

use rlvmr_core::{Env, EnvError, OutputStyle, PromptEnv, StepResult};
use sciworld::{EnvConfig, GoldLengths, GoldPaths, Level, Phase, SciWorldEnv, TaskVariation};

use crate::agent::Policy;
use crate::envs::provider::{Detours, EnvProvider, Protocol};
use crate::envs::text::rename_all;
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
    /// The conductivity tasks' tested object shown as [`rename::TESTED_OBJECT_ALIAS`].
    alias_tested_object: bool,
    /// The conductivity tasks' wires shown as [`rename::WIRE_ALIASES`].
    alias_wires: bool,
    /// The expert plays recorded gold paths.
    recorded_gold_paths: bool,
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
            alias_tested_object: false,
            alias_wires: false,
            recorded_gold_paths: false,
        })
    }

    /// With `recorded`, the expert plays the committed recording's gold paths
    /// ([`sciworld::GoldPaths::recorded_train`]) where it has them and starts a gold-path JVM
    /// only for the others; a recorded path does not depend on what was generated before it.
    pub fn recorded_gold_paths(mut self, recorded: bool) -> Self {
        self.recorded_gold_paths = recorded;
        self
    }

    /// With `alias`, episodes of the conductivity tasks show the tested object as
    /// [`rename::TESTED_OBJECT_ALIAS`] (`tested object`) in the task, every observation, the
    /// room, the inventory and the valid actions, and commands naming the alias reach the
    /// simulator with the object's name; the expert plays the same way. The test variations
    /// test objects the training ones never name (a paper clip), and a small model does not
    /// copy a name it has never written.
    pub fn alias_tested_object(mut self, alias: bool) -> Self {
        self.alias_tested_object = alias;
        self
    }

    /// With `alias`, episodes of the conductivity tasks show the workshop's three wires as
    /// [`rename::WIRE_ALIASES`] (`left wire`, `middle wire`, `right wire` in the order the
    /// table lists them) in every text from the first look that shows them, and commands
    /// naming an alias reach the simulator with the wire's colour; the expert plays the same
    /// way. The wires are interchangeable, and a small model does not copy the right colour
    /// out of a room line full of colours (boxes, bulbs, wires).
    pub fn alias_wires(mut self, alias: bool) -> Self {
        self.alias_wires = alias;
        self
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
                .reading(self.recorded_gold_paths.then(GoldPaths::recorded_train))
                .giving_up_at(detours.give_up_at)
                .cutting_at(detours.cut_at)
                .alias_tested_object(self.alias_tested_object)
                .alias_wires(self.alias_wires)
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
        let mut env = match pooled {
            Some(env) => env,
            None => SciWorldEnv::new(self.config.clone()).map_err(|e| EnvError(e.to_string()))?,
        };
        // A pooled simulator may have been told to leave the list out by its last player.
        env.fetch_admissible(self.config.valid_actions);
        Ok(Box::new(PooledEnv {
            env: Some(env),
            idle: self.idle.clone(),
            task: name,
            variation,
            alias_tested_object: self.alias_tested_object,
            alias_wires: self.alias_wires,
            aliases: Vec::new(),
            shown_task: String::new(),
        }))
    }
}

/// One episode's simulator; it goes back to the pool when the episode is dropped.
struct PooledEnv {
    env: Option<SciWorldEnv>,
    idle: Idle,
    task: String,
    variation: usize,
    alias_tested_object: bool,
    alias_wires: bool,
    /// This episode's (name, alias) pairs: what the agent is shown instead of a name.
    aliases: Vec<(String, String)>,
    /// The task description as the agent is shown it.
    shown_task: String,
}

impl PooledEnv {
    fn env(&mut self) -> Result<&mut SciWorldEnv, EnvError> {
        self.env
            .as_mut()
            .ok_or_else(|| EnvError("the simulator is gone".into()))
    }

    /// `text` as the agent is shown it.
    fn shown(&self, text: &str) -> String {
        match self.aliases.is_empty() {
            true => text.to_string(),
            false => rename_all(text, &self.aliases),
        }
    }

    /// A step's texts as the agent is shown them.
    fn shown_step(&self, mut step: StepResult) -> StepResult {
        if !self.aliases.is_empty() {
            step.observation = self.shown(&step.observation);
            if let Some(actions) = step.admissible_actions.take() {
                step.admissible_actions = Some(actions.iter().map(|a| self.shown(a)).collect());
            }
        }
        step
    }

    /// With wire aliases asked for in a conductivity task and none found yet: the wires of
    /// the agent's room (a look, which does not act), aliased once all three are in view.
    /// `step` is the simulator's own: while its valid actions name no wire, none is in view
    /// and no look is spent.
    fn find_wires(&mut self, step: &StepResult) -> Result<(), EnvError> {
        let wanted = self.alias_wires && rename::is_conductivity_task(&self.task);
        if !wanted || self.aliases.iter().any(|(_, alias)| rename::WIRE_ALIASES.contains(&alias.as_str())) {
            return Ok(());
        }
        let in_view = step.admissible_actions.as_ref().is_none_or(|actions| actions.iter().any(|a| a.contains(" wire")));
        if !in_view {
            return Ok(());
        }
        let look = self.env()?.look().map_err(|e| EnvError(e.to_string()))?;
        self.aliases.extend(rename::wire_aliases(&look));
        Ok(())
    }

    /// `command` with each alias the agent wrote turned back into the simulator's name.
    fn to_simulator(&self, command: &str) -> String {
        let names: Vec<(String, String)> =
            self.aliases.iter().map(|(name, alias)| (alias.clone(), name.clone())).collect();
        rename_all(command, &names)
    }
}

impl Env for PooledEnv {
    fn reset(&mut self) -> Result<StepResult, EnvError> {
        let (task, variation) = (self.task.clone(), self.variation);
        let step = self
            .env()?
            .reset_to(&task, variation)
            .map(|s| s.to_step_result())
            .map_err(|e| EnvError(e.to_string()))?;
        let description = self.env()?.task().to_string();
        self.aliases = match self.alias_tested_object {
            true => rename::tested_object_alias(&description).into_iter().collect(),
            false => Vec::new(),
        };
        self.shown_task = self.shown(&description);
        self.find_wires(&step)?;
        Ok(self.shown_step(step))
    }

    fn step(&mut self, command: &str) -> Result<StepResult, EnvError> {
        let command = self.to_simulator(command);
        let step = self.env()?.step(&command)?;
        self.find_wires(&step)?;
        Ok(self.shown_step(step))
    }

    fn task(&self) -> &str {
        &self.shown_task
    }

    fn fetch_admissible(&mut self, wanted: bool) {
        if let Some(env) = self.env.as_mut() {
            env.fetch_admissible(wanted);
        }
    }

    fn anchor(&self) -> String {
        self.shown(&self.env.as_ref().map(|e| e.anchor()).unwrap_or_default())
    }

    fn templates_and_objects(&mut self) -> Result<(Vec<String>, Vec<String>), EnvError> {
        let (templates, objects) = self.env()?.templates_and_objects()?;
        Ok((templates, objects.iter().map(|o| self.shown(o)).collect()))
    }

    fn room_and_inventory(&mut self) -> Result<(String, String), EnvError> {
        let (room, inventory) = self.env()?.room_and_inventory()?;
        Ok((self.shown(&room), self.shown(&inventory)))
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
