//! Shared test helpers: the project's ALFWorld zip and small policies and environments
//! that misbehave on purpose.

#![allow(dead_code)]

pub mod fake_openai;

use std::path::PathBuf;

use trainer::envs::{open_env, EnvProvider};

/// The ALFWorld zip beside the repository (`../shared/alfworld/json_2.1.1.zip`).
pub fn zip() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/alfworld/json_2.1.1.zip")
}

pub fn alfworld(level: &str) -> Box<dyn EnvProvider> {
    open_env("alfworld", level, Some(&zip())).expect("the ALFWorld zip beside the repository")
}
