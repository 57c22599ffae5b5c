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
root=$PWD
cache=${RLVMR_CACHE:-$HOME/.cache/rlvmr}
venv=$cache/python-venv
python=${PYTHON:-python3}
# numpy: verl's advantage function works on arrays (torch tensors take the same path).
pins="maturin==1.16.0 pytest==9.2.0 pyyaml==6.0.2 numpy==2.1.3"
if [ "$(cat "$venv/pins" 2>/dev/null)" != "$pins" ]; then
    command -v "$python" > /dev/null || { echo "test_python.sh: no $python to make the venv with" >&2; exit 2; }
    rm -rf "$venv"
    "$python" -m venv "$venv"
    # shellcheck disable=SC2086 # one argument per pin
    "$venv/bin/pip" install --quiet --disable-pip-version-check $pins
    echo "$pins" > "$venv/pins"
fi
if [ -z "${RLVMR_BIN:-}" ]; then
    cargo build --release -q -p rlvmr
    export RLVMR_BIN=$root/target/release/rlvmr
fi
export ALFWORLD_DATA=${ALFWORLD_DATA:-$root/../shared/alfworld}
wheels=$(mktemp -d)
trap 'rm -rf "$wheels"' EXIT
(cd crates/python && "$venv/bin/maturin" build --release --quiet -o "$wheels" -i "$venv/bin/python")
"$venv/bin/pip" install --quiet --disable-pip-version-check --force-reinstall --no-deps "$wheels"/rlvmr-*.whl
"$venv/bin/python" -m pytest -q -p no:cacheprovider crates/python/tests "$@"
