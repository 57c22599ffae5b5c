"""rlvmr.verl: GRPO-MR on verl-shaped tensors (numpy arrays, and torch tensors where torch
is installed) against `rlvmr.score` on the same episodes, a case worked by hand, and bad
input."""

import math
import random

import numpy as np
import pytest

import rlvmr
from rlvmr.verl import compute_grpo_mr_advantage, meta_reasoning_rewards

REPLIES = [
    "<planning>step 1: find the apple, step 2: heat it</planning><action>go to {a}</action>",
    "<explore>the apple may be in a drawer or on a counter</explore><action>go to {a}</action>",
    "<reflection>that failed, try elsewhere</reflection><action>open {a}</action>",
    "<monitor>apple found, next take it</monitor><action>take apple 1 from {a}</action>",
    "<action>go to {a}</action>",  # no reasoning: invalid format
    "<think>hmm</think><action>{a}</action>",  # not a tag of the tagged style: invalid
]
PLACES = ["countertop 1", "drawer 2", "fridge 1", "cabinet 3"]


def synthetic_batch(seed, groups=3, per_group=4):
    """Episodes of random replies; every group (uid) has won and lost episodes."""
    rng = random.Random(seed)
    episodes = []
    for g in range(groups):
        for k in range(per_group):
            steps = []
            for _ in range(rng.randint(1, 6)):
                place = rng.choice(PLACES)
                admissible = [f"go to {p}" for p in PLACES] + [f"open {place}"]
                steps.append({
                    "output": rng.choice(REPLIES).format(a=place),
                    "observation": f"You see {rng.choice(PLACES)}.",
                    "admissible_actions": admissible,
                })
            episodes.append({"uid": f"task-{g}", "won": k % 2 == 0, "steps": steps})
    return episodes


def flatten(episodes, length=7, seed=0):
    """verl-agent's step samples, step-major (step 0 of every episode, then step 1, ...), each
    step's outcome reward on the last token of a response of random length."""
    rng = random.Random(seed)
    order = [(e, t) for t in range(max(len(ep["steps"]) for ep in episodes))
             for e, ep in enumerate(episodes) if t < len(ep["steps"])]
    rewards = np.zeros((len(order), length), dtype=np.float64)
    mask = np.zeros((len(order), length), dtype=np.float64)
    for i, (e, t) in enumerate(order):
        used = rng.randint(1, length)
        mask[i, :used] = 1.0
        rewards[i, used - 1] = episodes[e]["steps"][t]["reward"]
    return order, rewards, mask


@pytest.mark.parametrize("mode,tag_scope", [("mean_std_norm", "uid"), ("mean_norm", "uid"), ("mean_std_norm", "batch")])
def test_tensor_advantage_equals_score_on_whole_episodes(mode, tag_scope):
    config = {"advantage": {"algo": "grpo_mr", "norm": mode, "tag_scope": tag_scope}}
    scored = rlvmr.score(synthetic_batch(seed=3), config)
    order, rewards, mask = flatten(scored)
    steps = [scored[e]["steps"][t] for e, t in order]
    advantages, returns = compute_grpo_mr_advantage(
        rewards, mask,
        index=np.array([scored[e]["uid"] for e, _ in order], dtype=object),
        tags=np.array([s["tag"] for s in steps], dtype=object),
        mr_rewards=np.array([s["mr_reward"] for s in steps]),
        mode=mode, tag_scope=tag_scope)
    assert advantages.shape == rewards.shape and advantages.dtype == rewards.dtype
    np.testing.assert_array_equal(returns, advantages)
    expected = np.array([s["advantage"] for s in steps])
    np.testing.assert_allclose(advantages[:, 0], expected, rtol=1e-12, atol=1e-12)
    # Spread over the response tokens only.
    np.testing.assert_array_equal(advantages, expected[:, None] * mask)
    assert len({s["tag"] for s in steps}) >= 4 and any(s["mr_reward"] for s in steps)


def test_worked_by_hand():
    # uid a: outcomes 10, 0, 0 (mean 10/3, unbiased std sqrt(100/3)); tags planning (mr 1, 0)
    # and none (alone: mean 0, std 1, mr 0). uid b: one sample, outcome 4 -> 4 / (1 + eps).
    rewards = np.array([[0.0, 10.0], [0.0, 0.0], [0.0, 0.0], [4.0, 0.0]])
    mask = np.ones_like(rewards)
    advantages, _ = compute_grpo_mr_advantage(
        rewards, mask, index=["a", "a", "a", "b"], tags=["planning", "planning", None, "monitor"],
        mr_rewards=[1.0, 0.0, 0.0, 0.0], epsilon=1e-6)
    std = math.sqrt(((10 - 10 / 3) ** 2 + 2 * (10 / 3) ** 2) / 2)
    episode = [(10 - 10 / 3) / (std + 1e-6), -(10 / 3) / (std + 1e-6), -(10 / 3) / (std + 1e-6), 4 / (1 + 1e-6)]
    tag = [0.5 / (math.sqrt(0.5) + 1e-6), -0.5 / (math.sqrt(0.5) + 1e-6), 0.0, 0.0]
    np.testing.assert_allclose(advantages[:, 1], [e + t for e, t in zip(episode, tag)], rtol=1e-12)
    half, _ = compute_grpo_mr_advantage(
        rewards, mask, index=["a", "a", "a", "b"], tags=["planning", "planning", None, "monitor"],
        mr_rewards=[1.0, 0.0, 0.0, 0.0], step_advantage_w=0.5)
    np.testing.assert_allclose(half[:, 1], [e + 0.5 * t for e, t in zip(episode, tag)], rtol=1e-12)


def test_float32_in_float32_out():
    rewards = np.array([[10.0], [0.0]], dtype=np.float32)
    advantages, _ = compute_grpo_mr_advantage(rewards, np.ones_like(rewards), ["u", "u"], ["monitor", "monitor"], [0, 0])
    assert advantages.dtype == np.float32
    assert advantages[0, 0] == pytest.approx(1 / math.sqrt(2), rel=1e-5)


def test_torch_tensors_in_torch_tensors_out():
    """verl hands torch tensors: the advantages come back as tensors of the rewards' dtype and
    device, equal to the numpy path, for float, bool and integer response masks (verl slices
    them from attention masks) and with the uids as verl's numpy object array. Skipped where
    torch is not installed (the CI venv); tools/test_python_torch.sh runs it."""
    torch = pytest.importorskip("torch")
    scored = rlvmr.score(synthetic_batch(seed=5))
    order, rewards, mask = flatten(scored)
    steps = [scored[e]["steps"][t] for e, t in order]
    uids = np.array([scored[e]["uid"] for e, _ in order], dtype=object)
    tags = [s["tag"] for s in steps]
    want, _ = compute_grpo_mr_advantage(rewards, mask, uids, tags, [s["mr_reward"] for s in steps])
    for dtype, tolerance in ((torch.float64, 1e-12), (torch.float32, 1e-5)):
        for mask_dtype in (dtype, torch.bool, torch.int64):
            token_rewards = torch.tensor(rewards, dtype=dtype)
            mr_rewards = torch.tensor([s["mr_reward"] for s in steps], dtype=dtype)
            advantages, returns = compute_grpo_mr_advantage(
                token_rewards, torch.tensor(mask).to(mask_dtype), uids, tags, mr_rewards)
            assert isinstance(advantages, torch.Tensor) and isinstance(returns, torch.Tensor)
            assert advantages.dtype == dtype and advantages.device == token_rewards.device
            assert tuple(advantages.shape) == rewards.shape
            assert returns is not advantages and torch.equal(returns, advantages)
            np.testing.assert_allclose(advantages.numpy(), want, rtol=tolerance, atol=tolerance)


def test_outcome_term_equals_verl_grpo():
    """With the tag term off (w = 0) GRPO-MR is GRPO: equal to verl's own
    `compute_grpo_outcome_advantage` (verl.trainer.ppo.core_algos) on the same torch tensors,
    with and without the division by the group's std, a group of one sample included.
    Skipped where verl is not installed; tools/test_python_torch.sh runs it."""
    torch = pytest.importorskip("torch")
    core_algos = pytest.importorskip("verl.trainer.ppo.core_algos")
    scored = rlvmr.score(synthetic_batch(seed=7, groups=4, per_group=5))
    order, rewards, mask = flatten(scored)
    steps = [scored[e]["steps"][t] for e, t in order]
    # One more sample, alone in its group: verl takes mean 0 and std 1 there.
    rewards = np.vstack([rewards, np.full((1, rewards.shape[1]), 0.5)])
    mask = np.vstack([mask, np.ones((1, mask.shape[1]))])
    uids = np.array([scored[e]["uid"] for e, _ in order] + ["alone"], dtype=object)
    tags = [s["tag"] for s in steps] + ["monitor"]
    mr_rewards = [s["mr_reward"] for s in steps] + [0.0]
    token_rewards = torch.tensor(rewards, dtype=torch.float32)
    response_mask = torch.tensor(mask, dtype=torch.float32)
    for by_std, mode in ((True, "mean_std_norm"), (False, "mean_norm")):
        theirs, _ = core_algos.compute_grpo_outcome_advantage(
            token_rewards.clone(), response_mask, uids, epsilon=1e-6, norm_adv_by_std_in_grpo=by_std)
        ours, _ = compute_grpo_mr_advantage(
            token_rewards, response_mask, uids, tags, mr_rewards, step_advantage_w=0.0, mode=mode)
        assert theirs.abs().max() > 0.5
        torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-5)


def test_meta_reasoning_rewards_from_step_samples_equal_score():
    episodes = synthetic_batch(seed=11)
    scored = rlvmr.score(episodes)
    order, _, _ = flatten(scored)
    got = meta_reasoning_rewards(
        responses=[episodes[e]["steps"][t]["output"] for e, t in order],
        traj_index=np.array([f"traj-{e}" for e, _ in order], dtype=object),
        index=[episodes[e]["uid"] for e, _ in order],
        won=np.array([episodes[e]["won"] for e, _ in order]),
        admissible_commands=[episodes[e]["steps"][t]["admissible_actions"] for e, t in order],
        observations=[episodes[e]["steps"][t]["observation"] for e, t in order])
    steps = [scored[e]["steps"][t] for e, t in order]
    assert got["tags"] == [s["tag"] for s in steps]
    assert got["mr_rewards"] == [s["mr_reward"] for s in steps]
    assert got["outcome_rewards"] == [s["reward"] for s in steps]
    assert got["format_valid"] == [s["format_valid"] for s in steps]
    assert got["admissible"] == [s["admissible"] for s in steps]


def test_bad_input_raises():
    rewards, mask = np.zeros((2, 3)), np.ones((2, 3))
    with pytest.raises(ValueError, match="one value per sample"):
        compute_grpo_mr_advantage(rewards, mask, ["u"], ["monitor", "monitor"], [0, 0])
    with pytest.raises(ValueError, match=r'tags\[1\] = "musing"'):
        compute_grpo_mr_advantage(rewards, mask, ["u", "u"], ["monitor", "musing"], [0, 0])
    with pytest.raises(ValueError, match="sample 0: `mr_reward` is not finite"):
        compute_grpo_mr_advantage(rewards, mask, ["u", "u"], ["monitor", "monitor"], [float("nan"), 0])
    with pytest.raises(ValueError, match="response_mask has shape"):
        compute_grpo_mr_advantage(rewards, np.ones((2, 4)), ["u", "u"], ["monitor", "monitor"], [0, 0])
    with pytest.raises(ValueError, match="2-D"):
        compute_grpo_mr_advantage(np.zeros(2), np.ones(2), ["u", "u"], ["monitor", "monitor"], [0, 0])
    with pytest.raises(ValueError, match="unknown mode"):
        compute_grpo_mr_advantage(rewards, mask, ["u", "u"], ["monitor", "monitor"], [0, 0], mode="z")
    with pytest.raises(ValueError, match="unknown tag_scope"):
        compute_grpo_mr_advantage(rewards, mask, ["u", "u"], ["monitor", "monitor"], [0, 0], tag_scope="z")
    with pytest.raises(ValueError, match="episode 't' has uid 'a'"):
        meta_reasoning_rewards(["x", "y"], ["t", "t"], ["a", "b"], [True, True], [[], []])
    with pytest.raises(ValueError, match="one entry per sample"):
        meta_reasoning_rewards(["x", "y"], ["t"], ["a", "a"], [True, True], [[], []])
