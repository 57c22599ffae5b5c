//! The game key of a ScienceWorld episode, `task/variation`.

use rlvmr_core::EnvError;

/// `task/variation`, the game key of a ScienceWorld episode.
pub fn game_name(task: &str, variation: usize) -> String {
    format!("{task}/{variation}")
}

/// The task name and variation of a game key.
pub fn parse_game(game: &str) -> Result<(String, usize), EnvError> {
    game.rsplit_once('/')
        .and_then(|(task, v)| Some((task.to_string(), v.parse().ok()?)))
        .ok_or_else(|| EnvError(format!("not a ScienceWorld game (task/variation): {game:?}")))
}
