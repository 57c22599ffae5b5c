"""One row per method of long runs (tools/long_runs.sh): the final evaluation per seed and what
the training episodes did at the end. Run by hand:

  python3 tools/arms_table.py runs/long/rlvmr-nolift runs/long/rlvmr-nolift-seed{1,2} ...
  python3 tools/arms_table.py --kl runs/long/rlvmr-kl ...     # the KL per iteration instead

Runs named METHOD and METHOD-seedN are seeds of one method. Per method it prints L2 and L0
success % of the evaluation after the last trained iteration per seed (a seed without one yet
is left out of those columns), their mean ± sample standard deviation, the L2
invalid and repetitive rates (means over seeds), and over the last two training iterations
(19-20 in a 20-iteration run) the explore share of steps and the exploration reward per
episode as the published rule pays it (`rlvmr score` with its defaults on the rollouts, so
that runs trained without that reward are measured by the same rule).
"""
import argparse
import gzip
import json
import os
import re
import statistics
import subprocess
import sys


def read_lines(run):
    path = os.path.join(run, "metrics.jsonl")
    try:
        with open(path) as lines:
            return [json.loads(line) for line in lines if line.strip()]
    except OSError as error:
        sys.exit(f"arms_table: {run} is not a run directory ({error})")
    except json.JSONDecodeError as error:
        sys.exit(f"arms_table: {path}: not JSON lines ({error})")


def method_and_seed(run):
    name = os.path.basename(os.path.normpath(run))
    match = re.fullmatch(r"(.*)-seed(\d+)", name)
    return (match.group(1), int(match.group(2))) if match else (name, 0)


def final_eval(lines, split, iteration):
    """The evaluation on `split` after `iteration` (None while a run has not written it)."""
    evals = [line for line in lines if "eval" in line and line["eval"].get("split") == split
             and line.get("iteration") == iteration]
    return evals[-1] if evals else None


def published_exploration(binary, run, iterations):
    """Exploration reward per episode and explore share of steps under the default rules."""
    episodes = []
    for iteration in iterations:
        path = os.path.join(run, "rollouts", f"{iteration:04d}.jsonl.gz")
        with gzip.open(path, "rt") as lines:
            episodes.extend(json.loads(line) for line in lines if line.strip())
    payload = "".join(json.dumps({"uid": e["uid"], "won": e["won"] in (True, "True", "true"),
                                  "steps": [{"observation": s["observation"], "output": s["output"],
                                             "admissible_actions": s["admissible_actions"]
                                             if isinstance(s["admissible_actions"], list)
                                             else eval_list(s["admissible_actions"])}
                                            for s in e["steps"]]}) + "\n" for e in episodes)
    scored = subprocess.run([binary, "score"], input=payload, capture_output=True, text=True)
    if scored.returncode != 0:
        sys.exit(f"arms_table: rlvmr score failed on {run}: {scored.stderr.strip()[:300]}")
    reward, steps, explore = 0.0, 0, 0
    for line in scored.stdout.splitlines():
        for step in json.loads(line)["steps"]:
            steps += 1
            if step["tag"] == "explore":
                explore += 1
                reward += step["mr_reward"]
    return reward / max(len(episodes), 1), explore / max(steps, 1)


def eval_list(text):
    import ast
    return ast.literal_eval(text)


def spread(values):
    if not values:
        return "–"
    if len(values) == 1:
        return f"{values[0]:.1f}"
    return f"{statistics.mean(values):.1f} ± {statistics.stdev(values):.1f}"


def percent(line, key):
    return 100.0 * line["eval"][key] if line else None


def arms(binary, runs):
    methods = {}
    for run in runs:
        method, seed = method_and_seed(run)
        methods.setdefault(method, []).append((seed, run))
    print("| method | seeds | L2 % per seed | L2 mean ± sd | L0 % per seed | L0 mean ± sd | L2 invalid % |"
          " L2 repetitive % | explore share of training steps, last 2 iterations | exploration reward per"
          " training episode (published rule), last 2 iterations |")
    print("|---|---|---|---:|---|---:|---:|---:|---|---|")
    for method, seeds in methods.items():
        l2, l0, invalid, repetitive, shares, rewards, iters = [], [], [], [], [], [], set()
        for _, run in sorted(seeds):
            lines = read_lines(run)
            trained = [line for line in lines if "eval" not in line and "iteration" in line]
            last = trained[-1]["iteration"] if trained else 0
            iters.add(last)
            e2, e0 = final_eval(lines, "L2", last), final_eval(lines, "L0", last)
            if e2:
                l2.append(percent(e2, "success_rate"))
                invalid.append(percent(e2, "invalid_rate"))
                repetitive.append(percent(e2, "repetitive_rate"))
            if e0:
                l0.append(percent(e0, "success_rate"))
            if last >= 2:
                reward, share = published_exploration(binary, run, [last - 1, last])
                rewards.append(reward)
                shares.append(100.0 * share)
        fmt = lambda values: ", ".join(f"{v:.1f}" for v in values) or "–"
        mean = lambda values: f"{statistics.mean(values):.1f}" if values else "–"
        print(f"| {method} | {len(seeds)} (iteration {'/'.join(str(i) for i in sorted(iters))}) | {fmt(l2)} |"
              f" {spread(l2)} | {fmt(l0)} | {spread(l0)} | {mean(invalid)} | {mean(repetitive)} |"
              f" {fmt(shares)} | {fmt(rewards)} |")


def kl_table(runs):
    """KL and explore share per iteration, one column pair per run."""
    columns = [(os.path.basename(os.path.normpath(run)),
                {line["iteration"]: line for line in read_lines(run) if "eval" not in line and "iteration" in line})
               for run in runs]
    print("| iteration | " + " | ".join(f"{name} KL | {name} explore %" for name, _ in columns) + " |")
    print("|---:|" + "---:|---:|" * len(columns))
    last = max((max(lines) for _, lines in columns if lines), default=0)
    for iteration in range(1, last + 1):
        cells = []
        for _, lines in columns:
            line = lines.get(iteration)
            cells += ([f"{line['kl']:.4f}", f"{100.0 * line['tag_mix'].get('explore', 0.0):.1f}"]
                      if line else ["–", "–"])
        print(f"| {iteration} | " + " | ".join(cells) + " |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rlvmr", default="target/release/rlvmr", help="the rlvmr binary")
    parser.add_argument("--kl", action="store_true", help="print the KL and explore share per iteration")
    parser.add_argument("runs", nargs="+", help="run directories of tools/long_runs.sh")
    args = parser.parse_args()
    if args.kl:
        kl_table(args.runs)
    else:
        arms(args.rlvmr, args.runs)


if __name__ == "__main__":
    main()
