//! Where tensors live: the CPU, or an NVIDIA GPU when built with the `cuda` feature.

use candle_core::Device;

use crate::error::{PolicyError, Result};

/// The environment variable that picks the device when no explicit choice is given
/// (tests read it too, so the same suite runs on a GPU machine).
pub const DEVICE_ENV: &str = "RLVMR_DEVICE";

/// A device name, read but not opened.
enum Name {
    Cpu,
    Auto,
    Cuda(usize),
}

/// Reads `cpu`, `auto`, `cuda` (GPU 0) or `cuda:N`; a `cuda` name also needs a build with the
/// `cuda` feature.
fn name(spec: &str) -> Result<Name> {
    let spec = spec.trim();
    let name = match spec {
        "cpu" => Name::Cpu,
        "auto" => Name::Auto,
        "cuda" => Name::Cuda(0),
        _ => match spec.strip_prefix("cuda:").map(str::parse::<usize>) {
            Some(Ok(ordinal)) => Name::Cuda(ordinal),
            _ => {
                return Err(PolicyError::Input(format!(
                    "unknown device {spec:?}: expected cpu, cuda, cuda:N or auto"
                )))
            }
        },
    };
    if matches!(name, Name::Cuda(_)) {
        cuda_build()?;
    }
    Ok(name)
}

/// Parse a device name: `cpu`, `cuda` (GPU 0), `cuda:N`, or `auto` (the first GPU when the
/// binary was built with `cuda` and one is present, else the CPU).
pub fn parse(spec: &str) -> Result<Device> {
    match name(spec)? {
        Name::Cpu => Ok(Device::Cpu),
        Name::Auto => Ok(auto()),
        Name::Cuda(ordinal) => Device::new_cuda(ordinal)
            .map_err(|e| PolicyError::context(format!("cannot open CUDA device {ordinal}"), e)),
    }
}

/// Checks a device name without opening the device: `parse` would accept it on a machine
/// that has the device.
pub fn check(spec: &str) -> Result<()> {
    name(spec).map(|_| ())
}

/// The device named by `$RLVMR_DEVICE`, or the CPU when it is unset.
pub fn from_env() -> Result<Device> {
    match std::env::var(DEVICE_ENV) {
        Ok(spec) => parse(&spec),
        Err(_) => Ok(Device::Cpu),
    }
}

/// Matrix products of f32 on a GPU in TF32 (`true`: inputs rounded to 10-bit mantissas,
/// f32 accumulation, as PyTorch's `allow_tf32`) or in full f32 (`false`, the default). It
/// holds for the whole process, and has no effect on the CPU.
pub fn set_tf32(on: bool) {
    #[cfg(feature = "cuda")]
    candle_core::cuda_backend::set_gemm_reduced_precision_f32(on);
    #[cfg(not(feature = "cuda"))]
    let _ = on;
}

fn auto() -> Device {
    if cfg!(feature = "cuda") {
        if let Ok(device) = Device::new_cuda(0) {
            return device;
        }
    }
    Device::Cpu
}

fn cuda_build() -> Result<()> {
    if cfg!(feature = "cuda") {
        return Ok(());
    }
    Err(PolicyError::Input(
        "this build has no CUDA support: rebuild with `--features cuda` (tools/cuda/build.sh)".into(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_cpu_and_rejects_unknown_names() {
        assert!(parse("cpu").unwrap().is_cpu());
        assert!(parse(" cpu ").unwrap().is_cpu());
        let err = parse("tpu").unwrap_err().to_string();
        assert!(err.contains("\"tpu\""), "{err}");
        assert!(parse("cuda:x").is_err());
    }

    #[test]
    fn check_agrees_with_parse_on_names() {
        for good in ["cpu", " auto ", "cpu\n"] {
            check(good).unwrap();
        }
        for bad in ["tpu", "cuda:", "cuda:-1", "gpu:0", ""] {
            let err = check(bad).unwrap_err().to_string();
            assert!(err.contains("expected cpu, cuda, cuda:N or auto"), "{bad:?}: {err}");
        }
        assert_eq!(check("cuda:1").is_ok(), cfg!(feature = "cuda"));
    }

    #[test]
    fn auto_falls_back_to_cpu_without_a_gpu() {
        let device = parse("auto").unwrap();
        if !cfg!(feature = "cuda") {
            assert!(device.is_cpu());
        }
    }

    #[cfg(not(feature = "cuda"))]
    #[test]
    fn cuda_without_the_feature_says_how_to_build_it() {
        let err = parse("cuda").unwrap_err().to_string();
        assert!(err.contains("--features cuda"), "{err}");
        let err = check("cuda:0").unwrap_err().to_string();
        assert!(err.contains("--features cuda"), "{err}");
    }
}
