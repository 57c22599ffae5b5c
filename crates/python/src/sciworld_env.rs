//! `SciWorldEnv` and `SciWorldEnvs`: the real ScienceWorld simulator (one JVM per
//! environment), stepped with the official Python client's semantics: the reward is the
//! score change, done on completion, a negative score, or moves past the step limit.

use std::path::PathBuf;

use pyo3::exceptions::{PyFileNotFoundError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use sciworld::{EnvConfig, JvmConfig, SciStep, SciWorldEnv as Simulator};

use crate::slots::{reset_all, step_all, thread_pool, Game, Slot};

/// One simulator and the game it plays.
pub(crate) struct SciGame {
    env: Simulator,
    task: &'static str,
    variation: usize,
}

impl Game for SciGame {
    type Step = SciStep;
    fn restart(&mut self) -> Result<SciStep, String> {
        self.env.reset_to(self.task, self.variation).map_err(|e| e.to_string())
    }
    fn play(&mut self, command: &str) -> Result<SciStep, String> {
        self.env.step_command(command).map_err(|e| e.to_string())
    }
    fn is_done(step: &SciStep) -> bool {
        step.done
    }
}

/// The settings every environment of a call shares; the jar is the cached one (fetched
/// from PyPI when missing) unless `jar` names one.
fn env_config(jar: Option<PathBuf>, simplifications: &str, step_limit: i64) -> PyResult<EnvConfig> {
    if step_limit < 1 {
        return Err(PyValueError::new_err(format!("step_limit must be at least 1, not {step_limit}")));
    }
    let mut config = match jar {
        Some(jar) if !jar.is_file() => {
            return Err(PyFileNotFoundError::new_err(format!("scienceworld jar {}: no such file", jar.display())))
        }
        Some(jar) => EnvConfig::new(JvmConfig::new(jar)),
        None => EnvConfig::from_default_jar().map_err(|e| PyRuntimeError::new_err(e.to_string()))?,
    };
    config.simplifications = simplifications.to_string();
    config.step_limit = step_limit;
    Ok(config)
}

/// Checks the game, then starts its JVM (about 2 s).
fn open_game(config: &EnvConfig, task: &str, variation: usize) -> PyResult<Slot<SciGame>> {
    let info = sciworld::resolve_task(task).map_err(|e| PyValueError::new_err(e.to_string()))?;
    sciworld::check_variation(&info, variation).map_err(|e| PyValueError::new_err(e.to_string()))?;
    let env = Simulator::new(config.clone()).map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
    let name = format!("{} variation {variation}", info.name);
    Ok(Slot::new(name, SciGame { env, task: info.name, variation }))
}

/// `info` of a step: `admissible_commands` (the valid actions, sorted), `score` (0-100,
/// negative when the task failed), `won`, `moves`, `task_description`.
fn info<'py>(py: Python<'py>, slot: &Slot<SciGame>, step: &SciStep) -> PyResult<Bound<'py, PyDict>> {
    let info = PyDict::new(py);
    info.set_item("admissible_commands", step.valid_actions.clone().unwrap_or_default())?;
    info.set_item("score", step.score)?;
    info.set_item("won", step.won)?;
    info.set_item("moves", step.moves)?;
    let description = slot.game().and_then(|g| g.env.task_description()).unwrap_or_default();
    info.set_item("task_description", description)?;
    Ok(info)
}

/// One ScienceWorld game. `SciWorldEnv(task, variation=0, simplifications="easy",
/// step_limit=100, jar=None)`: `task` a name (`"boil"`) or index (`"0"`).
#[pyclass(module = "rlvmr._native")]
pub(crate) struct SciWorldEnv {
    slot: Slot<SciGame>,
}

#[pymethods]
impl SciWorldEnv {
    #[new]
    #[pyo3(signature = (task, variation = 0, simplifications = sciworld::DEFAULT_SIMPLIFICATIONS, step_limit = sciworld::DEFAULT_STEP_LIMIT, jar = None))]
    fn new(py: Python<'_>, task: &str, variation: usize, simplifications: &str, step_limit: i64, jar: Option<PathBuf>) -> PyResult<Self> {
        let config = env_config(jar, simplifications, step_limit)?;
        let slot = py.allow_threads(|| open_game(&config, task, variation))?;
        Ok(SciWorldEnv { slot })
    }

    /// Loads the game again and looks around: `(observation, info)`.
    fn reset<'py>(&mut self, py: Python<'py>) -> PyResult<(String, Bound<'py, PyDict>)> {
        let slot = &mut self.slot;
        let step = py.allow_threads(|| slot.reset()).map_err(PyRuntimeError::new_err)?;
        Ok((step.observation.clone(), info(py, &self.slot, &step)?))
    }

    /// Plays one command: `(observation, reward, done, info)`, the reward being the score
    /// change. Stepping a finished episode raises (call `reset`).
    fn step<'py>(&mut self, py: Python<'py>, command: &str) -> PyResult<(String, f64, bool, Bound<'py, PyDict>)> {
        let slot = &mut self.slot;
        let step = py.allow_threads(|| slot.step_single(command))?;
        Ok((step.observation.clone(), step.reward as f64, step.done, info(py, &self.slot, &step)?))
    }

    /// The task description (after `reset`).
    #[getter]
    fn task_description(&self) -> String {
        self.slot.game().and_then(|g| g.env.task_description()).unwrap_or_default().to_string()
    }

    /// Stops the simulator's JVM; any later call raises.
    fn close(&mut self) {
        self.slot.close();
    }
}

/// Many ScienceWorld games, one JVM each, stepped together on native threads with the GIL
/// released. `SciWorldEnvs(games, simplifications="easy", step_limit=100, jar=None,
/// threads=None)`: `games` a list of `(task, variation)`.
#[pyclass(module = "rlvmr._native")]
pub(crate) struct SciWorldEnvs {
    slots: Vec<Slot<SciGame>>,
    pool: rayon::ThreadPool,
}

type Batch<'py> = (Vec<String>, Vec<f64>, Vec<bool>, Vec<Bound<'py, PyDict>>);

#[pymethods]
impl SciWorldEnvs {
    #[new]
    #[pyo3(signature = (games, simplifications = sciworld::DEFAULT_SIMPLIFICATIONS, step_limit = sciworld::DEFAULT_STEP_LIMIT, jar = None, threads = None))]
    fn new(py: Python<'_>, games: Vec<(String, usize)>, simplifications: &str, step_limit: i64, jar: Option<PathBuf>, threads: Option<usize>) -> PyResult<Self> {
        let pool = thread_pool(threads)?;
        let config = env_config(jar, simplifications, step_limit)?;
        let opened: Vec<PyResult<Slot<SciGame>>> = py.allow_threads(|| {
            use rayon::prelude::*;
            pool.install(|| games.par_iter().map(|(task, variation)| open_game(&config, task, *variation)).collect())
        });
        Ok(SciWorldEnvs { slots: opened.into_iter().collect::<PyResult<_>>()?, pool })
    }

    fn __len__(&self) -> usize {
        self.slots.len()
    }

    /// Loads every game again: `(observations, infos)`.
    fn reset<'py>(&mut self, py: Python<'py>) -> PyResult<(Vec<String>, Vec<Bound<'py, PyDict>>)> {
        let steps = reset_all(py, &self.pool, &mut self.slots)?;
        let infos = self.slots.iter().zip(&steps).map(|(s, step)| info(py, s, step)).collect::<PyResult<_>>()?;
        Ok((steps.into_iter().map(|s| s.observation).collect(), infos))
    }

    /// Plays `commands[i]` in game i: `(observations, rewards, dones, infos)`. A game whose
    /// episode is over plays nothing and returns its last observation, reward 0 and done.
    fn step<'py>(&mut self, py: Python<'py>, commands: Vec<String>) -> PyResult<Batch<'py>> {
        let steps = step_all(py, &self.pool, &mut self.slots, commands)?;
        let mut batch: Batch<'py> = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for (slot, (step, played)) in self.slots.iter().zip(steps) {
            batch.3.push(info(py, slot, &step)?);
            batch.2.push(step.done);
            batch.1.push(if played { step.reward as f64 } else { 0.0 });
            batch.0.push(step.observation);
        }
        Ok(batch)
    }

    /// Stops every JVM; any later call raises.
    fn close(&mut self) {
        self.slots.iter_mut().for_each(Slot::close);
    }
}

/// The games of an official ScienceWorld split (`train`, `dev`, `test`) as `(task,
/// variation)`, tasks in the simulator's order; `tasks`: names or indices to keep (None: all).
#[pyfunction]
#[pyo3(signature = (split, tasks = None))]
pub(crate) fn sciworld_games(split: &str, tasks: Option<Vec<String>>) -> PyResult<Vec<(String, usize)>> {
    let split = sciworld::OfficialSplit::from_name(split)
        .ok_or_else(|| PyValueError::new_err(format!("unknown split {split:?}: use train, dev or test")))?;
    let keep: Option<Vec<&'static str>> = tasks
        .map(|names| {
            names
                .iter()
                .map(|n| sciworld::resolve_task(n).map(|t| t.name).map_err(|e| PyValueError::new_err(e.to_string())))
                .collect::<PyResult<_>>()
        })
        .transpose()?;
    Ok(sciworld::tasks()
        .into_iter()
        .filter(|t| keep.as_ref().is_none_or(|k| k.contains(&t.name)))
        .flat_map(|t| t.split(split).map(move |v| (t.name.to_string(), v)))
        .collect())
}

/// ScienceWorld's gold action sequences, from a JVM of their own (asking a playing simulator
/// for one slows its later resets). `SciWorldGold(simplifications="easy", jar=None)`;
/// `actions(task, variation)`: the sequence that, played from a reset, reaches score 100.
#[pyclass(module = "rlvmr._native")]
pub(crate) struct SciWorldGold {
    oracle: sciworld::GoldOracle,
}

#[pymethods]
impl SciWorldGold {
    #[new]
    #[pyo3(signature = (simplifications = sciworld::DEFAULT_SIMPLIFICATIONS, jar = None))]
    fn new(py: Python<'_>, simplifications: &str, jar: Option<PathBuf>) -> PyResult<Self> {
        let config = env_config(jar, simplifications, sciworld::DEFAULT_STEP_LIMIT)?;
        let oracle = py.allow_threads(|| sciworld::GoldOracle::new(&config)).map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
        Ok(SciWorldGold { oracle })
    }

    fn actions(&mut self, py: Python<'_>, task: &str, variation: usize) -> PyResult<Vec<String>> {
        let info = sciworld::resolve_task(task).map_err(|e| PyValueError::new_err(e.to_string()))?;
        sciworld::check_variation(&info, variation).map_err(|e| PyValueError::new_err(e.to_string()))?;
        let oracle = &mut self.oracle;
        py.allow_threads(|| oracle.gold_actions(task, variation)).map_err(|e| PyRuntimeError::new_err(e.to_string()))
    }
}
