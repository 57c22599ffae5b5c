//! Helpers shared by the integration tests.
#![allow(dead_code)] // each test binary uses its own subset

use std::path::PathBuf;

/// A word-level tokenizer with exactly `n` tokens: `<unk>` (id 0) and `w1` .. `w{n-1}`, split on
/// whitespace. Small enough for the tiny random models.
pub fn word_tokenizer(n: u32) -> policy::Tokenizer {
    policy::tokenizer::word_level(n).expect("word-level tokenizer")
}

/// `crates/policy/tests/fixtures/{name}`.
pub fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("fixtures")
        .join(name)
}

/// A fresh, empty temporary folder unique to this process and `tag`.
pub fn fresh_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("rlvmr-policy-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("create temporary folder");
    d
}

/// A copy of the fixture folder `name` in a fresh temporary folder, to damage freely.
pub fn copy_fixture(name: &str, tag: &str) -> PathBuf {
    let dir = fresh_dir(tag);
    for entry in std::fs::read_dir(fixture(name)).expect("fixture folder") {
        let path = entry.expect("fixture entry").path();
        let file = path.file_name().expect("file name");
        std::fs::copy(&path, dir.join(file)).expect("copy fixture file");
    }
    dir
}

/// The device the tests run on: `$RLVMR_DEVICE` (`cpu`, `cuda`, `cuda:N`, `auto`), else the
/// CPU, so that the same suite checks a CUDA build on a GPU machine. One device for the whole
/// test binary: tensors on two CUDA handles of the same GPU do not mix.
pub fn device() -> candle_core::Device {
    static DEVICE: std::sync::OnceLock<candle_core::Device> = std::sync::OnceLock::new();
    DEVICE
        .get_or_init(|| policy::device::from_env().expect("RLVMR_DEVICE names a usable device"))
        .clone()
}
