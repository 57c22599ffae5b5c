"""rlvmr.verl_agent against the interface verl-agent's ALFWorld environment manager uses
(its documented shapes; no verl install needed)."""

import os

import pytest

import rlvmr
from rlvmr.verl_agent import build_alfworld_envs

DATA = os.environ.get("ALFWORLD_DATA")


@pytest.fixture()
def alf_config(tmp_path):
    """An ALFWorld config as verl-agent ships it: dataset paths under $ALFWORLD_DATA and the
    task types to play."""
    yaml = pytest.importorskip("yaml")
    path = tmp_path / "config_tw.yaml"
    path.write_text(yaml.safe_dump({
        "dataset": {
            "data_path": "$ALFWORLD_DATA/json_2.1.1/train",
            "eval_id_data_path": "$ALFWORLD_DATA/json_2.1.1/valid_seen",
            "eval_ood_data_path": "$ALFWORLD_DATA/json_2.1.1/valid_unseen",
        },
        "env": {"type": "AlfredTWEnv", "task_types": [1, 2, 3]},
    }))
    return str(path)


def split_of(gamefile):
    return gamefile.split("json_2.1.1/")[1].split("/")[0]


def test_reset_and_step_have_verl_agents_shapes_and_groups_share_a_game(alf_config):
    envs = build_alfworld_envs(alf_config, seed=3, env_num=4, group_n=2, is_train=True)
    observations, images, infos = envs.reset()
    assert images is None and len(observations) == len(infos) == 8
    assert all(isinstance(o, str) and o.startswith("-= Welcome to TextWorld") for o in observations)
    for info in infos:
        assert set(info) == {"won", "admissible_commands", "extra.gamefile"}
        assert info["won"] is False and "look" in info["admissible_commands"]
        assert split_of(info["extra.gamefile"]) == "train"
        task = info["extra.gamefile"].split("/")[-3].split("-")[0]
        assert task in {"pick_and_place_simple", "look_at_obj_in_light", "pick_clean_then_place_in_recep"}
    games = [i["extra.gamefile"] for i in infos]
    assert all(games[2 * g] == games[2 * g + 1] for g in range(4)), "a group plays one game"
    assert envs.get_admissible_commands == [i["admissible_commands"] for i in infos]
    actions = [i["admissible_commands"][0] for i in infos]
    observations, images, rewards, dones, infos = envs.step(actions)
    assert images is None and len(observations) == len(rewards) == len(dones) == len(infos) == 8
    assert all(r == 0.0 for r in rewards) and not any(dones)
    assert observations[0] == observations[1], "same game, same command, same observation"
    assert envs.get_admissible_commands == [i["admissible_commands"] for i in infos]
    envs.close()


def test_the_seed_fixes_the_training_games_and_evaluation_walks_its_split(alf_config):
    def games(seed, **kwargs):
        envs = build_alfworld_envs(alf_config, seed, 3, 1, **kwargs)
        drawn = [[i["extra.gamefile"] for i in envs.reset()[2]] for _ in range(2)]
        envs.close()
        return drawn

    assert games(5) == games(5)
    assert games(5) != games(6)
    seen = games(0, is_train=False)
    assert all(split_of(g) == "valid_seen" for g in seen[0] + seen[1])
    assert len(set(seen[0] + seen[1])) == 6, "evaluation walks distinct games in order"
    unseen = games(0, is_train=False, env_kwargs={"eval_dataset": "eval_out_of_distribution"})
    assert all(split_of(g) == "valid_unseen" for g in unseen[0])


def test_without_a_config_the_data_comes_from_alfworld_data():
    envs = build_alfworld_envs(None, 0, 2, 2, is_train=False)
    assert envs.data == DATA
    assert len(envs.games) == len(rlvmr.games("valid_seen", data=DATA))
    assert len(envs.reset()[0]) == 4


def test_max_steps_ends_episodes():
    envs = build_alfworld_envs(None, 0, 1, 2, env_kwargs={"max_steps": 2})
    envs.reset()
    assert envs.step(["look", "look"])[3] == [False, False]
    assert envs.step(["look", "look"])[3] == [True, True]


def test_bad_use_raises(alf_config, tmp_path):
    with pytest.raises(FileNotFoundError, match="no such file"):
        build_alfworld_envs(str(tmp_path / "missing.yaml"), 0, 1, 1)
    with pytest.raises(ValueError, match="eval_dataset"):
        build_alfworld_envs(alf_config, 0, 1, 1, is_train=False, env_kwargs={"eval_dataset": "test"})
    with pytest.raises(ValueError, match="at least 1"):
        build_alfworld_envs(alf_config, 0, 0, 1)
    envs = build_alfworld_envs(alf_config, 0, 1, 2)
    with pytest.raises(RuntimeError, match="before reset"):
        envs.step(["look", "look"])
    envs.reset()
    with pytest.raises(ValueError, match="1 actions for 2 environments"):
        envs.step(["look"])
    with pytest.raises(TypeError):
        envs.step([None, "look"])
    envs.close()
    with pytest.raises(RuntimeError):
        envs.step(["look", "look"])
    with pytest.raises(ValueError, match="task type 7"):
        rlvmr.games("train", data=DATA, task_types=[7])
    with pytest.raises(ValueError, match="split"):
        rlvmr.games("test", data=DATA)
