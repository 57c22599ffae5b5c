#!/usr/bin/env bash
# Makes (once) a Python venv with CPU PyTorch and transformers from PyPI for the policy
# benchmark's reference side (tools/bench_torch.py), at ${RLVMR_CACHE:-~/.cache/rlvmr}/torch-venv,
# and prints the path of its python. Run by hand; nothing in the build or the tests needs it.
#   TORCH_VENV=/path/to/existing/venv tools/torch_venv.sh   # use a venv you already have
set -euo pipefail
if [[ -n "${TORCH_VENV:-}" ]]; then
    echo "$TORCH_VENV/bin/python"
    exit 0
fi
venv="${RLVMR_CACHE:-$HOME/.cache/rlvmr}/torch-venv"
if [[ ! -x "$venv/bin/python" ]] || ! "$venv/bin/python" -c 'import torch, transformers' 2>/dev/null; then
    python3 -m venv "$venv" >&2
    "$venv/bin/python" -m pip install --quiet --upgrade pip >&2
    "$venv/bin/python" -m pip install --quiet torch --index-url https://download.pytorch.org/whl/cpu >&2 \
        || "$venv/bin/python" -m pip install --quiet torch >&2
    "$venv/bin/python" -m pip install --quiet transformers safetensors numpy >&2
fi
echo "$venv/bin/python"
