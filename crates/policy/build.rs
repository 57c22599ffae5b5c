//! With the `cuda` feature: compiles the GPU path's kernels (src/ops/kernels.cu) to PTX with
//! nvcc, for CUDA_COMPUTE_CAP (default 90, H100/H200); the driver compiles the PTX on the GPU.
//! tools/cuda/build.sh puts an nvcc on the PATH on a machine with no CUDA toolkit.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=src/ops/kernels.cu");
    println!("cargo:rerun-if-env-changed=CUDA_COMPUTE_CAP");
    if std::env::var_os("CARGO_FEATURE_CUDA").is_none() {
        return;
    }
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR")).join("kernels.ptx");
    let cap = std::env::var("CUDA_COMPUTE_CAP").unwrap_or_else(|_| "90".into());
    let status = Command::new("nvcc")
        .args(["--ptx", "-O3", &format!("-arch=compute_{cap}"), "-o"])
        .arg(&out)
        .arg("src/ops/kernels.cu")
        .status();
    match status {
        Ok(s) if s.success() => {}
        Ok(s) => panic!("nvcc failed on src/ops/kernels.cu ({s})"),
        Err(e) => panic!("cannot run nvcc ({e}): build with tools/cuda/build.sh, which fetches one"),
    }
}
