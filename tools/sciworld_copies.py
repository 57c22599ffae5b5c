#!/usr/bin/env python3
"""How often a ScienceWorld model names what its prompt shows, per evaluation.

    python3 tools/sciworld_copies.py TRAJECTORIES [TRAJECTORIES ...]

Each TRAJECTORIES is an evaluation's trajectories.jsonl (`rlvmr eval --out DIR` writes
DIR/trajectories.jsonl). Two names a model must copy from its prompt to win:

- the box: every `move X to C box` command in a task whose description names boxes, and
  whether C is one of the description's colours (the task line is the only place that says
  which box);
- the find tasks' object: every `focus on X` in find-animal, find-living-thing,
  find-non-living-thing and find-plant, and whether X is written in the prompt's `Now:`,
  `Room:` or `Inventory:` line (the room's objects);
- the find tasks' first focus: per find game, whether the simulator carried out its first
  `focus on` (an object the room holds; a find game's focus decides it);
- the find tasks' next step: per find game whose first focus was carried out and went on,
  whether the step after that focus is another `focus on` (the pick-up is what wins);
- the find tasks' room: per find game, whether the model ever moves into the room the task
  puts its box in (`move it to the C box in the ROOM`), which only the task line names.

Prints a Markdown table, one row per file: games won, then each share with its count.
"""
import re
import sys

from trajectories import episodes, print_table

BOX_IN_TASK = re.compile(r"(\w+) box")
BOX_MOVE = re.compile(r"^move .* to (\w+) box$")
BOX_ROOM = re.compile(r" box in the ([a-z ]+?)[.,]")
ROOM_MOVE = re.compile(r"^(?:teleport to|go to) (.+)$")
SCENE_LINES = ("Now: ", "Room: ", "Inventory: ")


def scene(prompt):
    """The prompt's lines that show the room, the current observation and the inventory."""
    return "\n".join(line for line in prompt.split("\n") if line.startswith(SCENE_LINES))


def row(path):
    counts = dict(games=0, won=0, box=0, box_named=0, focus=0, focus_shown=0, find=0, box_room=0, first_focus=0,
                  focused_went_on=0, focus_again=0)
    for episode in episodes(path):
        counts["games"] += 1
        counts["won"] += bool(episode.get("won"))
        boxes = set(BOX_IN_TASK.findall(episode.get("task") or ""))
        finding = (episode.get("task_type") or "").startswith("find-")
        box_room = BOX_ROOM.search(episode.get("task") or "")
        rooms_entered = set()
        first_focus = None
        after_first_focus = None
        for step in episode.get("steps", []):
            action = (step.get("action") or "").strip()
            if first_focus and after_first_focus is None:
                after_first_focus = action
            move = BOX_MOVE.match(action)
            if move and boxes:
                counts["box"] += 1
                counts["box_named"] += move.group(1) in boxes
            room_move = ROOM_MOVE.match(action)
            if room_move:
                rooms_entered.add(room_move.group(1))
            if finding and action.startswith("focus on "):
                if first_focus is None:
                    first_focus = (step.get("next_observation") or "").startswith("You focus on")
                counts["focus"] += 1
                counts["focus_shown"] += action[len("focus on "):] in scene(step.get("prompt") or "")
        if finding and box_room:
            counts["find"] += 1
            counts["box_room"] += box_room.group(1) in rooms_entered
            counts["first_focus"] += bool(first_focus)
            if after_first_focus is not None:
                counts["focused_went_on"] += 1
                counts["focus_again"] += after_first_focus.startswith("focus on ")
    return counts


def share(part, whole):
    return f"{100 * part / whole:.0f}% of {whole}" if whole else "-"


def cells(path):
    c = row(path)
    return [f"{c['won']} of {c['games']}", share(c["box_named"], c["box"]), share(c["focus_shown"], c["focus"]),
            share(c["first_focus"], c["find"]), share(c["focus_again"], c["focused_went_on"]),
            share(c["box_room"], c["find"])]


def main(argv):
    columns = [
        "won",
        "box moves naming a box of the task",
        "find tasks: focus on an object the scene shows",
        "find games whose first focus is carried out",
        "of those, the next step another focus",
        "find games reaching the box's room",
    ]
    print_table(argv, __doc__, columns, cells)


if __name__ == "__main__":
    main(sys.argv)
