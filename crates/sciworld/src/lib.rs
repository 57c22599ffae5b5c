//! ScienceWorld for rlvmr: the Java simulator (`scienceworld==1.2.3`'s jar) driven over py4j's
//! wire protocol from Rust, one simulator per JVM.
//!
//! The API the trainer uses:
//! - [`tasks()`], [`resolve_task`]: the 30 tasks by name or index, with their variation counts;
//!   [`TaskInfo::split`] gives the official train/dev/test variations; [`Level::games`] gives
//!   RLVMR's L0/L1/L2 train and test games.
//! - [`SciWorldEnv`] implements [`rlvmr_core::Env`] (score mapped to 0..1); its own
//!   [`SciWorldEnv::reset_to`] and [`SciWorldEnv::step_command`] return [`SciStep`] with the
//!   official 0-100 score, reward and valid actions. [`start_envs`] starts N at once.
//! - [`GoldOracle::gold_actions`]: gold action sequences, in a JVM of their own;
//!   [`GoldOracle::playable_path`] as an agent plays them; [`GoldPaths`] those recorded.
//!
//! A JVM that crashes or stops answering within [`JvmConfig::call_timeout`] is killed; the
//! call returns an error (the episode failed) and the next reset starts a fresh JVM.

pub mod assets;
pub mod bench;
mod env;
mod error;
mod gold;
mod gold_paths;
pub mod plain;
pub mod jvm;
mod pool;
pub mod py4j;
pub mod replay;
pub mod sim;
mod tasks;

pub use env::{EnvConfig, SciStep, SciWorldEnv, DEFAULT_SIMPLIFICATIONS, DEFAULT_STEP_LIMIT};
pub use error::{Result, SciError};
pub use gold::{
    replay_gold, with_teleports, without_door_openings, GoldCheck, GoldLengths, GoldOracle, PlayablePath,
    GOLD_LENGTHS_HEADER,
};
pub use gold_paths::{GoldPathRecord, GoldPaths};
pub use jvm::JvmConfig;
pub use pool::start_envs;
pub use tasks::{
    check_variation, resolve_task, tasks, Level, OfficialSplit, Phase, TaskInfo, TaskVariation,
    L2_HELD_OUT, NONDETERMINISTIC_TASKS, NUM_TASKS, UNUSED_TASK,
};
