use thiserror::Error;

/// Errors from reading PDDL text (domain or problem).
#[derive(Debug, Error)]
pub enum PddlError {
    #[error("PDDL syntax error at line {line}: {message}")]
    Syntax { line: usize, message: String },
    #[error("PDDL structure error: {0}")]
    Structure(String),
}

impl PddlError {
    pub(crate) fn syntax(line: usize, message: impl Into<String>) -> Self {
        PddlError::Syntax { line, message: message.into() }
    }
    pub(crate) fn structure(message: impl Into<String>) -> Self {
        PddlError::Structure(message.into())
    }
}

/// Errors from reading the TextWorld logic/grammar text of a game.
#[derive(Debug, Error)]
pub enum GrammarError {
    #[error("grammar syntax error: {0}")]
    Syntax(String),
    #[error("grammar JSON error in {block}: {source}")]
    Json { block: String, source: serde_json::Error },
}

/// Errors from loading or playing a game.
#[derive(Debug, Error)]
pub enum GameError {
    #[error("game file is not valid JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("game file lacks the key '{0}' (or it is not a string)")]
    MissingKey(&'static str),
    #[error("in pddl_domain: {0}")]
    Domain(PddlError),
    #[error("in pddl_problem: {0}")]
    Problem(PddlError),
    #[error("in grammar: {0}")]
    Grammar(#[from] GrammarError),
    #[error("text rendering failed: {0}")]
    Render(String),
}
