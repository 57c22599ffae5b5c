#!/usr/bin/env bash
# On a GPU machine, from the repository root: run what tools/cuda/pack.sh packed.
#
#   tools/cuda/check.sh tests PACK OUT    the policy test binaries with RLVMR_DEVICE=cuda (but
#                                         those that need the GGUF; TESTS: the binaries to run,
#                                         e.g. "policy gradients", default all)
#   tools/cuda/check.sh train PACK OUT    joins the GGUF's parts (PACK/model.xz.part-a and
#                                         PACK-b/model.xz.part-b), runs the test binaries that
#                                         load it on the GPU, then RL iterations of
#                                         configs/smollm2-gpu.toml from the untrained model:
#                                         ITERATIONS (default 2) of TASKS games (default 16, the
#                                         preset's) x 8 rollouts of at most STEPS steps (30)
#   tools/cuda/check.sh learn PACK OUT    joins the GGUF's parts, then the real model learns:
#                                         SFT of SmolLM2-135M on the main job's cold start
#                                         (PACK/sft.jsonl.xz; SFT_SAMPLES, default all), its
#                                         success on every L0 and L2 test game (EPISODES, STEPS
#                                         to shorten), then ITERATIONS (default 1) RL iterations
#                                         of configs/smollm2-gpu-main.toml's shape from it, each
#                                         phase within its time limit (SFT_SECONDS, EVAL_SECONDS,
#                                         RL_SECONDS); logs, metrics, evaluation summaries and
#                                         trajectories in OUT/learn.tar.xz
#
# Everything it measures lands in OUT: the test output (tests.log), the run's log and metrics,
# the GPU's memory in use and utilisation every 250 ms (*-memory.csv). No network there: pip is
# told not to look (a test that would fetch an asset fails at once instead of retrying).
set -uo pipefail
mode=$1 pack=$2 out=$3
export RLVMR_CACHE=/tmp/rlvmr-cache ALFWORLD_DATA=$PWD/$pack/alfworld
work=/tmp/rlvmr-gpu bins=/tmp/rlvmr-gpu/bin   # bins: the unpacked binaries alone
mkdir -p "$bins" "$RLVMR_CACHE/models" "$out"
# The test binaries read their fixtures from the repository they were built in.
built_in=$(cat "$pack/built-in")
[ -e "$built_in" ] || { mkdir -p "$(dirname "$built_in")" && ln -s "$PWD" "$built_in"; }
[ -x "$bins/rlvmr" ] || tar -C "$bins" -xJf "$pack/bins.tar.xz"
source "$(dirname "$0")/gpu_env.sh"
echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}" >> "$out/summary.txt"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$out/gpu.txt"
nproc >> "$out/gpu.txt"

# memory_log NAME: sample the GPU's memory in use into OUT/NAME until killed.
memory_log() {
    nvidia-smi --query-gpu=timestamp,memory.used,utilization.gpu --format=csv,noheader,nounits -lms 250 > "$out/$1" &
    echo $!
}

# rl_run CONFIG INIT DIR SECONDS: a timed RL run; its metrics and log come back.
rl_run() {
    local started=$SECONDS
    timeout "$4" "$bins/rlvmr" train --config "$1" --init "$2" --out "$3" > "$out/$(basename "$3").log" 2>&1
    local rc=$?   # 124: stopped at SECONDS
    echo "$(basename "$3"): rc $rc after $((SECONDS - started)) s" >> "$out/summary.txt"
    cp "$3/metrics.jsonl" "$out/$(basename "$3")-metrics.jsonl" 2>/dev/null
}

# run_tests NAME SECONDS: one test binary on the GPU, its output appended to OUT/tests.log
# (a call brings back at most 8 files).
run_tests() {
    local started=$SECONDS log=$work/$1.log
    RLVMR_DEVICE=cuda timeout "$2" "$bins/$1" --test-threads=1 > "$log" 2>&1
    echo "$1: rc $? after $((SECONDS - started)) s; $(grep '^test result' "$log")" >> "$out/summary.txt"
    { echo "=== $1"; cat "$log"; } >> "$out/tests.log"
}

# The test binaries that load the embedded SmolLM2 GGUF: `train` runs them, once it is joined.
GGUF_TESTS="smollm2_reference hf_folder kv_cache tokenizer"

# rl_config SRC DEST SED_ARGS...: SRC with no final evaluation, TASKS games (default 16) of
# at most STEPS steps (30) an iteration, and the sed edits given.
rl_config() {
    local src=$1 dest=$2
    shift 2
    sed -e 's/^final_eval = .*/final_eval = []/' -e "s/^tasks_per_iter = .*/tasks_per_iter = ${TASKS:-16}/" \
        -e "s/^max_steps = .*/max_steps = ${STEPS:-30}/" "$@" "$src" > "$dest"
}

join_gguf() {
    cat "$pack/model.xz.part-a" "$pack-b/model.xz.part-b" | xz -dc > "$RLVMR_CACHE/models/SmolLM2-135M-Instruct.Q4_1.gguf" \
        || { echo "the GGUF's parts are not both here: PACK went with an earlier call to another machine?" | tee "$out/summary.txt"; exit 1; }
}

# timed NAME SECONDS COMMAND...: one phase of `learn`, its output in WORK/NAME.log; its start,
# end (for the memory log's timestamps) and exit status in OUT/summary.txt.
timed() {
    local name=$1 limit=$2 started=$SECONDS
    shift 2
    echo "$name: start $(date -u +%FT%T)" >> "$out/summary.txt"
    timeout "$limit" "$@" > "$work/$name.log" 2>&1
    echo "$name: rc $? after $((SECONDS - started)) s, end $(date -u +%FT%T)" >> "$out/summary.txt"
    tail -n 4 "$work/$name.log" >> "$out/summary.txt"
    # What the phases wrote so far (the weights left out), in case the call's limit comes next.
    (cd "$work" && tar -cJf "$out/learn.tar.xz" --exclude=checkpoints --exclude=final --exclude='*.safetensors' \
        --exclude=sft.jsonl ./*.log ./*.toml ./sft ./eval-* ./rl 2>/dev/null)
}

case $mode in
tests)
    for name in ${TESTS:-$(ls "$bins")}; do
        case " $GGUF_TESTS rlvmr " in *" $name "*) continue ;; esac
        run_tests "$name" 60
    done
    ;;
train)
    join_gguf
    for name in $GGUF_TESTS; do run_tests "$name" 60; done
    rl_config configs/smollm2-gpu.toml "$work/smollm2-gpu.toml" -e "s/^iterations = .*/iterations = ${ITERATIONS:-2}/"
    mem=$(memory_log smollm2-gpu-memory.csv)
    rl_run "$work/smollm2-gpu.toml" smollm2-135m-instruct "$work/smollm2-gpu" "${SECONDS_LIMIT:-420}"
    kill "$mem"
    ;;
learn)
    join_gguf
    config=configs/smollm2-gpu-main.toml
    xz -dc "$pack/sft.jsonl.xz" | head -n "${SFT_SAMPLES:-1000000}" > "$work/sft.jsonl"
    mem=$(memory_log learn-memory.csv)
    timed sft "${SFT_SECONDS:-300}" "$bins/rlvmr" sft --config "$config" --data "$work/sft.jsonl" --out "$work/sft"
    # A stopped SFT leaves its last checkpoint: evaluate that one (the summary says which).
    model=$work/sft/final
    [ -d "$model" ] || model=$(ls -d "$work"/sft/checkpoints/step-* 2>/dev/null | sort -t- -k3 -n | tail -1)
    echo "model: ${model:-none}" >> "$out/summary.txt"
    if [ -n "$model" ]; then
        for level in L2 L0; do
            timed "eval-$level" "${EVAL_SECONDS:-150}" "$bins/rlvmr" eval --config "$config" --split "$level" \
                --policy "$model" --out "$work/eval-$level" ${EPISODES:+--episodes "$EPISODES"} ${STEPS:+--max-steps "$STEPS"}
        done
        rl_config "$config" "$work/rl.toml" -e "s/^eval_every = .*/eval_every = 0/"
        timed rl "${RL_SECONDS:-300}" "$bins/rlvmr" train --config "$work/rl.toml" --init "$model" \
            --iterations "${ITERATIONS:-1}" --out "$work/rl"
    fi
    kill "$mem"
    ;;
*) echo "usage: tools/cuda/check.sh tests|train|learn PACK OUT" >&2; exit 2 ;;
esac
cat "$out/summary.txt"
