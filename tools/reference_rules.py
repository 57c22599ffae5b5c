"""Scores real rollouts with the RLVMR authors' own Python rules and with `rlvmr score`, and
counts where they agree (issue 32, point 6). Run by hand:

  python3 tools/reference_rules.py --ref CHECKOUT runs/long/rlvmr/rollouts/*.jsonl.gz

with any Python 3; a Python with torch and numpy (e.g. the one tools/torch_venv.sh prints)
also compares the advantages.

The authors' files are read from REF (a checkout of their repository); nothing of theirs is
copied into this project. Per step it compares:
  - the format check: their `alfworld_projection_rlvmr` valid flag against `format_valid`;
  - the meta-reasoning reward: their `process_trajectory_rlvmr_rewards` against `mr_reward`;
  - with real torch, the GRPO-MR advantage: their `compute_rlvmr_outcome_advantage`
    (mean_std_norm, w = 1, the ALFWorld RLVMR script's settings) against `advantage`.
once with this project's defaults and once with `validity = "reference"` and
`matching = "reference"`, and prints every kind of disagreement with an example.

With `--layout lines` (issue 40) every reply is first rewritten into the layout of the authors'
prompts, each tag's body and the action on lines of their own
(`<explore>\nbody\n</explore>\n<action>\ngo to desk 1\n</action>`), and scored that way by
both; it then also prints, per tag, the share of steps each side pays: their code on the
rewritten replies against this project's default rules on the same steps, and, where the
rollouts record the reward their run trained on (`mr_reward`), on how many steps that reward
equals theirs: run on the rollouts of `rlvmr-planonly` (tools/long_runs.sh), it checks step
for step that the planning reward alone is what their code pays in that layout.
"""
import argparse
import ast
import collections
import gzip
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import types

REFERENCE_CONFIG = '[format]\nvalidity = "reference"\n[reward]\nmatching = "reference"\n'
SUCCESS_REWARD = 10.0
FORMAT_PENALTY = 0.1
TOLERANCE = 1e-4  # their float32 tensors against our float64


def stub_missing_modules():
    """Their module imports torch, numpy and verl at the top; the reward rules only call
    torch.tensor on a float. Without torch the advantage is not compared."""
    try:
        import torch  # noqa: F401
        real_torch = True
    except ImportError:
        real_torch = False
        torch_stub = types.ModuleType("torch")
        torch_stub.tensor = lambda value, **_: float(value)
        torch_stub.Tensor = float
        sys.modules["torch"] = torch_stub
    try:
        import numpy  # noqa: F401
    except ImportError:
        numpy_stub = types.ModuleType("numpy")
        numpy_stub.array = list
        sys.modules["numpy"] = numpy_stub
    try:
        import verl  # noqa: F401
    except ImportError:
        verl_stub = types.ModuleType("verl")
        verl_stub.DataProto = object
        sys.modules["verl"] = verl_stub
    return real_torch


def load_module(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def find_reference(ref):
    """The two files, in a checkout of the authors' repository or in one folder."""
    candidates = [
        (os.path.join(ref, "RLVMR/code/rlvmr/core_rlvmr.py"),
         os.path.join(ref, "RLVMR/code/agent_system/environments/env_package/alfworld/projection.py")),
        (os.path.join(ref, "code/rlvmr/core_rlvmr.py"),
         os.path.join(ref, "code/agent_system/environments/env_package/alfworld/projection.py")),
        (os.path.join(ref, "core_rlvmr.py"), os.path.join(ref, "projection.py")),
    ]
    for core, projection in candidates:
        if os.path.isfile(core) and os.path.isfile(projection):
            return core, projection
    sys.exit(f"reference_rules: no core_rlvmr.py and projection.py under {ref} "
             "(give a checkout of the authors' repository, or a folder holding both files)")


def read_episodes(paths):
    episodes = []
    for path in paths:
        opener = gzip.open if path.endswith(".gz") else open
        with opener(path, "rt") as lines:
            for number, line in enumerate(lines, 1):
                try:
                    episode = json.loads(line)
                except json.JSONDecodeError as error:
                    sys.exit(f"reference_rules: {path} line {number}: not JSON ({error})")
                if "steps" not in episode or "uid" not in episode:
                    sys.exit(f"reference_rules: {path} line {number}: no 'steps' or 'uid'")
                episodes.append(episode)
    return episodes


def as_list(value):
    """Rollout files write lists as their Python repr text; `rlvmr score` writes JSON lists."""
    if isinstance(value, list):
        return value
    return ast.literal_eval(value)


def as_bool(value):
    return value is True or value == "True" or value == "true"


LAYOUT_BLOCKS = ("planning", "explore", "reflection", "monitor", "action")


def in_lines_layout(output):
    """The reply with each block's body on a line of its own, as the authors' prompts lay it
    out: `<tag>body</tag>` becomes `<tag>\nbody\n</tag>`."""
    for name in LAYOUT_BLOCKS:
        output = output.replace(f"<{name}>", f"<{name}>\n").replace(f"</{name}>", f"\n</{name}>")
    return output


def rewrite_layout(episodes):
    rewritten = []
    for episode in episodes:
        steps = [dict(step, output=in_lines_layout(step["output"])) for step in episode["steps"]]
        rewritten.append(dict(episode, steps=steps))
    return rewritten


class Payouts:
    """Per tag, how many valid steps carry it and how many of them each side pays."""

    def __init__(self):
        self.counts = collections.Counter()
        self.first_difference = None

    def add(self, ours, theirs, written):
        for our_episode, their_steps, episode in zip(ours, theirs, written):
            for index, (our, their, step) in enumerate(zip(our_episode["steps"], their_steps, episode["steps"])):
                if "mr_reward" in step:
                    # The reward the run itself trained on, recorded in its rollouts.
                    self.counts["recorded"] += 1
                    if abs(float(step["mr_reward"]) - their["reward"]) <= TOLERANCE:
                        self.counts["recorded agree"] += 1
                    elif self.first_difference is None:
                        self.first_difference = (episode["uid"], index, step["mr_reward"], their["reward"], step["output"])
                tag = our.get("tag")
                if tag in (None, "none"):
                    continue
                self.counts[(tag, "steps")] += 1
                self.counts[(tag, "ours")] += float(our["mr_reward"]) > 0
                self.counts[(tag, "theirs")] += their["reward"] > 0

    def print(self):
        print("\npaid steps per tag (our tag of each valid step): this project's default rules on the"
              " original replies | the authors' code on the replies in their layout")
        for tag in ("planning", "explore", "reflection", "monitor"):
            steps = self.counts[(tag, "steps")]
            if steps:
                ours, theirs = self.counts[(tag, "ours")], self.counts[(tag, "theirs")]
                print(f"  {tag}: {steps} steps; ours pay {ours} ({ours / steps:.1%}), theirs pay {theirs} ({theirs / steps:.1%})")
        recorded = self.counts["recorded"]
        if recorded:
            agree = self.counts["recorded agree"]
            print(f"the reward each run trained on (recorded in its rollouts) equals theirs on {agree} of {recorded} steps")
            if self.first_difference:
                uid, index, mine, their, output = self.first_difference
                print(f"  first difference: {uid} step {index}: recorded {mine}, theirs {their}; reply {output[:160]!r}")


def score_with_rlvmr(binary, episodes, config_text):
    """Our per-step fields for every episode, from `rlvmr score` (defaults or a config)."""
    minimal = []
    for episode in episodes:
        steps = [{"observation": s["observation"], "admissible_actions": as_list(s["admissible_actions"]),
                  "output": s["output"]} for s in episode["steps"]]
        minimal.append({"uid": episode["uid"], "won": as_bool(episode["won"]), "steps": steps})
    command = [binary, "score"]
    config_path = None
    if config_text:
        with tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False) as config:
            config.write(config_text)
        config_path = config.name
        command += ["--config", config_path]
    try:
        run = subprocess.run(command, input="".join(json.dumps(e) + "\n" for e in minimal),
                             capture_output=True, text=True)
    finally:
        if config_path:
            os.unlink(config_path)
    if run.returncode != 0:
        sys.exit(f"reference_rules: {' '.join(command)} failed: {run.stderr.strip()[:500]}")
    return [json.loads(line) for line in run.stdout.splitlines()]


def score_with_reference(core, projection, episodes, real_torch):
    """Their valid flag, tag and reward per step; with torch, their advantage."""
    rewards = types.SimpleNamespace(planning_reward=1.0, exploration_reward=1.0, reflection_reward=1.0)
    config = types.SimpleNamespace(algorithm=types.SimpleNamespace(rlvmr=rewards))
    scored = []
    for episode in episodes:
        trajectory = []
        for step in episode["steps"]:
            _, valids, _, available = projection.alfworld_projection_rlvmr(
                [step["output"]], [as_list(step["admissible_actions"])])
            trajectory.append({"active_masks": True, "full_output": step["output"],
                               "is_action_valid": bool(valids[0]), "action_available": bool(available[0])})
        won = as_bool(episode["won"])
        core.process_trajectory_rlvmr_rewards([trajectory], config, [SUCCESS_REWARD if won else 0.0])
        for step in trajectory:
            reward = step["rlvmr_step_reward"]
            step["reward"] = float(reward.item() if hasattr(reward, "item") else reward)
            step["outcome"] = SUCCESS_REWARD * won - FORMAT_PENALTY * (not step["is_action_valid"])
        scored.append(trajectory)
    if real_torch:
        add_reference_advantages(core, episodes, scored)
    return scored


def add_reference_advantages(core, episodes, scored):
    import numpy as np
    import torch
    flat = [(episode["uid"], step) for episode, steps in zip(episodes, scored) for step in steps]
    outcome = torch.tensor([[step["outcome"]] for _, step in flat], dtype=torch.float32)
    meta = torch.tensor([step["reward"] for _, step in flat], dtype=torch.float32)
    advantages, _, _ = core.compute_rlvmr_outcome_advantage(
        outcome, meta, torch.ones_like(outcome), np.array([uid for uid, _ in flat], dtype=object),
        step_advantage_w=1.0, mode="mean_std_norm",
        tag_types=np.array([step["rlvmr_tag_type"] for _, step in flat], dtype=object))
    for (_, step), advantage in zip(flat, advantages[:, 0].tolist()):
        step["advantage"] = advantage


class Agreement:
    """Per-step agreement counts of one reading of ours against the reference, with the first
    example of each kind of disagreement."""

    def __init__(self, label):
        self.label = label
        self.counts = collections.Counter()
        self.examples = {}
        self.checked = []

    def add(self, ours, theirs, episodes):
        for episode, our_episode, their_steps in zip(episodes, ours, theirs):
            for index, (our, their) in enumerate(zip(our_episode["steps"], their_steps)):
                self.add_step(episode["uid"], index, our, their)

    def add_step(self, uid, index, our, their):
        self.counts["steps"] += 1
        checks = [("format check", our["format_valid"], their["is_action_valid"]),
                  ("meta-reasoning reward", float(our["mr_reward"]), their["reward"])]
        if "advantage" in their:
            checks.append(("advantage", float(our["advantage"]), their["advantage"]))
        for name, our_value, their_value in checks:
            if name not in self.checked:
                self.checked.append(name)
            same = (abs(our_value - their_value) <= TOLERANCE * max(1.0, abs(their_value))
                    if isinstance(their_value, float) else our_value == their_value)
            if same:
                self.counts[name] += 1
                continue
            kind = (name, our.get("tag"), their["rlvmr_tag_type"])
            self.counts[kind] += 1
            self.examples.setdefault(kind, (uid, index, our_value, their_value, our["output"]))

    def print(self):
        total = self.counts["steps"]
        print(f"\n{self.label}: {total} steps")
        for name in self.checked:
            print(f"  {name}: {self.counts[name]} agree ({self.counts[name] / total:.2%})")
        for kind, example in sorted(self.examples.items(), key=lambda e: -self.counts[e[0]]):
            name, our_tag, their_tag = kind
            uid, index, our_value, their_value, output = example
            print(f"  differ on {name}, our tag {our_tag}, their tag {their_tag}: {self.counts[kind]} steps;"
                  f" e.g. {uid} step {index}: ours {our_value}, theirs {their_value}; reply {output[:160]!r}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ref", required=True, help="a checkout of the authors' repository")
    parser.add_argument("--rlvmr", default="target/release/rlvmr", help="the rlvmr binary")
    parser.add_argument("rollouts", nargs="+",
                        help="rollouts/NNNN.jsonl.gz files of runs; each file (one iteration) is scored alone")
    parser.add_argument("--layout", choices=("as-written", "lines"), default="as-written",
                        help="lines: rewrite every reply into the authors' layout before scoring")
    args = parser.parse_args()
    real_torch = stub_missing_modules()
    core_path, projection_path = find_reference(args.ref)
    core = load_module("core_rlvmr", core_path)
    projection = load_module("projection", projection_path)
    print(f"reference: {core_path}")
    if not real_torch:
        print("no torch in this Python: the advantage is not compared (use a Python with torch)")
    defaults = Agreement("defaults (validity = strict, matching = parsed)")
    reference = Agreement('validity = "reference", matching = "reference"')
    episode_count = 0
    payouts = Payouts()
    for path in args.rollouts:
        written = read_episodes([path])
        episodes = rewrite_layout(written) if args.layout == "lines" else written
        episode_count += len(episodes)
        theirs = score_with_reference(core, projection, episodes, real_torch)
        ours_by_default = score_with_rlvmr(args.rlvmr, episodes, "")
        defaults.add(ours_by_default, theirs, episodes)
        reference.add(score_with_rlvmr(args.rlvmr, episodes, REFERENCE_CONFIG), theirs, episodes)
        if args.layout == "lines":
            payouts.add(score_with_rlvmr(args.rlvmr, written, ""), theirs, written)
    print(f"{episode_count} episodes from {len(args.rollouts)} files, replies {args.layout}")
    defaults.print()
    reference.print()
    if args.layout == "lines":
        payouts.print()


if __name__ == "__main__":
    main()
