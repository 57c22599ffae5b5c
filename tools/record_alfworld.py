#!/usr/bin/env python3
"""Record reference transcripts from the ALFWorld text engine.

The reference is alfworld 0.4.2 (PyPI) running on textworld 1.7.0's PDDL
engine, wrapped exactly the way ALFWorld's AlfredTWEnv wraps it
(AlfredDemangler(shuffle=False) + AlfredInfos).  For each selected game two
episodes are recorded, one JSON object per line:

    {"game": "json_2.1.1/<split>/<task>/<trial>/game.tw-pddl",
     "kind": "walkthrough" | "random",
     "seed": <int>,                      # random episodes only
     "steps": [{"command": null | "<exact string sent>",
                "observation": "...",
                "admissible_commands": [...],
                "won": bool, "done": bool}, ...]}

The first step of every episode is the reset (command null, done false).
The walkthrough episode replays the game file's "walkthrough" list; the random
episode is a seeded random walk of 30..50 steps mixing admissible,
inadmissible, padded, case-changed and odd commands (see RandomWalker); in
half of the games the walk is nudged along the walkthrough so that it often
wins and keeps stepping after the win.

Output: <out>/<split>.jsonl is written incrementally (one flush per game); at
the end its lines are sorted by (game, kind) and written to
<out>/<split>.jsonl.gz (gzip level 9, mtime 0, so the bytes are reproducible)
and the uncompressed file is removed.

Usage (normally through tools/record_alfworld.sh, which makes the venv):
    python tools/record_alfworld.py --data DIR [--out DIR] [--splits a,b]
        [--train-per-type N] [--seed S] [--jobs J] [--limit K]
"""

import argparse
import gzip
import hashlib
import json
import multiprocessing
import os
import random
import re
import shutil
import sys
import tempfile
import time
import zipfile

DATA_VERSION = "json_2.1.1"
TASK_TYPES = [
    "pick_and_place_simple",
    "look_at_obj_in_light",
    "pick_clean_then_place_in_recep",
    "pick_heat_then_place_in_recep",
    "pick_cool_then_place_in_recep",
    "pick_two_obj_and_place",
]
DEFAULT_SPLITS = ["valid_seen", "valid_unseen", "train"]


# --------------------------------------------------------------------------
# Game selection
# --------------------------------------------------------------------------

def task_type_of(rel_game):
    # json_2.1.1/<split>/<task-folder>/<trial>/game.tw-pddl
    folder = rel_game.split("/")[2]
    return folder.split("-", 1)[0]


def list_games(data_dir, split):
    root = os.path.join(data_dir, DATA_VERSION, split)
    games = []
    for dirpath, _dirnames, filenames in os.walk(root):
        if "game.tw-pddl" in filenames:
            full = os.path.join(dirpath, "game.tw-pddl")
            rel = os.path.relpath(full, data_dir).replace(os.sep, "/")
            games.append(rel)
    games.sort()
    return games


def select_games(data_dir, split, train_per_type, seed, limit):
    games = list_games(data_dir, split)
    if split == "train" and train_per_type is not None and train_per_type >= 0:
        by_type = {}
        for g in games:
            by_type.setdefault(task_type_of(g), []).append(g)
        chosen = []
        for ttype in sorted(by_type):
            pool = by_type[ttype]  # already sorted
            rng = random.Random(derive_seed(seed, "train-select:" + ttype))
            n = min(train_per_type, len(pool))
            chosen.extend(rng.sample(pool, n))
        games = sorted(chosen)
    if limit is not None:
        games = games[:limit]
    return games


def derive_seed(seed, text):
    digest = hashlib.sha256(("%d\0%s" % (seed, text)).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big")


# --------------------------------------------------------------------------
# Random command generation
# --------------------------------------------------------------------------

# Admissible commands are drawn in two stages: first a verb, with these
# weights (over the verbs currently available), then a command of that verb
# (uniformly, except that "go to" favours useful targets).  State-changing
# verbs are favoured over "go to" so that holding / heated / cooled /
# cleaned / sliced / toggled / opened states are reached.
VERB_WEIGHTS = {
    "go": 3.0,
    "take": 5.0,
    "move": 4.0,
    "open": 3.0,
    "close": 1.0,
    "heat": 8.0,
    "cool": 8.0,
    "clean": 8.0,
    "use": 6.0,
    "slice": 8.0,
    "examine": 1.5,
    "inventory": 0.7,
    "look": 0.7,
    "help": 0.3,
}
# "go to" targets that lead to interesting states get a boost.
APPLIANCES = ("microwave", "fridge", "sinkbasin", "bathtubbasin", "stoveburner",
              "desklamp", "floorlamp", "countertop", "diningtable")

# Whitespace that Python's str.strip() removes.
UNUSUAL_WS = ["\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x1f", "\x85", "\xa0",
              "\u2003", "\u3000"]
PLAIN_WS = [" ", "  ", "\t", "\n", "\r\n", " \t ", "\r"]

NON_ASCII = [
    "prendre la pomme 1 à la table 1",
    "examiner le réfrigérateur 1",
    "go to café 1",
    "take äpfel 1 from tisch 1",
    "🍎",
    "take 🍎 1 from countertop 1",
    "look 👀",
    "拿起苹果 1",
    "去 冰箱 1",
    "りんごを取る",
    "ИНВЕНТАРЬ",
    "naïve façade — “quoted” ‘text’ …",
    "go to desk 1\u200b",   # zero-width space is NOT stripped by str.strip()
    "look\u00ad",            # soft hyphen
    "e\u0301xamine",         # combining accent
]
PUNCT = [
    "{look}", "[look]", "(look)", "\"look\"", "'look'", "#look", "look #1",
    "100% look", "%s", "%d%%", "{0}", "{}", "{{}}", "[]", "<look>",
    "look; inventory", "look && inventory", "look\\n", "take {obj} from [recep]",
    "go to $receptacle", "examine *", "take * from *", "go to {recep}",
    "\\", "/", "'", "\"", "`ls`", "%(name)s", "look.", "look!", "look?",
    "inventory,", "go to: desk 1", "go_to desk 1", "go-to desk 1",
]

TOKEN_RE = re.compile(r"\b([a-z]+) (\d+)\b")


def parse_names(command):
    """Return (objects, receptacles) named in an admissible command."""
    objs, receps = [], []
    m = re.match(r"^go to (.+)$", command)
    if m:
        return objs, [m.group(1)]
    m = re.match(r"^(open|close) (.+)$", command)
    if m:
        return objs, [m.group(2)]
    m = re.match(r"^take (.+) from (.+)$", command)
    if m:
        return [m.group(1)], [m.group(2)]
    m = re.match(r"^move (.+) to (.+)$", command)
    if m:
        return [m.group(1)], [m.group(2)]
    m = re.match(r"^(heat|cool|clean) (.+) with (.+)$", command)
    if m:
        return [m.group(2)], [m.group(3)]
    m = re.match(r"^slice (.+) with (.+)$", command)
    if m:
        return [m.group(1), m.group(2)], []
    m = re.match(r"^use (.+)$", command)
    if m:
        return [m.group(1)], []
    m = re.match(r"^examine (.+)$", command)
    if m:
        return [], [m.group(1)]
    return objs, receps


class RandomWalker:
    """Chooses the next command of a random episode."""

    def __init__(self, rng, walkthrough):
        self.rng = rng
        # Half of the games get a "guided" walk: when the admissible stage is
        # drawn and the next walkthrough command is admissible, it is taken
        # with probability 0.6.  Those walks usually win part-way, so the
        # transcripts also show how the engine behaves after the game is won.
        self.walkthrough = list(walkthrough)
        self.wt_pos = 0
        self.guide_p = 0.6 if rng.random() < 0.5 else 0.0
        self.objects = set()
        self.receptacles = set()
        self.mentioned = set()   # "name N" tokens seen in observations
        self.walk_targets = set()
        for cmd in walkthrough:
            o, r = parse_names(cmd)
            self.objects.update(o)
            self.receptacles.update(r)
            self.walk_targets.update(r)
            self.walk_targets.update(o)

    def executed(self, command, admissible_before):
        if (self.wt_pos < len(self.walkthrough)
                and command.strip() == self.walkthrough[self.wt_pos]
                and self.walkthrough[self.wt_pos] in admissible_before):
            self.wt_pos += 1

    def observe(self, observation, admissible):
        for cmd in admissible:
            o, r = parse_names(cmd)
            self.objects.update(o)
            self.receptacles.update(r)
        for name, num in TOKEN_RE.findall(observation):
            self.mentioned.add("%s %s" % (name, num))

    # -- the five kinds of command -------------------------------------------

    def next_command(self, admissible):
        r = self.rng.random()
        if r < 0.55:
            return self.admissible(admissible)
        if r < 0.70:
            return self.inadmissible(admissible)
        if r < 0.82:
            return self.padded(admissible)
        if r < 0.94:
            return self.case_changed(admissible)
        return self.odd(admissible)

    def admissible(self, admissible):
        if not admissible:
            return "look"
        if self.guide_p and self.wt_pos < len(self.walkthrough):
            nxt = self.walkthrough[self.wt_pos]
            if nxt in admissible and self.rng.random() < self.guide_p:
                return nxt
        groups = {}
        for cmd in admissible:
            groups.setdefault(cmd.split(" ", 1)[0], []).append(cmd)
        verbs = sorted(groups)
        verb = self.rng.choices(verbs, weights=[VERB_WEIGHTS.get(v, 1.0) for v in verbs], k=1)[0]
        cmds = groups[verb]
        weights = [1.0] * len(cmds)
        if verb == "go":
            for i, cmd in enumerate(cmds):
                target = cmd[len("go to "):]
                if target in self.walk_targets:
                    weights[i] = 6.0
                elif target.split(" ")[0] in APPLIANCES:
                    weights[i] = 3.0
        return self.rng.choices(cmds, weights=weights, k=1)[0]

    def _pick(self, seq, default):
        seq = sorted(seq)
        return self.rng.choice(seq) if seq else default

    def inadmissible(self, admissible):
        adm = set(admissible)
        rng = self.rng
        obj_pool = sorted(self.objects | {m for m in self.mentioned if m not in self.receptacles})
        rec_pool = sorted(self.receptacles)
        for _ in range(20):
            obj = self._pick(obj_pool, "apple 1")
            rec = self._pick(rec_pool, "countertop 1")
            rec_type = rec.rsplit(" ", 1)[0]
            obj_type = obj.rsplit(" ", 1)[0]
            choice = rng.randrange(22)
            if choice == 0:
                cmd = "take %s from %s" % (obj, rec)
            elif choice == 1:
                cmd = "go to %s" % rec  # often the current receptacle
                goes = [c for c in admissible if c.startswith("go to ")]
                here = sorted(r for r in rec_pool if "go to " + r not in goes)
                if here:
                    cmd = "go to %s" % rng.choice(here)
            elif choice == 2:
                cmd = "examine %s" % obj
            elif choice == 3:
                cmd = "%s %s" % (rng.choice(["open", "close"]), rec)
            elif choice == 4:
                cmd = "%s %s %s" % (rng.choice(["go to", "open", "examine", "close"]), rec_type,
                                    rng.choice(["99", "0", "00", "01", "-1", "1000000000000"]))
            elif choice == 5:
                cmd = "put %s %s %s" % (obj, rng.choice(["in", "on", "in/on", "into"]), rec)
            elif choice == 6:
                cmd = "move %s to %s" % (obj, rec)
            elif choice == 7:
                cmd = self.misspell(rng.choice(admissible) if admissible else "look")
            elif choice == 8:
                cmd = rng.choice(["", " ", "\t", "\n", "  \t\n ", "\r\n", "\x0b\x0c", "\u3000"])
            elif choice == 9:
                cmd = "%s %s with %s" % (rng.choice(["heat", "cool", "clean"]), obj, rec)
            elif choice == 10:
                cmd = "slice %s with %s" % (obj, self._pick(obj_pool, "knife 1"))
            elif choice == 11:
                cmd = "use %s" % self._pick(obj_pool + rec_pool, "desklamp 1")
            elif choice == 12:
                cmd = rng.choice(["go to", "take", "open", "examine", "use", "move", "heat",
                                  "go", "look around", "inventory 1", "look at %s" % obj,
                                  "pick up %s" % obj, "get %s" % obj, "drop %s" % obj,
                                  "go to %s" % rec_type, "take %s" % obj,
                                  "take %s from" % obj, "move %s to" % obj,
                                  "take %s from %s" % (obj_type, rec),
                                  "north", "wait", "quit", "restart", "i", "l", "x %s" % obj])
            elif choice == 13:
                cmd = "go to %s" % obj  # an object is not a receptacle
            elif choice == 14:
                cmd = "open %s" % obj
            elif choice == 15:
                cmd = "take %s from %s" % (rec, obj)  # swapped roles
            elif choice == 16:
                # admissible command with a trailing token
                base = rng.choice(admissible) if admissible else "look"
                cmd = base + rng.choice([" 1", " please", ".", " now", " " + base])
            elif choice == 17:
                # admissible command with doubled internal space
                cmd = self.double_space(rng.choice(admissible) if admissible else "go to desk 1")
            elif choice == 18:
                # admissible command with a number changed
                base = rng.choice(admissible) if admissible else "go to desk 1"
                cmd = re.sub(r"\d+", lambda m: str(int(m.group(0)) + rng.choice([1, 7, 50])), base, count=1)
            elif choice == 19:
                cmd = "examine %s" % rng.choice(rec_pool + obj_pool) if (rec_pool or obj_pool) else "examine"
            elif choice == 20:
                cmd = "%s %s from %s" % (rng.choice(["take", "Take"]), obj, rec)
            else:
                cmd = "go to %s" % self._pick(self.mentioned, "desk 1")
            if cmd.strip() not in adm:
                return cmd
        return "xyzzy"

    def misspell(self, cmd):
        rng = self.rng
        if len(cmd) < 2:
            return cmd + "x"
        i = rng.randrange(len(cmd))
        op = rng.randrange(4)
        letters = "abcdefghijklmnopqrstuvwxyz"
        if op == 0:
            return cmd[:i] + cmd[i + 1:]
        if op == 1:
            return cmd[:i] + rng.choice(letters) + cmd[i:]
        if op == 2 and i + 1 < len(cmd):
            return cmd[:i] + cmd[i + 1] + cmd[i] + cmd[i + 2:]
        return cmd[:i] + rng.choice(letters) + cmd[i + 1:]

    def double_space(self, cmd):
        idx = [i for i, c in enumerate(cmd) if c == " "]
        if not idx:
            return cmd + "  "
        i = self.rng.choice(idx)
        return cmd[:i] + self.rng.choice(["  ", "   ", " \t", "\t"]) + cmd[i + 1:]

    def _ws(self):
        rng = self.rng
        n = rng.randrange(0, 4)
        parts = []
        for _ in range(n):
            if rng.random() < 0.3:
                parts.append(rng.choice(UNUSUAL_WS))
            else:
                parts.append(rng.choice(PLAIN_WS))
        return "".join(parts)

    def padded(self, admissible):
        rng = self.rng
        base = self.admissible(admissible)
        if rng.random() < 0.15:
            base = self.double_space(base)
        left, right = self._ws(), self._ws()
        if not left and not right:
            right = rng.choice(PLAIN_WS + UNUSUAL_WS)
        return left + base + right

    def case_changed(self, admissible):
        rng = self.rng
        base = self.admissible(admissible)
        mode = rng.randrange(5)
        if mode == 0:
            out = base.upper()
        elif mode == 1:
            out = base.title()
        elif mode == 2:
            out = base[:1].upper() + base[1:]
        elif mode == 3:
            out = base.swapcase()
        else:
            out = "".join(c.upper() if rng.random() < 0.5 else c for c in base)
        if out == base:
            out = base.upper()
        if rng.random() < 0.2:
            out = " " + out + "\n"
        return out

    def odd(self, admissible):
        rng = self.rng
        mode = rng.randrange(4)
        if mode == 0:
            n = rng.randrange(1000, 6000)
            kind = rng.randrange(3)
            if kind == 0:
                unit = (rng.choice(admissible) if admissible else "look") + " "
                s = (unit * (n // len(unit) + 1))[:n]
            elif kind == 1:
                s = "".join(rng.choice("abcdefghij klmnopqrstuvwxyz0123456789") for _ in range(n))
            else:
                s = "go to " + "a" * n
            return s
        if mode == 1:
            return rng.choice(NON_ASCII)
        if mode == 2:
            return rng.choice(PUNCT)
        # an admissible command decorated with non-ASCII or punctuation
        base = rng.choice(admissible) if admissible else "look"
        return rng.choice(["¡%s!", "%s 🙂", "«%s»", "%s。", "[%s]", "{%s}", "%s %%", "%s #", "\"%s\""]) % base


# --------------------------------------------------------------------------
# Recording (runs in worker processes)
# --------------------------------------------------------------------------

_ENV = None
_DATA_DIR = None
_SEED = 0


def make_env():
    import textworld
    from textworld.envs.pddl import PddlEnv
    from alfworld.agents.environment.alfred_tw_env import AlfredDemangler, AlfredInfos
    env = PddlEnv(textworld.EnvInfos(admissible_commands=True, won=True, extras=["gamefile"]))
    return AlfredInfos(AlfredDemangler(env, shuffle=False))


def _init_worker(data_dir, seed):
    global _ENV, _DATA_DIR, _SEED
    _ENV = make_env()
    _DATA_DIR = data_dir
    _SEED = seed


def dump_line(obj):
    """json.dumps without ASCII escaping, except for the characters that some
    line splitters (Python's str.splitlines, JavaScript) treat as line breaks:
    U+0085, U+2028, U+2029 (JSON escapes all other control characters)."""
    text = json.dumps(obj, ensure_ascii=False)
    return text.replace("\x85", "\\u0085").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def _step_record(command, state, done):
    return {
        "command": command,
        "observation": state.feedback,
        "admissible_commands": list(state["admissible_commands"]),
        "won": bool(state["won"]),
        "done": bool(done),
    }


def record_game(rel_game):
    env = _ENV
    path = os.path.join(_DATA_DIR, rel_game)
    with open(path, encoding="utf-8") as f:
        walkthrough = json.load(f).get("walkthrough", [])

    t0 = time.time()
    lines = []

    # Walkthrough episode.
    env.load(path)
    state = env.reset()
    steps = [_step_record(None, state, False)]
    for cmd in walkthrough:
        state, _score, done = env.step(cmd)
        steps.append(_step_record(cmd, state, done))
    wt_won = steps[-1]["won"]
    lines.append(dump_line({"game": rel_game, "kind": "walkthrough", "steps": steps}))

    # Random episode.
    seed = derive_seed(_SEED, rel_game)
    rng = random.Random(seed)
    walker = RandomWalker(rng, walkthrough)
    env.load(path)
    state = env.reset()
    steps = [_step_record(None, state, False)]
    walker.observe(state.feedback, state["admissible_commands"])
    length = rng.randint(30, 50)
    for _ in range(length):
        before = list(state["admissible_commands"])
        cmd = walker.next_command(before)
        state, _score, done = env.step(cmd)
        steps.append(_step_record(cmd, state, done))
        walker.executed(cmd, before)
        walker.observe(state.feedback, state["admissible_commands"])
    lines.append(dump_line({"game": rel_game, "kind": "random", "seed": seed, "steps": steps}))
    return rel_game, lines, wt_won, time.time() - t0


# --------------------------------------------------------------------------
# Driver
# --------------------------------------------------------------------------

def finalize(jsonl_path, gz_path):
    with open(jsonl_path, encoding="utf-8") as f:
        lines = [ln.rstrip("\n") for ln in f if ln.strip()]

    def key(ln):
        obj = json.loads(ln)
        return (obj["game"], obj["kind"])

    lines.sort(key=key)
    payload = "".join(ln + "\n" for ln in lines).encode("utf-8")
    tmp = gz_path + ".tmp"
    with open(tmp, "wb") as raw:
        with gzip.GzipFile(filename="", mode="wb", compresslevel=9, fileobj=raw, mtime=0) as gz:
            gz.write(payload)
    os.replace(tmp, gz_path)
    os.remove(jsonl_path)
    return len(lines)


def extract_zip(zip_path, splits):
    tmp = tempfile.mkdtemp(prefix="alfworld-data-")
    prefixes = tuple("%s/%s/" % (DATA_VERSION, s) for s in splits)
    with zipfile.ZipFile(zip_path) as zf:
        for name in zf.namelist():
            if name.startswith(prefixes) and name.endswith("/game.tw-pddl"):
                zf.extract(name, tmp)
    return tmp


def log(msg):
    sys.stderr.write("[record_alfworld %s] %s\n" % (time.strftime("%H:%M:%S"), msg))
    sys.stderr.flush()


def main(argv=None):
    here = os.path.dirname(os.path.abspath(__file__))
    default_out = os.path.join(os.path.dirname(here), "crates", "alfworld", "tests", "transcripts")
    default_data = os.environ.get("ALFWORLD_DATA") or os.path.expanduser("~/.cache/alfworld")

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=default_data,
                    help="folder holding json_2.1.1/ (default $ALFWORLD_DATA or ~/.cache/alfworld)")
    ap.add_argument("--zip", default=None, help="json_2.1.1.zip to extract to a temp dir instead of --data")
    ap.add_argument("--out", default=default_out, help="output folder (default %(default)s)")
    ap.add_argument("--splits", default=",".join(DEFAULT_SPLITS))
    ap.add_argument("--train-per-type", type=int, default=60)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--limit", type=int, default=None, help="debug: first K games per split")
    args = ap.parse_args(argv)

    splits = [s for s in args.splits.split(",") if s]
    tmpdir = None
    data_dir = os.path.abspath(args.data)
    if args.zip:
        log("extracting %s" % args.zip)
        tmpdir = extract_zip(args.zip, splits)
        data_dir = tmpdir
    if not os.path.isdir(os.path.join(data_dir, DATA_VERSION)):
        sys.exit("no %s/ folder in %s" % (DATA_VERSION, data_dir))

    os.makedirs(args.out, exist_ok=True)
    t_all = time.time()
    try:
        ctx = multiprocessing.get_context("fork" if sys.platform != "win32" else "spawn")
        with ctx.Pool(processes=max(1, args.jobs), initializer=_init_worker,
                      initargs=(data_dir, args.seed)) as pool:
            for split in splits:
                games = select_games(data_dir, split, args.train_per_type, args.seed, args.limit)
                log("%s: %d games" % (split, len(games)))
                jsonl = os.path.join(args.out, "%s.jsonl" % split)
                gz = jsonl + ".gz"
                t_split = time.time()
                not_won = []
                with open(jsonl, "w", encoding="utf-8") as out:
                    for i, (game, lines, won, secs) in enumerate(
                            pool.imap_unordered(record_game, games, chunksize=1), 1):
                        for ln in lines:
                            out.write(ln + "\n")
                        out.flush()
                        if not won:
                            not_won.append(game)
                        elapsed = time.time() - t_split
                        eta = elapsed / i * (len(games) - i)
                        log("%s %d/%d %.1fs (elapsed %.0fs, eta %.0fs) %s"
                            % (split, i, len(games), secs, elapsed, eta, game))
                n = finalize(jsonl, gz)
                log("%s: wrote %s (%d lines, %d bytes) in %.0fs"
                    % (split, gz, n, os.path.getsize(gz), time.time() - t_split))
                if not_won:
                    log("%s: WARNING walkthrough did not win in %d games: %s"
                        % (split, len(not_won), not_won[:5]))
    finally:
        if tmpdir:
            shutil.rmtree(tmpdir, ignore_errors=True)
    log("all done in %.0fs" % (time.time() - t_all))


if __name__ == "__main__":
    main()
