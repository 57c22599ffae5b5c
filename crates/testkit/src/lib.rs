//! What the project's tests share: where ALFWorld's game files are (found when the tests are
//! built; see build.rs), and a folder's files read whole.

use std::path::{Path, PathBuf};

/// ALFWorld's game files, as the test build found them: `$ALFWORLD_DATA`, else
/// `~/.cache/alfworld`, else `../shared/alfworld/json_2.1.1.zip` beside the repository.
pub fn alfworld_data() -> PathBuf {
    PathBuf::from(env!("RLVMR_TEST_ALFWORLD_DATA"))
}

/// Every file under `dir` (recursively) with its bytes, sorted by path.
pub fn files_under(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())).flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(files_under(&path));
        } else {
            let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            out.push((path, bytes));
        }
    }
    out.sort();
    out
}
