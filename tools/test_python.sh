#!/usr/bin/env bash
# Builds the `rlvmr` Python package (crates/python, PyO3 + maturin, one abi3 wheel) into a
# venv and runs its pytest suite against the release CLI. Run by `cargo test` (the rlvmr
# crate's tests/python.rs) so CI covers it; also by hand:
#
#   tools/test_python.sh [PYTEST ARGS...]
#
# The venv (maturin, pytest, PyYAML and numpy from PyPI, pinned) lives in $RLVMR_CACHE/python-venv
# (default ~/.cache/rlvmr) and is made once. RLVMR_BIN: the CLI the tests compare with
# (default target/release/rlvmr, built when missing). ALFWORLD_DATA: default ../shared/alfworld.
set -euo pipefail
cd "$(dirname "$0")/.."
cache=${RLVMR_CACHE:-$HOME/.cache/rlvmr}
venv=$cache/python-venv
# numpy: verl's advantage function works on arrays (its torch tests skip here and run in
# tools/test_python_torch.sh).
# shellcheck source=tools/python_venv.sh
source tools/python_venv.sh
pinned_venv "$venv" "maturin==1.16.0 pytest==9.2.0 pyyaml==6.0.2 numpy==2.1.3"
run_python_tests "$venv" "$@"
