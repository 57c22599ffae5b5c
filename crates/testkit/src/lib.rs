//! What the project's tests share: where ALFWorld's game files are (found when the tests are
//! built; see build.rs).

use std::path::PathBuf;

/// ALFWorld's game files, as the test build found them: `$ALFWORLD_DATA`, else
/// `~/.cache/alfworld`, else `../shared/alfworld/json_2.1.1.zip` beside the repository.
pub fn alfworld_data() -> PathBuf {
    PathBuf::from(env!("RLVMR_TEST_ALFWORLD_DATA"))
}
