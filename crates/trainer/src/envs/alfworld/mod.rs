//! ALFWorld: the games of a level, its expert and the annotator that tags and reasons the
//! expert's steps.

pub mod annotate;
pub mod expert;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use alfworld::{AlfworldData, AlfworldEnv, Level};
use rlvmr_core::{Env, EnvError, OutputStyle, PromptEnv};
use textworld::Game;

use crate::agent::Policy;
use crate::envs::provider::{Detours, EnvProvider, Protocol};
use crate::error::Result;
use crate::record::TaskRef;

use expert::ExpertPolicy;

/// ALFWorld at one level; parsed games are cached, so the G rollouts of a group parse once.
pub struct AlfworldProvider {
    data: AlfworldData,
    level: Level,
    games: Mutex<HashMap<String, Arc<Game>>>,
}

impl AlfworldProvider {
    pub fn new(data: AlfworldData, level: Level) -> Self {
        AlfworldProvider {
            data,
            level,
            games: Mutex::new(HashMap::new()),
        }
    }

    fn tasks(entries: Vec<&alfworld::GameEntry>) -> Vec<TaskRef> {
        entries
            .into_iter()
            .map(|g| TaskRef {
                game: g.path.clone(),
                task_type: g.task_type.short().to_string(),
            })
            .collect()
    }

    fn game(&self, path: &str) -> Result<Arc<Game>, EnvError> {
        let mut cache = self
            .games
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(game) = cache.get(path) {
            return Ok(game.clone());
        }
        let text = self.data.read(path).map_err(|e| EnvError(e.to_string()))?;
        let game = Arc::new(
            alfworld::load_game(&text).map_err(|e| EnvError(format!("game {path}: {e}")))?,
        );
        cache.insert(path.to_string(), game.clone());
        Ok(game)
    }
}

impl EnvProvider for AlfworldProvider {
    fn name(&self) -> &'static str {
        "alfworld"
    }

    fn prompt_env(&self) -> PromptEnv {
        PromptEnv::AlfWorld
    }

    fn train_tasks(&self) -> Vec<TaskRef> {
        Self::tasks(self.level.train_games(&self.data))
    }

    fn test_tasks(&self) -> Vec<TaskRef> {
        Self::tasks(self.level.test_games(&self.data))
    }

    /// `published`: the training games of all six task types (L0's, whatever the level),
    /// as the authors' cold start draws them; `strict`: the level's training games.
    fn coldstart_tasks(&self, protocol: Protocol) -> Vec<TaskRef> {
        match protocol {
            Protocol::Published => Self::tasks(Level::L0.train_games(&self.data)),
            Protocol::Strict => self.train_tasks(),
        }
    }

    fn expert(&self, detours: Detours, style: OutputStyle) -> Result<Box<dyn Policy>> {
        Ok(Box::new(
            ExpertPolicy::new(detours.mistake_fraction)
                .searching_appliance(detours.appliance_search)
                .replying(style),
        ))
    }

    /// ALFWorld games are deterministic: the seed changes nothing.
    fn make(
        &self,
        task: &TaskRef,
        _env_seed: u64,
        max_steps: usize,
    ) -> Result<Box<dyn Env + Send>, EnvError> {
        Ok(Box::new(
            AlfworldEnv::new(self.game(&task.game)?).with_max_steps(max_steps),
        ))
    }
}

