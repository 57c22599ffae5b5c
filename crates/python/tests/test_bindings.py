"""The Python bindings against the Rust CLI on the same games and rollouts, and bad input.

Needs the release CLI (`RLVMR_BIN`, default target/release/rlvmr of the repository) and the
ALFWorld data (`ALFWORLD_DATA`: a folder holding json_2.1.1/ or the zip; tests/CI use
../shared/alfworld). tools/test_python.sh sets both.
"""

import json
import os
import subprocess
import zipfile
from pathlib import Path

import pytest

import rlvmr

ROOT = Path(__file__).resolve().parents[3]
BIN = os.environ.get("RLVMR_BIN", str(ROOT / "target" / "release" / "rlvmr"))
DATA = os.environ.get("ALFWORLD_DATA", str(ROOT.parent / "shared" / "alfworld"))


def game_paths():
    """Every game path relative to the data folder, sorted."""
    data = Path(DATA)
    archive = data if data.suffix == ".zip" else data / "json_2.1.1.zip"
    if archive.is_file():
        names = zipfile.ZipFile(archive).namelist()
    else:
        names = [str(p.relative_to(data)) for p in (data / "json_2.1.1").rglob("game.tw-pddl")]
    return sorted(n for n in names if n.endswith("/game.tw-pddl"))


GAMES = game_paths()
def spread(games, per_split=4):
    """`per_split` games evenly spaced over each split's sorted games (so over task types)."""
    picked = []
    for split in ("train", "valid_seen", "valid_unseen"):
        of_split = [g for g in games if g.split("/")[1] == split]
        picked += of_split[:: max(1, len(of_split) // per_split)][:per_split]
    return picked


SAMPLE = spread(GAMES)


def walk(admissible, step):
    """A fixed pseudo-random choice among the admissible commands; every 5th step a command
    the game does not know."""
    if step % 5 == 4:
        return "dance with the fridge"
    return admissible[(step * 7 + 3) % len(admissible)]


def play(env, steps=12):
    """Plays the walk in a single environment: the commands and every step's result."""
    observation, info = env.reset()
    trace = [{"command": None, "observation": observation, "admissible_commands": info["admissible_commands"],
              "won": info["won"], "done": False, "reward": 0.0}]
    commands = []
    for step in range(steps):
        command = walk(info["admissible_commands"], step)
        observation, reward, done, info = env.step(command)
        commands.append(command)
        trace.append({"command": command, "observation": observation,
                      "admissible_commands": info["admissible_commands"], "won": info["won"],
                      "done": done, "reward": reward})
        if done:
            break
    return commands, trace


def cli(args, stdin):
    out = subprocess.run([BIN, *args], input=stdin, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_the_game_sample_spans_splits():
    assert len(GAMES) > 3000, f"{len(GAMES)} games under {DATA}"
    assert {g.split("/")[1] for g in SAMPLE} == {"train", "valid_seen", "valid_unseen"}
    assert len({g.split("/")[2].split("-")[0] for g in SAMPLE}) >= 4, "task types"


def test_single_environments_equal_the_cli_replay_byte_for_byte():
    traces, requests = [], []
    for game in SAMPLE:
        env = rlvmr.AlfworldEnv(game, data=DATA)
        commands, trace = play(env)
        assert env.gamefile == game
        traces.append(trace)
        requests.append(json.dumps({"game": game, "commands": commands}))
    lines = cli(["alfworld", "replay", "--data", DATA], "\n".join(requests) + "\n").splitlines()
    assert len(lines) == len(SAMPLE)
    for trace, line in zip(traces, lines):
        replayed = json.loads(line)["steps"]
        assert len(replayed) == len(trace)
        for ours, theirs in zip(trace, replayed):
            for key in ("command", "observation", "admissible_commands", "won", "done"):
                assert ours[key] == theirs[key], (key, ours, theirs)
            assert ours["reward"] == (rlvmr.WIN_REWARD if theirs["won"] else 0.0)


def test_vectorised_environments_equal_single_ones():
    envs = rlvmr.AlfworldEnvs(SAMPLE, data=DATA, threads=2)
    assert len(envs) == len(SAMPLE) and envs.gamefiles == SAMPLE
    singles = [rlvmr.AlfworldEnv(g, data=DATA) for g in SAMPLE]
    observations, infos = envs.reset()
    expected = [s.reset() for s in singles]
    assert observations == [o for o, _ in expected]
    assert infos == [i for _, i in expected]
    for step in range(8):
        commands = [walk(i["admissible_commands"], step) for i in infos]
        observations, rewards, dones, infos = envs.step(commands)
        for k, single in enumerate(singles):
            assert (observations[k], rewards[k], dones[k], infos[k]) == single.step(commands[k])
        assert envs.get_admissible_commands() == [i["admissible_commands"] for i in infos]
    envs.close()
    with pytest.raises(RuntimeError, match="closed"):
        envs.reset()


def test_a_finished_game_stays_finished_in_the_vector_and_raises_alone():
    game = SAMPLE[0]
    envs = rlvmr.AlfworldEnvs([game], data=DATA, max_steps=2)
    observations, _ = envs.reset()
    envs.step(["look"])
    last = envs.step(["look"])
    assert last[2] == [True]
    again = envs.step(["inventory"])
    assert again[0] == last[0] and again[1] == [0.0] and again[2] == [True]
    env = rlvmr.AlfworldEnv(game, data=DATA, max_steps=1)
    env.reset()
    assert env.step("look")[2] is True
    with pytest.raises(RuntimeError, match="over"):
        env.step("look")


def episodes_of_walks():
    """Episodes in `rlvmr score`'s schema: two groups of three rollouts of one game each, with
    replies of every tag, a think reply and malformed ones."""
    replies = [
        "<planning>find the object first</planning><action>{}</action>",
        "<explore>try somewhere new</explore><action>{}</action>",
        "<reflection>that failed, so change</reflection><action>{}</action>",
        "<monitor>on track</monitor><action>{}</action>",
        "<think>no tag</think><action>{}</action>",
        "no blocks at all {}",
    ]
    episodes = []
    for g, game in enumerate(SAMPLE[:2]):
        for rollout in range(3):
            env = rlvmr.AlfworldEnv(game, data=DATA)
            observation, info = env.reset()
            steps = []
            for step in range(6):
                command = walk(info["admissible_commands"], step + rollout)
                output = replies[(step + rollout + g) % len(replies)].format(command)
                steps.append({"observation": observation, "admissible_actions": info["admissible_commands"],
                              "output": output})
                observation, _, done, info = env.step(command)
                if done:
                    break
            episodes.append({"uid": f"game{g}", "won": rollout == 1, "steps": steps})
    return episodes


@pytest.mark.parametrize("algo", ["grpo_mr", "grpo", "gigpo", "rloo"])
def test_score_equals_the_cli(algo):
    episodes = episodes_of_walks()
    ours = rlvmr.score(episodes, algo=algo)
    stdin = "".join(json.dumps(e) + "\n" for e in episodes)
    theirs = [json.loads(line) for line in cli(["score", "--algo", algo], stdin).splitlines()]
    assert ours == theirs
    assert "advantage" in ours[0]["steps"][0] and "metrics" in ours[0]
    assert episodes == episodes_of_walks(), "the inputs were changed"


def test_parse_output_agrees_with_score():
    for episode in rlvmr.score(episodes_of_walks()):
        for step in episode["steps"]:
            parsed = rlvmr.parse_output(step["output"])
            assert parsed["format_valid"] == step["format_valid"]
            assert (parsed["tag"] or "none") == step["tag"]
            assert parsed["action"] == step["action"]
            assert parsed["invalid_reasons"] == step["invalid_reasons"]
    think = rlvmr.parse_output("<think>x</think><action>look</action>", style="think")
    assert think == {"tag": None, "reasoning": "x", "action": "look", "format_valid": True, "invalid_reasons": []}


def test_bad_input_raises_with_the_reason():
    with pytest.raises(FileNotFoundError, match="no-such-game"):
        rlvmr.AlfworldEnv("valid_seen/no-such-game/trial/game.tw-pddl", data=DATA)
    with pytest.raises(FileNotFoundError):
        rlvmr.AlfworldEnv("whatever", data="/nonexistent/folder")
    with pytest.raises(TypeError):
        rlvmr.AlfworldEnv(42)
    with pytest.raises(ValueError, match="max_steps"):
        rlvmr.AlfworldEnv(SAMPLE[0], data=DATA, max_steps=0)
    env = rlvmr.AlfworldEnv(SAMPLE[0], data=DATA)
    with pytest.raises(RuntimeError, match="before reset"):
        env.step("look")
    env.reset()
    with pytest.raises(TypeError):
        env.step(None)
    env.close()
    with pytest.raises(RuntimeError, match="closed"):
        env.step("look")
    envs = rlvmr.AlfworldEnvs(SAMPLE[:2], data=DATA)
    envs.reset()
    with pytest.raises(ValueError, match="1 commands for 2 environments"):
        envs.step(["look"])
    with pytest.raises(ValueError, match="threads"):
        rlvmr.AlfworldEnvs(SAMPLE[:1], data=DATA, threads=0)
    with pytest.raises(FileNotFoundError, match="no-such-game"):
        rlvmr.AlfworldEnvs([SAMPLE[0], "valid_seen/no-such-game/t/game.tw-pddl"], data=DATA)
    with pytest.raises(ValueError, match="style"):
        rlvmr.parse_output("x", style="xml")
    with pytest.raises(ValueError, match=r"episodes\[1\]"):
        rlvmr.score([episodes_of_walks()[0], {"uid": 3}])
    with pytest.raises(ValueError, match="score config"):
        rlvmr.score(episodes_of_walks(), config={"reward": {"no_such_key": 1}})
    with pytest.raises(ValueError, match="algo|variant"):
        rlvmr.score(episodes_of_walks(), algo="ppo")
    with pytest.raises(TypeError):
        rlvmr.score("not a list")
    with pytest.raises(TypeError):
        rlvmr.score([{"uid": "a", "won": True, "steps": [{"output": object()}]}])


def test_the_expert_wins_a_game_through_the_bindings():
    game = next(g for g in SAMPLE if g.split("/")[1] == "valid_seen")
    env = rlvmr.AlfworldEnv(game, data=DATA)
    observation, info = env.reset()
    expert = rlvmr.AlfworldExpert(observation)
    commands, rewards = [], []
    done = False
    while not done:
        command = expert.act(observation, info["admissible_commands"])
        assert command in info["admissible_commands"]
        observation, reward, done, info = env.step(command)
        commands.append(command)
        rewards.append(reward)
    assert info["won"] and rewards[-1] == rlvmr.WIN_REWARD and not any(rewards[:-1])
    replayed = json.loads(cli(["alfworld", "replay", "--data", DATA], json.dumps({"game": game, "commands": commands}) + "\n"))
    assert replayed["steps"][-1]["won"] and replayed["steps"][-1]["observation"] == observation
    with pytest.raises(ValueError, match="expert"):
        rlvmr.AlfworldExpert("no receptacles and no task here")
