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

/// Writes `dir` through `write` into a temporary sibling, then renames it into place, so a
/// kill leaves either the old folder or the new one whole.
pub fn write_dir_atomically(dir: &Path, write: impl FnOnce(&Path) -> Result<()>) -> Result<()> {
    let name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp = dir.with_file_name(format!(".{name}.tmp"));
    if tmp.exists() {
        std::fs::remove_dir_all(&tmp).map_err(|e| TrainerError::io(&tmp, e))?;
    }
    std::fs::create_dir_all(&tmp).map_err(|e| TrainerError::io(&tmp, e))?;
    write(&tmp)?;
    if dir.exists() {
        std::fs::remove_dir_all(dir).map_err(|e| TrainerError::io(dir, e))?;
    }
    std::fs::rename(&tmp, dir).map_err(|e| TrainerError::io(dir, e))
}

/// Writes `bytes` to `path` through a temporary file and a rename.
pub fn write_file_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp = path.with_file_name(format!(".{name}.tmp"));
    std::fs::write(&tmp, bytes).map_err(|e| TrainerError::io(&tmp, e))?;
    std::fs::rename(&tmp, path).map_err(|e| TrainerError::io(path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_writes_leave_the_old_folder_whole_until_the_rename() {
        let root = std::env::temp_dir().join(format!("rundir-atomic-{}", std::process::id()));
        let target = root.join("iter-0001");
        write_dir_atomically(&target, |tmp| {
            std::fs::write(tmp.join("a"), "1").map_err(|e| TrainerError::io(tmp, e))
        })
        .unwrap();
        let failed = write_dir_atomically(&target, |_| Err(TrainerError::Invalid("disk full".into())));
        assert!(failed.is_err());
        assert_eq!(std::fs::read_to_string(target.join("a")).unwrap(), "1");
        let _ = std::fs::remove_dir_all(&root);
    }
}
