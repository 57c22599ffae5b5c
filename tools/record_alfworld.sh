#!/usr/bin/env bash
# Record reference transcripts from the ALFWorld text engine (alfworld 0.4.2 on
# textworld 1.7.0) into crates/alfworld/tests/transcripts/ (by default).
#
# Creates a venv at ${RLVMR_CACHE:-~/.cache/rlvmr}/alfworld-ref-venv on first
# use (python3 -m venv; pip install alfworld==0.4.2 textworld[pddl]==1.7.0),
# then runs tools/record_alfworld.py with it; all arguments are passed
# through, e.g.
#
#   tools/record_alfworld.sh --data ~/.cache/alfworld          # folder with json_2.1.1/
#   tools/record_alfworld.sh --zip /path/to/json_2.1.1.zip
#   tools/record_alfworld.sh --data DIR --limit 2 --out /tmp/smoke   # quick smoke test
#
# Time: a game costs 2-35 s of CPU (two env resets at ~0.5-1 s each plus ~45-90
# steps at 30-60 ms; big kitchen scenes are the slowest).  The full default
# recording (valid_seen 140 + valid_unseen 134 + 360 train games = 634 games,
# 1268 episodes, ~30k steps) took 64 minutes with --jobs 2 under `nice` on a
# shared 2-core machine that was compiling Rust at the same time (valid_seen
# 11 min, valid_unseen 16 min, train 37 min); expect roughly half that on an
# idle machine, less with more --jobs.  Creating the venv adds a few minutes.
# Output: ~1.26 MB of .jsonl.gz in total.
#
# The output is deterministic: same data + same --seed (+ any --jobs) gives
# byte-identical .jsonl.gz files.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache="${RLVMR_CACHE:-$HOME/.cache/rlvmr}"
venv="$cache/alfworld-ref-venv"

if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import alfworld, textworld.envs.pddl" 2>/dev/null; then
    echo "record_alfworld.sh: creating reference venv in $venv" >&2
    mkdir -p "$cache"
    python3 -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --upgrade pip
    "$venv/bin/python" -m pip install --quiet "alfworld==0.4.2" "textworld[pddl]==1.7.0"
fi

exec "$venv/bin/python" "$here/record_alfworld.py" "$@"
