//! The trainer: where environments and models meet. Rollout collection (shared by
//! evaluation, cold start and RL), the expert/random/model policies, evaluation, cold-start
//! demonstrations, SFT and the TOML run configs.

pub mod agent;
pub mod annotate;
pub mod coldstart;
pub mod collector;
pub mod config;
pub mod envs;
pub mod error;
pub mod eval;
pub mod policies;
pub mod record;
pub mod report;
pub mod rl;
pub mod rundir;
pub mod runner;
pub mod sci_annotate;
pub mod sciworld_env;
pub mod served;
pub mod sft;
pub mod teacher;
pub mod view;

pub use agent::{Policy, Reply, Turn};
pub use collector::{collect, grouped_specs, Collection, CollectorOptions, Throughput};
pub use config::RunConfig;
pub use envs::{open_env, EnvProvider};
pub use error::{Result, TrainerError};
pub use record::{EpisodeRecord, EpisodeSpec, StepRecord, TaskRef};
pub use rundir::RunDir;
