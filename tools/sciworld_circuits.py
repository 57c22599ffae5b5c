#!/usr/bin/env python3
"""How far a model gets with the conductivity tasks' circuits, per evaluation.

    python3 tools/sciworld_circuits.py TRAJECTORIES [TRAJECTORIES ...]

Each TRAJECTORIES is an evaluation's trajectories.jsonl (`rlvmr eval --out DIR` writes
DIR/trajectories.jsonl). For the episodes of test-conductivity and
test-conductivity-of-unknown-substances it counts: the episodes that play a `connect`
command, the share of `connect` commands the simulator carried out, the episodes whose
circuit is whole (the battery's anode and cathode, the powered part's anode and cathode and
the tested object's two terminals each connected to a wire), those where the powered part
was ever on, the wins among all and among the whole circuits, the episodes that move
something into one of the task's boxes, and those whose first such box is the one the task
names for what the room showed just before (a powered part on: conductive; none on:
nonconductive), whether or not the circuit was whole. Prints a Markdown table, one row per
file.
"""
import re
import sys

from trajectories import episodes, print_table

TASKS = ("test-conductivity", "test-conductivity-of-unknown-substances")
CONNECTED = re.compile(r"^(.*?) is now connected to (.*?)$")
ON = re.compile(r"(light bulb|buzzer|motor), which is on")
BOX_MOVE = re.compile(r"^move .+? (?:in|to) (\w+ box)$")


def box_verdict(task, box):
    """'conductive' or 'nonconductive': what the task puts into `box`, else None."""
    m = re.search(r"If it is electrically (\w+), place it in the " + re.escape(box), task)
    return m.group(1) if m else None


def endpoints(feedback):
    """The two ends a successful `connect` joined, e.g. ('anode on battery', 'terminal 1 on red wire')."""
    m = CONNECTED.match(feedback.strip())
    return (m.group(1).strip(), m.group(2).strip().rstrip(".")) if m else ()


def circuit_is_whole(connected):
    """Both ends of the battery, of a powered part and of the tested object joined to something."""
    battery = {"anode on battery", "cathode on battery"} <= connected
    tested = {"terminal 1 on tested object", "terminal 2 on tested object"} <= connected
    parts = {e.split(" on ", 1)[1] for e in connected if e.startswith(("anode on ", "cathode on "))} - {"battery"}
    powered = any({f"anode on {p}", f"cathode on {p}"} <= connected for p in parts)
    return battery and tested and powered


def row(path):
    counts = dict(episodes=0, wiring=0, played=0, done=0, whole=0, on=0, won=0, won_whole=0, boxed=0, read=0)
    for episode in episodes(path):
        if episode.get("task_type") not in TASKS:
            continue
        counts["episodes"] += 1
        connected, wired, on, moved = set(), False, False, False
        for step in episode.get("steps", []):
            action = step.get("action") or ""
            feedback = step.get("next_observation") or ""
            on = on or bool(ON.search(feedback))
            boxed = BOX_MOVE.match(action)
            verdict = boxed and box_verdict(episode.get("task") or "", boxed.group(1))
            if verdict and not moved:
                moved = True
                shown_on = bool(ON.search(step.get("observation") or ""))
                counts["boxed"] += 1
                counts["read"] += shown_on == (verdict == "conductive")
            if not action.startswith("connect "):
                continue
            wired = True
            counts["played"] += 1
            ends = endpoints(feedback)
            if ends:
                counts["done"] += 1
                connected.update(ends)
        whole = circuit_is_whole(connected)
        counts["wiring"] += wired
        counts["whole"] += whole
        counts["on"] += on
        counts["won"] += bool(episode.get("won"))
        counts["won_whole"] += whole and bool(episode.get("won"))
    return counts


def cells(path):
    c = row(path)
    share = f"{100 * c['done'] / c['played']:.0f}% of {c['played']}" if c["played"] else "-"
    return [str(c[key]) for key in ("episodes", "wiring")] + [share] + [str(c[key]) for key in ("whole", "on", "won", "won_whole", "boxed", "read")]


def main(argv):
    columns = ["episodes", "wiring", "connects carried out", "whole circuit", "part on", "won", "won with a whole circuit", "box moves", "box as the room showed"]
    print_table(argv, __doc__, columns, cells)


if __name__ == "__main__":
    main(sys.argv)
