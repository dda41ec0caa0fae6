"""Group-normalised advantages for ragged groups (group sizes differ per prompt).

    A_j = (r_j - mean(r_g)) / (std(r_g) + eps)       j in group g          (GRPO)
    A_j =  r_j - mean(r_g)                           normalize_std=False   (Dr. GRPO)

`std` is the unbiased sample standard deviation, as in verl's `compute_grpo_outcome_advantage` and
TRL's `GRPOTrainer` (both use `torch.std`). A group of one rollout has no baseline: its advantage is 0
(verl would return the raw score there). A group whose rewards are all equal gets advantages of
exactly 0, whatever the dtype: its mean is not exact in floating point (seven rewards of 0.7 in
float32 leave r - mean ~ 6e-8, which the eps-guarded division turns into +0.056), and an exact 0 is
what lets the learner skip those rollouts.

Rewards are laid out flat, groups back to back (see rollalloc.types): `rewards` (R,),
`group_sizes` (G,) with sum(group_sizes) == R.
"""

from __future__ import annotations

import numpy as np


def _check(n_rewards: int, group_sizes: np.ndarray) -> None:
    if group_sizes.ndim != 1 or (len(group_sizes) and group_sizes.min() < 1):
        raise ValueError("group_sizes must be a 1-D array of positive sizes")
    if int(group_sizes.sum()) != n_rewards:
        raise ValueError(
            f"group_sizes sum to {int(group_sizes.sum())} but there are {n_rewards} rewards"
        )


def group_advantages(
    rewards: np.ndarray, group_sizes: np.ndarray, normalize_std: bool = True, eps: float = 1e-6
) -> np.ndarray:
    """Advantages (R,) of flat ragged rewards (R,) in groups of `group_sizes` (G,)."""
    r = np.asarray(rewards, dtype=np.float64)  # (R,)
    sizes = np.asarray(group_sizes, dtype=np.int64)  # (G,)
    _check(len(r), sizes)
    bad = np.flatnonzero(~np.isfinite(r))
    if len(bad):
        raise ValueError(f"group_advantages: reward {r[bad[0]]} at row {bad[0]} is not finite")
    if len(sizes) == 0:
        return np.zeros(0)
    gidx = np.repeat(np.arange(len(sizes)), sizes)  # (R,) group of each rollout
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])  # (G,) first rollout of each group
    spread = np.maximum.reduceat(r, starts) - np.minimum.reduceat(r, starts)  # (G,) max - min
    mean = np.bincount(gidx, weights=r, minlength=len(sizes)) / sizes  # (G,)
    centred = r - mean[gidx]  # (R,)
    if normalize_std:
        ss = np.bincount(gidx, weights=centred**2, minlength=len(sizes))  # (G,)
        std = np.sqrt(ss / np.maximum(sizes - 1, 1))  # (G,) unbiased
        centred = centred / (std[gidx] + eps)
    # `!= 0` (not `> 0`) so that a NaN reward still shows up as a NaN advantage
    return np.where((sizes[gidx] > 1) & (spread[gidx] != 0), centred, 0.0)


def group_advantages_torch(rewards, group_sizes, normalize_std: bool = True, eps: float = 1e-6):
    """Same as `group_advantages` on torch tensors (keeps device and dtype of `rewards`)."""
    import torch

    r = rewards if torch.is_tensor(rewards) else torch.as_tensor(rewards, dtype=torch.float32)
    sizes = torch.as_tensor(group_sizes, dtype=torch.long, device=r.device)  # (G,)
    _check(r.numel(), np.asarray(sizes.cpu()))
    if sizes.numel() == 0:
        return torch.zeros(0, dtype=r.dtype, device=r.device)
    gidx = torch.repeat_interleave(torch.arange(sizes.numel(), device=r.device), sizes)  # (R,)
    n = sizes.to(r.dtype)  # (G,)
    hi = torch.zeros_like(n).scatter_reduce(0, gidx, r, reduce="amax", include_self=False)  # (G,)
    lo = torch.zeros_like(n).scatter_reduce(0, gidx, r, reduce="amin", include_self=False)  # (G,)
    mean = torch.zeros_like(n).index_add_(0, gidx, r) / n  # (G,)
    centred = r - mean[gidx]  # (R,)
    if normalize_std:
        ss = torch.zeros_like(n).index_add_(0, gidx, centred**2)  # (G,)
        std = torch.sqrt(ss / torch.clamp(n - 1, min=1))  # (G,) unbiased
        centred = centred / (std[gidx] + eps)
    keep = (sizes[gidx] > 1) & ((hi - lo)[gidx] != 0)  # (R,) not a singleton, not all-equal
    return torch.where(keep, centred, torch.zeros_like(centred))
