"""`build_prompt`, `carried_plan` and `metrics` against `rlvmr eval`: the prompts the CLI
recorded while playing, rebuilt step by step from its own trajectories, byte for byte; and
its summary's figures recomputed from the same trajectories."""

import json
import subprocess
import tomllib

import pytest

import rlvmr
from test_bindings import BIN, DATA


@pytest.fixture(scope="module")
def evaluation(tmp_path_factory):
    """A random policy's evaluation of 8 L0 test games (random replies carry all four tags)."""
    out = tmp_path_factory.mktemp("eval")
    subprocess.run([BIN, "eval", "--policy", "random", "--split", "L0", "--episodes", "8", "--max-steps", "12",
                    "--data", DATA, "--out", str(out)], check=True, capture_output=True, timeout=300)
    episodes = [json.loads(line) for line in (out / "trajectories.jsonl").read_text().splitlines()]
    config = tomllib.loads((out / "config.toml").read_text())
    summary = json.loads((out / "summary.json").read_text())
    return episodes, config, summary


@pytest.mark.parametrize("overrides", [{}, {"history": 2, "recent_outputs": 1, "compact": True}, {"history": "all", "instructions": False}])
def test_prompts_equal_the_ones_the_cli_played_with(evaluation, overrides):
    episodes, config, _ = evaluation
    prompt_config = config["prompt"]
    checked = 0
    for episode in episodes:
        plan, history = None, []
        for i, step in enumerate(episode["steps"]):
            prompt = rlvmr.build_prompt(episode["task"], step["observation"], step["admissible_actions"], step=i,
                                        history=history, plan=plan, config=prompt_config)
            assert prompt == step["prompt"], (episode["game"], i)
            # Other settings render, and differ from the recorded prompt where they should.
            other = rlvmr.build_prompt(episode["task"], step["observation"], step["admissible_actions"], step=i,
                                       history=history, plan=plan, config={**prompt_config, **overrides})
            assert (other == prompt) == (not overrides)
            history.append({"observation": step["observation"], "action": step["action"], "output": step["output"]})
            plan = rlvmr.carried_plan(plan, step["output"])
            checked += 1
    assert checked >= 8 * 12 - 20


def test_metrics_equal_the_cli_summary(evaluation):
    episodes, _, summary = evaluation
    got = rlvmr.metrics(episodes)
    assert got["episodes"] == summary["episodes"] == len(episodes)
    for key in ("success_rate", "invalid_rate", "inadmissible_rate", "repetitive_rate", "avg_actions"):
        assert got[key] == pytest.approx(summary[key], rel=1e-12, abs=1e-12), key
    assert {k: v for k, v in got["tag_mix"].items() if v} == pytest.approx(summary["tag_mix"])
    assert set(got["success_by_type"]) == set(summary["per_type"])
    for task_type, figures in summary["per_type"].items():
        assert got["success_by_type"][task_type] == figures["success_rate"]
    assert len(got["tag_mix"]) >= 4


def test_bad_prompt_input_raises():
    with pytest.raises(ValueError, match="unknown field `histroy`"):
        rlvmr.build_prompt("t", "o", config={"histroy": 2})
    with pytest.raises(ValueError, match=r"history\[0\] has no 'output'"):
        rlvmr.build_prompt("t", "o", history=[{"observation": "o", "action": "look"}])
    with pytest.raises(TypeError):
        rlvmr.build_prompt("t", "o", config="compact")
    with pytest.raises(ValueError, match="episodes"):
        rlvmr.metrics([{"uid": "u"}])
