#!/usr/bin/env bash
# Makes (once) a venv with llama.cpp's OpenAI-compatible server from PyPI
# (llama-cpp-python with its `server` extra, built from source: about 10 minutes on two
# cores) and prints its python. The served-policy tests start this server when the venv
# exists (RLVMR_LLAMA_SERVER_PYTHON or the default path) and skip the real-peer test when
# it does not. Run from the repository root.
set -euo pipefail
source tools/python_venv.sh
cache=${RLVMR_CACHE:-$HOME/.cache/rlvmr}
venv=$cache/llama-server-venv
mkdir -p "$cache"
# A portable build (no -march=native), so a cached venv moves between machines.
export CMAKE_ARGS=${CMAKE_ARGS:-"-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON"}
export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}
pinned_venv "$venv" "llama-cpp-python[server]==0.3.16"
echo "$venv/bin/python"
