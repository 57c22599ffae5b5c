#!/usr/bin/env bash
# The paired GPU benchmark: `rlvmr bench-policy` (this project's CUDA build) and
# tools/cuda/bench_torch.py (that machine's PyTorch and transformers) on the same shapes, the
# same weights and the same token ids, one case after the other (docs/policy.md, "GPU
# benchmark").
#
#   tools/cuda/bench.sh pack [PACK]          here: build with CUDA, pack the stripped binary
#                                            (default PACK: .gpu-bench, git-ignored)
#   tools/cuda/bench.sh run PACK OUT         there, from the repository root (one device call)
#
# CASES (run): space-separated SHAPE:MATMUL:MICRO[:PHASES[:SAMPLES]], default
#   "smollm2:f32:1:check,logprobs,update,sample smollm2:f32:8:logprobs,update,parts"
# SHAPE smollm2 (SmolLM2-135M, weights written and loaded by both sides) or qwen2.5-1.5b
# (config only: each side draws its own random weights); MATMUL f32 or tf32 (both sides);
# MICRO samples per forward; PHASES of check, update, parts, logprobs, sample (default
# update,logprobs,sample; check and parts are this project's side alone); SAMPLES in the
# update's mini-batch (default 64 of ~1,200 tokens, replies ~200; sampling: 128 prompts of
# ~1,000 tokens, 200 new tokens). REPEATS (default 1) timed repeats per phase; CASE_SECONDS
# (default 240) the limit of each side of a case.
#
# OUT gets results.json (every figure of both sides, by case, with each side's peak GPU memory
# in use, sampled every 100 ms), the logs (bench.log), the GPU (gpu.txt) and summary.md, the
# table of both sides and their ratios (tools/cuda/bench_table.py), which is also printed last.
set -uo pipefail
cd "$(dirname "$0")/../.."
mode=${1:-}
case $mode in
pack)
    pack=${2:-.gpu-bench}
    set -e
    tools/cuda/build.sh build --release -p rlvmr
    mkdir -p "$pack"
    strip --strip-debug -o "$pack/rlvmr" target-cuda/release/rlvmr
    xz -f -T2 -6 "$pack/rlvmr"
    du -sh "$pack/rlvmr.xz"
    exit 0
    ;;
run) ;;
*) echo "usage: tools/cuda/bench.sh pack [PACK] | run PACK OUT" >&2; exit 2 ;;
esac
pack=$2 out=$3
mkdir -p "$out"
source tools/cuda/gpu_env.sh
work=/tmp/rlvmr-bench
mkdir -p "$work"
[ -x "$work/rlvmr" ] || xz -dc "$pack/rlvmr.xz" > "$work/rlvmr" && chmod +x "$work/rlvmr"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv | tee "$out/gpu.txt"
python3 -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)' | tee -a "$out/gpu.txt"

# side NAME FILE COMMAND...: one side of a case, its GPU memory in use sampled every 100 ms
# (whole process) into FILE.mem; its JSON lands in FILE.
side() {
    local name=$1 file=$2
    shift 2
    nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 100 > "$file.mem" &
    local smi=$!
    timeout "${CASE_SECONDS:-240}" "$@" --out "$file" >> "$out/bench.log" 2>&1
    echo "$name: rc $?" | tee -a "$out/bench.log"
    kill $smi 2>/dev/null; wait $smi 2>/dev/null
}

CASES=${CASES:-"smollm2:f32:1:check,logprobs,update,sample smollm2:f32:8:logprobs,update,parts"}
for case in $CASES; do
    IFS=: read -r shape matmul micro phases samples <<< "$case"
    phases=${phases:-update,logprobs,sample}
    samples=${samples:-64}
    name="$shape-$matmul-mb$micro-$samples"
    weights=$work/weights-$shape
    flags=(); tflags=()
    [ "$matmul" = tf32 ] && { flags+=(--tf32); tflags+=(--tf32); }
    [ "$shape" = smollm2 ] || flags+=(--config-only)
    rm -rf "$weights"
    side "rlvmr $name" "$work/rlvmr-$name.json" "$work/rlvmr" bench-policy --device cuda --shape "$shape" \
        --weights "$weights" --micro-batch "$micro" --samples "$samples" --phases "$phases" \
        --repeats "${REPEATS:-1}" "${flags[@]}"
    # PyTorch's update reports its parts itself; the check compares this project's devices.
    tphases=$(tr , '\n' <<< "$phases" | grep -v -x -e check -e parts | paste -sd, -)
    [ -n "$tphases" ] && PYTHONUNBUFFERED=1 side "torch $name" "$work/torch-$name.json" python3 tools/cuda/bench_torch.py \
        --weights "$weights" --phases "$tphases" --repeats "${REPEATS:-1}" "${tflags[@]}"
done
# One file of every figure: {case: {"rlvmr": .., "torch": .., "peak_mib": {side: MiB}}}.
python3 - "$work" "$out/results.json" <<'PY'
import glob, json, os, sys
work, dest = sys.argv[1], sys.argv[2]
results = {}
for path in sorted(glob.glob(os.path.join(work, "*-*.json"))):
    side, name = os.path.basename(path)[:-5].split("-", 1)
    case = results.setdefault(name, {"peak_mib": {}})
    case[side] = json.load(open(path))
    mem = [int(l) for l in open(path + ".mem") if l.strip().isdigit()] if os.path.exists(path + ".mem") else []
    case["peak_mib"][side] = max(mem) if mem else None
json.dump(results, open(dest, "w"), indent=1)
PY
python3 tools/cuda/bench_table.py "$out/results.json" | tee "$out/summary.md"
