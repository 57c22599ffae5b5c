"""rlvmr: RLVMR's native ALFWorld engine, reply parser and verifiable rewards for Python.

    >>> import rlvmr
    >>> env = rlvmr.AlfworldEnv("valid_seen/<task>/<trial>/game.tw-pddl")
    >>> observation, info = env.reset()
    >>> observation, reward, done, info = env.step(info["admissible_commands"][0])

`AlfworldEnvs` steps many games at once on native threads; `AlfworldExpert` is the hand-coded
expert. `SciWorldEnv` and `SciWorldEnvs` play the real ScienceWorld simulator (one JVM each,
the jar fetched from PyPI and cached on first use) with the official client's rewards;
`SciWorldGold` gives gold action sequences.
`build_prompt` renders a step's prompt as rlvmr's own policies see it (`carried_plan` keeps
the plan it shows). `parse_output`, `score` and `metrics` are
`rlvmr score`'s parser and scorer (rewards, meta-reasoning rewards, advantages of every
algorithm, metrics). Errors are Python exceptions carrying the Rust message.
"""

import json as _json

from ._native import (
    WIN_REWARD,
    AlfworldEnv,
    AlfworldEnvs,
    AlfworldExpert,
    SciWorldEnv,
    SciWorldEnvs,
    SciWorldGold,
    carried_plan,
    games,
    parse_output,
    sciworld_games,
)
from ._native import build_prompt as _build_prompt
from ._native import metrics_json as _metrics_json
from ._native import score_json as _score_json

__all__ = [
    "AlfworldEnv", "AlfworldEnvs", "AlfworldExpert", "SciWorldEnv", "SciWorldEnvs", "SciWorldGold", "games",
    "sciworld_games", "parse_output", "build_prompt", "carried_plan", "score", "metrics", "WIN_REWARD",
]


def score(episodes, config=None, algo=None):
    """Scores episodes as `rlvmr score` does and returns them with the scores merged in.

    `episodes`: a list of dicts in `rlvmr score`'s input schema (`uid`, `won`, `steps` with
    `output`, `observation`, `admissible_actions`). `config`: a dict of the score config
    (`reward`, `advantage`, `format` sections; None: the defaults). `algo`: `grpo_mr`,
    `grpo`, `gigpo` or `rloo`, overriding `config["advantage"]["algo"]`. Groups are formed
    by `uid` over the whole list. Returns new dicts; the inputs are not changed.
    """
    if not isinstance(episodes, (list, tuple)):
        raise TypeError(f"episodes must be a list of dicts, not {type(episodes).__name__}")
    _config_json(config, "config")  # the type check, before merging in `algo`
    if algo is not None:
        config = dict(config or {})
        config["advantage"] = dict(config.get("advantage", {}), algo=algo)
    return _json.loads(_score_json(_json.dumps(list(episodes)), _config_json(config, "config")))


def _config_json(config, what):
    if config is None:
        return None
    if not isinstance(config, dict):
        raise TypeError(f"{what} must be a dict, not {type(config).__name__}")
    return _json.dumps(config)


def build_prompt(task, observation, admissible_commands=(), step=0, history=(), plan=None,
                 templates=(), objects=(), config=None, room="", inventory=""):
    """One step's prompt, byte for byte as `rlvmr eval` and `rlvmr train` render it.

    `history`: the past steps, oldest first, each a dict with `observation` (what the agent
    saw), `action` (the command sent) and `output` (the raw reply), or such a triple; the
    config's window picks the tail it shows. `step`: steps taken before this one. `plan`: the
    plan to show (None: "No plan."), kept step by step with `carried_plan(plan, output)`.
    `templates`, `objects`: ScienceWorld's action templates and objects. `room`, `inventory`:
    ScienceWorld's room description and inventory text (the env's free look and inventory),
    shown instead of the templates when the config has `room = True`. `config`: the run
    config's `[prompt]` section as a dict (`env`, `style`, `history`, `recent_outputs`,
    `compact`, `cold_start`, `drop_help`, `instructions`, `layout`, `room`); None for the
    defaults.
    """
    entries = []
    for i, entry in enumerate(history):
        if isinstance(entry, dict):
            try:
                entry = (entry["observation"], entry["action"], entry["output"])
            except KeyError as e:
                raise ValueError(f"history[{i}] has no {e.args[0]!r}") from None
        entries.append(tuple(entry))
    return _build_prompt(task, observation, list(admissible_commands), int(step), entries, plan,
                         list(templates), list(objects), _config_json(config, "config"), str(room),
                         str(inventory))


def metrics(episodes, config=None):
    """The metrics of `episodes` as one set (what `rlvmr eval` summarises): `success_rate`,
    `invalid_rate`, `inadmissible_rate`, `repetitive_rate`, `avg_actions`, `tag_mix`,
    `tag_rewards`, and `success_by_type` / `success_by_split` for episodes naming their
    `task_type` / `split`. `episodes` and `config` as for `score`."""
    if not isinstance(episodes, (list, tuple)):
        raise TypeError(f"episodes must be a list of dicts, not {type(episodes).__name__}")
    return _json.loads(_metrics_json(_json.dumps(list(episodes)), _config_json(config, "config")))
