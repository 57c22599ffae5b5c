"""RLVMR's advantage (GRPO-MR) for verl's trainer, on tensors.

verl computes advantages in `compute_advantage` (verl/trainer/ppo/ray_trainer.py) from the
batch's `token_level_rewards` and `response_mask` (tensors of shape `(samples, response
length)`) and its `uid` (one group id per sample). In verl-agent every sample is one step of
an episode. `compute_grpo_mr_advantage` takes those, plus each step's meta-reasoning tag and
reward, and returns `(advantages, returns)` of the same shape, type, dtype and device as
`token_level_rewards` (torch tensors or numpy arrays):

    A_i = N(R_i) over the samples of uid_i  +  w * N(mr_i) over the samples of (uid_i, tag_i)

where `R_i` is the sum of sample i's token rewards (10 x won - 0.1 x invalid format in the
published runs), `N(x) = (x - mean) / (unbiased std + epsilon)` (`mode="mean_norm"`: `x - mean`;
a group of one sample: mean 0, std 1), and `A_i` is spread over the sample's response tokens.
This is the reference form of `rlvmr score` and `rlvmr train`, computed by the same Rust code.

`meta_reasoning_rewards` gives the tags and rewards from the decoded replies, the episode
outcomes and each step's admissible commands, as `rlvmr score` scores them.
"""

from . import _native
from . import score as _score

MODES = ("mean_std_norm", "mean_norm")


def _floats(values, name):
    """A flat list of floats from a tensor, array or sequence."""
    if hasattr(values, "detach"):
        values = values.detach()
    if hasattr(values, "tolist"):
        values = values.tolist()
    try:
        return [float(v) for v in values]
    except (TypeError, ValueError) as e:
        raise TypeError(f"{name}: expected one number per sample ({e})") from None


def _strings(values, name):
    if hasattr(values, "tolist"):
        values = values.tolist()
    if isinstance(values, (str, bytes)):
        raise TypeError(f"{name}: expected one entry per sample, not a string")
    return [str(v) for v in values]


def _like(reference, values):
    """`values` (a list) as a 1-D tensor or array of `reference`'s kind, dtype and device."""
    if hasattr(reference, "new_tensor"):  # torch
        return reference.new_tensor(values)
    import numpy

    return numpy.asarray(values, dtype=reference.dtype)


def compute_grpo_mr_advantage(token_level_rewards, response_mask, index, tags, mr_rewards,
                              epsilon=1e-6, step_advantage_w=1.0, mode="mean_std_norm", tag_scope="uid"):
    """GRPO-MR advantages of a verl batch: `(advantages, returns)`, both `(samples, length)`.

    `token_level_rewards`, `response_mask`: tensors (or numpy arrays) of shape
    `(samples, length)`; `index`: the group id of each sample (verl's `uid`); `tags`: each
    sample's tag (`planning`, `explore`, `reflection`, `monitor`; `none` or None for a reply
    whose format is invalid); `mr_rewards`: each sample's meta-reasoning reward.
    `step_advantage_w`: the tag term's weight w. `tag_scope="batch"` groups tags over the whole
    batch instead of within each uid. Returns equal advantages and returns, as verl's GRPO does.
    """
    shape = tuple(getattr(token_level_rewards, "shape", ()))
    if len(shape) != 2:
        raise ValueError(f"token_level_rewards must be 2-D (samples, length), got shape {shape}")
    if tuple(getattr(response_mask, "shape", ())) != shape:
        raise ValueError(f"response_mask has shape {tuple(getattr(response_mask, 'shape', ()))}, "
                         f"token_level_rewards {shape}")
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}: use {' or '.join(MODES)}")
    if tags is None:
        raise ValueError("tags: one tag per sample is needed (use rlvmr.parse_output or meta_reasoning_rewards)")
    tags = [None if t is None else str(t) for t in (tags.tolist() if hasattr(tags, "tolist") else tags)]
    scores = _floats(token_level_rewards.sum(-1), "token_level_rewards")
    advantages = _native.grpo_mr_advantages(
        scores, _floats(mr_rewards, "mr_rewards"), _strings(index, "index"), tags,
        w=float(step_advantage_w), epsilon=float(epsilon), norm=mode, tag_scope=tag_scope)
    per_token = _like(token_level_rewards, advantages)[:, None] * response_mask
    returns = per_token.clone() if hasattr(per_token, "clone") else per_token.copy()
    return per_token, returns


def meta_reasoning_rewards(responses, traj_index, index, won, admissible_commands,
                           observations=None, config=None):
    """Each sample's tag and rewards, scored as `rlvmr score` scores whole episodes.

    Samples are steps: `responses[i]` the decoded reply, `traj_index[i]` its episode
    (verl-agent's `traj_uid`), `index[i]` its group (`uid`), `won[i]` whether its episode
    was won, `admissible_commands[i]` the commands admissible when it was taken,
    `observations[i]` the observation it answered (GiGPO's anchor; optional). The samples of an
    episode are its steps in batch order. `config`: `rlvmr.score`'s config dict.

    Returns a dict of lists, one entry per sample: `tags` (`none` for an invalid format),
    `mr_rewards`, `outcome_rewards` (10 x won - 0.1 x invalid format, the step's share of the
    episode term), `format_valid`, `actions` and `admissible`.
    """
    responses, traj_index, index = list(responses), _strings(traj_index, "traj_index"), _strings(index, "index")
    won = won.tolist() if hasattr(won, "tolist") else list(won)
    admissible_commands = list(admissible_commands)
    observations = [""] * len(responses) if observations is None else list(observations)
    counts = {len(x) for x in (traj_index, index, won, admissible_commands, observations)}
    if counts != {len(responses)}:
        raise ValueError(f"one entry per sample: {len(responses)} responses, {len(traj_index)} traj_index, "
                         f"{len(index)} index, {len(won)} won, {len(admissible_commands)} admissible_commands, "
                         f"{len(observations)} observations")
    episodes, where = {}, []
    for i, traj in enumerate(traj_index):
        episode = episodes.get(traj)
        if episode is None:
            episode = episodes[traj] = {"uid": index[i], "won": bool(won[i]), "steps": []}
        elif episode["uid"] != index[i] or episode["won"] != bool(won[i]):
            raise ValueError(f"sample {i}: episode {traj!r} has uid {episode['uid']!r} and won {episode['won']} "
                             f"at its first step, but uid {index[i]!r} and won {bool(won[i])} here")
        where.append((traj, len(episode["steps"])))
        episode["steps"].append({
            "output": str(responses[i]),
            "observation": str(observations[i]),
            "admissible_actions": [str(c) for c in admissible_commands[i]],
        })
    scored = dict(zip(episodes, _score(list(episodes.values()), config)))
    steps = [scored[traj]["steps"][t] for traj, t in where]
    return {
        "tags": [s["tag"] for s in steps],
        "mr_rewards": [s["mr_reward"] for s in steps],
        "outcome_rewards": [s["reward"] for s in steps],
        "format_valid": [s["format_valid"] for s in steps],
        "actions": [s["action"] for s in steps],
        "admissible": [s["admissible"] for s in steps],
    }
