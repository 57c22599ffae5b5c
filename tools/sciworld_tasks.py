#!/usr/bin/env python3
"""Per task: what a model wins against what the gold paths win on the same test draw.

    python3 tools/sciworld_tasks.py EXPERT_SUMMARY MODEL_SUMMARY [MODEL_SUMMARY ...]

Each SUMMARY is an evaluation's summary.json (`rlvmr eval --out DIR` writes DIR/summary.json;
`rlvmr train` writes DIR/eval/L0.json ...). The expert's is `rlvmr eval --env sciworld
--split L --policy expert --episodes N` with the model's seed and N, so both played the same
seeded draw of test variations. Prints a Markdown table: task, episodes, gold wins, then
each model's wins, and a total row.
"""
import json
import sys


def per_task(path):
    try:
        with open(path) as f:
            summary = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        sys.exit(f"{path}: {e}")
    tasks = summary.get("per_type")
    if not isinstance(tasks, dict):
        sys.exit(f"{path}: no per_type section (not an evaluation summary?)")
    return {t: (r["episodes"], round(r["success_rate"] * r["episodes"])) for t, r in tasks.items()}


def main(argv):
    if len(argv) < 3:
        sys.exit(__doc__)
    expert = per_task(argv[1])
    models = [per_task(p) for p in argv[2:]]
    for path, model in zip(argv[2:], models):
        for task, (n, _) in model.items():
            if expert.get(task, (n, 0))[0] != n:
                sys.exit(f"{path}: {task} has {n} episodes, the expert's {expert[task][0]}: not the same draw")
    header = "| task | episodes | gold path wins | " + " | ".join(f"model {i + 1} wins" for i in range(len(models))) + " |"
    print(header)
    print("|---|---:|---:|" + "---:|" * len(models))
    totals = [0, 0] + [0] * len(models)
    for task in sorted(expert):
        n, gold = expert[task]
        wins = [m.get(task, (n, 0))[1] for m in models]
        print(f"| {task} | {n} | {gold} | " + " | ".join(str(w) for w in wins) + " |")
        for i, v in enumerate([n, gold] + wins):
            totals[i] += v
    n = totals[0]
    cells = [f"{v} ({100 * v / n:.0f}%)" if n else str(v) for v in totals[1:]]
    print(f"| all | {n} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main(sys.argv)
