//! The simulator jar: `scienceworld/scienceworld.jar` from the PyPI wheel `scienceworld==1.2.3`,
//! fetched once with `pip download --no-deps`, checked by sha256 and cached under
//! `${RLVMR_CACHE:-~/.cache/rlvmr}/sciworld/` (the `pypi-asset` crate). `$SCIWORLD_JAR`
//! overrides (used as given).

use std::path::PathBuf;

use pypi_asset::WheelAsset;

use crate::error::{Result, SciError};

/// The pip requirement that ships the jar.
pub const WHEEL_REQUIREMENT: &str = "scienceworld==1.2.3";
/// The jar's path inside the wheel.
pub const JAR_MEMBER: &str = "scienceworld/scienceworld.jar";
/// The cached file's name.
pub const JAR_FILE: &str = "scienceworld-1.2.3.jar";
/// sha256 of the jar.
pub const JAR_SHA256: &str = "f4e1fdce0cdabe1bab7128a7e78ea820210d9db3c28d7272bcbbc3f3a1c5f0d7";

/// The jar inside its wheel.
pub const JAR: WheelAsset = WheelAsset {
    requirement: WHEEL_REQUIREMENT,
    member: JAR_MEMBER,
    folder: "sciworld",
    file: JAR_FILE,
    sha256: JAR_SHA256,
    instead: "or set SCIWORLD_JAR to a scienceworld.jar",
};

/// The cache root: `$RLVMR_CACHE`, else `$HOME/.cache/rlvmr`.
pub fn cache_dir() -> Result<PathBuf> {
    Ok(pypi_asset::cache_dir()?)
}

/// The jar to run: `$SCIWORLD_JAR` when set (it must exist), else the cached jar, fetched and
/// verified on first use.
pub fn jar_path() -> Result<PathBuf> {
    if let Some(jar) = std::env::var_os("SCIWORLD_JAR").filter(|j| !j.is_empty()) {
        let jar = PathBuf::from(jar);
        return if jar.is_file() {
            Ok(jar)
        } else {
            Err(SciError::Asset(format!("SCIWORLD_JAR={} does not exist", jar.display())))
        };
    }
    Ok(JAR.path()?)
}
