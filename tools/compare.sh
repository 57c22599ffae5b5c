#!/usr/bin/env bash
# Issue 15's comparison: RLVMR, GRPO, GiGPO, GRPO with the four tags but no meta-reasoning
# rewards, and SFT only, on ALFWorld L2 with the main job's budget (configs/cpu-l2.toml).
#
#   tools/compare.sh [OUT]      (default runs/compare; SEEDS="0 1 2", OTHER_SEEDS="0",
#                                CONFIG=configs/cpu-l2.toml)
#
# SEEDS are RLVMR's and GRPO's seeds, OTHER_SEEDS GRPO-tagged's and GiGPO's (seed 0 always runs).
#
# One cold start (the same episodes, seed 0) written twice: in RLVMR's tagged format and in
# the `<think>` format of the published baselines; one SFT of each. RLVMR and GRPO-tagged
# start from the tagged SFT model, GRPO and GiGPO from the think one; every run has the
# preset's iterations, games, rollouts and learning rate, and ends with the preset's
# evaluation of every L0, L1 and L2 test game. Two lanes run side by side (tagged, think),
# one compute thread each. A finished run is kept: call again to go on after a stop.
# Prints the table of `rlvmr compare` and draws the overlaid curves into OUT/plots.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-runs/compare}
SEEDS=${SEEDS:-"0 1 2"}
OTHER_SEEDS=${OTHER_SEEDS:-"0"}
CONFIG=${CONFIG:-configs/cpu-l2.toml}
mkdir -p "$OUT"
cargo build --release -q -p rlvmr
# A copy: rebuilding the project while the comparison runs does not change its binary.
[ -x "$OUT/rlvmr" ] || cp target/release/rlvmr "$OUT/rlvmr"
bin=$(cd "$OUT" && pwd)/rlvmr
# Both formats from the preset: only the reply format differs.
cp "$CONFIG" "$OUT/tagged.toml"
sed -e 's/^\[prompt\]$/[prompt]\nstyle = "think"/' "$CONFIG" > "$OUT/think.toml"
grep -q '^style = "think"' "$OUT/think.toml" || { echo "$CONFIG has no [prompt] section" >&2; exit 2; }

# train RUN CONFIG ALGO INIT SEED: one run into OUT/RUN unless it finished before.
train() {
    local run=$1 config=$2 algo=$3 init=$4 seed=$5
    if [ -f "$OUT/$run/eval/L2.json" ]; then
        echo "$run: done before, kept"
        return
    fi
    local resume=()
    if [ -f "$OUT/$run/config.toml" ]; then
        resume=(--resume "$OUT/$run")
    else
        resume=(--config "$config" --algo "$algo" --init "$init" --seed "$seed" --out "$OUT/$run")
    fi
    echo "$run: rlvmr train ${resume[*]}"
    "$bin" train "${resume[@]}" > "$OUT/$run.log" 2>&1
}

# sft_only NAME MODEL: the SFT model alone on every test game of each level.
sft_only() {
    local name=$1 model=$2
    for level in L0 L1 L2; do
        [ -f "$OUT/$name/$level/summary.json" ] && continue
        "$bin" eval --split "$level" --policy "$model" --out "$OUT/$name/$level" > "$OUT/$name-$level.log" 2>&1
    done
}

lane() {
    local style=$1 first=$2 second=$3
    local sft=$OUT/$first-seed0/sft/final
    # The first run makes the lane's cold start and SFT model.
    train "$first-seed0" "$OUT/$style.toml" "$first" coldstart 0
    sft_only "sft-only-$style" "$sft"
    # One run of every method before the further seeds, so a stopped comparison has them all.
    train "$second-seed0" "$OUT/$style.toml" "${second%-tagged}" "$sft" 0
    for seed in $SEEDS; do
        [ "$seed" = 0 ] || train "$first-seed$seed" "$OUT/$style.toml" "$first" "$sft" "$seed"
    done
    for seed in $OTHER_SEEDS; do
        [ "$seed" = 0 ] || train "$second-seed$seed" "$OUT/$style.toml" "${second%-tagged}" "$sft" "$seed"
    done
}

export RAYON_NUM_THREADS=1
lane tagged rlvmr grpo-tagged &
tagged_lane=$!
lane think grpo gigpo &
think_lane=$!
wait "$tagged_lane"
wait "$think_lane"

runs=("$OUT"/sft-only-tagged "$OUT"/sft-only-think)
for run in rlvmr grpo gigpo grpo-tagged; do
    for dir in "$OUT/$run"-seed*; do
        [ -d "$dir" ] && runs+=("$dir")
    done
done
"$bin" compare "${runs[@]}" | tee "$OUT/table.md"
"$bin" report "${runs[@]:2}" --out "$OUT/plots" > /dev/null
