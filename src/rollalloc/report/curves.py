"""Rollouts to target (BENCHMARKS.md) as pure numpy functions.

For strategies S, each run (strategy, seed) is a list of evaluations (x_k, acc_k), x = cumulative
rollouts (or tokens, or wall seconds), x_0 = 0 at the initial policy.

    grid        0, d, 2d, ... up to the largest x of any run; d = median spacing of the evaluations
    curve_s     accuracy of run s interpolated linearly on the grid; NaN beyond its last evaluation
    mean curve  mean over the strategy's seeds, where every seed has a value (NaN elsewhere)
    smoothed    trailing moving average over 3 grid points (= 3 evaluation points):
                    a_k = mean(c_{k-2}, c_{k-1}, c_k)     (fewer at the start)
    acc0        mean accuracy of the initial evaluations (x = 0)
    target(f)   acc0 + f * (peak(baseline) - acc0), peak = max of the baseline's smoothed mean curve
    x_to_target first grid point where the smoothed curve >= target; None if it never gets there
    speedup[A][B] = x_to_target[B] / x_to_target[A]   (larger is better for A)

Per-seed values use the same target on each seed's own smoothed curve. The trailing window makes
the reported point a little late for every strategy alike; it never uses a future evaluation.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

SMOOTH_WINDOW = 3


def eval_spacing(xs: Sequence[np.ndarray]) -> float:
    """Median positive spacing of consecutive evaluation points over all runs."""
    diffs = [np.diff(np.asarray(x, dtype=np.float64)) for x in xs if len(x) > 1]
    d = np.concatenate(diffs) if diffs else np.zeros(0)
    d = d[d > 0]
    if len(d) == 0:
        raise ValueError("eval_spacing: need at least one run with two distinct evaluation points")
    return float(np.median(d))


def common_grid(xs: Sequence[np.ndarray], spacing: float | None = None) -> np.ndarray:
    """Grid 0, d, 2d, ... covering every run's evaluations: (K,). d defaults to `eval_spacing`."""
    d = eval_spacing(xs) if spacing is None else float(spacing)
    if not d > 0:
        raise ValueError(f"common_grid: spacing must be positive, got {d}")
    hi = max(float(np.max(x)) for x in xs if len(x))
    k = int(np.floor(hi / d + 1e-9))
    return d * np.arange(k + 1, dtype=np.float64)


def interp_curve(x: np.ndarray, y: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """y(x) of one run linearly interpolated at `grid` (K,); NaN outside [x_0, x_last]."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if len(x) != len(y) or len(x) == 0:
        raise ValueError("interp_curve: x and y must be non-empty and of equal length")
    if np.any(np.diff(x) < 0):
        raise ValueError("interp_curve: x must be non-decreasing")
    out = np.interp(grid, x, y)
    out[(grid < x[0]) | (grid > x[-1])] = np.nan
    return out


def moving_average(y: np.ndarray, window: int = SMOOTH_WINDOW) -> np.ndarray:
    """Trailing moving average over `window` points (fewer at the start); NaN stays NaN."""
    y = np.asarray(y, dtype=np.float64)
    if window < 1:
        raise ValueError(f"moving_average: window must be >= 1, got {window}")
    c = np.concatenate([[0.0], np.cumsum(np.nan_to_num(y))])
    idx = np.arange(len(y))
    lo = np.maximum(idx - window + 1, 0)
    out = (c[idx + 1] - c[lo]) / (idx + 1 - lo)
    nan = np.isnan(y)
    if nan.any():  # any NaN inside the window makes the average NaN
        cn = np.concatenate([[0], np.cumsum(nan)])
        out[(cn[idx + 1] - cn[lo]) > 0] = np.nan
    return out


def seed_curves(
    xs: Sequence[np.ndarray],
    ys: Sequence[np.ndarray],
    grid: np.ndarray,
    window: int = SMOOTH_WINDOW,
) -> tuple[np.ndarray, np.ndarray]:
    """Smoothed per-seed curves (S, K) and the smoothed seed-mean curve (K,) on `grid`.

    The mean is taken before smoothing, over grid points where every seed has a value.
    """
    raw = np.stack([interp_curve(x, y, grid) for x, y in zip(xs, ys)])  # (S, K)
    per_seed = np.stack([moving_average(r, window) for r in raw])  # (S, K)
    mean = moving_average(raw.mean(axis=0), window)  # (K,) NaN where a seed is missing
    return per_seed, mean


def first_reach(grid: np.ndarray, curve: np.ndarray, target: float) -> float | None:
    """First grid point where `curve` >= `target` (up to 1e-12 of float round-off), or None."""
    hit = np.flatnonzero(np.nan_to_num(curve, nan=-np.inf) >= target - 1e-12)
    return float(grid[hit[0]]) if len(hit) else None


def target_value(acc0: float, peak: float, fraction: float) -> float:
    """acc0 + fraction * (peak - acc0)."""
    return float(acc0 + fraction * (peak - acc0))


def rollouts_to_target(
    xs: Sequence[np.ndarray],
    ys: Sequence[np.ndarray],
    target: float,
    grid: np.ndarray | None = None,
) -> tuple[float | None, list[float | None]]:
    """x to target of the seed-mean curve and of every seed, for runs (x_s, acc_s) of one strategy.

    Works for any cumulative x (rollouts, tokens, wall seconds); `grid` defaults to `common_grid(xs)`.
    """
    grid = common_grid(xs) if grid is None else grid
    per_seed, mean = seed_curves(xs, ys, grid)
    return first_reach(grid, mean, target), [first_reach(grid, c, target) for c in per_seed]


def speedups(to_target: dict[str, float | None]) -> dict[str, dict[str, float | None]]:
    """speedup[A][B] = to_target[B] / to_target[A] for every ordered pair A != B (None if either
    never reached the target)."""
    out: dict[str, dict[str, float | None]] = {}
    for a, ta in to_target.items():
        out[a] = {}
        for b, tb in to_target.items():
            if a != b:
                out[a][b] = None if (ta is None or tb is None or ta <= 0) else float(tb / ta)
    return out
