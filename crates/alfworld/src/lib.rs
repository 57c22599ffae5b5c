//! ALFWorld on the native TextWorld engine.

pub mod names;

use std::sync::Arc;

/// Loads a game file's text with ALFWorld's display names applied.
pub fn load_game_text(text: &str) -> Result<textworld::Game, textworld::GameError> {
    let mut game = textworld::Game::from_json(text)?;
    let ids: Vec<String> = game.entity_ids().iter().map(|s| s.to_string()).collect();
    let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
    let names: std::collections::HashMap<String, String> = ids.iter().cloned().zip(names::demangle(&refs)).collect();
    game.set_names(|id| names[id].clone());
    Ok(game)
}

pub fn arc_game(text: &str) -> Result<Arc<textworld::Game>, textworld::GameError> {
    load_game_text(text).map(Arc::new)
}
