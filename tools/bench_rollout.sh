#!/usr/bin/env bash
# Rollout speed at longer prompts. The RL issue's rollout target (30 env steps/s on 2 cores)
# is stated for prompts of ~460 tokens; the main preset's compact prompts are ~290. This
# plays 64 L0 test episodes at temperature 1.0 with the preset's SFT model (batches of 32 as
# in its rollouts), once per HISTORY: the model's saved `prompt.history` (recent steps shown)
# set to HISTORY, so the prompts grow. Prints mean prompt tokens and env steps/s per history.
# A benchmark, not a test: the figures depend on the machine.
#
#   tools/bench_rollout.sh [INIT] [HISTORY...]      (default histories: 3 6 9)
#
# INIT: an SFT checkpoint of the preset (default: the one tools/bench_rl.sh makes,
# $BENCH_DIR/init/sft/final; run that first). RLVMR_BIN: another rlvmr binary to time (e.g. one
# built from an earlier commit, for a before/after table), instead of this tree's release build.
set -euo pipefail
cd "$(dirname "$0")/.."
BENCH_DIR=${BENCH_DIR:-/tmp/rlvmr-bench-rl}
init=${1:-$BENCH_DIR/init/sft/final}
shift || true
histories=("${@:-3 6 9}")
[ -f "$init/rlvmr.toml" ] || { echo "no SFT checkpoint at $init (run tools/bench_rl.sh first)" >&2; exit 2; }
bin=${RLVMR_BIN:-target/release/rlvmr}
[ -n "${RLVMR_BIN:-}" ] || cargo build --release -q -p rlvmr
cpu=$(lscpu | sed -n 's/^Model name: *//p')
echo "CPU: $cpu"
echo "| history | mean prompt tokens | episodes | env steps | env steps/s | against 30/s |"
echo "|---:|---:|---:|---:|---:|---:|"
# shellcheck disable=SC2068 # one history per word
for history in ${histories[@]}; do
    model=$BENCH_DIR/rollout-$$-h$history
    rm -rf "$model" "$model-eval"
    cp -r "$init" "$model"
    sed -i "s/^history = .*/history = $history/" "$model/rlvmr.toml"
    "$bin" eval --env alfworld --split L0 --episodes 64 --temperature 1.0 --policy "$model" \
        --out "$model-eval" > /dev/null 2>&1 || { echo "rlvmr eval failed for history $history" >&2; exit 1; }
    python3 - "$model-eval" "$history" <<'PY'
import json, sys
out, history = sys.argv[1], sys.argv[2]
summary = json.load(open(f"{out}/summary.json"))
prompts = [len(step["prompt_ids"]) for line in open(f"{out}/trajectories.jsonl")
           for step in json.loads(line)["steps"]]
rate = summary["throughput"]["env_steps_per_s"]
print(f"| {history} | {sum(prompts) / len(prompts):.0f} | {summary['episodes']} | {len(prompts)} | {rate:.1f} | {rate / 30:.2f}x |")
PY
    rm -rf "$model" "$model-eval"
done
