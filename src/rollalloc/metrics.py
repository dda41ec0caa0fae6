"""Measures of wasted and useful rollouts, on ragged groups laid out flat (see rollalloc.types).

`rollouts_to_target` and the curve helpers of BENCHMARKS.md live in rollalloc.report.curves.
"""

from __future__ import annotations

import numpy as np

ZERO_STD_TOL = 1e-9
"""Rewards of a group whose spread is below this are "all equal" (continuous rewards included)."""


def group_reward_stats(
    rewards: np.ndarray, group_sizes: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Per-group mean and (population) variance of flat ragged rewards: shapes (G,), (G,)."""
    rewards = np.asarray(rewards, dtype=np.float64)
    group_sizes = np.asarray(group_sizes, dtype=np.int64)
    if len(group_sizes) == 0:
        return np.zeros(0), np.zeros(0)
    gidx = np.repeat(np.arange(len(group_sizes)), group_sizes)  # (R,)
    sizes = np.maximum(group_sizes, 1)
    mean = np.bincount(gidx, weights=rewards, minlength=len(sizes)) / sizes  # (G,)
    dev2 = (rewards - mean[gidx]) ** 2  # (R,)
    var = np.bincount(gidx, weights=dev2, minlength=len(sizes)) / sizes  # (G,)
    return mean, var


def effective_prompt_ratio(rewards: np.ndarray, group_sizes: np.ndarray) -> float:
    """Share of groups whose rewards are not all identical (the groups that carry a gradient)."""
    if len(group_sizes) == 0:
        return 0.0
    _, var = group_reward_stats(rewards, group_sizes)
    return float(np.mean(var > ZERO_STD_TOL**2))


def mean_group_reward_var(rewards: np.ndarray, group_sizes: np.ndarray) -> float:
    """Mean within-group reward variance: p(1-p) per group for binary rewards (Proposition 3.1)."""
    if len(group_sizes) == 0:
        return 0.0
    _, var = group_reward_stats(rewards, group_sizes)
    return float(var.mean())
