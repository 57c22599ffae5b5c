#!/usr/bin/env python3
"""The table of tools/cuda/bench.sh: for each case and phase, this project's time against
PyTorch's on the same card (ratio = ours / PyTorch's: below 1 is faster), throughputs, the
update's parts, and each side's peak GPU memory in use (nvidia-smi, every 100 ms, whole
process: PyTorch's caching allocator and candle's pool both count what they hold).

    python3 tools/cuda/bench_table.py OUT/results.json
"""

import json
import os
import sys


def main():
    path = sys.argv[1]
    results = json.load(open(path))
    gpu_txt = os.path.join(os.path.dirname(path), "gpu.txt")
    gpu = open(gpu_txt).read().strip().splitlines() if os.path.exists(gpu_txt) else []
    print("GPU: " + "; ".join(gpu[1:]) if gpu else "GPU: unknown")
    print()
    print("| case | phase | rlvmr (s) | PyTorch (s) | rlvmr / PyTorch | rlvmr | PyTorch | peak GPU MiB rlvmr / PyTorch |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    checks = []
    for name, case in results.items():
        ours, theirs, peak = case.get("rlvmr", {}), case.get("torch", {}), case.get("peak_mib", {})
        memory = f"{peak.get('rlvmr', '?')} / {peak.get('torch', '?')}"
        if "check" in ours:
            checks.append((name, ours["check"]))
        for phase in ("update", "logprobs", "sample"):
            if phase not in ours and phase not in theirs:
                continue
            a, b = ours.get(phase, {}), theirs.get(phase, {})
            rate = "new_tokens_per_s" if phase == "sample" else "tokens_per_s"
            unit = "new tok/s" if phase == "sample" else "tok/s"
            ratio = f"{a['seconds'] / b['seconds']:.2f}" if "seconds" in a and "seconds" in b else "not run"
            fmt = lambda d, k: f"{d[k]:.2f}" if k in d else "not run"
            rates = lambda d: f"{d[rate]:,.0f} {unit}" if rate in d else "not run"
            print(f"| {name} | {phase} | {fmt(a, 'seconds')} | {fmt(b, 'seconds')} | {ratio} | {rates(a)} | {rates(b)} | {memory} |")
            if phase == "update":
                parts = ours.get("parts", {})
                for part in ("forward_s", "backward_s", "optimizer_s"):
                    pr = f"{parts[part] / b[part]:.2f}" if part in parts and part in b and b[part] > 0 else ""
                    print(f"| {name} | update: {part[:-2]} | {fmt(parts, part)} | {fmt(b, part)} | {pr} | | | |")
                ops = parts.get("ops_fwd_bwd_s", {})
                if "attention_fwd_bwd_s_all_layers" in parts:  # results of the first version
                    ops = {"attention": parts["attention_fwd_bwd_s_all_layers"]}
                for op, seconds in ops.items():
                    print(f"| {name} | update: {op} alone, forward + backward (rlvmr) | {seconds:.2f} | | | | | |")
            if phase == "logprobs" and "logprob_sum" in a and "logprob_sum" in b:
                print(f"| {name} | logprobs: sum of the reply log-probs (same model?) | {a['logprob_sum']:.3f} | {b['logprob_sum']:.3f} | | | | |")
            if phase == "sample":
                pr = f"{a['prefill_s'] / b['prefill_s']:.2f}" if "prefill_s" in a and "prefill_s" in b else "not run"
                print(f"| {name} | sample: prefill | {fmt(a, 'prefill_s')} | {fmt(b, 'prefill_s')} | {pr} | | | |")
    for name, check in checks:
        print(f"\ncheck ({name}, the device against the CPU on the same weights): {json.dumps(check)}")

if __name__ == "__main__":
    main()
