"""The ScienceWorld bindings against `rlvmr sciworld replay` (the same simulator driven by the
CLI) on the same games and commands, the vector against single environments, a won game
(the gold path) and bad input. Each environment starts a JVM (about 2 s), so the games are
few."""

import json

import pytest

import rlvmr
from test_bindings import cli

GAMES = [("boil", 0), ("find-living-thing", 3)]


def walk(valid, step):
    """A fixed pseudo-random choice among the valid actions; every 4th step unknown input."""
    if step % 4 == 3:
        return "dance with the beaker"
    return valid[(step * 5 + 1) % len(valid)]


def test_the_official_split_lists_equal_the_cli():
    table = [line.split("\t") for line in cli(["sciworld", "tasks"], "").splitlines()[1:]]
    for column, split in ((3, "train"), (4, "dev"), (5, "test")):
        expected = []
        for row in table:
            first, last = map(int, row[column].split("-"))
            expected += [(row[1], v) for v in range(first, last + 1)]
        assert rlvmr.sciworld_games(split) == expected
    assert rlvmr.sciworld_games("train", tasks=["0"]) == [("boil", v) for v in range(14)]


def test_single_and_vectorised_environments_equal_the_cli_replay():
    envs = rlvmr.SciWorldEnvs(GAMES, threads=2)
    assert len(envs) == len(GAMES)
    observations, infos = envs.reset()
    traces = [[{"command": None, "observation": o, "score": i["score"], "done": False}] for o, i in zip(observations, infos)]
    for step in range(6):
        commands = [walk(i["admissible_commands"], step) for i in infos]
        observations, rewards, dones, infos = envs.step(commands)
        for k, trace in enumerate(traces):
            if trace[-1]["done"]:  # over: nothing was played, the last step comes back
                assert (observations[k], rewards[k], dones[k]) == (trace[-1]["observation"], 0.0, True)
                continue
            assert rewards[k] == infos[k]["score"] - trace[-1]["score"]
            trace.append({"command": commands[k], "observation": observations[k], "score": infos[k]["score"], "done": dones[k]})
    assert all(i["task_description"] for i in infos)
    envs.close()
    with pytest.raises(RuntimeError, match="closed"):
        envs.step(["look around"] * len(GAMES))

    requests = [json.dumps({"task": t, "variation": v, "commands": [s["command"] for s in trace[1:]]})
                for (t, v), trace in zip(GAMES, traces)]
    lines = cli(["sciworld", "replay"], "\n".join(requests) + "\n").splitlines()
    assert len(lines) == len(GAMES)
    for trace, line in zip(traces, lines):
        replayed = json.loads(line)["steps"]
        assert [{k: s[k] for k in ("command", "observation", "score", "done")} for s in replayed] == trace

    # One game alone plays the same.
    task, variation = GAMES[0]
    env = rlvmr.SciWorldEnv(task, variation)
    observation, info = env.reset()
    assert observation == traces[0][0]["observation"] and env.task_description == info["task_description"]
    for expected in traces[0][1:]:
        observation, _, done, info = env.step(expected["command"])
        assert (observation, info["score"], done) == (expected["observation"], expected["score"], expected["done"])
    env.close()
    with pytest.raises(RuntimeError, match="closed"):
        env.reset()


def test_the_gold_path_wins_and_the_step_limit_ends_an_episode():
    task, variation = "find-living-thing", 0
    gold = rlvmr.SciWorldGold().actions(task, variation)
    assert gold
    env = rlvmr.SciWorldEnv(task, variation)
    _, info = env.reset()
    total = info["score"]
    for command in gold:
        _, reward, done, info = env.step(command)
        total += reward
    assert info["won"] and done and info["score"] == 100 and total == 100
    env.close()
    limited = rlvmr.SciWorldEnv(task, variation, step_limit=3)
    limited.reset()
    done, steps = False, 0
    while not done and steps < 5:
        _, _, done, info = limited.step("wait1")
        steps += 1
        assert done == (info["moves"] > 3), "done once the moves pass the step limit"
    assert done and not info["won"]
    limited.close()


def test_bad_input_raises():
    with pytest.raises(ValueError, match="unknown task `brew-coffee`"):
        rlvmr.SciWorldEnv("brew-coffee")
    with pytest.raises(ValueError, match="variation 999 is out of range"):
        rlvmr.SciWorldEnvs([("boil", 999)])
    with pytest.raises(FileNotFoundError, match="no-such.jar"):
        rlvmr.SciWorldEnv("boil", jar="/no-such.jar")
    with pytest.raises(ValueError, match="step_limit"):
        rlvmr.SciWorldEnv("boil", step_limit=0)
    with pytest.raises(ValueError, match="unknown split"):
        rlvmr.sciworld_games("holdout")
    with pytest.raises(TypeError):
        rlvmr.SciWorldEnvs(["boil"])
    with pytest.raises(ValueError, match="unknown task"):
        rlvmr.sciworld_games("test", tasks=["brew-coffee"])
