#!/usr/bin/env python3
"""Record ScienceWorld transcripts with the official Python client (scienceworld==1.2.3).

Per task, two episodes, one JSON object per line:

    {"task": name, "variation": int, "kind": "gold" | "random", "seed": int,
     "simplifications": "easy", "task_description": str,
     "commands": [...],
     "steps": [{"command": null | str, "observation": str, "score": int, "done": bool,
                "stable": bool}, ...]}

The first step is the reset (env.load(...) then env.reset(), command null). "gold" replays the
gold path of the task's first test variation (generated in a second ScienceWorldEnv, so the
playing one never asks for a gold path), with a few odd commands mixed in; "random" is a seeded
walk of --random-steps steps on the first dev variation mixing valid actions (from
info['valid']) with unknown, empty and odd commands. Scores are the client's 0-100 numbers.

The official client's simulator is not deterministic run to run (listing order, ambiguity
resolution, bees, thermometer readings: its JVM runs with its own identity hash codes, where
rlvmr's runs with one constant), so every episode is played twice, in two fresh
ScienceWorldEnv instances (two JVMs); a step is "stable" when both runs gave the same
observation, score and done. The first run's steps are kept.

Output: gzip level 9, mtime 0, lines sorted by (task, kind).

Usage (normally through tools/record_sciworld.sh):
    python tools/record_sciworld.py [--out FILE] [--tasks a,b] [--seed S] [--random-steps N]
"""

import argparse
import gzip
import io
import json
import os
import random
import sys
import zlib

from scienceworld import ScienceWorldEnv

SIMPLIFICATIONS = "easy"
ODD_COMMANDS = ["", "xyzzy", "look  around", "LOOK AROUND", "open", "focus on", "teleport to nowhere",
                "caf\u00e9 \u2603", "wait1", "inventory"]


def first_of(env, task, split):
    env.load(task, 0, SIMPLIFICATIONS)
    return {"dev": env.get_variations_dev, "test": env.get_variations_test}[split]()[0]


def play(env, task, variation, commands):
    env.load(task, variation, SIMPLIFICATIONS)
    obs, info = env.reset()
    steps = [{"command": None, "observation": obs, "score": info["score"], "done": False}]
    for command in commands:
        obs, _reward, done, info = env.step(command)
        steps.append({"command": command, "observation": obs, "score": info["score"], "done": bool(done)})
    return env.get_task_description(), steps


def gold_commands(gold_env, task, variation, rng):
    gold_env.load(task, variation, SIMPLIFICATIONS, generateGoldPath=True)
    gold = gold_env.get_gold_action_sequence()
    commands = list(gold)
    # Odd commands in the middle do not change the gold path's outcome.
    for _ in range(2):
        commands.insert(rng.randrange(len(commands) + 1), rng.choice(ODD_COMMANDS))
    return commands


def random_commands(env, task, variation, rng, n):
    env.load(task, variation, SIMPLIFICATIONS)
    _obs, info = env.reset()
    commands = []
    for _ in range(n):
        if rng.random() < 0.25:
            command = rng.choice(ODD_COMMANDS)
        else:
            command = rng.choice(sorted(info["valid"]))
        commands.append(command)
        _obs, _r, _done, info = env.step(command)
    return commands


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--out", default=os.path.join(here, "..", "crates", "sciworld", "tests", "transcripts",
                                                  "official.jsonl.gz"))
    ap.add_argument("--tasks", default="", help="comma-separated task names (default: all 30)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--random-steps", type=int, default=25)
    args = ap.parse_args()

    env = ScienceWorldEnv("", envStepLimit=100)
    second_env = ScienceWorldEnv("", envStepLimit=100)
    gold_env = ScienceWorldEnv("", envStepLimit=100)
    tasks = [t for t in args.tasks.split(",") if t] or env.get_task_names()
    records = []

    def record(task, variation, kind, commands):
        description, steps = play(env, task, variation, commands)
        _, second = play(second_env, task, variation, commands)
        for step, other in zip(steps, second):
            step["stable"] = step == other
        records.append({"task": task, "variation": variation, "kind": kind, "seed": args.seed,
                        "simplifications": SIMPLIFICATIONS, "task_description": description,
                        "commands": commands, "steps": steps})
        stable = sum(s["stable"] for s in steps)
        print(f"{task} {variation} {kind}: {len(commands)} commands, final score {steps[-1]['score']}, "
              f"{stable}/{len(steps)} steps stable", file=sys.stderr)

    for task in tasks:
        # Seeded by name, so a subset of tasks records the same episodes.
        rng = random.Random(args.seed * 1_000_003 + zlib.crc32(task.encode()))
        test_variation = first_of(env, task, "test")
        record(task, test_variation, "gold", gold_commands(gold_env, task, test_variation, rng))
        dev_variation = first_of(env, task, "dev")
        record(task, dev_variation, "random", random_commands(env, task, dev_variation, rng, args.random_steps))
    env.close()
    second_env.close()
    gold_env.close()
    records.sort(key=lambda r: (r["task"], r["kind"]))
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    payload = "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in records).encode("utf-8")
    with open(args.out, "wb") as raw:
        with gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=9, mtime=0, filename="") as gz:
            gz.write(payload)
    print(f"wrote {len(records)} episodes to {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
