//! `AlfworldEnv` and `AlfworldEnvs`: the native ALFWorld engine with gym-like steps.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use alfworld::{load_game, AlfworldData};
use pyo3::exceptions::{PyFileNotFoundError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use rlvmr_core::{Env, StepResult};

use crate::slots::{reset_all, step_all, thread_pool, Game, Slot};

/// ALFWorld's reward for a won game (verl-agent's `10 * won`).
pub(crate) const WIN_REWARD: f64 = 10.0;

impl Game for alfworld::AlfworldEnv {
    type Step = StepResult;
    fn restart(&mut self) -> Result<StepResult, String> {
        self.reset().map_err(|e| e.to_string())
    }
    fn play(&mut self, command: &str) -> Result<StepResult, String> {
        Env::step(self, command).map_err(|e| e.to_string())
    }
    fn is_done(step: &StepResult) -> bool {
        step.done
    }
}

/// One ALFWorld game, built from its file: the slot that plays it.
fn open_game(game: &str, data: Option<&Path>, max_steps: usize) -> PyResult<Slot<alfworld::AlfworldEnv>> {
    if max_steps == 0 {
        return Err(PyValueError::new_err("max_steps must be at least 1"));
    }
    let folder: PathBuf = data.map_or_else(alfworld::default_data_dir, Path::to_path_buf);
    let (name, text) = alfworld::read_game_text(game, || AlfworldData::open(&folder)).map_err(|e| {
        PyFileNotFoundError::new_err(format!("game {game}: not a file, nor a game of {}: {e}", folder.display()))
    })?;
    let parsed = load_game(&text).map_err(|e| PyValueError::new_err(format!("{name}: not an ALFWorld game: {e}")))?;
    Ok(Slot::new(name, alfworld::AlfworldEnv::new(Arc::new(parsed)).with_max_steps(max_steps)))
}

/// `info` of a step: `admissible_commands` (the reference engine's order), `won`, `gamefile`.
fn info<'py>(py: Python<'py>, name: &str, result: &StepResult) -> PyResult<Bound<'py, PyDict>> {
    let info = PyDict::new(py);
    info.set_item("admissible_commands", result.admissible_actions.clone().unwrap_or_default())?;
    info.set_item("won", result.won)?;
    info.set_item("gamefile", name)?;
    Ok(info)
}

fn reward(result: &StepResult) -> f64 {
    if result.won { WIN_REWARD } else { 0.0 }
}

/// One ALFWorld game. `AlfworldEnv(game, data=None, max_steps=50)`: `game` is a
/// `game.tw-pddl` path, or one relative to the data folder.
#[pyclass(module = "rlvmr._native")]
pub(crate) struct AlfworldEnv {
    slot: Slot<alfworld::AlfworldEnv>,
}

#[pymethods]
impl AlfworldEnv {
    #[new]
    #[pyo3(signature = (game, data = None, max_steps = alfworld::DEFAULT_MAX_STEPS))]
    fn new(game: &str, data: Option<PathBuf>, max_steps: usize) -> PyResult<Self> {
        Ok(AlfworldEnv { slot: open_game(game, data.as_deref(), max_steps)? })
    }

    /// Starts the game again: `(observation, info)`.
    fn reset<'py>(&mut self, py: Python<'py>) -> PyResult<(String, Bound<'py, PyDict>)> {
        let result = self.slot.reset().map_err(pyo3::exceptions::PyRuntimeError::new_err)?;
        Ok((result.observation.clone(), info(py, &self.slot.name, &result)?))
    }

    /// Plays one command: `(observation, reward, done, info)`, reward 10 when won. Stepping a
    /// finished episode raises (call `reset`).
    fn step<'py>(&mut self, py: Python<'py>, command: &str) -> PyResult<(String, f64, bool, Bound<'py, PyDict>)> {
        let result = self.slot.step_single(command)?;
        Ok((result.observation.clone(), reward(&result), result.done, info(py, &self.slot.name, &result)?))
    }

    /// The task sentence (after `reset`).
    #[getter]
    fn task(&self) -> String {
        self.slot.game().map(|g| g.task().to_string()).unwrap_or_default()
    }

    /// The game file, relative to the data folder when it was found there.
    #[getter]
    fn gamefile(&self) -> String {
        self.slot.name.clone()
    }

    /// Frees the game; any later call raises.
    fn close(&mut self) {
        self.slot.close();
    }
}

/// Many ALFWorld games stepped together on native threads, the GIL released.
/// `AlfworldEnvs(games, data=None, max_steps=50, threads=None)`; `threads` defaults to the
/// machine's cores.
#[pyclass(module = "rlvmr._native")]
pub(crate) struct AlfworldEnvs {
    slots: Vec<Slot<alfworld::AlfworldEnv>>,
    pool: rayon::ThreadPool,
}

type Batch<'py> = (Vec<String>, Vec<f64>, Vec<bool>, Vec<Bound<'py, PyDict>>);

#[pymethods]
impl AlfworldEnvs {
    #[new]
    #[pyo3(signature = (games, data = None, max_steps = alfworld::DEFAULT_MAX_STEPS, threads = None))]
    fn new(py: Python<'_>, games: Vec<String>, data: Option<PathBuf>, max_steps: usize, threads: Option<usize>) -> PyResult<Self> {
        let pool = thread_pool(threads)?;
        let opened: Vec<PyResult<Slot<alfworld::AlfworldEnv>>> = py.allow_threads(|| {
            use rayon::prelude::*;
            pool.install(|| games.par_iter().map(|g| open_game(g, data.as_deref(), max_steps)).collect())
        });
        Ok(AlfworldEnvs { slots: opened.into_iter().collect::<PyResult<_>>()?, pool })
    }

    fn __len__(&self) -> usize {
        self.slots.len()
    }

    /// Starts every game again: `(observations, infos)`.
    fn reset<'py>(&mut self, py: Python<'py>) -> PyResult<(Vec<String>, Vec<Bound<'py, PyDict>>)> {
        let results = reset_all(py, &self.pool, &mut self.slots)?;
        let infos = self.slots.iter().zip(&results).map(|(s, r)| info(py, &s.name, r)).collect::<PyResult<_>>()?;
        Ok((results.into_iter().map(|r| r.observation).collect(), infos))
    }

    /// Plays `commands[i]` in game i: `(observations, rewards, dones, infos)`. A game whose
    /// episode is over plays nothing and returns its last observation, reward 0 and done.
    fn step<'py>(&mut self, py: Python<'py>, commands: Vec<String>) -> PyResult<Batch<'py>> {
        let results = step_all(py, &self.pool, &mut self.slots, commands)?;
        let mut batch: Batch<'py> = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for (slot, (result, played)) in self.slots.iter().zip(results) {
            batch.3.push(info(py, &slot.name, &result)?);
            batch.2.push(result.done);
            batch.1.push(if played { reward(&result) } else { 0.0 });
            batch.0.push(result.observation);
        }
        Ok(batch)
    }

    /// The admissible commands of every game, as of its last reset or step.
    fn get_admissible_commands(&self) -> Vec<Vec<String>> {
        self.slots
            .iter()
            .map(|s| s.last.as_ref().and_then(|r| r.admissible_actions.clone()).unwrap_or_default())
            .collect()
    }

    /// The game files, in order.
    #[getter]
    fn gamefiles(&self) -> Vec<String> {
        self.slots.iter().map(|s| s.name.clone()).collect()
    }

    /// Frees every game; any later call raises.
    fn close(&mut self) {
        self.slots.iter_mut().for_each(Slot::close);
    }
}

/// ALFWorld's hand-coded expert (the one that writes the cold-start demonstrations).
/// `AlfworldExpert(intro)`: `intro` is the observation `reset()` returned (it lists the
/// receptacles and says the task); `act(observation, admissible_commands)` gives the next
/// command, the intro being the first observation.
#[pyclass(module = "rlvmr._native")]
pub(crate) struct AlfworldExpert {
    expert: alfworld::Expert,
}

#[pymethods]
impl AlfworldExpert {
    #[new]
    fn new(intro: &str) -> PyResult<Self> {
        let expert = alfworld::Expert::new(intro).map_err(|e| PyValueError::new_err(format!("expert: {e}")))?;
        Ok(AlfworldExpert { expert })
    }

    /// The next command: one of `admissible_commands` when that list is not empty.
    fn act(&mut self, observation: &str, admissible_commands: Vec<String>) -> String {
        self.expert.act(observation, &admissible_commands)
    }
}
