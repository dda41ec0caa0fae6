"""Rollouts to target (BENCHMARKS.md) as pure numpy functions.

For strategies S, each run (strategy, seed) is a list of evaluations (x_k, acc_k), x = cumulative
rollouts (or tokens, or wall seconds), x_0 = 0 at the initial policy.

    grid        0, d, 2d, ... up to the largest x of any run; d = median spacing of the evaluations
                (a summary takes the baseline's runs: adding a strategy moves no comparison)
    curve_s     accuracy of run s interpolated linearly on the grid; NaN beyond its last evaluation
    mean curve  mean over the strategy's seeds, where every seed has a value (NaN elsewhere)
    smoothed    trailing moving average over 3 grid points (= 3 evaluation points):
                    a_k = mean(c_{k-2}, c_{k-1}, c_k)     (fewer at the start)
    acc0        mean accuracy of the initial evaluations (x = 0; in a summary, the baseline's runs)
    target(f)   acc0 + f * (peak(baseline) - acc0), peak = max of the baseline's smoothed mean curve
    x_to_target the crossing of the smoothed curve with the target, interpolated between
                evaluations: k = the first grid point with a_k >= target; if k > 0,
                    x = g_{k-1} + (target - a_{k-1}) / (a_k - a_{k-1}) * (g_k - g_{k-1})
                (the straight line between the two grid points around the crossing, so a value
                resolves far finer than the evaluation spacing); None if it never gets there.
                k = 0 (the curve starts at or above the target) is reported by `crossing` as
                status "at_start": the target is no improvement, never a "0 rollouts" result.
    speedup[A][B] = x_to_target[B] / x_to_target[A]   (larger is better for A)

Per-seed values use the same target and the same interpolation on each seed's own smoothed curve.
The trailing window makes the reported point a little late for every strategy alike; it never
uses a future evaluation.

`first_reach_many` is the same crossing for a batch of curves (one target each), used by the
bootstrap of `rollalloc.report.bootstrap`.
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


def baseline_grid(xs: Sequence[np.ndarray], baseline_xs: Sequence[np.ndarray]) -> np.ndarray:
    """`common_grid` of every run `xs`, spaced as the baseline's evaluations `baseline_xs` (as
    every run's when no baseline run has two distinct points): a comparison of A and B does not
    move when another strategy, evaluated at another spacing, is added."""
    usable = any(len(np.unique(np.asarray(x))) > 1 for x in baseline_xs)
    return common_grid(xs, eval_spacing(baseline_xs) if usable else None)


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


REACH_TOL = 1e-12  # float round-off allowed when comparing a curve with its target

REACHED, NEVER, AT_START = "reached", "never", "at_start"


def first_reach(grid: np.ndarray, curve: np.ndarray, target: float) -> float | None:
    """Where `curve` first reaches `target` (up to 1e-12 of float round-off), interpolated linearly
    between the grid point before and the first grid point at or above the target; None if never.

    A curve at or above the target at its first grid point gives that grid point (0.0); `crossing`
    tells this case apart ("at_start")."""
    return crossing(grid, curve, target)[0]


def crossing(grid: np.ndarray, curve: np.ndarray, target: float) -> tuple[float | None, str]:
    """(x, status) of the first crossing: status "reached" (x interpolated between evaluations),
    "never" (x None) or "at_start" (x = grid[0]: the curve starts at or above the target)."""
    grid = np.asarray(grid, dtype=np.float64)
    curve = np.asarray(curve, dtype=np.float64)
    hit = np.flatnonzero(np.nan_to_num(curve, nan=-np.inf) >= target - REACH_TOL)
    if not len(hit):
        return None, NEVER
    k = int(hit[0])
    if k == 0:
        return float(grid[0]), AT_START
    return float(_interpolate(grid[k - 1], grid[k], curve[k - 1], curve[k], target)), REACHED


def _interpolate(g0, g1, c0, c1, target):
    """x on the line through (g0, c0), (g1, c1) where it equals target, clipped to [g0, g1];
    g1 where c0 is NaN (no value before the crossing to interpolate from). Works elementwise."""
    g0, g1, c0, c1 = (np.asarray(v, dtype=np.float64) for v in (g0, g1, c0, c1))
    with np.errstate(invalid="ignore", divide="ignore"):
        frac = np.clip((target - c0) / (c1 - c0), 0.0, 1.0)
    x = g0 + frac * (g1 - g0)
    return np.where(np.isnan(c0) | ~np.isfinite(frac), g1, x)


def first_reach_many(grid: np.ndarray, curves: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """`crossing` of every row of `curves` (B, K) with its own target (B,): x (B,), with +inf where
    a row never reaches its target and NaN where it starts at or above it ("at_start")."""
    grid = np.asarray(grid, dtype=np.float64)
    curves = np.asarray(curves, dtype=np.float64)
    targets = np.asarray(targets, dtype=np.float64).reshape(-1)
    hit = np.nan_to_num(curves, nan=-np.inf) >= targets[:, None] - REACH_TOL
    anyhit = hit.any(axis=1)
    k = np.argmax(hit, axis=1)
    km1 = np.maximum(k - 1, 0)
    rows = np.arange(len(curves))
    x = _interpolate(grid[km1], grid[k], curves[rows, km1], curves[rows, k], targets)
    x = np.where(anyhit, x, np.inf)
    return np.where(anyhit & (k == 0), np.nan, x)


def moving_average_rows(y: np.ndarray, window: int = SMOOTH_WINDOW) -> np.ndarray:
    """`moving_average` of every row of `y` (B, K)."""
    y = np.asarray(y, dtype=np.float64)
    if window < 1:
        raise ValueError(f"moving_average: window must be >= 1, got {window}")
    k = y.shape[1]
    z = np.zeros((y.shape[0], 1))
    c = np.concatenate([z, np.cumsum(np.nan_to_num(y), axis=1)], axis=1)
    cn = np.concatenate([z, np.cumsum(np.isnan(y), axis=1)], axis=1)
    idx = np.arange(k)
    lo = np.maximum(idx - window + 1, 0)
    out = (c[:, idx + 1] - c[:, lo]) / (idx + 1 - lo)
    out[(cn[:, idx + 1] - cn[:, lo]) > 0] = np.nan
    return out


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
