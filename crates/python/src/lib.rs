//! `rlvmr._native`: the native ALFWorld engine, the ScienceWorld simulator and RLVMR's pure
//! core for Python.
//!
//! Every failure is a Python exception carrying the Rust message (a bad game path is a
//! `FileNotFoundError`, a bad argument a `ValueError`, a closed or finished environment a
//! `RuntimeError`); nothing here panics across the interpreter boundary. The vectorised
//! environments step on native threads with the GIL released.

use std::path::PathBuf;

use alfworld::AlfworldData;
use pyo3::exceptions::{PyFileNotFoundError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use rlvmr_core::{OutputStyle, Validity};

mod alfworld_env;
mod sciworld_env;
mod slots;

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
    let validity: Validity = by_name("validity", validity, "\"strict\", \"lenient\" or \"reference\"")?;
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
    let config = score_config(config_json)?;
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

/// One step's prompt, rendered as `rlvmr` renders it for its own policies. `history`: the
/// past steps, oldest first, as `(observation, action, output)`; `plan`: the current plan
/// (see `carried_plan`); `templates` and `objects`: ScienceWorld's; `room` and `inventory`:
/// ScienceWorld's room description and inventory text (shown with the config's `room =
/// true`); `config_json`: the run config's `[prompt]` section as JSON (None: the defaults).
#[pyfunction]
#[pyo3(signature = (task, observation, admissible_commands, step, history, plan = None, templates = Vec::new(), objects = Vec::new(), config_json = None, room = String::new(), inventory = String::new()))]
#[allow(clippy::too_many_arguments)]
fn build_prompt(
    task: &str,
    observation: &str,
    admissible_commands: Vec<String>,
    step: usize,
    history: Vec<(String, String, String)>,
    plan: Option<String>,
    templates: Vec<String>,
    objects: Vec<String>,
    config_json: Option<&str>,
    room: String,
    inventory: String,
) -> PyResult<String> {
    let config: rlvmr_core::prompt::PromptConfig = match config_json {
        Some(text) => serde_json::from_str(text).map_err(|e| PyValueError::new_err(format!("bad prompt config: {e}")))?,
        None => Default::default(),
    };
    let history: Vec<rlvmr_core::prompt::HistoryEntry<'_>> = history
        .iter()
        .map(|(observation, action, output)| rlvmr_core::prompt::HistoryEntry { observation, action, output })
        .collect();
    let input = rlvmr_core::prompt::PromptInput {
        task,
        step,
        history: &history,
        observation,
        admissible: &admissible_commands,
        plan: plan.as_deref(),
        templates: &templates,
        objects: &objects,
        room: &room,
        inventory: &inventory,
    };
    Ok(rlvmr_core::prompt::render(&config, &input))
}

/// The plan the next prompt shows: the last non-empty `<planning>` block of `output`, else
/// `previous`.
#[pyfunction]
#[pyo3(signature = (previous, output))]
fn carried_plan(previous: Option<&str>, output: &str) -> Option<String> {
    rlvmr_core::prompt::carried_plan(previous, output)
}

/// The metrics of a batch of episodes (`rlvmr score`'s input, with optional `task_type` and
/// `split`) as one set, as JSON.
#[pyfunction]
#[pyo3(signature = (episodes_json, config_json = None))]
fn metrics_json(py: Python<'_>, episodes_json: &str, config_json: Option<&str>) -> PyResult<String> {
    let config = score_config(config_json)?;
    let episodes: Vec<rlvmr_core::EpisodeIn> = serde_json::from_str(episodes_json)
        .map_err(|e| PyValueError::new_err(format!("episodes: {e}")))?;
    let metrics = py
        .allow_threads(|| rlvmr_core::batch_metrics(&config, &episodes))
        .map_err(|e| PyValueError::new_err(e.to_string()))?;
    serde_json::to_string(&metrics).map_err(|e| PyRuntimeError::new_err(e.to_string()))
}

/// The score config from JSON (None: the defaults), checked.
fn score_config(config_json: Option<&str>) -> PyResult<rlvmr_core::ScoreConfig> {
    let config: rlvmr_core::ScoreConfig = match config_json {
        Some(text) => serde_json::from_str(text).map_err(|e| PyValueError::new_err(format!("bad score config: {e}")))?,
        None => rlvmr_core::ScoreConfig::default(),
    };
    config.validate().map_err(|e| PyValueError::new_err(format!("bad score config: {e}")))?;
    Ok(config)
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
    m.add_class::<alfworld_env::AlfworldEnv>()?;
    m.add_class::<alfworld_env::AlfworldEnvs>()?;
    m.add_class::<alfworld_env::AlfworldExpert>()?;
    m.add_class::<sciworld_env::SciWorldEnv>()?;
    m.add_class::<sciworld_env::SciWorldEnvs>()?;
    m.add_class::<sciworld_env::SciWorldGold>()?;
    m.add_function(wrap_pyfunction!(sciworld_env::sciworld_games, m)?)?;
    m.add_function(wrap_pyfunction!(parse_output, m)?)?;
    m.add_function(wrap_pyfunction!(score_json, m)?)?;
    m.add_function(wrap_pyfunction!(games, m)?)?;
    m.add_function(wrap_pyfunction!(grpo_mr_advantages, m)?)?;
    m.add_function(wrap_pyfunction!(build_prompt, m)?)?;
    m.add_function(wrap_pyfunction!(carried_plan, m)?)?;
    m.add_function(wrap_pyfunction!(metrics_json, m)?)?;
    m.add("WIN_REWARD", alfworld_env::WIN_REWARD)?;
    Ok(())
}
