//! The run directory: every command writes its resolved config and its outputs there.
//!
//! ```text
//! DIR/config.toml          the resolved config (every key), written first
//! DIR/trajectories.jsonl   one episode per line (eval, coldstart), with its game
//! DIR/summary.json         eval: metrics overall and per task type, throughput
//! DIR/sft.jsonl            coldstart: {"prompt", "response"} per step
//! DIR/metrics.jsonl        sft: one JSON line per logged step
//! DIR/checkpoints/step-N/  sft: model (config.json + model.safetensors) + optimizer state
//! DIR/final/               sft: the final model
//! ```

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::config::RunConfig;
use crate::error::{Result, TrainerError};

/// An open run directory.
#[derive(Debug, Clone)]
pub struct RunDir {
    path: PathBuf,
}

impl RunDir {
    /// Creates `path` (and parents) and writes `config.toml`.
    pub fn create(path: &Path, config: &RunConfig) -> Result<RunDir> {
        std::fs::create_dir_all(path).map_err(|e| TrainerError::io(path, e))?;
        let dir = RunDir {
            path: path.to_path_buf(),
        };
        config.save(&dir.file("config.toml"))?;
        Ok(dir)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn file(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }

    pub fn write_text(&self, name: &str, text: &str) -> Result<()> {
        let path = self.file(name);
        std::fs::write(&path, text).map_err(|e| TrainerError::io(&path, e))
    }

    /// Writes `value` as pretty JSON.
    pub fn write_json(&self, name: &str, value: &impl Serialize) -> Result<()> {
        let text = serde_json::to_string_pretty(value)
            .map_err(|e| TrainerError::context(name, e))?;
        self.write_text(name, &(text + "\n"))
    }

    /// Writes one JSON line per item.
    pub fn write_jsonl<T: Serialize>(&self, name: &str, items: &[T]) -> Result<()> {
        let path = self.file(name);
        let file = File::create(&path).map_err(|e| TrainerError::io(&path, e))?;
        let mut out = BufWriter::new(file);
        for item in items {
            let line = serde_json::to_string(item)
                .map_err(|e| TrainerError::context(name, e))?;
            writeln!(out, "{line}").map_err(|e| TrainerError::io(&path, e))?;
        }
        out.flush().map_err(|e| TrainerError::io(&path, e))
    }
}
