#!/usr/bin/env bash
# Check that transformers loads folders saved by rlvmr's checkpoint::save_model and gives the
# same tokens, chat text and logits as rlvmr (tools/check_hf_export.py). Not part of CI: it
# needs PyTorch.
#
#   tools/check_hf_export.sh [MODEL ...]
#
# MODEL defaults to the embedded SmolLM2 GGUF (converted to an HF Llama folder) and the two tiny
# Qwen2 fixtures (round-tripped). Uses the venv in $TORCH_VENV if set, else creates
# ${RLVMR_CACHE:-~/.cache/rlvmr}/torch-venv (python3 -m venv; pip install torch transformers
# safetensors from PyPI; a few minutes and ~1 GB the first time). Outputs go to a temporary
# folder that is removed at the end.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
cache="${RLVMR_CACHE:-$HOME/.cache/rlvmr}"
venv="${TORCH_VENV:-$cache/torch-venv}"

if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import torch, transformers, safetensors" 2>/dev/null; then
    echo "check_hf_export.sh: creating a PyTorch venv in $venv" >&2
    mkdir -p "$(dirname "$venv")"
    python3 -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --upgrade pip
    "$venv/bin/python" -m pip install --quiet torch transformers safetensors
fi

if [ "$#" -eq 0 ]; then
    set -- smollm2-135m-instruct \
        "$root/crates/policy/tests/fixtures/qwen2-tiny" \
        "$root/crates/policy/tests/fixtures/qwen2-tiny-tied"
fi

(cd "$root" && cargo build --release --quiet -p policy --example export_hf)
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
status=0
for model in "$@"; do
    out="$work/$(basename "$model")"
    echo "== $model"
    "$root/target/release/examples/export_hf" "$model" "$out"
    "$venv/bin/python" "$here/check_hf_export.py" "$out" || status=1
done
exit $status
