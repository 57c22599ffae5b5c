//! Model folders on disk, for SFT and RL alike: loading a model to train or play, and
//! writing a checkpoint (weights, tokenizer, the optimizer and the trainer's position when
//! training goes on from it, and the run config) through a temporary folder and a rename
//! ([`write_dir_atomically`]), so a kill leaves either the old checkpoint or the new one whole.

use std::path::{Path, PathBuf};

use candle_core::{DType, Device};
use policy::{AdamW, Llama, Tokenizer};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::config::RunConfig;
use crate::error::{Result, TrainerError};
use crate::rundir::write_dir_atomically;

/// The run config saved beside every model, so `rlvmr eval` and RL build the prompts the
/// model was trained on.
pub const RUN_CONFIG_FILE: &str = "rlvmr.toml";

/// The run config saved in a model folder (`folder/rlvmr.toml`), if there is one: `None` for
/// the expert, a hub model's name or a GGUF file.
pub fn saved_run_config(folder: &str) -> Option<PathBuf> {
    let path = Path::new(folder).join(RUN_CONFIG_FILE);
    path.is_file().then_some(path)
}

/// Where an SFT checkpoint keeps the trainer's position (step of total steps).
pub const SFT_STATE_FILE: &str = "trainer_state.json";
/// Where an RL checkpoint keeps the trainer's position (iteration, starting model).
pub const RL_STATE_FILE: &str = "rl_state.json";

/// Loads a model to train or play: a checkpoint or Hugging Face folder, a GGUF file, or the
/// embedded default's name, onto `device` (`[model] device`, opened once by the caller: models
/// that meet in one computation must share the device they were opened on).
pub fn load_model(path: &str, device: &Device) -> Result<(Llama, Tokenizer)> {
    Ok(policy::load_model(path, DType::F32, device)?)
}

/// Saves `model` with its tokenizer and `config` (as [`RUN_CONFIG_FILE`]) into `dir`, whole
/// or not at all. With `training` (the optimizer, a state file name and the state), the
/// checkpoint also holds what it takes to train on from it.
pub fn save_checkpoint<S: Serialize>(
    dir: &Path,
    config: &RunConfig,
    model: &Llama,
    tokenizer: &Tokenizer,
    training: Option<(&AdamW, &str, &S)>,
) -> Result<()> {
    write_dir_atomically(dir, |tmp| {
        match training {
            Some((optimizer, state_file, state)) => {
                policy::checkpoint::save_training_state(model, tokenizer, optimizer, tmp)?;
                let text = serde_json::to_string_pretty(state)
                    .map_err(|e| TrainerError::context(format!("state of {}", dir.display()), e))?;
                let path = tmp.join(state_file);
                std::fs::write(&path, text).map_err(|e| TrainerError::io(&path, e))?;
            }
            None => policy::checkpoint::save_model(model, tokenizer, tmp)?,
        }
        config.save(&tmp.join(RUN_CONFIG_FILE))
    })
}

/// Reads a checkpoint's state file; a bad one is an error naming the file.
pub fn read_state<S: DeserializeOwned>(path: &Path) -> Result<S> {
    let text = std::fs::read_to_string(path).map_err(|e| TrainerError::io(path, e))?;
    serde_json::from_str(&text).map_err(|e| TrainerError::context(path.display().to_string(), e))
}
