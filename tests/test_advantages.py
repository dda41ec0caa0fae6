"""Ragged group advantages against a plain Python loop, and numpy against torch."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rollalloc.advantages import group_advantages, group_advantages_torch
from rollalloc.metrics import effective_prompt_ratio, group_reward_stats, mean_group_reward_var


def loop_advantages(rewards, sizes, normalize_std=True, eps=1e-6):
    out, start = [], 0
    for n in sizes:
        g = rewards[start : start + n]
        start += n
        if n == 1:
            out.append(0.0)
            continue
        mean = sum(g) / n
        std = math.sqrt(sum((x - mean) ** 2 for x in g) / (n - 1))
        for x in g:
            out.append((x - mean) / (std + eps) if normalize_std else x - mean)
    return out


@pytest.mark.parametrize("normalize_std", [True, False])
@pytest.mark.parametrize("seed", range(5))
def test_ragged_advantages_equal_plain_loop(seed, normalize_std):
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 9, size=12)
    rewards = rng.integers(0, 2, size=sizes.sum()).astype(float)
    if seed % 2:
        rewards = rng.random(sizes.sum())  # continuous rewards
    ref = loop_advantages(rewards.tolist(), sizes.tolist(), normalize_std)
    np.testing.assert_allclose(group_advantages(rewards, sizes, normalize_std), ref, atol=1e-12)
    torch = pytest.importorskip("torch")
    got = group_advantages_torch(torch.tensor(rewards, dtype=torch.float64), sizes, normalize_std)
    np.testing.assert_allclose(got.numpy(), ref, atol=1e-9)


def test_singleton_and_zero_variance_groups_get_zero():
    adv = group_advantages(np.array([1.0, 1, 1, 0.0, 1.0]), np.array([3, 1, 1]))
    assert (adv == 0).all()


def test_bad_sizes_raise():
    with pytest.raises(ValueError, match="sum to"):
        group_advantages(np.zeros(3), np.array([2, 2]))


def test_group_stats():
    mean, var = group_reward_stats(np.array([1.0, 0, 1, 1]), np.array([2, 2]))
    np.testing.assert_allclose(mean, [0.5, 1.0])
    np.testing.assert_allclose(var, [0.25, 0.0])
    assert effective_prompt_ratio(np.array([1.0, 0, 1, 1]), np.array([2, 2])) == 0.5
    assert mean_group_reward_var(np.array([1.0, 0, 1, 1]), np.array([2, 2])) == 0.125


@pytest.mark.parametrize("value", [0.7, 0.1, 0.3, 1 / 3, -0.7, 12.3])
def test_all_equal_groups_get_exactly_zero_in_every_dtype(value):
    # In exact arithmetic r - mean(r) = 0 for a group of equal rewards, so its advantage is 0 (GRPO
    # and Dr. GRPO alike); in float32 seven rewards of 0.7 leave r - mean ~ 6e-8 and 6e-8 / (0 +
    # 1e-6) = +0.056, in float64 ~1e-10: neither is 0, and the learner's skip would not apply.
    sizes = np.array([7, 3, 11, 2, 16])
    rewards = np.concatenate([np.full(7, value), [1.0, 0.0, 1.0], np.full(11, value), [1.0, 1.0]])
    rewards = np.concatenate([rewards, np.full(16, value)])
    equal = np.repeat([True, False, True, True, True], sizes)  # rollouts of all-equal groups
    torch = pytest.importorskip("torch")
    for normalize_std in (True, False):
        got = {
            "numpy": group_advantages(rewards, sizes, normalize_std),
            "torch32": group_advantages_torch(
                torch.tensor(rewards, dtype=torch.float32), sizes, normalize_std
            ).numpy(),
            "torch64": group_advantages_torch(
                torch.tensor(rewards, dtype=torch.float64), sizes, normalize_std
            ).numpy(),
        }
        for name, adv in got.items():
            assert (adv[equal] == 0).all(), (name, normalize_std, adv[equal][:3])
            assert (adv[~equal] != 0).all(), name  # the 1, 0, 1 group keeps its signal
