#!/usr/bin/env python3
"""Speed of the reference ALFWorld text engine, for the benchmark table.

Replays recorded transcripts (from tools/record_alfworld.py) on alfworld 0.4.2 /
textworld 1.7.0 and prints ONE JSON object on stdout:

    {"games": n, "reset_ms_mean": .., "reset_ms_median": ..,
     "step_us_mean": .., "step_us_median": .., "steps": n,
     "mb_per_game": .., "mismatches": k, ...}

* games: the first --games distinct games of the walkthrough episodes, in file
  order (files in the order given).
* reset_ms_*: wall time of env.load(game) + env.reset(), one env object reused
  for all games (as the recorder does).
* step_us_*: wall time of each env.step(command) while replaying the recorded
  commands of the selected episodes (--kinds, default the walkthrough).
* mismatches: steps whose live observation differs from the recorded one
  (admissible-command / won differences are counted in state_mismatches).
* mb_per_game: growth of the process RSS (VmRSS) when --mem-games games are
  loaded and reset in separate, simultaneously alive env objects, divided by
  their number.

Run it with the reference venv made by tools/record_alfworld.sh, e.g.
    ~/.cache/rlvmr/alfworld-ref-venv/bin/python tools/ref_bench.py \\
        --data ~/.cache/alfworld crates/alfworld/tests/transcripts/valid_seen.jsonl.gz
"""

import argparse
import gc
import gzip
import json
import os
import platform
import statistics
import sys
import time


def make_env():
    import textworld
    from textworld.envs.pddl import PddlEnv
    from alfworld.agents.environment.alfred_tw_env import AlfredDemangler, AlfredInfos
    env = PddlEnv(textworld.EnvInfos(admissible_commands=True, won=True, extras=["gamefile"]))
    return AlfredInfos(AlfredDemangler(env, shuffle=False))


def rss_bytes():
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    import resource  # fallback: peak RSS (kB on Linux, bytes on macOS)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


def open_text(path):
    if path.endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8")
    return open(path, encoding="utf-8")


def load_episodes(files, n_games, kinds):
    """Return [(game, [episodes of that game in file order])] for the first
    n_games distinct games having a walkthrough episode."""
    all_eps = []
    for path in files:
        with open_text(path) as f:
            all_eps.extend(json.loads(line) for line in f if line.strip())
    games = []
    for ep in all_eps:
        if ep["kind"] == "walkthrough" and ep["game"] not in games:
            games.append(ep["game"])
            if len(games) == n_games:
                break
    episodes = {g: [] for g in games}
    for ep in all_eps:
        if ep["game"] in episodes and ep["kind"] in kinds:
            episodes[ep["game"]].append(ep)
    return [(g, episodes[g]) for g in games]


def main(argv=None):
    ap = argparse.ArgumentParser(description="Reference ALFWorld engine speed.")
    ap.add_argument("transcripts", nargs="+", help="transcript .jsonl.gz file(s)")
    ap.add_argument("--games", type=int, default=20)
    ap.add_argument("--data", default=os.environ.get("ALFWORLD_DATA") or os.path.expanduser("~/.cache/alfworld"),
                    help="folder holding json_2.1.1/ (default $ALFWORLD_DATA or ~/.cache/alfworld)")
    ap.add_argument("--kinds", default="walkthrough",
                    help="episode kinds to replay, comma-separated (walkthrough,random)")
    ap.add_argument("--mem-games", type=int, default=10)
    ap.add_argument("--verbose", action="store_true", help="print mismatches to stderr")
    args = ap.parse_args(argv)

    kinds = set(k for k in args.kinds.split(",") if k)
    selected = load_episodes(args.transcripts, args.games, kinds)
    if not selected:
        sys.exit("no walkthrough episodes found")

    env = make_env()
    # Warm-up (imports, grammar caches) so the first game does not dominate.
    env.load(os.path.join(args.data, selected[0][0]))
    env.reset()

    reset_ms = []
    step_us = []
    mismatches = 0
    state_mismatches = 0
    for game, eps in selected:
        path = os.path.join(args.data, game)
        for ep in eps:
            t0 = time.perf_counter_ns()
            env.load(path)
            state = env.reset()
            reset_ms.append((time.perf_counter_ns() - t0) / 1e6)
            recs = ep["steps"]
            if state.feedback != recs[0]["observation"]:
                mismatches += 1
            for rec in recs[1:]:
                t0 = time.perf_counter_ns()
                state, _score, done = env.step(rec["command"])
                step_us.append((time.perf_counter_ns() - t0) / 1e3)
                if state.feedback != rec["observation"]:
                    mismatches += 1
                    if args.verbose:
                        sys.stderr.write("mismatch %s %r: %r != %r\n"
                                         % (game, rec["command"], state.feedback, rec["observation"]))
                if (list(state["admissible_commands"]) != rec["admissible_commands"]
                        or bool(state["won"]) != rec["won"] or bool(done) != rec["done"]):
                    state_mismatches += 1

    # Memory per live game: separate env objects, all alive at once.
    mem_games = [g for g, _ in selected][:max(1, args.mem_games)]
    gc.collect()
    before = rss_bytes()
    live = []
    for game in mem_games:
        e = make_env()
        e.load(os.path.join(args.data, game))
        e.reset()
        live.append(e)
    gc.collect()
    after = rss_bytes()
    mb_per_game = (after - before) / len(live) / (1024 * 1024)

    try:
        from importlib.metadata import version
        engine = "alfworld %s / textworld %s" % (version("alfworld"), version("textworld"))
    except Exception:  # pragma: no cover
        engine = "alfworld / textworld"

    out = {
        "engine": engine,
        "python": platform.python_version(),
        "games": len(selected),
        "episodes": len(reset_ms),
        "reset_ms_mean": round(statistics.mean(reset_ms), 3),
        "reset_ms_median": round(statistics.median(reset_ms), 3),
        "step_us_mean": round(statistics.mean(step_us), 1) if step_us else None,
        "step_us_median": round(statistics.median(step_us), 1) if step_us else None,
        "steps": len(step_us),
        "mb_per_game": round(mb_per_game, 2),
        "mem_games": len(live),
        "mismatches": mismatches,
        "state_mismatches": state_mismatches,
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
