#!/usr/bin/env bash
# How long RL must run here, and how the methods compare. One long run per method under the
# published protocol, with a main job's settings (CONFIG: configs/cpu-l2.toml, ALFWorld, or
# configs/cpu-sciworld.toml) except the length and the evaluations: every EVAL_EVERY
# iterations the weights play a seeded draw of EVAL_EPISODES test games of L0 and of L2
# (ALFWorld's 38: every L2 test game), at the evaluation temperature: the same games for
# every method of a seed, and for every seed where CONFIG sets [eval] draw_seed.
#
#   tools/long_runs.sh [OUT]     (default runs/long; CONFIG=configs/cpu-l2.toml,
#                                 ITERATIONS=60, EVAL_EVERY=5, EVAL_EPISODES=38,
#                                 TAGGED_SFT=runs/cpu-l2/rlvmr/sft/final,
#                                 METHODS="rlvmr grpo-tagged grpo gigpo", SEEDS=0,
#                                 THINK_SEEDS=0, LANES=2)
#
# Variants, each the tagged preset with one setting changed, run in the tagged lane from the
# same model (not in the default METHODS): rlvmr-noexplore (`[reward] exploration_reward =
# 0`) and rlvmr-newtarget (`[reward] exploration = "new_target"`, the paper's rule), issue 32's
# diagnostics; rlvmr-kl and grpo-tagged-kl (`[rl] kl_coef = 0.01`, the authors' k3 KL term to
# the SFT model); rlvmr-nolift (`[advantage] tag_lift = "won_only"`: this project's variant,
# the tag term may not lift a lost episode's steps; docs/method.md); rlvmr-planonly
# (`exploration_reward = 0`, `reflection_reward = 0`: the planning reward alone, what the
# authors' code pays on replies laid out as their prompts ask; docs/training.md).
#
# rlvmr and grpo-tagged start from one tagged SFT model: TAGGED_SFT when it exists (the main
# job's; the same config and seed make the same model), else the one the rlvmr run makes
# first; they run once per seed in SEEDS. grpo's seed-0 run makes its own `<think>` cold
# start and SFT (the same demonstrations in the published baselines' format); gigpo and the
# further grpo seeds (THINK_SEEDS) start from that model. Two lanes (tagged, think) go side
# by side, one compute thread each; LANES=1 runs them one after the other on two threads.
# When no think-lane method is wanted, LANES=2 splits the tagged methods over the two lanes
# instead (RLVMR and GRPO-tagged side by side, each over its seeds). Seed 0 runs are
# OUT/METHOD, others OUT/METHOD-seedN.
#
# Every run checkpoints after each iteration; calling the script again resumes each run from
# its last checkpoint (and a larger ITERATIONS extends finished runs). It ends with
# `rlvmr report` over the runs: OUT/plots/{success,rates,tags,eval-L0,eval-L2}.png, the
# methods overlaid, and the table.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-runs/long}
CONFIG=${CONFIG:-configs/cpu-l2.toml}
ITERATIONS=${ITERATIONS:-60}
EVAL_EVERY=${EVAL_EVERY:-5}
EVAL_EPISODES=${EVAL_EPISODES:-38}
TAGGED_SFT=${TAGGED_SFT:-runs/cpu-l2/rlvmr/sft/final}
METHODS=${METHODS:-"rlvmr grpo-tagged grpo gigpo"}
SEEDS=${SEEDS:-0}
THINK_SEEDS=${THINK_SEEDS:-0}
LANES=${LANES:-2}
mkdir -p "$OUT"
cargo build --release -q -p rlvmr
# A copy: rebuilding the project while the runs go on does not change their binary.
[ -x "$OUT/rlvmr.bin" ] || cp target/release/rlvmr "$OUT/rlvmr.bin"
bin=$(cd "$OUT" && pwd)/rlvmr.bin

# The preset, made long: checkpoints every iteration, the evaluations above, no final
# evaluation of the whole test sets (the curves are the point; `rlvmr eval` does it later),
# one run at the preset's level even where the preset trains one per level (the key is
# dropped, so a binary older than it reads the file too).
long_config() {
    sed -e "s/^iterations = .*/iterations = $ITERATIONS/" \
        -e "s/^eval_every = .*/eval_every = $EVAL_EVERY/" \
        -e "s/^save_every = .*/save_every = 1/" \
        -e "/^per_level = /d" \
        -e "s/^final_eval = .*/final_eval = []\neval_levels = [\"L0\", \"L2\"]\neval_episodes = $EVAL_EPISODES/" \
        "$CONFIG"
}
long_config > "$OUT/tagged.toml"
sed -e 's/^\[prompt\]$/[prompt]\nstyle = "think"/' "$OUT/tagged.toml" > "$OUT/think.toml"
# variant NAME SECTION KEY: the tagged preset with one key added in a section the preset lacks,
# as OUT/tagged-NAME.toml; methods rlvmr-NAME and grpo-tagged-NAME run it.
variant() {
    grep -q "^\[$2\]" "$OUT/tagged.toml" && { echo "$CONFIG has a [$2] section: cannot add variant $1's" >&2; exit 2; }
    printf '%s\n[%s]\n%s\n' "$(cat "$OUT/tagged.toml")" "$2" "$3" > "$OUT/tagged-$1.toml"
}
variant noexplore reward 'exploration_reward = 0.0'
variant newtarget reward 'exploration = "new_target"'
variant nolift advantage 'tag_lift = "won_only"'
variant planonly reward $'exploration_reward = 0.0\nreflection_reward = 0.0'
# The KL variant changes a key the preset has.
sed -e 's/^kl_coef = .*/kl_coef = 0.01/' "$OUT/tagged.toml" > "$OUT/tagged-kl.toml"
grep -q '^kl_coef = 0.01$' "$OUT/tagged-kl.toml" || { echo "$CONFIG has no [rl] kl_coef: cannot make the KL variant" >&2; exit 2; }
for f in tagged think; do
    grep -q "^eval_levels" "$OUT/$f.toml" && grep -q "^iterations = $ITERATIONS" "$OUT/$f.toml" \
        || { echo "$CONFIG changed shape: cannot make $OUT/$f.toml" >&2; exit 2; }
done

# name METHOD SEED: the run's folder name (seed 0 keeps the bare method name).
name() { if [ "$2" = 0 ]; then echo "$1"; else echo "$1-seed$2"; fi; }

# run METHOD SEED INIT: one long run into OUT/NAME from INIT. A run with checkpoints is
# resumed (and extended when ITERATIONS grew); a finished run at least ITERATIONS long is kept.
run() {
    local method=$1 seed=$2 init=$3 style=tagged algo=$1
    local dir=$OUT/$(name "$1" "$2")
    case $method in
        grpo-tagged) algo=grpo ;;
        grpo-tagged-*) algo=grpo style=tagged-${method#grpo-tagged-} ;;
        grpo | gigpo) style=think ;;
        rlvmr-*) algo=rlvmr style=tagged-${method#rlvmr-} ;;
    esac
    if [ -d "$dir/checkpoints" ]; then
        local planned
        planned=$(sed -n 's/^iterations = //p' "$dir/config.toml")
        if [ -d "$dir/final" ] && [ "$planned" -ge "$ITERATIONS" ]; then
            echo "$dir: $planned iterations done, kept"
            return
        fi
        echo "$dir: resuming"
        "$bin" train --resume "$dir" --iterations "$ITERATIONS" >> "$dir.log" 2>&1
        return
    fi
    echo "$dir: from $init, seed $seed"
    "$bin" train --config "$OUT/$style.toml" --algo "$algo" --init "$init" --seed "$seed" \
        --out "$dir" > "$dir.log" 2>&1
}

wanted() { [[ " $METHODS " == *" $1 "* ]]; }
# Every method of the tagged lane, in the order a seed runs them.
TAGGED_METHODS="rlvmr grpo-tagged rlvmr-noexplore rlvmr-newtarget rlvmr-planonly rlvmr-nolift rlvmr-kl grpo-tagged-kl"
for method in $METHODS; do
    [[ " $TAGGED_METHODS grpo gigpo " == *" $method "* ]] || { echo "unknown method $method (known: $TAGGED_METHODS grpo gigpo)" >&2; exit 2; }
done

# Without the main job's SFT model, the first tagged run makes it (cold start and SFT in
# its own folder) before the others start.
if [ ! -f "$TAGGED_SFT/rlvmr.toml" ]; then
    RAYON_NUM_THREADS=2 run rlvmr 0 coldstart
    TAGGED_SFT=$OUT/rlvmr/sft/final
fi

# Tagged lane LANE of LANES: RLVMR and GRPO with the four tags from one SFT model, seed by
# seed, every LANES-th wanted method from the LANE-th (lane 0 of 1: all of them).
tagged_lane() {
    local lane=$1 lanes=$2 i
    for seed in $SEEDS; do
        i=0
        for method in $TAGGED_METHODS; do
            wanted "$method" || continue
            if [ $((i % lanes)) = "$lane" ]; then run "$method" "$seed" "$TAGGED_SFT"; fi
            i=$((i + 1))
        done
    done
}

# The think lane: GRPO's seed-0 run makes the `<think>` cold start (seed 0: the tagged
# model's demonstrations, in the published baselines' format) and SFT; every other GRPO and
# GiGPO run starts from that model, which is also evaluated alone on every L2 test game.
think_lane() {
    local think_sft=$OUT/grpo/sft/final
    wanted grpo || wanted gigpo || return 0
    [ -f "$think_sft/rlvmr.toml" ] || run grpo 0 coldstart
    [ -f "$OUT/sft-only-think/L2/summary.json" ] \
        || "$bin" eval --split L2 --policy "$think_sft" --out "$OUT/sft-only-think/L2" \
            > "$OUT/sft-only-think-L2.log" 2>&1
    for seed in $THINK_SEEDS; do
        for method in grpo gigpo; do
            if wanted "$method"; then run "$method" "$seed" "$think_sft"; fi
        done
    done
}

if [ "$LANES" -ge 2 ] && { wanted grpo || wanted gigpo; }; then
    export RAYON_NUM_THREADS=1
    tagged_lane 0 1 &
    think_lane &
    wait
elif [ "$LANES" -ge 2 ]; then
    export RAYON_NUM_THREADS=1
    for lane in $(seq 0 $((LANES - 1))); do tagged_lane "$lane" "$LANES" & done
    wait
else
    export RAYON_NUM_THREADS=2
    tagged_lane 0 1
    think_lane
fi
dirs=()
for method in $TAGGED_METHODS grpo gigpo; do
    for run_dir in "$OUT/$method" "$OUT/$method"-seed*; do
        if wanted "$method" && [ -f "$run_dir/config.toml" ]; then dirs+=("$run_dir"); fi
    done
done
"$bin" report "${dirs[@]}" --out "$OUT/plots"
