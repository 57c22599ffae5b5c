//! `rlvmr._native`: the native ALFWorld engine and RLVMR's pure core for Python.
//!
//! Every failure is a Python exception carrying the Rust message (a bad game path is a
//! `FileNotFoundError`, a bad argument a `ValueError`, a closed or finished environment a
//! `RuntimeError`); nothing here panics across the interpreter boundary. The vectorised
//! environments step on native threads with the GIL released.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use alfworld::{load_game, AlfworldData};
use pyo3::exceptions::{PyFileNotFoundError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use rlvmr_core::{Env, OutputStyle, StepResult, Validity};

/// ALFWorld's reward for a won game (verl-agent's `10 * won`).
const WIN_REWARD: f64 = 10.0;

/// One ALFWorld game, built from its file: the environment that plays it.
fn open_game(game: &str, data: Option<&Path>, max_steps: usize) -> PyResult<(String, alfworld::AlfworldEnv)> {
    if max_steps == 0 {
        return Err(PyValueError::new_err("max_steps must be at least 1"));
    }
    let folder: PathBuf = data.map_or_else(alfworld::default_data_dir, Path::to_path_buf);
    let (name, text) = alfworld::read_game_text(game, || AlfworldData::open(&folder)).map_err(|e| {
        PyFileNotFoundError::new_err(format!("game {game}: not a file, nor a game of {}: {e}", folder.display()))
    })?;
    let parsed = load_game(&text).map_err(|e| PyValueError::new_err(format!("{name}: not an ALFWorld game: {e}")))?;
    Ok((name, alfworld::AlfworldEnv::new(Arc::new(parsed)).with_max_steps(max_steps)))
}

/// One game's state between calls: the engine, what it last returned, whether it is closed.
struct Slot {
    name: String,
    env: alfworld::AlfworldEnv,
    last: Option<StepResult>,
    closed: bool,
}

impl Slot {
    fn reset(&mut self) -> Result<StepResult, String> {
        if self.closed {
            return Err(format!("{}: the environment is closed", self.name));
        }
        let result = self.env.reset().map_err(|e| format!("{}: {e}", self.name))?;
        self.last = Some(result.clone());
        Ok(result)
    }

    /// Plays `command`. `Ok(None)`: the episode was already over (nothing was played).
    fn step(&mut self, command: &str) -> Result<Option<StepResult>, String> {
        if self.closed {
            return Err(format!("{}: the environment is closed", self.name));
        }
        match &self.last {
            None => return Err(format!("{}: step before reset", self.name)),
            Some(last) if last.done => return Ok(None),
            Some(_) => {}
        }
        let result = self.env.step(command).map_err(|e| format!("{}: {e}", self.name))?;
        self.last = Some(result.clone());
        Ok(Some(result))
    }
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
struct AlfworldEnv {
    slot: Slot,
}

#[pymethods]
impl AlfworldEnv {
    #[new]
    #[pyo3(signature = (game, data = None, max_steps = alfworld::DEFAULT_MAX_STEPS))]
    fn new(game: &str, data: Option<PathBuf>, max_steps: usize) -> PyResult<Self> {
        let (name, env) = open_game(game, data.as_deref(), max_steps)?;
        Ok(AlfworldEnv { slot: Slot { name, env, last: None, closed: false } })
    }

    /// Starts the game again: `(observation, info)`.
    fn reset<'py>(&mut self, py: Python<'py>) -> PyResult<(String, Bound<'py, PyDict>)> {
        let result = self.slot.reset().map_err(PyRuntimeError::new_err)?;
        Ok((result.observation.clone(), info(py, &self.slot.name, &result)?))
    }

    /// Plays one command: `(observation, reward, done, info)`, reward 10 when won. Stepping a
    /// finished episode raises (call `reset`).
    fn step<'py>(&mut self, py: Python<'py>, command: &str) -> PyResult<(String, f64, bool, Bound<'py, PyDict>)> {
        let result = self
            .slot
            .step(command)
            .map_err(PyRuntimeError::new_err)?
            .ok_or_else(|| PyRuntimeError::new_err(format!("{}: the episode is over; call reset()", self.slot.name)))?;
        Ok((result.observation.clone(), reward(&result), result.done, info(py, &self.slot.name, &result)?))
    }

    /// The task sentence (after `reset`).
    #[getter]
    fn task(&self) -> String {
        self.slot.env.task().to_string()
    }

    /// The game file, relative to the data folder when it was found there.
    #[getter]
    fn gamefile(&self) -> String {
        self.slot.name.clone()
    }

    /// Frees the game; any later call raises.
    fn close(&mut self) {
        self.slot.closed = true;
    }
}

/// Many ALFWorld games stepped together on native threads, the GIL released.
/// `AlfworldEnvs(games, data=None, max_steps=50, threads=None)`; `threads` defaults to the
/// machine's cores.
#[pyclass(module = "rlvmr._native")]
struct AlfworldEnvs {
    slots: Vec<Slot>,
    pool: rayon::ThreadPool,
}

type Batch<'py> = (Vec<String>, Vec<f64>, Vec<bool>, Vec<Bound<'py, PyDict>>);

#[pymethods]
impl AlfworldEnvs {
    #[new]
    #[pyo3(signature = (games, data = None, max_steps = alfworld::DEFAULT_MAX_STEPS, threads = None))]
    fn new(py: Python<'_>, games: Vec<String>, data: Option<PathBuf>, max_steps: usize, threads: Option<usize>) -> PyResult<Self> {
        if threads == Some(0) {
            return Err(PyValueError::new_err("threads must be at least 1"));
        }
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads.unwrap_or(0))
            .build()
            .map_err(|e| PyRuntimeError::new_err(format!("cannot start threads: {e}")))?;
        let opened: Vec<PyResult<(String, alfworld::AlfworldEnv)>> = py.allow_threads(|| {
            use rayon::prelude::*;
            pool.install(|| games.par_iter().map(|g| open_game(g, data.as_deref(), max_steps)).collect())
        });
        let slots = opened
            .into_iter()
            .map(|r| r.map(|(name, env)| Slot { name, env, last: None, closed: false }))
            .collect::<PyResult<Vec<_>>>()?;
        Ok(AlfworldEnvs { slots, pool })
    }

    fn __len__(&self) -> usize {
        self.slots.len()
    }

    /// Starts every game again: `(observations, infos)`.
    fn reset<'py>(&mut self, py: Python<'py>) -> PyResult<(Vec<String>, Vec<Bound<'py, PyDict>>)> {
        let (slots, pool) = (&mut self.slots, &self.pool);
        let results: Vec<Result<StepResult, String>> = py.allow_threads(|| {
            use rayon::prelude::*;
            pool.install(|| slots.par_iter_mut().map(Slot::reset).collect())
        });
        let mut observations = Vec::with_capacity(results.len());
        let mut infos = Vec::with_capacity(results.len());
        for (slot, result) in self.slots.iter().zip(results) {
            let result = result.map_err(PyRuntimeError::new_err)?;
            infos.push(info(py, &slot.name, &result)?);
            observations.push(result.observation);
        }
        Ok((observations, infos))
    }

    /// Plays `commands[i]` in game i: `(observations, rewards, dones, infos)`. A game whose
    /// episode is over plays nothing and returns its last observation, reward 0 and done.
    fn step<'py>(&mut self, py: Python<'py>, commands: Vec<String>) -> PyResult<Batch<'py>> {
        if commands.len() != self.slots.len() {
            return Err(PyValueError::new_err(format!(
                "{} commands for {} environments",
                commands.len(),
                self.slots.len()
            )));
        }
        let (slots, pool) = (&mut self.slots, &self.pool);
        let results: Vec<Result<Option<StepResult>, String>> = py.allow_threads(|| {
            use rayon::prelude::*;
            pool.install(|| slots.par_iter_mut().zip(commands.par_iter()).map(|(s, c)| s.step(c)).collect())
        });
        let mut batch: Batch<'py> = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for (slot, result) in self.slots.iter().zip(results) {
            let (result, reward) = match result.map_err(PyRuntimeError::new_err)? {
                Some(result) => {
                    let r = reward(&result);
                    (result, r)
                }
                None => (slot.last.clone().expect("a finished episode has a last result"), 0.0),
            };
            batch.3.push(info(py, &slot.name, &result)?);
            batch.2.push(result.done);
            batch.1.push(reward);
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
        for slot in &mut self.slots {
            slot.closed = true;
        }
    }
}

/// A unit variant of the core by its config name (`"tagged"`, `"strict"`), as TOML and JSON
/// configs name it; anything else is a `ValueError` listing the accepted names.
fn by_name<T: serde::de::DeserializeOwned>(what: &str, name: &str, accepted: &str) -> PyResult<T> {
    serde_json::from_value(serde_json::Value::String(name.to_string()))
        .map_err(|_| PyValueError::new_err(format!("unknown {what} {name:?}: use {accepted}")))
}

/// Parses one model reply as `rlvmr score` does: a dict with `tag` (None when the format is
/// invalid or the style is think), `reasoning`, `action`, `format_valid` and
/// `invalid_reasons`.
#[pyfunction]
#[pyo3(signature = (text, style = "tagged", validity = "strict"))]
fn parse_output<'py>(py: Python<'py>, text: &str, style: &str, validity: &str) -> PyResult<Bound<'py, PyDict>> {
    let style: OutputStyle = by_name("style", style, "\"tagged\" or \"think\"")?;
    let validity: Validity = by_name("validity", validity, "\"strict\" or \"lenient\"")?;
    let parsed = rlvmr_core::parse_output(text, style, validity);
    let out = PyDict::new(py);
    out.set_item("tag", parsed.step_tag().map(|t| t.name()))?;
    out.set_item("reasoning", parsed.reasoning.clone())?;
    out.set_item("action", parsed.action.clone())?;
    out.set_item("format_valid", parsed.format_valid())?;
    out.set_item("invalid_reasons", parsed.invalid.iter().map(ToString::to_string).collect::<Vec<_>>())?;
    Ok(out)
}

/// `rlvmr score` on JSON text: `episodes_json` a JSON array of episodes, `config_json` the
/// score config as JSON (None: the defaults). Returns the scored episodes as a JSON array;
/// an entry that is not an episode raises `ValueError` naming its index.
#[pyfunction]
#[pyo3(signature = (episodes_json, config_json = None))]
fn score_json(py: Python<'_>, episodes_json: &str, config_json: Option<&str>) -> PyResult<String> {
    let config: rlvmr_core::ScoreConfig = match config_json {
        Some(text) => serde_json::from_str(text).map_err(|e| PyValueError::new_err(format!("bad score config: {e}")))?,
        None => rlvmr_core::ScoreConfig::default(),
    };
    config.validate().map_err(|e| PyValueError::new_err(format!("bad score config: {e}")))?;
    let values: Vec<serde_json::Value> =
        serde_json::from_str(episodes_json).map_err(|e| PyValueError::new_err(format!("episodes: not a JSON array: {e}")))?;
    let scored = py
        .allow_threads(|| rlvmr_core::score_json(&config, values))
        .map_err(|e| PyValueError::new_err(e.to_string()))?;
    let mut out = Vec::with_capacity(scored.len());
    for (i, entry) in scored.into_iter().enumerate() {
        out.push(entry.map_err(|e| PyValueError::new_err(format!("episodes[{i}]: {e}")))?);
    }
    serde_json::to_string(&out).map_err(|e| PyRuntimeError::new_err(e.to_string()))
}

/// GRPO-MR advantages of verl step samples (the reference form, as `rlvmr score` computes
/// it): `A_i = N(outcome_i)` over the samples of uid `uids[i]` plus `w * N(mr_i)` over the
/// samples of the same uid and tag (`tag_scope = "batch"`: of the same tag in the batch).
/// `tags[i]`: `planning`, `explore`, `reflection`, `monitor`, or `none`/None for a step
/// whose format is invalid. One advantage per sample, in order.
#[pyfunction]
#[pyo3(signature = (outcome_rewards, mr_rewards, uids, tags, w = 1.0, epsilon = 1e-6, norm = "mean_std_norm", tag_scope = "uid"))]
#[allow(clippy::too_many_arguments)]
fn grpo_mr_advantages(
    py: Python<'_>,
    outcome_rewards: Vec<f64>,
    mr_rewards: Vec<f64>,
    uids: Vec<String>,
    tags: Vec<Option<String>>,
    w: f64,
    epsilon: f64,
    norm: &str,
    tag_scope: &str,
) -> PyResult<Vec<f64>> {
    let n = outcome_rewards.len();
    if mr_rewards.len() != n || uids.len() != n || tags.len() != n {
        return Err(PyValueError::new_err(format!(
            "one value per sample: {n} outcome rewards, {} mr rewards, {} uids, {} tags",
            mr_rewards.len(),
            uids.len(),
            tags.len()
        )));
    }
    let tags: Vec<Option<rlvmr_core::Tag>> = tags
        .iter()
        .enumerate()
        .map(|(i, tag)| match tag.as_deref() {
            None | Some("none") => Ok(None),
            Some(name) => rlvmr_core::Tag::from_name(name).map(Some).ok_or_else(|| {
                PyValueError::new_err(format!(
                    "tags[{i}] = {name:?}: use planning, explore, reflection, monitor or none"
                ))
            }),
        })
        .collect::<PyResult<_>>()?;
    let config = rlvmr_core::AdvantageConfig {
        algo: rlvmr_core::advantage::Algo::GrpoMr,
        norm: by_name("norm", norm, "\"mean_std_norm\" or \"mean_norm\"")?,
        tag_scope: by_name("tag_scope", tag_scope, "\"uid\" or \"batch\"")?,
        w,
        epsilon,
        ..Default::default()
    };
    // Each sample is a one-step episode of its uid: the reference form groups step samples
    // by uid (episode term) and by (uid, tag) (tag term), never by episode, so this is the
    // same computation as on whole episodes.
    let episodes: Vec<rlvmr_core::EpisodeRewards<'_>> = (0..n)
        .map(|i| rlvmr_core::EpisodeRewards {
            uid: &uids[i],
            won: false,
            steps: vec![rlvmr_core::StepReward {
                tag: tags[i],
                outcome_reward: outcome_rewards[i],
                mr_reward: mr_rewards[i],
                env_reward: 0.0,
                format_penalty: 0.0,
                anchor: "",
            }],
        })
        .collect();
    let advantages = py
        .allow_threads(|| rlvmr_core::compute_advantages(&config, &episodes))
        .map_err(|e| match e {
            rlvmr_core::advantage::AdvantageError::NonFinite { episode, field, value, .. } => {
                PyValueError::new_err(format!("sample {episode}: `{field}` is not finite ({value})"))
            }
            other => PyValueError::new_err(other.to_string()),
        })?;
    Ok(advantages.into_iter().map(|a| a[0]).collect())
}

/// The game files of an ALFWorld split (`train`, `valid_seen`, `valid_unseen`) as ALFWorld
/// lists them, relative to the data folder, sorted; `task_types`: ALFWorld's numbers (1 pick,
/// 2 look, 3 clean, 4 heat, 5 cool, 6 pick_two), None for all.
#[pyfunction]
#[pyo3(signature = (split, data = None, task_types = None))]
fn games(py: Python<'_>, split: &str, data: Option<PathBuf>, task_types: Option<Vec<u8>>) -> PyResult<Vec<String>> {
    let split = alfworld::Split::from_name(split)
        .ok_or_else(|| PyValueError::new_err(format!("unknown split {split:?}: use train, valid_seen or valid_unseen")))?;
    if let Some(bad) = task_types.iter().flatten().find(|t| !(1..=6).contains(*t)) {
        return Err(PyValueError::new_err(format!("unknown task type {bad}: ALFWorld numbers them 1 to 6")));
    }
    let folder: PathBuf = data.unwrap_or_else(alfworld::default_data_dir);
    let data = py
        .allow_threads(|| AlfworldData::open(&folder))
        .map_err(|e| PyFileNotFoundError::new_err(format!("ALFWorld data {}: {e}", folder.display())))?;
    let mut paths: Vec<String> = data
        .split(split)
        .into_iter()
        .filter(|g| task_types.as_ref().is_none_or(|types| types.contains(&g.task_type.id())))
        .map(|g| g.path.clone())
        .collect();
    paths.sort();
    Ok(paths)
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<AlfworldEnv>()?;
    m.add_class::<AlfworldEnvs>()?;
    m.add_function(wrap_pyfunction!(parse_output, m)?)?;
    m.add_function(wrap_pyfunction!(score_json, m)?)?;
    m.add_function(wrap_pyfunction!(games, m)?)?;
    m.add_function(wrap_pyfunction!(grpo_mr_advantages, m)?)?;
    m.add("WIN_REWARD", WIN_REWARD)?;
    Ok(())
}
