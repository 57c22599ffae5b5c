//! Gold action sequences, generated in a JVM of their own: a load that asks for the gold path
//! makes every later plain `reset()` of that simulator regenerate it (up to 14 s), so playing
//! environments never ask for one.

use std::collections::HashMap;

use crate::env::{EnvConfig, SimSlot};
use crate::error::Result;
use crate::tasks::{check_variation, resolve_task};

/// Heap for the gold JVM: generating a gold path runs out of a 128 MB heap on the
/// change-of-state tasks (boil, melt, freeze, ...). One gold JVM serves many playing ones.
pub const GOLD_HEAP_MB: u32 = 1024;

/// Hands out gold action sequences (cached per task and variation).
pub struct GoldOracle {
    slot: SimSlot,
    simplifications: String,
    cache: HashMap<(usize, usize), Vec<String>>,
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
        let task = resolve_task(task)?;
        check_variation(&task, variation)?;
        if let Some(actions) = self.cache.get(&(task.index, variation)) {
            return Ok(actions.clone());
        }
        let simplifications = self.simplifications.clone();
        let actions = self.slot.with(|sim| {
            sim.load(task.name, variation, &simplifications, true)?;
            sim.gold_action_sequence()
        })?;
        self.cache.insert((task.index, variation), actions.clone());
        Ok(actions)
    }

    /// The oracle JVM's pid.
    pub fn jvm_pid(&self) -> Option<u32> {
        self.slot.pid()
    }
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
