#!/usr/bin/env bash
# Times one RL iteration of the CPU preset (configs/cpu-l2.toml: 4 L2 training games x 8
# rollouts of up to 30 steps, the 1.3M-parameter model made from nothing) by phase, and
# compares it with the speed targets of the RL issue (30 env steps/s in rollouts, 6000
# tokens/s in the update). A benchmark, not a test: the figures depend on the machine.
#
#   tools/bench_rl.sh [INIT]
#
# INIT: an SFT checkpoint of the preset (e.g. runs/cpu-l2/rlvmr/sft/final). Without it the
# preset's cold start and SFT run first (about 6 minutes on a 2-core Zen 5, 20 on an AVX2
# EPYC) into $BENCH_DIR/init, and later calls reuse it. RLVMR_BIN: another rlvmr binary to
# time (e.g. one built from an earlier commit), instead of this tree's release build.
# OLD_LOGPROBS=recompute: PPO's old log-probs recomputed by a forward pass (rl.old_logprobs)
# instead of taken from the sampler, to time what that pass costs.
set -euo pipefail
cd "$(dirname "$0")/.."
BENCH_DIR=${BENCH_DIR:-/tmp/rlvmr-bench-rl}
mkdir -p "$BENCH_DIR"
bin=${RLVMR_BIN:-target/release/rlvmr}
[ -n "${RLVMR_BIN:-}" ] || cargo build --release -q -p rlvmr
init=${1:-}
if [ -z "$init" ]; then
    init=$BENCH_DIR/init/sft/final
    if [ ! -f "$init/rlvmr.toml" ]; then
        # The preset's cold start and SFT; its RL part cut to one episode and no final evaluation.
        sed -e 's/^iterations = .*/iterations = 1/' -e 's/^tasks_per_iter = .*/tasks_per_iter = 1/' \
            -e 's/^group_size = .*/group_size = 1/' -e 's/^final_eval = .*/final_eval = []/' \
            configs/cpu-l2.toml > "$BENCH_DIR/init.toml"
        "$bin" train --config "$BENCH_DIR/init.toml" --out "$BENCH_DIR/init" >&2
    fi
fi
# One iteration, no evaluation (periodic or final), no KL change from the preset.
old_logprobs=${OLD_LOGPROBS:-sampler}
sed -e 's/^iterations = .*/iterations = 1/' -e 's/^eval_every = .*/eval_every = 0/' -e 's/^final_eval = .*/final_eval = []/' \
    -e "s/^\[rl\]$/[rl]\nold_logprobs = \"$old_logprobs\"/" \
    configs/cpu-l2.toml > "$BENCH_DIR/bench.toml"
rm -rf "$BENCH_DIR/run"
"$bin" train --config "$BENCH_DIR/bench.toml" --init "$init" --out "$BENCH_DIR/run" >&2
python3 - "$BENCH_DIR/run/metrics.jsonl" "$old_logprobs" <<'PY'
import json, subprocess, sys
line = json.loads(open(sys.argv[1]).readline())
t = line["time"]; s = t["seconds"]
total = sum(s.values())
cpu = next((l.split(":", 1)[1].strip() for l in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines() if l.startswith("Model name")), "?")
print(f"CPU: {cpu}; old log-probs: {sys.argv[2]}; {line['episodes']} episodes, {line['samples']} step samples, {line['tokens']} reply tokens")
print("| phase | seconds | share | throughput | target |")
print("|---|---:|---:|---|---|")
print(f"| rollout | {s['rollout']:.1f} | {s['rollout']/total:.0%} | {t['rollout_env_steps_per_s']:.1f} env steps/s, {t['rollout_tokens_per_s']:.0f} generated tokens/s | 30 env steps/s: {t['rollout_env_steps_per_s']/30:.2f}x |")
print(f"| scoring | {s['scoring']:.3f} | {s['scoring']/total:.1%} | | |")
# A phase that did not run (no pass: the sampler's old log-probs, no KL term) takes 0 s.
ran = lambda phase: s[phase] > 1e-6
logprobs = f"{t['logprob_tokens_per_s']:.0f} tokens/s (forward only)" if ran("logprobs") and t["logprob_tokens_per_s"] > 0 else "not run"
print(f"| old + reference log-probs | {s['logprobs']:.1f} | {s['logprobs']/total:.0%} | {logprobs} | |")
print(f"| update | {s['update']:.1f} | {s['update']/total:.0%} | {t['update_tokens_per_s']:.0f} tokens/s ({t['update_reply_tokens_per_s']:.0f} reply tokens/s) | 6000 tokens/s: {t['update_tokens_per_s']/6000:.2f}x |")
print(f"| iteration | {total:.1f} | | | |")
PY
