//! The one environment contract: reset to a task, step with a command string.

use std::fmt;

/// What an environment returns after a reset or a step.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct StepResult {
    pub observation: String,
    /// Admissible actions, when the environment has them (ALFWorld does).
    pub admissible_actions: Option<Vec<String>>,
    pub won: bool,
    pub done: bool,
    /// Task score in [0, 1] (ALFWorld: 1 when won).
    pub score: f64,
}

/// An environment failure (never a panic): a crashed simulator, a bad game file.
#[derive(Debug, Clone, PartialEq)]
pub struct EnvError(pub String);

impl fmt::Display for EnvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for EnvError {}

/// A text environment an agent plays one episode at a time.
pub trait Env {
    /// Starts the episode again; returns the first observation.
    fn reset(&mut self) -> Result<StepResult, EnvError>;
    /// Plays one command.
    fn step(&mut self, command: &str) -> Result<StepResult, EnvError>;
    /// The task sentence the agent must achieve.
    fn task(&self) -> &str;
    /// A stable key for the current state, used to group steps (GiGPO's anchor).
    fn anchor(&self) -> String;

    /// The action templates (`open OBJ`) and the objects that can fill them, for prompts of
    /// environments whose full list of valid actions is too long to show (ScienceWorld).
    /// Environments without them return empty lists.
    fn templates_and_objects(&mut self) -> Result<(Vec<String>, Vec<String>), EnvError> {
        Ok((Vec::new(), Vec::new()))
    }

    /// Whether the next step's result is to carry the admissible actions. Environments for
    /// which the list costs more than the step itself (ScienceWorld: 3-5x) leave it out when
    /// not `wanted`; the others always give it. Default: always given.
    fn fetch_admissible(&mut self, wanted: bool) {
        let _ = wanted;
    }

    /// The description of the room the agent is in and its inventory, read without spending
    /// a move, for prompts that show them every step (ScienceWorld). Environments without
    /// them return empty texts.
    fn room_and_inventory(&mut self) -> Result<(String, String), EnvError> {
        Ok((String::new(), String::new()))
    }
}
