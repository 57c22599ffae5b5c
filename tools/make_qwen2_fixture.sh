#!/usr/bin/env bash
# Re-create the tiny random Qwen2 fixtures in crates/policy/tests/fixtures/ (see
# tools/make_qwen2_fixture.py for what they hold). Uses the venv in $TORCH_VENV if set, else
# creates ${RLVMR_CACHE:-~/.cache/rlvmr}/torch-venv (python3 -m venv; pip install torch
# transformers tokenizers safetensors from PyPI). Arguments go to the Python script
# (e.g. --out DIR). Takes seconds once the venv exists; the output is deterministic for a given
# torch/tokenizers version.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache="${RLVMR_CACHE:-$HOME/.cache/rlvmr}"
venv="${TORCH_VENV:-$cache/torch-venv}"

if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import torch, transformers, tokenizers, safetensors" 2>/dev/null; then
    echo "make_qwen2_fixture.sh: creating a PyTorch venv in $venv" >&2
    mkdir -p "$(dirname "$venv")"
    python3 -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --upgrade pip
    "$venv/bin/python" -m pip install --quiet torch transformers tokenizers safetensors
fi

exec "$venv/bin/python" "$here/make_qwen2_fixture.py" "$@"
