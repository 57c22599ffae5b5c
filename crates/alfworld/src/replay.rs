//! Batch replay: JSON lines `{"game": <path relative to the data>, "commands": [..]}`
//! in, one JSON line per game out, with the reference engine's observations.
//! A bad line or game yields an error line naming it; the rest of the batch runs.

use std::collections::HashMap;
use std::io::{self, BufRead, Write};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use textworld::{Game, Observation, Session};

use crate::data::AlfworldData;
use crate::env::load_game;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Request {
    game: String,
    #[serde(default)]
    commands: Vec<String>,
}

#[derive(Debug, Serialize, Deserialize, PartialEq)]
pub struct ReplayStep {
    /// `None` for the reset.
    pub command: Option<String>,
    pub observation: String,
    pub admissible_commands: Vec<String>,
    pub won: bool,
    pub done: bool,
}

#[derive(Debug, Serialize)]
struct Response<'a> {
    game: &'a str,
    steps: Vec<ReplayStep>,
}

#[derive(Debug, Serialize)]
struct Failure<'a> {
    line: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    game: Option<&'a str>,
    error: String,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ReplaySummary {
    pub games: usize,
    pub failed: usize,
}

fn step_record(command: Option<&str>, obs: Observation) -> ReplayStep {
    ReplayStep { command: command.map(str::to_string), observation: obs.feedback, admissible_commands: obs.admissible_commands, won: obs.won, done: obs.done }
}

/// Plays `commands` from a reset of `game`.
pub fn replay_game(game: Arc<Game>, commands: &[String]) -> Result<Vec<ReplayStep>, textworld::GameError> {
    let (mut session, intro) = Session::start(game)?;
    let mut steps = Vec::with_capacity(commands.len() + 1);
    steps.push(step_record(None, intro));
    for command in commands {
        let obs = session.step(command)?;
        steps.push(step_record(Some(command), obs));
    }
    Ok(steps)
}

/// Replays every request line of `input`. Errors go to `output` as
/// `{"line": n, "game": .., "error": ..}` lines and to `errors` as text.
pub fn replay_stream(data: &AlfworldData, mut input: impl BufRead, mut output: impl Write, mut errors: impl Write) -> io::Result<ReplaySummary> {
    // Consecutive lines usually name the same game; keep a bounded cache.
    let mut cache: HashMap<String, Arc<Game>> = HashMap::new();
    let mut summary = ReplaySummary::default();
    let mut buf = Vec::new();
    let mut line_no = 0;
    loop {
        buf.clear();
        if input.read_until(b'\n', &mut buf)? == 0 {
            break;
        }
        line_no += 1;
        let outcome = replay_line(data, &mut cache, &buf);
        let (game, result) = match outcome {
            LineOutcome::Blank => continue,
            LineOutcome::Done(game, steps) => (game, Ok(steps)),
            LineOutcome::Failed(game, message) => (game, Err(message)),
        };
        summary.games += 1;
        match result {
            Ok(steps) => {
                serde_json::to_writer(&mut output, &Response { game: &game.unwrap_or_default(), steps })?;
            }
            Err(error) => {
                summary.failed += 1;
                let named = game.as_deref().map(|g| format!(" (game {g})")).unwrap_or_default();
                writeln!(errors, "line {line_no}{named}: {error}")?;
                serde_json::to_writer(&mut output, &Failure { line: line_no, game: game.as_deref(), error })?;
            }
        }
        output.write_all(b"\n")?;
        output.flush()?;
    }
    Ok(summary)
}

enum LineOutcome {
    Blank,
    Done(Option<String>, Vec<ReplayStep>),
    Failed(Option<String>, String),
}

fn replay_line(data: &AlfworldData, cache: &mut HashMap<String, Arc<Game>>, raw: &[u8]) -> LineOutcome {
    let Ok(text) = std::str::from_utf8(raw) else {
        return LineOutcome::Failed(None, "the line is not valid UTF-8".into());
    };
    if text.trim().is_empty() {
        return LineOutcome::Blank;
    }
    let request: Request = match serde_json::from_str(text) {
        Ok(r) => r,
        Err(e) => return LineOutcome::Failed(None, format!("malformed request JSON: {e}")),
    };
    let game = match cache.get(&request.game) {
        Some(g) => g.clone(),
        None => {
            let loaded = data
                .read(&request.game)
                .map_err(|e| e.to_string())
                .and_then(|t| load_game(&t).map_err(|e| format!("cannot load {}: {e}", request.game)));
            match loaded {
                Ok(g) => {
                    if cache.len() >= 64 {
                        cache.clear();
                    }
                    let g = Arc::new(g);
                    cache.insert(request.game.clone(), g.clone());
                    g
                }
                Err(e) => return LineOutcome::Failed(Some(request.game), e),
            }
        }
    };
    match replay_game(game, &request.commands) {
        Ok(steps) => LineOutcome::Done(Some(request.game), steps),
        Err(e) => LineOutcome::Failed(Some(request.game), e.to_string()),
    }
}
