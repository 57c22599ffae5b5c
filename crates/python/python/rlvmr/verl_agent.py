"""A drop-in for verl-agent's ALFWorld package on the native engine.

verl-agent builds its ALFWorld environments with
`build_alfworld_envs(alf_config_path, seed, env_num, group_n, is_train=True, env_kwargs={})`
and drives them through `reset()`, `step(actions)`, `get_admissible_commands` and `close()`.
This module offers the same function and object, played by rlvmr's engine on native threads
in the calling process (no Ray actor per game):

- `reset()` returns `(text_observations, None, infos)` and `step(actions)` returns
  `(text_observations, None, rewards, dones, infos)`; each info holds `won`,
  `admissible_commands` and `extra.gamefile`; the reward is `10 * won`.
- `env_num * group_n` environments; each group of `group_n` consecutive environments plays
  one game (GRPO's group), as verl-agent seeds its workers `seed + i // group_n`.
- Games: ALFWorld's training games when `is_train`, else `env_kwargs["eval_dataset"]`:
  `eval_in_distribution` (valid_seen, the default) or `eval_out_of_distribution`
  (valid_unseen); the task types of the config's `env.task_types`; the data paths of the
  config's `dataset` section (`$ALFWORLD_DATA` expanded), else `$ALFWORLD_DATA`.
- Training draws each group's game at every reset with a seeded generator (seed + group);
  evaluation walks the games in order, group g of reset r playing game r * env_num + g.
  The split and filters are ALFWorld's; the order is rlvmr's own (not Python's `random`).
- `env_kwargs["max_steps"]` ends an episode after that many steps (default 50, ALFWorld's).

Switching a verl-agent run: in `agent_system/environments/env_package/alfworld/__init__.py`
import `build_alfworld_envs` from `rlvmr.verl_agent` instead of `.envs`.
"""

import os
import random

from ._native import AlfworldEnvs as _NativeEnvs
from ._native import games as _games

EVAL_DATASETS = {
    "eval_in_distribution": ("valid_seen", "eval_id_data_path"),
    "eval_out_of_distribution": ("valid_unseen", "eval_ood_data_path"),
}


def _load_config(path):
    """ALFWorld's YAML config as a dict; None or a missing path is an error naming it."""
    if path is None:
        return {}
    if not os.path.isfile(path):
        raise FileNotFoundError(f"ALFWorld config {path!r}: no such file")
    try:
        import yaml
    except ImportError as e:  # verl-agent installs PyYAML; a bare venv may not have it
        raise ImportError("reading an ALFWorld config needs PyYAML (pip install pyyaml)") from e
    with open(path) as f:
        config = yaml.safe_load(f) or {}
    if not isinstance(config, dict):
        raise ValueError(f"ALFWorld config {path!r}: not a mapping")
    return config


def _data_folder(config, key):
    """The folder holding json_2.1.1/: from the config's `dataset.<key>` (which names
    `.../json_2.1.1/<split>`), else $ALFWORLD_DATA, else ~/.cache/alfworld."""
    path = (config.get("dataset") or {}).get(key)
    if path:
        path = os.path.expandvars(os.path.expanduser(str(path))).rstrip("/")
        parts = path.split("/")
        if len(parts) >= 2 and parts[-2] == "json_2.1.1":
            return "/".join(parts[:-2]) or "/"
        return path
    return os.environ.get("ALFWORLD_DATA", os.path.expanduser("~/.cache/alfworld"))


class AlfworldEnvs:
    """`env_num * group_n` ALFWorld games with verl-agent's environment interface."""

    def __init__(self, alf_config_path, seed=0, env_num=1, group_n=1, is_train=True, env_kwargs=None):
        env_kwargs = dict(env_kwargs or {})
        if int(env_num) < 1 or int(group_n) < 1:
            raise ValueError(f"env_num and group_n must be at least 1 (got {env_num}, {group_n})")
        config = _load_config(alf_config_path)
        if is_train:
            split, key = "train", "data_path"
        else:
            dataset = env_kwargs.get("eval_dataset", "eval_in_distribution")
            if dataset not in EVAL_DATASETS:
                raise ValueError(f"unknown eval_dataset {dataset!r}: use {' or '.join(EVAL_DATASETS)}")
            split, key = EVAL_DATASETS[dataset]
        task_types = (config.get("env") or {}).get("task_types")
        self.data = _data_folder(config, key)
        self.games = _games(split, data=self.data, task_types=task_types)
        if not self.games:
            raise ValueError(f"no ALFWorld {split} games of task types {task_types} under {self.data}")
        self.seed, self.env_num, self.group_n = int(seed), int(env_num), int(group_n)
        self.num_processes = self.env_num * self.group_n
        self.is_train = bool(is_train)
        self.max_steps = int(env_kwargs.get("max_steps", 50))
        self._rngs = [random.Random(self.seed + g) for g in range(self.env_num)]
        self._resets = 0
        self._envs = None
        self._gamefiles = []
        self.prev_admissible_commands = [None] * self.num_processes

    def _next_games(self):
        """One game per group for this reset."""
        if self.is_train:
            return [rng.choice(self.games) for rng in self._rngs]
        start = self._resets * self.env_num
        return [self.games[(start + g) % len(self.games)] for g in range(self.env_num)]

    def _infos(self, infos):
        out = []
        for i, info in enumerate(infos):
            self.prev_admissible_commands[i] = info["admissible_commands"]
            out.append({
                "won": info["won"],
                "admissible_commands": info["admissible_commands"],
                "extra.gamefile": os.path.join(self.data, info["gamefile"]),
            })
        return out

    def reset(self):
        """New games for every group: `(text_observations, None, infos)`."""
        if self._envs is not None:
            self._envs.close()
        per_env = [game for game in self._next_games() for _ in range(self.group_n)]
        self._resets += 1
        self._envs = _NativeEnvs(per_env, data=self.data, max_steps=self.max_steps)
        observations, infos = self._envs.reset()
        return observations, None, self._infos(infos)

    def step(self, actions):
        """`actions[i]` in environment i: `(text_observations, None, rewards, dones, infos)`."""
        if self._envs is None:
            raise RuntimeError("step before reset")
        if len(actions) != self.num_processes:
            raise ValueError(f"{len(actions)} actions for {self.num_processes} environments")
        observations, rewards, dones, infos = self._envs.step(list(actions))
        return observations, None, rewards, dones, self._infos(infos)

    @property
    def get_admissible_commands(self):
        """The admissible commands of every environment as of its last reset or step."""
        return self.prev_admissible_commands

    def close(self):
        if self._envs is not None:
            self._envs.close()
        self._envs = None


def build_alfworld_envs(alf_config_path, seed, env_num, group_n, is_train=True, env_kwargs=None):
    """verl-agent's constructor, on the native engine."""
    return AlfworldEnvs(alf_config_path, seed, env_num, group_n, is_train, env_kwargs)
