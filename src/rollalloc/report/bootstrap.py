"""Bootstrap intervals over seeds for a comparison (BENCHMARKS.md section 7).

One resample draws, for every strategy independently, as many seeds as it has, with replacement
(the strategies are independent runs: a seed number shared by two strategies does not pair them,
so their seeds are not resampled jointly). From the drawn runs it recomputes everything a summary
computes from all runs:

    acc0*      mean initial accuracy of the drawn runs of the baseline
    curve*_s   seed-mean curve of the drawn runs of s on the common grid, trailing 3-point average
    target*    acc0* + fraction * (peak(curve*_baseline) - acc0*)
    x*_s       crossing of curve*_s with target*, interpolated between evaluations (`curves.crossing`)
    tokens*_s  mean over the drawn runs of the tokens spent when each had spent x*_s rollouts
    final*_s   mean final accuracy (last evaluation, at equal budget) of the drawn runs

A resample where a strategy never reaches target* enters with x* = +inf (so a speedup of the others
over it is +inf and its own speedup 0; percentiles still work). A resample where the crossing is
undefined enters as NaN and is left out of the percentiles; its share is reported: the resampled
baseline did not rise above acc0* (target* is no improvement), or the curve starts at or above
target* ("at_start"), or both strategies of a speedup never reach it.

The interval is the percentile interval: the smallest values whose share of the (defined)
resamples at or below is >= (1 - level) / 2 and >= (1 + level) / 2 (numpy's "inverted_cdf"). The
RNG of each strategy is seeded by (seed, crc32 of its name), so summaries are deterministic and a
strategy's resamples do not change when other strategies are added; as acc0*, target* and the
grid's spacing come from the baseline alone, no interval of A against B does either.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from rollalloc.report import curves

DEFAULT_RESAMPLES = 2000
DEFAULT_SEED = 0
DEFAULT_LEVEL = 0.9

FASTER, SLOWER, WITHIN_NOISE, UNDEFINED = "faster", "slower", "within noise", "undefined"
HIGHER, LOWER = "higher", "lower"


def resample_counts(n_seeds: int, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """How often each of `n_seeds` seeds is drawn in each resample: (resamples, n_seeds), rows sum
    to n_seeds (seeds drawn uniformly with replacement)."""
    idx = rng.integers(0, n_seeds, size=(resamples, n_seeds))
    counts = np.zeros((resamples, n_seeds))
    np.add.at(counts, (np.arange(resamples)[:, None], idx), 1.0)
    return counts


def strategy_rng(seed: int, strategy: str) -> np.random.Generator:
    """The RNG of one strategy's resamples: (seed, crc32 of its name)."""
    return np.random.default_rng([int(seed), zlib.crc32(strategy.encode())])


def seed_counts(n_seeds: dict[str, int], resamples: int, seed: int) -> dict[str, np.ndarray]:
    """The standard draws of a comparison: counts[s] (resamples, n_seeds[s]) for every strategy,
    each from its own RNG (`strategy_rng`). What `resample` draws when it is given no counts, and
    what every other resampled statistic of a summary reuses (rollalloc.report.levels)."""
    if resamples < 1:
        raise ValueError(f"bootstrap: resamples must be >= 1, got {resamples}")
    return {s: resample_counts(n, resamples, strategy_rng(seed, s)) for s, n in n_seeds.items()}


def _weighted_mean(counts: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Mean of the drawn seeds' `values` (S, ...) for every resample: counts (B, S) -> (B, ...);
    NaN where a drawn seed's value is NaN."""
    values = np.asarray(values, dtype=np.float64)
    flat = values.reshape(values.shape[0], -1)
    nan = np.isnan(flat)
    out = counts @ np.nan_to_num(flat, nan=0.0, posinf=0.0) / counts.sum(axis=1, keepdims=True)
    out[(counts > 0).astype(np.float64) @ nan > 0] = np.nan
    inf = np.isposinf(flat)
    if inf.any():
        out[(counts > 0).astype(np.float64) @ inf > 0] = np.inf
    return out.reshape((counts.shape[0],) + values.shape[1:])


def _last_defined(curves2d: np.ndarray) -> np.ndarray:
    """Last non-NaN value of every row (NaN for an all-NaN row)."""
    ok = ~np.isnan(curves2d)
    k = curves2d.shape[1] - 1 - np.argmax(ok[:, ::-1], axis=1)
    out = curves2d[np.arange(len(curves2d)), k]
    return np.where(ok.any(axis=1), out, np.nan)


def ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """num / den for values in (0, +inf] (or NaN): +inf / x = +inf, x / +inf = 0, +inf / +inf and
    anything with NaN = NaN."""
    num, den = np.asarray(num, dtype=np.float64), np.asarray(den, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = num / den
    out[np.isinf(num) & np.isinf(den)] = np.nan
    out[(den <= 0) & ~np.isnan(den)] = np.nan
    return out


@dataclass
class Resamples:
    """The resampled statistics of a comparison; every array is (resamples,)."""

    acc0: np.ndarray
    target: np.ndarray
    baseline_gain_final: np.ndarray  # last value of the baseline's smoothed curve* - acc0*
    baseline_gain_peak: np.ndarray  # peak of the baseline's smoothed curve* - acc0*
    rollouts: dict[str, np.ndarray] = field(default_factory=dict)  # x*: +inf never, NaN undefined
    tokens: dict[str, np.ndarray] = field(default_factory=dict)  # tokens*: same conventions
    final: dict[str, np.ndarray] = field(default_factory=dict)  # final*

    def speedup(self, a: str, b: str) -> np.ndarray:
        """speedup*[a][b] = x*_b / x*_a (see `ratio`)."""
        return ratio(self.rollouts[b], self.rollouts[a])

    def final_diff(self, a: str, b: str) -> np.ndarray:
        """final*_a - final*_b."""
        return self.final[a] - self.final[b]


def resample(
    xs: dict[str, Sequence[np.ndarray]],
    ys: dict[str, Sequence[np.ndarray]],
    grid: np.ndarray,
    *,
    baseline: str,
    fraction: float,
    tokens: dict[str, Sequence[np.ndarray]] | None = None,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    counts: dict[str, np.ndarray] | None = None,
) -> Resamples:
    """Bootstrap a comparison: `xs[s][i]`, `ys[s][i]` are the cumulative rollouts and accuracies of
    strategy s, seed i (`tokens[s][i]` its cumulative tokens, optional); `grid` the common grid of
    the summary. Returns the `Resamples` described in the module docstring.

    `counts` (optional) replaces the draws: `counts[s]` (R, n_s) holds each seed's weight in each of
    R resamples (any non-negative weights with a positive row sum: m draws instead of n_s, or a
    0/1 half of the seeds); `resamples` and `seed` are then unused."""
    if counts is None:
        counts = seed_counts({s: len(xs[s]) for s in xs}, resamples, seed)
    else:
        counts = {s: np.asarray(counts[s], dtype=np.float64) for s in xs}
        for s, c in counts.items():
            if c.ndim != 2 or c.shape[1] != len(xs[s]) or np.any(c < 0) or np.any(c.sum(1) <= 0):
                raise ValueError(
                    f"bootstrap: counts[{s!r}] must be (resamples, {len(xs[s])}) non-negative "
                    "weights with positive row sums"
                )
        rows = {len(c) for c in counts.values()}
        if len(rows) != 1:
            raise ValueError(f"bootstrap: every strategy needs as many resamples, got {rows}")
    smoothed = {}
    for s in xs:
        raw = np.stack([curves.interp_curve(x, y, grid) for x, y in zip(xs[s], ys[s])])  # (S, K)
        smoothed[s] = curves.moving_average_rows(_weighted_mean(counts[s], raw))  # (B, K)
    acc0 = _weighted_mean(  # the baseline's drawn runs: target* depends on no other strategy
        counts[baseline], np.array([float(y[0]) for y in ys[baseline]], dtype=np.float64)
    )
    base = smoothed[baseline]
    with np.errstate(invalid="ignore"):
        all_nan = np.isnan(base).all(axis=1)
        peak = np.where(all_nan, np.nan, np.nanmax(np.where(all_nan[:, None], 0.0, base), axis=1))
    target = acc0 + fraction * (peak - acc0)
    out = Resamples(
        acc0=acc0,
        target=target,
        baseline_gain_final=_last_defined(base) - acc0,
        baseline_gain_peak=peak - acc0,
    )
    no_target = ~(peak - acc0 > 0)  # the resampled baseline never rose above acc0*
    for s in xs:
        x = curves.first_reach_many(grid, smoothed[s], target)
        x[no_target] = np.nan
        out.rollouts[s] = x
        out.final[s] = _weighted_mean(counts[s], np.array([float(y[-1]) for y in ys[s]]))
        if tokens is not None and tokens.get(s) is not None:
            per_seed = np.stack(
                [_spent_at(xr, tk, x) for xr, tk in zip(xs[s], tokens[s])]
            )  # (S, B)
            # mean over the drawn seeds of each resample's own crossing
            w = counts[s] / counts[s].sum(axis=1, keepdims=True)
            drawn = counts[s] > 0
            vals = np.where(drawn, per_seed.T, 0.0)
            with np.errstate(invalid="ignore"):
                tok = np.sum(np.nan_to_num(vals, posinf=0.0) * w, axis=1)
            tok[np.any(drawn & np.isnan(per_seed.T), axis=1)] = np.nan
            tok[np.isinf(x)] = np.inf
            tok[np.isnan(x)] = np.nan
            out.tokens[s] = tok
    return out


def _spent_at(xr: np.ndarray, spent: np.ndarray, at: np.ndarray) -> np.ndarray:
    """`spent` (e.g. cumulative tokens) interpolated at rollouts `at` (B,) of one run; NaN outside
    the run's evaluations or where `at` is not finite."""
    xr, spent = np.asarray(xr, dtype=np.float64), np.asarray(spent, dtype=np.float64)
    if not np.all(np.isfinite(spent)):
        return np.full(len(at), np.nan)
    ok = np.isfinite(at) & (at >= xr[0]) & (at <= xr[-1])
    return np.where(ok, np.interp(np.where(ok, at, xr[0]), xr, spent), np.nan)


def interval(samples: np.ndarray, level: float = DEFAULT_LEVEL) -> tuple[float, float] | None:
    """Percentile interval of the defined (non-NaN) samples, +inf allowed; None if none is."""
    v = np.asarray(samples, dtype=np.float64)
    v = v[~np.isnan(v)]
    if not len(v):
        return None
    lo, hi = np.quantile(v, [(1 - level) / 2, (1 + level) / 2], method="inverted_cdf")
    return float(lo), float(hi)


def undefined_share(samples: np.ndarray) -> float:
    return float(np.mean(np.isnan(np.asarray(samples, dtype=np.float64))))


def never_share(samples: np.ndarray) -> float:
    return float(np.mean(np.isposinf(np.asarray(samples, dtype=np.float64))))


def verdict(
    ci: tuple[float, float] | None,
    null: float,
    *,
    undefined: float = 0.0,
    level: float = DEFAULT_LEVEL,
    above: str = FASTER,
    below: str = SLOWER,
) -> str:
    """`above` if the interval lies above `null` (1.0 for a speedup, 0.0 for a difference),
    `below` if below, "within noise" if it contains it; "undefined" without an interval or when more
    than one tail's share (1 - level) / 2 of the resamples was undefined."""
    if ci is None or undefined > (1 - level) / 2:
        return UNDEFINED
    lo, hi = ci
    if lo > null:
        return above
    if hi < null:
        return below
    return WITHIN_NOISE
