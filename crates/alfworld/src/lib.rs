//! ALFWorld on the native TextWorld engine: game discovery (folder or zip),
//! splits, task types and RLVMR levels, the `Env` implementation.

pub mod bench;
pub mod data;
pub mod env;
pub mod expert;
pub mod locate;
pub mod names;
pub mod replay;
pub mod sampling;
pub mod task;

pub use data::{default_data_dir, read_game_text, AlfworldData, DataError, GameEntry};
pub use env::{load_game, AlfworldEnv, DEFAULT_MAX_STEPS};
pub use expert::{evaluate, run_episode, EpisodeOutcome, Expert, ExpertError, ExpertReport, Task};
pub use sampling::{select, TaskSampler};
pub use task::{Level, Split, TaskSpec, TaskType};
