#!/usr/bin/env bash
# The Python package's tests in a venv that also has PyTorch and verl, so the tests the CI
# venv (numpy only) skips run too: rlvmr.verl on torch tensors (the path verl's trainer
# takes), and GRPO-MR with the tag term off against verl's own GRPO advantage
# (verl.trainer.ppo.core_algos). Run by hand: PyTorch from PyPI with its CUDA libraries and
# verl's imports are a download of several GB (the venv takes about 7 GB).
#
#   tools/test_python_torch.sh [PYTEST ARGS...]     (e.g. -k torch)
#
# The venv lives in $RLVMR_CACHE/python-torch-venv (default ~/.cache/rlvmr) and is made once.
set -euo pipefail
cd "$(dirname "$0")/.."
cache=${RLVMR_CACHE:-$HOME/.cache/rlvmr}
venv=$cache/python-torch-venv
# shellcheck source=tools/python_venv.sh
source tools/python_venv.sh
# What importing verl.trainer.ppo.core_algos needs; verl itself without its dependencies
# (vLLM, wandb, datasets, ...: its trainer is not run here).
pinned_venv "$venv" "maturin==1.16.0 pytest==9.2.0 pyyaml==6.0.2 numpy==2.1.3 torch==2.12.1 tensordict==0.6.2 ray==2.60.0 pandas==3.1.1 omegaconf==2.4.0 transformers==5.24.0 setuptools==69.5.1"
"$venv/bin/python" -c 'import verl' 2>/dev/null || "$venv/bin/pip" install --quiet --disable-pip-version-check --no-deps verl==0.4.1
"$venv/bin/python" -c 'import torch, verl; print("torch", torch.__version__, "verl", verl.__version__)'
run_python_tests "$venv" "$@"
