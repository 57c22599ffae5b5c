//! The ALFWorld `Env`: one game, played with the reference's observable rules.

use std::sync::Arc;

use rlvmr_core::{Env, EnvError, StepResult};
use textworld::{Game, Observation, Session};

use crate::names;

/// ALFWorld's default episode limit (its wrapper's `max_episode_steps`).
pub const DEFAULT_MAX_STEPS: usize = 50;

/// Loads a game file's text with ALFWorld's display names applied.
pub fn load_game(text: &str) -> Result<Game, textworld::GameError> {
    let mut game = Game::from_json(text)?;
    let ids: Vec<String> = game.entity_ids().iter().map(|s| s.to_string()).collect();
    let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
    let mut display = names::demangle(&refs).into_iter();
    game.set_names(|_| display.next().unwrap_or_default());
    Ok(game)
}

/// An ALFWorld game as an [`Env`].
pub struct AlfworldEnv {
    game: Arc<Game>,
    session: Option<Session>,
    task: String,
    last_observation: String,
    steps: usize,
    max_steps: usize,
}

fn to_result(obs: &Observation, done: bool) -> StepResult {
    StepResult {
        observation: obs.feedback.clone(),
        admissible_actions: Some(obs.admissible_commands.clone()),
        won: obs.won,
        done,
        score: if obs.won { 1.0 } else { 0.0 },
    }
}

impl AlfworldEnv {
    pub fn new(game: Arc<Game>) -> Self {
        AlfworldEnv { game, session: None, task: String::new(), last_observation: String::new(), steps: 0, max_steps: DEFAULT_MAX_STEPS }
    }

    /// Ends episodes after `max_steps` steps (done without a win).
    pub fn with_max_steps(mut self, max_steps: usize) -> Self {
        self.max_steps = max_steps;
        self
    }

    pub fn game(&self) -> &Arc<Game> {
        &self.game
    }

    pub fn steps(&self) -> usize {
        self.steps
    }
}

fn task_line(intro: &str) -> String {
    intro.rsplit("Your task is to: ").next().filter(|_| intro.contains("Your task is to: ")).unwrap_or("").trim().to_string()
}

impl Env for AlfworldEnv {
    fn reset(&mut self) -> Result<StepResult, EnvError> {
        let (session, obs) = Session::start(self.game.clone()).map_err(|e| EnvError(e.to_string()))?;
        self.session = Some(session);
        self.task = task_line(&obs.feedback);
        self.last_observation = obs.feedback.clone();
        self.steps = 0;
        Ok(to_result(&obs, obs.done))
    }

    fn step(&mut self, command: &str) -> Result<StepResult, EnvError> {
        let session = self.session.as_mut().ok_or_else(|| EnvError("step before reset".into()))?;
        let obs = session.step(command).map_err(|e| EnvError(e.to_string()))?;
        self.steps += 1;
        self.last_observation = obs.feedback.clone();
        Ok(to_result(&obs, obs.done || self.steps >= self.max_steps))
    }

    fn task(&self) -> &str {
        &self.task
    }

    fn anchor(&self) -> String {
        self.last_observation.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_line_is_the_last_sentence_of_the_intro() {
        assert_eq!(task_line("-= Welcome =-\n\nYou are...\n\nYour task is to: put a book in sofa."), "put a book in sofa.");
        assert_eq!(task_line("no task"), "");
    }
}
