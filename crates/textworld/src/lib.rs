//! A native engine for TextWorld PDDL games (`.tw-pddl` files): it parses the
//! game's PDDL domain, problem and text grammar, grounds the actions, tracks
//! state and renders every observation from the game's own grammar, with the
//! same output as the reference engine (TextWorld's `PddlEnv`).

pub mod error;
pub mod facts;
pub mod game;
pub mod grammar;
pub mod logic;
pub mod pddl;
pub mod render;
pub mod sexpr;

pub use error::{GameError, GrammarError, PddlError};
pub use game::{py_strip, Game, Observation, Session};
