"""Reading an evaluation's trajectories.jsonl for the tools beside this file."""
import json
import sys


def episodes(path):
    """The episodes of a trajectories.jsonl, one dict a line; a file that cannot be read or
    a line that is not JSON ends the program with its file and line named."""
    try:
        lines = open(path).read().splitlines()
    except OSError as e:
        sys.exit(f"{path}: {e}")
    for number, line in enumerate(lines, 1):
        try:
            yield json.loads(line)
        except json.JSONDecodeError as e:
            sys.exit(f"{path}:{number}: {e}")


def print_table(argv, doc, columns, cells):
    """A tool's command line, `TOOL TRAJECTORIES...`: a Markdown table with a row per file,
    `cells(path)` its cells after the path's; no file given: `doc` and exit."""
    if len(argv) < 2:
        sys.exit(doc)
    print("| trajectories | " + " | ".join(columns) + " |")
    print("|---|" + "---:|" * len(columns))
    for path in argv[1:]:
        print(f"| {path} | " + " | ".join(cells(path)) + " |")
