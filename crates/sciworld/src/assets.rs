//! The simulator jar: `scienceworld/scienceworld.jar` from the PyPI wheel `scienceworld==1.2.3`,
//! fetched once with `pip download --no-deps`, checked by sha256 and cached under
//! `${RLVMR_CACHE:-~/.cache/rlvmr}/sciworld/`. `$SCIWORLD_JAR` overrides (used as given).

use sha2::{Digest, Sha256};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::error::{Result, SciError};

/// The pip requirement that ships the jar.
pub const WHEEL_REQUIREMENT: &str = "scienceworld==1.2.3";
/// The jar's path inside the wheel.
pub const JAR_MEMBER: &str = "scienceworld/scienceworld.jar";
/// The cached file's name.
pub const JAR_FILE: &str = "scienceworld-1.2.3.jar";
/// sha256 of the jar.
pub const JAR_SHA256: &str = "f4e1fdce0cdabe1bab7128a7e78ea820210d9db3c28d7272bcbbc3f3a1c5f0d7";

/// The cache root: `$RLVMR_CACHE`, else `$HOME/.cache/rlvmr`.
pub fn cache_dir() -> Result<PathBuf> {
    if let Some(dir) = std::env::var_os("RLVMR_CACHE").filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(dir));
    }
    match std::env::var_os("HOME").filter(|d| !d.is_empty()) {
        Some(home) => Ok(PathBuf::from(home).join(".cache").join("rlvmr")),
        None => Err(SciError::Asset(
            "neither RLVMR_CACHE nor HOME is set: cannot choose a cache directory".into(),
        )),
    }
}

/// Serialises fetches within a process.
static FETCH_LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The jar to run: `$SCIWORLD_JAR` when set (it must exist), else the cached jar, fetched and
/// verified on first use.
pub fn jar_path() -> Result<PathBuf> {
    if let Some(jar) = std::env::var_os("SCIWORLD_JAR").filter(|j| !j.is_empty()) {
        let jar = PathBuf::from(jar);
        return if jar.is_file() {
            Ok(jar)
        } else {
            Err(SciError::Asset(format!(
                "SCIWORLD_JAR={} does not exist",
                jar.display()
            )))
        };
    }
    let _guard = FETCH_LOCK.lock().unwrap_or_else(|p| p.into_inner());
    let dir = cache_dir()?.join("sciworld");
    let target = dir.join(JAR_FILE);
    // A corrupt or truncated cache entry is fetched again.
    if target.is_file() && sha256_file(&target)? == JAR_SHA256 {
        return Ok(target);
    }
    std::fs::create_dir_all(&dir).map_err(|e| SciError::io(&dir, e))?;
    fetch_into(&dir, &target)?;
    Ok(target)
}

/// sha256 of a file, lower-case hex.
pub fn sha256_file(path: &Path) -> Result<String> {
    let mut file = std::fs::File::open(path).map_err(|e| SciError::io(path, e))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf).map_err(|e| SciError::io(path, e))?;
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

/// A temporary name unique to this process and call.
fn unique_suffix() -> String {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    format!(
        "{}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

fn fetch_into(dir: &Path, target: &Path) -> Result<()> {
    let tmp = dir.join(format!(".download-{}", unique_suffix()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).map_err(|e| SciError::io(&tmp, e))?;
    let result = download_wheel(&tmp).and_then(|wheel| extract_jar(&wheel, target));
    let _ = std::fs::remove_dir_all(&tmp);
    result
}

fn download_wheel(tmp: &Path) -> Result<PathBuf> {
    let py = python();
    let output = Command::new(&py)
        .args([
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--disable-pip-version-check",
        ])
        .arg(WHEEL_REQUIREMENT)
        .arg("-d")
        .arg(tmp)
        .output()
        .map_err(|e| {
            SciError::Asset(format!(
                "could not run `{py} -m pip` ({e}): the jar is fetched with pip; install Python 3 \
                 with pip (or set RLVMR_PYTHON), or set SCIWORLD_JAR to a scienceworld.jar"
            ))
        })?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let tail: Vec<&str> = stderr.lines().rev().take(8).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        return Err(SciError::Asset(format!(
            "`{py} -m pip download {WHEEL_REQUIREMENT}` failed ({}): {}",
            output.status,
            tail.join("\n")
        )));
    }
    std::fs::read_dir(tmp)
        .map_err(|e| SciError::io(tmp, e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|x| x == "whl"))
        .ok_or_else(|| {
            SciError::Asset(format!(
                "pip reported success but left no wheel in {}",
                tmp.display()
            ))
        })
}

/// Copy the jar out of the wheel into `target` (through a private partial file), checking its
/// sha256 before it takes the final name.
fn extract_jar(wheel: &Path, target: &Path) -> Result<()> {
    let file = std::fs::File::open(wheel).map_err(|e| SciError::io(wheel, e))?;
    let mut archive = zip::ZipArchive::new(file)
        .map_err(|e| SciError::Asset(format!("{} is not a valid wheel: {e}", wheel.display())))?;
    let mut entry = archive.by_name(JAR_MEMBER).map_err(|e| {
        SciError::Asset(format!(
            "{JAR_MEMBER} not found in {}: {e}",
            wheel.display()
        ))
    })?;
    let partial = target.with_extension(format!("jar.partial-{}", unique_suffix()));
    let mut out = std::fs::File::create(&partial).map_err(|e| SciError::io(&partial, e))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = entry
            .read(&mut buf)
            .map_err(|e| SciError::Asset(format!("reading {JAR_MEMBER} from the wheel: {e}")))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        out.write_all(&buf[..n])
            .map_err(|e| SciError::io(&partial, e))?;
    }
    out.sync_all().map_err(|e| SciError::io(&partial, e))?;
    drop(out);
    let got = hex(&hasher.finalize());
    if got != JAR_SHA256 {
        let _ = std::fs::remove_file(&partial);
        return Err(SciError::Asset(format!(
            "sha256 mismatch for {JAR_MEMBER}: expected {JAR_SHA256}, got {got}"
        )));
    }
    std::fs::rename(&partial, target).map_err(|e| SciError::io(target, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wheel_without_the_jar_is_a_clear_error() {
        let dir = std::env::temp_dir().join(format!("sciworld-assets-{}", unique_suffix()));
        std::fs::create_dir_all(&dir).unwrap();
        let wheel = dir.join("fake.whl");
        let mut zip = zip::ZipWriter::new(std::fs::File::create(&wheel).unwrap());
        zip.start_file("other.txt", zip::write::SimpleFileOptions::default())
            .unwrap();
        zip.write_all(b"x").unwrap();
        zip.finish().unwrap();
        let err = extract_jar(&wheel, &dir.join(JAR_FILE)).unwrap_err();
        assert!(err.to_string().contains("not found"), "{err}");
        std::fs::write(&wheel, b"not a zip").unwrap();
        let err = extract_jar(&wheel, &dir.join(JAR_FILE)).unwrap_err();
        assert!(err.to_string().contains("not a valid wheel"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_jar_with_the_wrong_hash_is_refused() {
        let dir = std::env::temp_dir().join(format!("sciworld-assets-{}", unique_suffix()));
        std::fs::create_dir_all(&dir).unwrap();
        let wheel = dir.join("fake.whl");
        let mut zip = zip::ZipWriter::new(std::fs::File::create(&wheel).unwrap());
        zip.start_file(JAR_MEMBER, zip::write::SimpleFileOptions::default())
            .unwrap();
        zip.write_all(b"not the simulator").unwrap();
        zip.finish().unwrap();
        let target = dir.join(JAR_FILE);
        let err = extract_jar(&wheel, &target).unwrap_err();
        assert!(err.to_string().contains("sha256 mismatch"), "{err}");
        assert!(!target.exists());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
