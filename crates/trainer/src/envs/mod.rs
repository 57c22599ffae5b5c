//! Environments behind one provider trait ([`EnvProvider`]), a folder each: its provider,
//! its scripted player and its annotator. A new environment is a new folder and one line in
//! [`open_env`].

pub mod alfworld;
pub mod provider;
pub mod sciworld;
pub mod text;

use std::path::Path;

use ::alfworld::{AlfworldData, Level};

use crate::error::{Result, TrainerError};

pub use alfworld::AlfworldProvider;
pub use provider::{Detours, EnvProvider, Protocol};
pub use sciworld::SciworldProvider;

/// The environments `--env` accepts.
pub const ENV_NAMES: [&str; 2] = ["alfworld", "sciworld"];

/// Opens environment `env` at level `split` (`L0`, `L1`, `L2`). `data` overrides where the
/// ALFWorld files are (see [`AlfworldData::open_default`]); `alias_tested_object` is
/// ScienceWorld's (see [`SciworldProvider::alias_tested_object`]).
pub fn open_env(env: &str, split: &str, data: Option<&Path>, alias_tested_object: bool) -> Result<Box<dyn EnvProvider>> {
    open_env_with(env, split, data, SciworldOptions { alias_tested_object, ..SciworldOptions::default() })
}

/// ScienceWorld's settings of [`open_env_with`] (ALFWorld has none of them).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SciworldOptions {
    /// See [`SciworldProvider::alias_tested_object`].
    pub alias_tested_object: bool,
    /// See [`SciworldProvider::alias_wires`].
    pub alias_wires: bool,
    /// See [`SciworldProvider::recorded_gold_paths`].
    pub recorded_gold_paths: bool,
}

/// [`open_env`], with all of ScienceWorld's settings.
pub fn open_env_with(env: &str, split: &str, data: Option<&Path>, sciworld: SciworldOptions) -> Result<Box<dyn EnvProvider>> {
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
        "sciworld" => Ok(Box::new(
            SciworldProvider::open(split)?
                .alias_tested_object(sciworld.alias_tested_object)
                .alias_wires(sciworld.alias_wires)
                .recorded_gold_paths(sciworld.recorded_gold_paths),
        )),
        other => Err(TrainerError::UnknownEnv(other.into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_names_are_named() {
        let err = open_env("sciworld", "L5", None, false)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("L5"), "{err}");
        let err = open_env("minecraft", "L0", None, false)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("minecraft"), "{err}");
        let err = open_env("alfworld", "L7", Some(Path::new("/nonexistent")), false)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("L7"), "{err}");
    }
}
