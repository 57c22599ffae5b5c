//! The one harness of the CLI tests (`mod harness;` in each): the built `rlvmr` binary run
//! with the test data as `ALFWORLD_DATA`, its exit code and output captured, and scratch
//! folders of its own per test process.
#![allow(dead_code)]

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_rlvmr");

/// The repository's root.
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The ALFWorld data the tests read (see `testkit`).
pub fn zip() -> String {
    testkit::alfworld_data().display().to_string()
}

/// An empty folder `name` for this test process (emptied when it exists).
pub fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rlvmr-cli-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `rlvmr ARGS` with the test data, no input, output piped: to spawn or to run.
pub fn command(args: &[&str]) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.args(args)
        .env("ALFWORLD_DATA", zip())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

/// Runs `rlvmr ARGS`: (exit code, stdout, stderr).
pub fn rlvmr(args: &[&str]) -> (i32, String, String) {
    captured(command(args).output().unwrap())
}

/// [`rlvmr`] with `stdin` written to its standard input.
pub fn rlvmr_input(args: &[&str], stdin: &[u8]) -> (i32, String, String) {
    let mut child = command(args).stdin(Stdio::piped()).spawn().unwrap();
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    captured(child.wait_with_output().unwrap())
}

/// [`rlvmr`] with the variables `env` set.
pub fn rlvmr_env(args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    captured(command(args).envs(env.iter().copied()).output().unwrap())
}

fn captured(out: Output) -> (i32, String, String) {
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}
