//! Shared test helpers: the project's ALFWorld zip and small policies and environments
//! that misbehave on purpose.

#![allow(dead_code)]

pub mod fake_openai;

use std::path::PathBuf;

use trainer::envs::{open_env, EnvProvider};

/// ALFWorld's game files, as the test build found them.
pub fn zip() -> PathBuf {
    testkit::alfworld_data()
}

pub fn alfworld(level: &str) -> Box<dyn EnvProvider> {
    open_env("alfworld", level, Some(&zip()), false).expect("the ALFWorld zip beside the repository")
}
