//! Where ALFWorld's game files are looked for when no path is given. Plain `std` and no crate
//! of ours, so that the test harness's build script can include this file and find the data
//! before any test is built.

use std::path::{Path, PathBuf};

/// Where this project's machines keep the data: the zip beside the repository.
pub const SHARED_ZIP: &str = "../shared/alfworld/json_2.1.1.zip";

/// The places looked at, in order, from `base` (the working directory, or the repository for
/// the tests): `$ALFWORLD_DATA` alone when it is set (ALFWorld's own convention); otherwise
/// `~/.cache/alfworld`, where `alfworld-download` writes, then [`SHARED_ZIP`].
pub fn candidates(base: &Path) -> Vec<PathBuf> {
    if let Some(dir) = std::env::var_os("ALFWORLD_DATA").filter(|d| !d.is_empty()) {
        return vec![PathBuf::from(dir)];
    }
    let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("."));
    vec![home.join(".cache").join("alfworld"), base.join(SHARED_ZIP)]
}

/// Whether `path` is something the data reader opens: a zip file, a folder holding
/// `json_2.1.1/` or `json_2.1.1.zip`, or `json_2.1.1/` itself.
pub fn holds_data(path: &Path) -> bool {
    path.is_file()
        || path.join("json_2.1.1").is_dir()
        || path.join("json_2.1.1.zip").is_file()
        || (path.is_dir() && path.file_name().is_some_and(|n| n == "json_2.1.1"))
}

/// The first of [`candidates`] that holds the data.
pub fn find_data(base: &Path) -> Option<PathBuf> {
    candidates(base).into_iter().find(|p| holds_data(p))
}

/// What to tell a user who has no data: where it was looked for and how to get it.
pub fn missing_data_help(base: &Path) -> String {
    let looked: Vec<String> = candidates(base).iter().map(|p| p.display().to_string()).collect();
    format!(
        "ALFWorld's game files were not found (looked at {}). Get them with ALFWorld's own tool: \
         `pip install alfworld && alfworld-download` writes them to ~/.cache/alfworld; or set \
         ALFWORLD_DATA to the folder that holds json_2.1.1/ (or to json_2.1.1.zip)",
        looked.join(", ")
    )
}
