//! Environments behind one provider trait: the tasks of a split and a fresh [`Env`] per
//! episode. The collector and evaluation only see this trait, so ScienceWorld plugs in by
//! implementing it.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use alfworld::{AlfworldData, AlfworldEnv, Level};
use rlvmr_core::{Env, EnvError, PromptEnv};
use serde::{Deserialize, Serialize};
use textworld::Game;

use crate::error::{Result, TrainerError};
use crate::record::TaskRef;

/// Which games may be played before an L2 test. The two differ only in the cold start's
/// games; RL trains on the level's training games under both.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    /// As the authors' code runs it (`alfworld_prepare.py`): the cold start draws its
    /// demonstrations from the training games of all six ALFWorld task types; RL and every
    /// later training game are the level's (types 1-4 at L2). The paper's L2 means "task
    /// categories never seen in RL".
    #[default]
    Published,
    /// The level's training games everywhere: at L2, types 5-6 (cool, pick_two) appear
    /// nowhere before the test ("never seen at all").
    Strict,
}

impl Protocol {
    pub const ALL: [Protocol; 2] = [Protocol::Published, Protocol::Strict];

    pub fn name(self) -> &'static str {
        match self {
            Protocol::Published => "published",
            Protocol::Strict => "strict",
        }
    }

    pub fn from_name(name: &str) -> Option<Protocol> {
        Protocol::ALL.into_iter().find(|p| p.name() == name)
    }

    /// One line for the header of a table that reports L2.
    pub fn describe(self) -> &'static str {
        match self {
            Protocol::Published => {
                "protocol published: cold start on all six ALFWorld task types, RL on the level's \
                 types (1-4 at L2), L2 tested on types 5-6 of valid_unseen"
            }
            Protocol::Strict => {
                "protocol strict: cold start and RL on the level's types only (1-4 at L2), \
                 L2 tested on types 5-6 of valid_unseen, seen nowhere before"
            }
        }
    }
}

impl std::fmt::Display for Protocol {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// An environment family at one generalisation level.
pub trait EnvProvider: Sync {
    /// `alfworld`, `sciworld`.
    fn name(&self) -> &'static str;
    /// Which environment text the prompt builder writes.
    fn prompt_env(&self) -> PromptEnv;
    /// The level's training tasks (cold start, RL), sorted.
    fn train_tasks(&self) -> Vec<TaskRef>;
    /// The level's test tasks (evaluation), sorted.
    fn test_tasks(&self) -> Vec<TaskRef>;
    /// The tasks the cold start draws its demonstrations from under `protocol`, sorted. An
    /// environment without the distinction gives its training tasks.
    fn coldstart_tasks(&self, protocol: Protocol) -> Vec<TaskRef> {
        let _ = protocol;
        self.train_tasks()
    }
    /// The most episodes to keep open at once (`None`: no limit), for environments that
    /// each hold a heavy resource such as a JVM.
    fn max_parallel(&self) -> Option<usize> {
        None
    }
    /// A fresh environment for one episode of `task`; it ends episodes after `max_steps`.
    fn make(
        &self,
        task: &TaskRef,
        env_seed: u64,
        max_steps: usize,
    ) -> Result<Box<dyn Env + Send>, EnvError>;
}

/// The environments `--env` accepts.
pub const ENV_NAMES: [&str; 2] = ["alfworld", "sciworld"];

/// Opens environment `env` at level `split` (`L0`, `L1`, `L2`). `data` overrides where the
/// ALFWorld files are (see [`AlfworldData::open_default`]).
pub fn open_env(env: &str, split: &str, data: Option<&Path>) -> Result<Box<dyn EnvProvider>> {
    match env {
        "alfworld" => {
            let level = Level::from_name(split).ok_or_else(|| TrainerError::UnknownSplit {
                env: env.into(),
                split: split.into(),
            })?;
            let data = match data {
                Some(path) => AlfworldData::open(path)?,
                None => AlfworldData::open_default()?,
            };
            Ok(Box::new(AlfworldProvider::new(data, level)))
        }
        "sciworld" => Ok(Box::new(crate::sciworld_env::SciworldProvider::open(split)?)),
        other => Err(TrainerError::UnknownEnv(other.into())),
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_names_are_named() {
        let err = open_env("sciworld", "L5", None)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("L5"), "{err}");
        let err = open_env("minecraft", "L0", None)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("minecraft"), "{err}");
        let err = open_env("alfworld", "L7", Some(Path::new("/nonexistent")))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("L7"), "{err}");
    }
}
