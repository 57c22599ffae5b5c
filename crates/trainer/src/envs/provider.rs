//! What an environment family gives the rest of the trainer: its tasks at a level, a fresh
//! environment per episode and its scripted player. The collector, evaluation, the cold
//! start and RL only see this trait.

use rlvmr_core::{Env, EnvError, OutputStyle, PromptEnv};
use serde::{Deserialize, Serialize};

use crate::agent::Policy;
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
    /// categories never seen in RL". ScienceWorld (`sciworld_prepare.py` takes expert
    /// trajectories of any task): the training variations of all 29 tasks.
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

    /// One line for the header of a table that reports L2, for the environment `env`
    /// (`alfworld`, `sciworld`).
    pub fn describe(self, env: &str) -> &'static str {
        match (self, env) {
            (Protocol::Published, "sciworld") => {
                "protocol published: cold start on the training variations of all 29 \
                 ScienceWorld tasks, RL on the level's tasks (19 at L2), L2 tested on the 10 \
                 held-out tasks' test variations"
            }
            (Protocol::Strict, "sciworld") => {
                "protocol strict: cold start and RL on the level's tasks only (19 at L2), L2 \
                 tested on the 10 held-out tasks' test variations, seen nowhere before"
            }
            (Protocol::Published, _) => {
                "protocol published: cold start on all six ALFWorld task types, RL on the level's \
                 types (1-4 at L2), L2 tested on types 5-6 of valid_unseen"
            }
            (Protocol::Strict, _) => {
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

/// How demonstrations leave the expert's straight path, each a seeded share of them.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Detours {
    /// One recoverable mistake.
    pub mistake_fraction: f64,
    /// ALFWorld only: the expert searches for its appliance (heat, cool, clean tasks).
    pub appliance_search: f64,
    /// The cold start keeps only episodes won in fewer steps than this: an expert that can
    /// tell in advance (ScienceWorld's gold path is this long or longer) gives such an
    /// episode up before playing it. `None`: play every episode (evaluation).
    pub give_up_at: Option<usize>,
    /// ScienceWorld only: a gold path longer than this is played up to this many actions
    /// (the cold start's openings of tasks too long to win in its step limit).
    pub cut_at: Option<usize>,
}

impl Detours {
    /// Mistakes only.
    pub fn mistakes(fraction: f64) -> Detours {
        Detours { mistake_fraction: fraction, ..Detours::default() }
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
    /// Whether the expert may win `task` in fewer than `max_steps` steps, as far as is known
    /// before playing it; the cold start draws only such tasks (it keeps only such
    /// episodes). Default: true.
    fn expert_may_fit(&self, task: &TaskRef, max_steps: usize) -> bool {
        let _ = (task, max_steps);
        true
    }
    /// Renamings for one cold-start demonstration of the task `description`: names the
    /// demonstration holds and the ones to write instead in its SFT samples, all at once,
    /// seeded by `rng` (`[coldstart] rename_fraction`). Default: none (the test games name
    /// only what the training games name).
    fn demo_renamings(&self, description: &str, rng: &mut rand_chacha::ChaCha8Rng) -> Vec<(String, String)> {
        let _ = (description, rng);
        Vec::new()
    }
    /// The most episodes to keep open at once (`None`: no limit), for environments that
    /// each hold a heavy resource such as a JVM.
    fn max_parallel(&self) -> Option<usize> {
        None
    }
    /// The environment's scripted player (ALFWorld's expert, ScienceWorld's gold paths),
    /// replying in `style` and leaving its straight path as `detours` says: the player of
    /// the cold start's demonstrations and of `--policy expert`.
    /// An environment without one cannot make a cold start or play `--policy expert`.
    fn expert(&self, detours: Detours, style: OutputStyle) -> Result<Box<dyn Policy>> {
        let _ = (detours, style);
        Err(TrainerError::Invalid(format!("{} has no scripted player (expert)", self.name())))
    }
    /// A fresh environment for one episode of `task`; it ends episodes after `max_steps`.
    fn make(
        &self,
        task: &TaskRef,
        env_seed: u64,
        max_steps: usize,
    ) -> Result<Box<dyn Env + Send>, EnvError>;
}

