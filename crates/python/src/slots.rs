//! What the single and vectorised environments of both simulators share: a game slot that
//! remembers its last step and whether it is closed, and the batch reset and step that run
//! the slots on native threads with the GIL released.

use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use rayon::prelude::*;

/// A simulator the bindings can drive: start its episode again, play one command.
pub(crate) trait Game: Send {
    type Step: Clone + Send;
    fn restart(&mut self) -> Result<Self::Step, String>;
    fn play(&mut self, command: &str) -> Result<Self::Step, String>;
    fn is_done(step: &Self::Step) -> bool;
}

/// One game between calls: the simulator (None once closed: closing frees it, a JVM too) and
/// what it last returned.
pub(crate) struct Slot<G: Game> {
    pub name: String,
    game: Option<G>,
    pub last: Option<G::Step>,
}

impl<G: Game> Slot<G> {
    pub fn new(name: String, game: G) -> Self {
        Slot { name, game: Some(game), last: None }
    }

    pub fn game(&self) -> Option<&G> {
        self.game.as_ref()
    }

    fn open(&mut self) -> Result<&mut G, String> {
        self.game.as_mut().ok_or_else(|| format!("{}: the environment is closed", self.name))
    }

    pub fn reset(&mut self) -> Result<G::Step, String> {
        let name = self.name.clone();
        let step = self.open()?.restart().map_err(|e| format!("{name}: {e}"))?;
        self.last = Some(step.clone());
        Ok(step)
    }

    /// Plays `command`. `Ok(None)`: the episode was already over (nothing was played).
    pub fn step(&mut self, command: &str) -> Result<Option<G::Step>, String> {
        self.open()?;
        match &self.last {
            None => return Err(format!("{}: step before reset", self.name)),
            Some(last) if G::is_done(last) => return Ok(None),
            Some(_) => {}
        }
        let name = self.name.clone();
        let step = self.open()?.play(command).map_err(|e| format!("{name}: {e}"))?;
        self.last = Some(step.clone());
        Ok(Some(step))
    }

    /// One command in a single environment: stepping a finished episode is an error there.
    pub fn step_single(&mut self, command: &str) -> PyResult<G::Step> {
        self.step(command)
            .map_err(PyRuntimeError::new_err)?
            .ok_or_else(|| PyRuntimeError::new_err(format!("{}: the episode is over; call reset()", self.name)))
    }

    pub fn close(&mut self) {
        self.game = None;
    }
}

/// A pool of `threads` native threads (None: one per core).
pub(crate) fn thread_pool(threads: Option<usize>) -> PyResult<rayon::ThreadPool> {
    if threads == Some(0) {
        return Err(PyValueError::new_err("threads must be at least 1"));
    }
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads.unwrap_or(0))
        .build()
        .map_err(|e| PyRuntimeError::new_err(format!("cannot start threads: {e}")))
}

/// Resets every slot in parallel; the first failure raises.
pub(crate) fn reset_all<G: Game>(py: Python<'_>, pool: &rayon::ThreadPool, slots: &mut [Slot<G>]) -> PyResult<Vec<G::Step>> {
    let results: Vec<Result<G::Step, String>> =
        py.allow_threads(|| pool.install(|| slots.par_iter_mut().map(Slot::reset).collect()));
    results.into_iter().map(|r| r.map_err(PyRuntimeError::new_err)).collect()
}

/// Plays `commands[i]` in slot i in parallel: each slot's step and whether it was played (a
/// finished episode plays nothing and gives its last step again).
pub(crate) fn step_all<G: Game>(
    py: Python<'_>,
    pool: &rayon::ThreadPool,
    slots: &mut [Slot<G>],
    commands: Vec<String>,
) -> PyResult<Vec<(G::Step, bool)>> {
    if commands.len() != slots.len() {
        return Err(PyValueError::new_err(format!("{} commands for {} environments", commands.len(), slots.len())));
    }
    let results: Vec<Result<Option<G::Step>, String>> = py.allow_threads(|| {
        pool.install(|| slots.par_iter_mut().zip(commands.par_iter()).map(|(s, c)| s.step(c)).collect())
    });
    slots
        .iter()
        .zip(results)
        .map(|(slot, result)| match result.map_err(PyRuntimeError::new_err)? {
            Some(step) => Ok((step, true)),
            None => Ok((slot.last.clone().expect("a finished episode has a last step"), false)),
        })
        .collect()
}
