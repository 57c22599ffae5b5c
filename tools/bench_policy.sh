#!/usr/bin/env bash
# The policy benchmark: Rust (crates/policy/examples/bench_model.rs) beside PyTorch
# (tools/bench_torch.py) on the same SmolLM2-135M f32 weights, 2 threads each, run back to back
# (train: rust, torch; decode: rust, torch) ROUNDS times; prints every JSON line, then a Markdown
# table of medians over the rounds with ratios (Rust / PyTorch). Run by hand:
#   tools/bench_policy.sh [ROUNDS]          (default 1)
# Env: TORCH_VENV (a venv with torch + transformers; default: tools/torch_venv.sh makes one),
#      THREADS (default 2), REPEATS (timed repeats inside each process, default 2),
#      CANDLE_NUM_THREADS (candle's elementwise pool; default 1, see docs/policy.md).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-1}"
threads="${THREADS:-2}"
repeats="${REPEATS:-2}"
export CANDLE_NUM_THREADS="${CANDLE_NUM_THREADS:-1}" RAYON_NUM_THREADS="$threads"
export OMP_NUM_THREADS="$threads" MKL_NUM_THREADS="$threads"
python="$(tools/torch_venv.sh)"
cargo build --release -q -p policy --example bench_model
bench=target/release/examples/bench_model
hf="${RLVMR_CACHE:-$HOME/.cache/rlvmr}/bench-smollm2-hf"
[[ -f "$hf/bench_ids.json" ]] || "$bench" save-hf "$hf" >&2
out="$(mktemp)"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for _ in $(seq "$rounds"); do
    for mode in train decode; do
        "$bench" "$mode" --repeats "$repeats" | tee -a "$out"
        "$python" tools/bench_torch.py "$mode" --model "$hf" --repeats "$repeats" --threads "$threads" | tee -a "$out"
    done
    # The Q8_0 sampling copy (no PyTorch counterpart); candle's quantized matmul runs on its
    # elementwise pool, so that pool gets all the threads here.
    CANDLE_NUM_THREADS="$threads" "$bench" decode --q8 --repeats "$repeats" | sed 's/"rust-candle"/"rust-candle-q8"/' | tee -a "$out"
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
"$python" - "$out" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
def med(impl, mode, key):
    """Median of `key` over the runs of `impl` ("pytorch" matches any torch version)."""
    def ours(r):
        return r["impl"] == impl or (impl == "pytorch" and r["impl"].startswith("pytorch"))
    xs = [r[key] for r in rows if r["mode"] == mode and ours(r)]
    return statistics.median(xs) if xs else float("nan")
lines = [
    ("training step, 512 tokens (s)", "train", "step_s"),
    ("  forward + loss (s)", "train", "forward_s"),
    ("  backward (s)", "train", "backward_s"),
    ("  clip + AdamW (s)", "train", "optimizer_s"),
    ("  peak RSS (MB)", "train", "peak_rss_mb"),
    ("prefill, 256 tokens, batch 1 (tokens/s)", "decode", "prefill_tok_s"),
    ("decode, batch 1 (tokens/s)", "decode", "decode_b1_tok_s"),
    ("decode, batch 8, total (tokens/s)", "decode", "decode_b8_tok_s"),
    ("  peak RSS, decode (MB)", "decode", "peak_rss_mb"),
]
print("| measure | rlvmr (candle) | PyTorch | rlvmr / PyTorch |")
print("|---|---|---|---|")
for name, mode, key in lines:
    a, b = med("rust-candle", mode, key), med("pytorch", mode, key)
    print(f"| {name} | {a:.4g} | {b:.4g} | {a / b:.2f} |")
for name, key in [("decode, batch 1, Q8_0 copy (tokens/s)", "decode_b1_tok_s"),
                  ("decode, batch 8, Q8_0 copy (tokens/s)", "decode_b8_tok_s")]:
    a, b = med("rust-candle-q8", "decode", key), med("pytorch", "decode", key)
    print(f"| {name} | {a:.4g} | {b:.4g} (f32) | {a / b:.2f} |")
PY
