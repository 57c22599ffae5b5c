#!/usr/bin/env bash
# Issue 32, point 3: how long RL must run here. One long run per method under the published
# protocol, with the main job's settings (configs/cpu-l2.toml) except the length and the
# evaluations: every EVAL_EVERY iterations the weights play the same seeded draw of
# EVAL_EPISODES L0 test games and every L2 test game (38), at the evaluation temperature.
#
#   tools/long_runs.sh [OUT]     (default runs/long; ITERATIONS=60, EVAL_EVERY=5,
#                                 EVAL_EPISODES=38, TAGGED_SFT=runs/cpu-l2/rlvmr/sft/final,
#                                 METHODS="rlvmr grpo-tagged grpo", LANES=2)
#
# rlvmr and grpo-tagged start from one tagged SFT model: TAGGED_SFT when it exists (the main
# job's; the same config and seed make the same model), else the one the rlvmr run makes
# first. grpo makes its own `<think>` cold start and SFT (the same demonstrations in the
# published baselines' format) inside its run. LANES runs go side by side, one compute
# thread each.
#
# Every run checkpoints after each iteration; calling the script again resumes each run from
# its last checkpoint (and a larger ITERATIONS extends finished runs). It ends with
# `rlvmr report` over the runs: OUT/plots/{success,rates,tags,eval-L0,eval-L2}.png, the
# methods overlaid, and the table.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-runs/long}
ITERATIONS=${ITERATIONS:-60}
EVAL_EVERY=${EVAL_EVERY:-5}
EVAL_EPISODES=${EVAL_EPISODES:-38}
TAGGED_SFT=${TAGGED_SFT:-runs/cpu-l2/rlvmr/sft/final}
METHODS=${METHODS:-"rlvmr grpo-tagged grpo"}
LANES=${LANES:-2}
mkdir -p "$OUT"
cargo build --release -q -p rlvmr
# A copy: rebuilding the project while the runs go on does not change their binary.
[ -x "$OUT/rlvmr.bin" ] || cp target/release/rlvmr "$OUT/rlvmr.bin"
bin=$(cd "$OUT" && pwd)/rlvmr.bin

# The preset, made long: checkpoints every iteration, the evaluations above, no final
# evaluation of the whole test sets (the curves are the point; `rlvmr eval` does it later).
long_config() {
    sed -e "s/^iterations = .*/iterations = $ITERATIONS/" \
        -e "s/^eval_every = .*/eval_every = $EVAL_EVERY/" \
        -e "s/^save_every = .*/save_every = 1/" \
        -e "s/^final_eval = .*/final_eval = []\neval_levels = [\"L0\", \"L2\"]\neval_episodes = $EVAL_EPISODES/" \
        configs/cpu-l2.toml
}
long_config > "$OUT/tagged.toml"
sed -e 's/^\[prompt\]$/[prompt]\nstyle = "think"/' "$OUT/tagged.toml" > "$OUT/think.toml"
for f in tagged think; do
    grep -q "^eval_levels" "$OUT/$f.toml" && grep -q "^iterations = $ITERATIONS" "$OUT/$f.toml" \
        || { echo "configs/cpu-l2.toml changed shape: cannot make $OUT/$f.toml" >&2; exit 2; }
done

# run METHOD INIT: one long run into OUT/METHOD from INIT, resumed when it has a checkpoint.
run() {
    local method=$1 init=$2 style=tagged algo=$1
    case $method in
        grpo-tagged) algo=grpo ;;
        grpo | gigpo) style=think ;;
    esac
    if [ -d "$OUT/$method/checkpoints" ]; then
        echo "$method: resuming"
        "$bin" train --resume "$OUT/$method" --iterations "$ITERATIONS" >> "$OUT/$method.log" 2>&1
        return
    fi
    [ "$style" = think ] && init=coldstart
    echo "$method: from $init"
    "$bin" train --config "$OUT/$style.toml" --algo "$algo" --init "$init" --out "$OUT/$method" > "$OUT/$method.log" 2>&1
}

# Without the main job's SFT model, the first tagged run makes it (cold start and SFT in
# its own folder) before the others start.
if [ ! -f "$TAGGED_SFT/rlvmr.toml" ]; then
    RAYON_NUM_THREADS=2 run rlvmr coldstart
    TAGGED_SFT=$OUT/rlvmr/sft/final
fi

export RAYON_NUM_THREADS=$((2 / LANES > 0 ? 2 / LANES : 1))
running=0
for method in $METHODS; do
    if [ "$running" -ge "$LANES" ]; then
        wait -n
        running=$((running - 1))
    fi
    run "$method" "$TAGGED_SFT" &
    running=$((running + 1))
done
wait
dirs=()
for method in $METHODS; do dirs+=("$OUT/$method"); done
"$bin" report "${dirs[@]}" --out "$OUT/plots"
