#!/usr/bin/env python3
"""ALFWorld from Python: rlvmr's vectorised engine against alfworld 0.4.2, same games, same
commands, one process.

For each count of environments N (default 1, 8, 64, 512):
- rlvmr: `rlvmr.AlfworldEnvs` of N games in this process, stepped together on native threads
  (the GIL released);
- alfworld 0.4.2 (textworld 1.7.0, the engine verl-agent runs): one worker process per game,
  as verl-agent runs one Ray actor per environment; the parent sends every environment its
  command, then collects the answers (the workers step in parallel).
Both play `--steps` steps of the same fixed walk over the admissible commands (every 5th step
a command the game does not know); a game that is won plays no further. The observations of
both engines are checked equal, so they do the same work. Timed: the reset (loading the games)
and the steps. Memory per environment: rlvmr's growth of this process's RSS over the N
environments; alfworld's proportional set size (PSS, shared pages split) of each worker
process after its reset. The reference is run up to `--ref-max` environments (its workers
need about 100 MB each). Prints a Markdown table and, with --json, the figures.

Run it with tools/bench_python.sh (it makes the venv and extracts the games).
"""

import argparse
import gc
import hashlib
import json
import multiprocessing as mp
import os
import platform
import subprocess
import time

import rlvmr


def walk(admissible, step):
    if step % 5 == 4:
        return "dance with the fridge"
    return admissible[(step * 7 + 3) % len(admissible)]


def rss_bytes(pid="self"):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def pss_bytes(pid):
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            if line.startswith("Pss:"):
                return int(line.split()[1]) * 1024
    return 0


class Digest:
    """A running hash of one environment's observations."""

    def __init__(self):
        self.hash = hashlib.sha256()

    def add(self, text):
        self.hash.update(text.encode())
        self.hash.update(b"\0")

    def hex(self):
        return self.hash.hexdigest()


def run_rlvmr(games, data, steps, threads):
    gc.collect()
    before = rss_bytes()
    start = time.perf_counter()
    envs = rlvmr.AlfworldEnvs(games, data=data, threads=threads)
    observations, infos = envs.reset()
    reset_s = time.perf_counter() - start
    memory = (rss_bytes() - before) / len(games)
    digests = [Digest() for _ in games]
    for d, o in zip(digests, observations):
        d.add(o)
    done = [False] * len(games)
    played = 0
    start = time.perf_counter()
    for step in range(steps):
        commands = [walk(i["admissible_commands"], step) for i in infos]
        observations, _, dones, infos = envs.step(commands)
        for k, o in enumerate(observations):
            if not done[k]:
                digests[k].add(o)
                played += 1
            done[k] = dones[k]
        if all(done):
            break
    step_s = time.perf_counter() - start
    envs.close()
    return {"reset_s": reset_s, "step_s": step_s, "steps": played, "bytes_per_env": memory,
            "digests": [d.hex() for d in digests]}


def reference_worker(connection, path):
    """One alfworld 0.4.2 environment in its own process, answering commands."""
    import textworld
    from alfworld.agents.environment.alfred_tw_env import AlfredDemangler, AlfredInfos
    from textworld.envs.pddl import PddlEnv

    env = AlfredInfos(AlfredDemangler(PddlEnv(textworld.EnvInfos(admissible_commands=True, won=True)), shuffle=False))
    connection.send("ready")
    while True:
        message = connection.recv()
        if message is None:
            return
        if message == "reset":
            env.load(path)
            state = env.reset()
            done = False
        else:
            state, _, done = env.step(message)
        connection.send((state.feedback, list(state["admissible_commands"]), bool(done) or bool(state["won"])))


def run_reference(games, data, steps):
    context = mp.get_context("spawn")
    pipes, workers = [], []
    for game in games:
        parent, child = context.Pipe()
        worker = context.Process(target=reference_worker, args=(child, os.path.join(data, game)), daemon=True)
        worker.start()
        pipes.append(parent)
        workers.append(worker)
    for p in pipes:
        assert p.recv() == "ready"
    start = time.perf_counter()
    for p in pipes:
        p.send("reset")
    answers = [p.recv() for p in pipes]
    reset_s = time.perf_counter() - start
    memory = sum(pss_bytes(w.pid) for w in workers) / len(games)
    digests = [Digest() for _ in games]
    for d, (o, _, _) in zip(digests, answers):
        d.add(o)
    done = [False] * len(games)
    played = 0
    start = time.perf_counter()
    for step in range(steps):
        live = [k for k in range(len(games)) if not done[k]]
        if not live:
            break
        for k in live:
            pipes[k].send(walk(answers[k][1], step))
        for k in live:
            answers[k] = pipes[k].recv()
            digests[k].add(answers[k][0])
            done[k] = answers[k][2]
            played += 1
    step_s = time.perf_counter() - start
    for p in pipes:
        p.send(None)
    for w in workers:
        w.join(timeout=10)
    return {"reset_s": reset_s, "step_s": step_s, "steps": played, "bytes_per_env": memory,
            "digests": [d.hex() for d in digests]}


def spread(games, n):
    """n games evenly spaced over the sorted list (so over the task types)."""
    stride = max(1, len(games) // n)
    return games[::stride][:n]


def cpu_name():
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        return next(line.split(":", 1)[1].strip() for line in out.splitlines() if line.startswith("Model name"))
    except (OSError, StopIteration):
        return platform.processor()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", required=True, help="folder holding json_2.1.1/ (extracted games)")
    ap.add_argument("--envs", default="1,8,64,512")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--ref-max", type=int, default=64, help="largest N the reference is run at")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args()
    counts = [int(n) for n in args.envs.split(",")]
    all_games = spread(rlvmr.games("train", data=args.data), max(counts))
    rows = []
    for n in counts:
        games = all_games[:n]
        ours = run_rlvmr(games, args.data, args.steps, args.threads)
        ref = run_reference(games, args.data, args.steps) if n <= args.ref_max else None
        if ref is not None:
            assert ref["digests"] == ours["digests"], f"N={n}: the engines' observations differ"
            assert ref["steps"] == ours["steps"]
        rows.append({"envs": n, "rlvmr": {k: v for k, v in ours.items() if k != "digests"},
                     "alfworld": None if ref is None else {k: v for k, v in ref.items() if k != "digests"}})
        print(f"N={n} done", flush=True)
    print(f"\nCPU: {cpu_name()}, {os.cpu_count()} cores; {args.steps} steps of the walk per game, "
          f"rlvmr on {args.threads} threads\n")
    print("| environments | rlvmr steps/s | alfworld 0.4.2 steps/s | ratio | rlvmr reset s | alfworld reset s "
          "| rlvmr MB/env | alfworld MB/env |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        ours, ref = row["rlvmr"], row["alfworld"]
        ours_rate = ours["steps"] / ours["step_s"]
        cells = [str(row["envs"]), f"{ours_rate:,.0f}"]
        if ref is None:
            cells += ["not run", "-", f"{ours['reset_s']:.2f}", "not run", f"{ours['bytes_per_env'] / 2**20:.2f}", "not run"]
        else:
            ref_rate = ref["steps"] / ref["step_s"]
            cells += [f"{ref_rate:,.0f}", f"{ours_rate / ref_rate:,.0f}x", f"{ours['reset_s']:.2f}", f"{ref['reset_s']:.2f}",
                      f"{ours['bytes_per_env'] / 2**20:.2f}", f"{ref['bytes_per_env'] / 2**20:.0f}"]
        print("| " + " | ".join(cells) + " |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"cpu": cpu_name(), "cores": os.cpu_count(), "steps": args.steps, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
