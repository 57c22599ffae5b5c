#!/usr/bin/env bash
# Run a ScienceWorld tool with the official Python client (scienceworld==1.2.3).
#
# Creates a venv at ${RLVMR_CACHE:-~/.cache/rlvmr}/sciworld-ref-venv on first use
# (python3 -m venv; pip install scienceworld==1.2.3 psutil), then runs
# tools/record_sciworld.py with it; all arguments are passed through:
#
#   tools/record_sciworld.sh                      # writes crates/sciworld/tests/transcripts/official.jsonl.gz
#   tools/record_sciworld.sh --tasks boil,melt --out /tmp/smoke.jsonl.gz
#
# With RLVMR_SCIWORLD_TOOL=bench it runs tools/sciworld_ref_bench.py instead (what
# `rlvmr sciworld bench` does).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache="${RLVMR_CACHE:-$HOME/.cache/rlvmr}"
venv="$cache/sciworld-ref-venv"

if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import scienceworld, psutil" 2>/dev/null; then
    echo "record_sciworld.sh: creating reference venv in $venv" >&2
    mkdir -p "$cache"
    python3 -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "scienceworld==1.2.3" psutil
fi

case "${RLVMR_SCIWORLD_TOOL:-record}" in
    record) exec "$venv/bin/python" "$here/record_sciworld.py" "$@" ;;
    bench) exec "$venv/bin/python" "$here/sciworld_ref_bench.py" "$@" ;;
    *) echo "RLVMR_SCIWORLD_TOOL must be record or bench" >&2; exit 2 ;;
esac
