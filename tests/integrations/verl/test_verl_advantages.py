"""rollalloc's ragged group advantages equal verl's GRPO advantages (compute_grpo_outcome_advantage)."""

import numpy as np
import pytest
import torch
from verl import DataProto
from verl.trainer.ppo.core_algos import compute_grpo_outcome_advantage
from verl.trainer.ppo.ray_trainer import compute_advantage

from rollalloc.advantages import group_advantages


def _verl_grpo(rewards, sizes, normalize_std, resp_len=5, seed=0):
    """verl's advantage per rollout: rewards on the last response token, groups told apart by uid."""
    rng = np.random.default_rng(seed)
    r = len(rewards)
    lengths = rng.integers(1, resp_len + 1, r)
    mask = torch.zeros((r, resp_len))
    token_rewards = torch.zeros((r, resp_len))
    for i in range(r):
        mask[i, : lengths[i]] = 1
        token_rewards[i, lengths[i] - 1] = float(rewards[i])
    uid = np.repeat(np.array([f"g{g}" for g in range(len(sizes))], dtype=object), sizes)
    perm = rng.permutation(r)  # verl groups by uid, not by position: shuffle the rows
    adv, _ = compute_grpo_outcome_advantage(
        token_rewards[perm], mask[perm], uid[perm], norm_adv_by_std_in_grpo=normalize_std
    )
    out = np.empty(r)
    out[perm] = adv[:, 0].double().numpy()  # every response has >= 1 token; adv is constant on it
    return out


@pytest.mark.parametrize("normalize_std", [True, False])
@pytest.mark.parametrize("kind", ["binary", "continuous"])
def test_ragged_group_advantages_equal_verl(normalize_std, kind):
    rng = np.random.default_rng(1)
    for trial in range(20):
        sizes = rng.integers(2, 12, rng.integers(1, 9))  # ragged, no singletons
        n = int(sizes.sum())
        rewards = rng.integers(0, 2, n).astype(float) if kind == "binary" else rng.random(n)
        if trial == 0:
            rewards[: sizes[0]] = 1.0  # an all-equal group: zero advantage in both
        ours = group_advantages(rewards, sizes, normalize_std=normalize_std)
        theirs = _verl_grpo(rewards, sizes, normalize_std, seed=trial)
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-5, err_msg=f"sizes={sizes}")


def test_singleton_groups_are_the_one_documented_difference():
    # verl gives a one-rollout group mean 0 and std 1, so its advantage is the raw reward;
    # rollalloc gives 0 (no baseline, no signal). Strategies here never train singletons by default.
    rewards, sizes = np.array([1.0, 0.0, 1.0, 0.7]), np.array([3, 1])
    ours, theirs = group_advantages(rewards, sizes), _verl_grpo(rewards, sizes, True)
    np.testing.assert_allclose(ours[:3], theirs[:3], atol=1e-5)
    assert ours[3] == 0.0
    assert theirs[3] == pytest.approx(0.7 / (1 + 1e-6), abs=1e-5)


def test_verl_compute_advantage_on_a_ragged_dataproto():
    """Through verl's trainer-level compute_advantage, on a DataProto laid out as a TrainBatch."""
    rng = np.random.default_rng(3)
    sizes = np.array([6, 2, 9, 4])
    n = int(sizes.sum())
    rewards = rng.integers(0, 2, n).astype(float)
    mask = torch.ones((n, 3))
    token_rewards = torch.zeros((n, 3))
    token_rewards[:, -1] = torch.as_tensor(rewards, dtype=torch.float32)
    uid = np.repeat(np.array(["7:3", "7:9", "7:1", "7:4"], dtype=object), sizes)
    data = DataProto.from_single_dict(
        {"token_level_rewards": token_rewards, "response_mask": mask, "uid": uid}
    )
    data = compute_advantage(data, adv_estimator="grpo", norm_adv_by_std_in_grpo=True)
    np.testing.assert_allclose(
        data.batch["advantages"][:, 0].numpy(), group_advantages(rewards, sizes), atol=1e-5
    )
