#!/usr/bin/env bash
# Issue 16's benchmark: ALFWorld from Python, rlvmr's vectorised engine against alfworld 0.4.2
# (one process per game, as verl-agent runs it), on the same games and commands.
#
#   tools/bench_python.sh [--envs 1,8,64,512] [--steps 20] [--ref-max 64] [--json FILE]
#
# Makes a venv in $RLVMR_CACHE/python-bench-venv (default ~/.cache/rlvmr) with alfworld 0.4.2
# and textworld 1.7.0 from PyPI, builds the rlvmr wheel into it, and extracts the benchmark's
# games from $ALFWORLD_DATA's json_2.1.1.zip (default ../shared/alfworld) into the cache (the
# reference reads files). See tools/bench_python.py for what is measured.
set -euo pipefail
cd "$(dirname "$0")/.."
cache=${RLVMR_CACHE:-$HOME/.cache/rlvmr}
venv=$cache/python-bench-venv
# shellcheck source=tools/python_venv.sh
source tools/python_venv.sh
pinned_venv "$venv" "alfworld==0.4.2 textworld[pddl]==1.7.0 maturin==1.16.0"
install_rlvmr_wheel "$venv"
source_data=${ALFWORLD_DATA:-../shared/alfworld}
data=$cache/alfworld-train
if [ ! -d "$data/json_2.1.1/train" ]; then
    zip=$source_data/json_2.1.1.zip
    [ -f "$zip" ] || { echo "bench_python.sh: no $zip" >&2; exit 2; }
    mkdir -p "$data.tmp"
    "$venv/bin/python" -c "import sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); z.extractall(sys.argv[2], [n for n in z.namelist() if n.startswith('json_2.1.1/train/')])" "$zip" "$data.tmp"
    mv "$data.tmp" "$data"
fi
"$venv/bin/python" tools/bench_python.py --data "$data" "$@"
