"""rlvmr: RLVMR's native ALFWorld engine, reply parser and verifiable rewards for Python.

    >>> import rlvmr
    >>> env = rlvmr.AlfworldEnv("valid_seen/<task>/<trial>/game.tw-pddl")
    >>> observation, info = env.reset()
    >>> observation, reward, done, info = env.step(info["admissible_commands"][0])

`AlfworldEnvs` steps many games at once on native threads. `parse_output` and `score` are
`rlvmr score`'s parser and scorer (rewards, meta-reasoning rewards, advantages of every
algorithm, metrics). Errors are Python exceptions carrying the Rust message.
"""

import json as _json

from ._native import WIN_REWARD, AlfworldEnv, AlfworldEnvs, games, parse_output, score_json as _score_json

__all__ = ["AlfworldEnv", "AlfworldEnvs", "games", "parse_output", "score", "WIN_REWARD"]


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
    if config is not None and not isinstance(config, dict):
        raise TypeError(f"config must be a dict, not {type(config).__name__}")
    if algo is not None:
        config = dict(config or {})
        config["advantage"] = dict(config.get("advantage", {}), algo=algo)
    config_json = None if config is None else _json.dumps(config)
    return _json.loads(_score_json(_json.dumps(list(episodes)), config_json))
