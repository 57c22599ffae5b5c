#!/usr/bin/env bash
# Check our LoRA adapters against Hugging Face PEFT (by hand; CI has no torch).
#
#   tools/peft_check.sh [tiny|smollm2] [OUT]
#
# 1. builds and runs `cargo run --release -p policy --example lora_peft_export` to write a base
#    model (HF folder), a LoRA adapter in PEFT's layout, our merged checkpoint and our logits
#    into OUT (default: a temporary folder);
# 2. runs tools/peft_check.py in a Python venv with torch, transformers, peft and safetensors:
#    $RLVMR_TORCH_VENV if set, else ${RLVMR_CACHE:-~/.cache/rlvmr}/torch-venv, created on
#    first use with PyTorch and the versions below from PyPI.
set -euo pipefail

model="${1:-tiny}"
out="${2:-$(mktemp -d)}"
root="$(cd "$(dirname "$0")/.." && pwd)"
venv="${RLVMR_TORCH_VENV:-${RLVMR_CACHE:-$HOME/.cache/rlvmr}/torch-venv}"

if [ ! -x "$venv/bin/python" ]; then
    echo "creating $venv" >&2
    python3 -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --upgrade pip
    # The versions this check was last run with (PyPI's torch wheel runs on the CPU too).
    "$venv/bin/python" -m pip install --quiet torch==2.15.0 transformers==5.23.0 peft==0.21.2 \
        safetensors==0.8.0 numpy==2.4.6
fi

(cd "$root" && cargo run --release -q -p policy --example lora_peft_export -- "$out" --model "$model")
"$venv/bin/python" "$root/tools/peft_check.py" "$out"
