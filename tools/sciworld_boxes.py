#!/usr/bin/env python3
"""Which verdict a model guesses in the conductivity tasks, against what the games hold.

    python3 tools/sciworld_boxes.py EXPERT_TRAJECTORIES TRAJECTORIES [TRAJECTORIES ...]

EXPERT_TRAJECTORIES is the gold paths' evaluation of the same games (`rlvmr eval --policy
expert --out DIR` with the same split, episodes and seed writes DIR/trajectories.jsonl):
the box its last move names is each game's answer. For every other file it counts, over the
test-conductivity and test-conductivity-of-unknown-substances games, the episodes whose last
move into one of the task's boxes names the conductive box (the first the task names) or the
nonconductive one, how many of each were won, and the episodes with no such move. Prints a
Markdown table, one row per file.
"""
import json
import re
import sys
from collections import Counter

BOX = re.compile(r"place it in the (\w+) box")
MOVE_TO_BOX = re.compile(r"\bto (\w+) box")


def verdict(episode):
    """0: the conductive box, 1: the nonconductive one, None: no move into either."""
    boxes = BOX.findall(episode["task"])
    chosen = None
    for step in episode["steps"]:
        action = step.get("action") or ""
        moved = MOVE_TO_BOX.search(action)
        if action.startswith("move") and moved and moved.group(1) in boxes[:2]:
            chosen = boxes.index(moved.group(1))
    return chosen


def conductivity_episodes(path):
    with open(path) as lines:
        for line in lines:
            episode = json.loads(line)
            if "conductiv" in episode["task_type"] and len(BOX.findall(episode["task"])) >= 2:
                yield episode


def main(paths):
    if len(paths) < 2:
        sys.exit(__doc__)
    answers = Counter(verdict(e) for e in conductivity_episodes(paths[0]))
    print(f"games: {sum(answers.values())}, conductive {answers[0]}, "
          f"nonconductive {answers[1]}, gold path without a box {answers[None]}\n")
    print("| evaluation | chose conductive (won) | chose nonconductive (won) | no box | wins |")
    print("|---|---:|---:|---:|---:|")
    for path in paths[1:]:
        chosen, won = Counter(), Counter()
        for episode in conductivity_episodes(path):
            guess = verdict(episode)
            chosen[guess] += 1
            won[guess] += bool(episode["won"])
        print(f"| {path} | {chosen[0]} ({won[0]}) | {chosen[1]} ({won[1]}) | "
              f"{chosen[None]} | {sum(won.values())} |")


if __name__ == "__main__":
    main(sys.argv[1:])
