//! The trainer: where environments and models meet.
//!
//! - `envs/`: the provider trait and a folder per environment (provider, scripted player,
//!   annotator); `collector` plays batched episodes of any [`Policy`] in them.
//! - `policies/` (a model sampled here, a random player) and `served/` (a model behind an
//!   OpenAI-compatible server, and its HTTP client).
//! - `coldstart/` (expert demonstrations, optionally re-annotated by a served teacher),
//!   `sft`, `rl/` (GRPO-MR and the baselines), `eval`, with model folders read and written
//!   by `checkpoints` for all of them.
//! - `config` (the TOML run config), `rundir`, `report` and `view` (tables, charts, the
//!   episode viewer), `runner` (`rlvmr eval` and the `--policy` names).

pub mod agent;
pub mod bench;
pub mod checkpoints;
pub mod coldstart;
pub mod collector;
pub mod config;
pub mod credit;
pub mod envs;
pub mod error;
pub mod eval;
pub mod policies;
pub mod record;
pub mod report;
pub mod rl;
pub mod rundir;
pub mod runner;
pub mod seeds;
pub mod served;
pub mod sft;
pub mod usage;
pub mod view;

pub use agent::{Policy, Reply, Turn};
pub use collector::{collect, grouped_specs, AdmissibleLists, Collection, CollectorOptions, Throughput};
pub use config::RunConfig;
pub use envs::{open_env, EnvProvider};
pub use error::{Result, TrainerError};
pub use record::{EpisodeRecord, EpisodeSpec, StepRecord, TaskRef};
pub use rundir::RunDir;
