#!/usr/bin/env python3
"""The official Python client's side of `rlvmr sciworld bench`.

Reads episodes as JSON lines on stdin ({"task", "variation", "commands"}), replays them with
scienceworld==1.2.3's ScienceWorldEnv (whose step() fetches look, inventory, task description
and the valid-action list every step), and prints one JSON object:

    {"steps": int, "step_seconds": [...per step...], "rss_bytes": int (python + its JVM),
     "parallel_envs": int, "parallel_steps": int, "parallel_seconds": float}

Latency: one environment replays every episode (load + reset, then each command; only step()
calls are timed). Memory: resident set size of this process plus its JVM after the latency run.
Throughput: --envs processes, each with its own environment, replay the episodes split round-
robin between them; wall time from a common start (after all environments are up).

Usage (through tools/record_sciworld.sh with RLVMR_SCIWORLD_TOOL=bench):
    python tools/sciworld_ref_bench.py --envs 8 < episodes.jsonl
"""

import argparse
import json
import multiprocessing
import sys
import time

import psutil
from scienceworld import ScienceWorldEnv

SIMPLIFICATIONS = "easy"


def replay(env, episode, timings):
    env.load(episode["task"], episode["variation"], SIMPLIFICATIONS)
    env.reset()
    for command in episode["commands"]:
        started = time.perf_counter()
        env.step(command)
        timings.append(time.perf_counter() - started)


def rss_with_children(pid):
    process = psutil.Process(pid)
    return process.memory_info().rss + sum(c.memory_info().rss for c in process.children(recursive=True))


def worker(episodes, ready, start, results):
    env = ScienceWorldEnv("", envStepLimit=100)
    ready.wait()
    start.wait()
    timings = []
    for episode in episodes:
        replay(env, episode, timings)
    results.put((len(timings), time.perf_counter()))
    env.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--envs", type=int, default=8)
    args = ap.parse_args()
    episodes = [json.loads(line) for line in sys.stdin if line.strip()]

    env = ScienceWorldEnv("", envStepLimit=100)
    timings = []
    for episode in episodes:
        replay(env, episode, timings)
    rss = rss_with_children(psutil.Process().pid)
    env.close()

    ready = multiprocessing.Barrier(args.envs + 1)
    start = multiprocessing.Barrier(args.envs + 1)
    results = multiprocessing.Queue()
    shares = [episodes[i::args.envs] for i in range(args.envs)]
    workers = [multiprocessing.Process(target=worker, args=(share, ready, start, results)) for share in shares]
    for w in workers:
        w.start()
    ready.wait()
    began = time.perf_counter()
    start.wait()
    finished = [results.get() for _ in workers]
    for w in workers:
        w.join()
    print(json.dumps({
        "steps": len(timings),
        "step_seconds": timings,
        "rss_bytes": rss,
        "parallel_envs": args.envs,
        "parallel_steps": sum(n for n, _ in finished),
        "parallel_seconds": max(t for _, t in finished) - began,
    }))


if __name__ == "__main__":
    main()
