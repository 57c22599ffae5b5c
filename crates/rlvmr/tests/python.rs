//! The Python package (crates/python) built into a venv and its pytest suite, which compares
//! the bindings with this CLI byte for byte (tools/test_python.sh).

use std::path::Path;
use std::process::Command;

#[test]
fn the_python_package_builds_and_agrees_with_the_cli() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let status = Command::new("bash")
        .arg(root.join("tools/test_python.sh"))
        .env("RLVMR_BIN", env!("CARGO_BIN_EXE_rlvmr"))
        .status()
        .expect("bash runs tools/test_python.sh");
    assert!(status.success(), "tools/test_python.sh failed: {status}");
}
