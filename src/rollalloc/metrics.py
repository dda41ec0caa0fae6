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


def concentration(trials: np.ndarray) -> dict[str, float]:
    """How a run spread its rollouts over the pool, from each prompt's rollout count (N,) (the
    allocator's `trials` column): prompts_seen (count > 0), share_top_tenth (the share of all
    rollouts on the ceil(N / 10) prompts with the most), max_per_prompt and cv (std / mean of the
    counts). Uniform GRPO over whole epochs: cv 0 and ceil(N / 10) / N (0.1 where 10 divides N); a narrow ranking: share near 1. A
    repeated prompt teaches the held-out set less than a fresh one (docs/simulator.md, "Session
    32"), so this is what to check when an allocator loses to GRPO on a mostly informative pool."""
    t = np.asarray(trials, dtype=np.float64)  # (N,)
    total = float(t.sum())
    if len(t) == 0 or total <= 0:
        return {"prompts_seen": 0, "share_top_tenth": 0.0, "max_per_prompt": 0, "cv": 0.0}
    k = -(-len(t) // 10)  # ceil(N / 10)
    top = np.partition(t, len(t) - k)[len(t) - k :]  # (k,) the k largest, O(N)
    return {
        "prompts_seen": int((t > 0).sum()),
        "share_top_tenth": float(top.sum() / total),
        "max_per_prompt": int(t.max()),
        "cv": float(t.std() / t.mean()),
    }
