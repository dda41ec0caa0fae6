"""Does a pool column predict pass rates? (the check before posterior-signal's `strata`)

A column (a level, a source, a difficulty score, an answer's form) helps posterior-signal only if
its values tell prompts' pass rates apart: then an unseen prompt's prior is its group's, not the
pool's. The check reads groups a run has trained (prompt i, k_r successes of n_r) and asks how much
of the between-prompt variance of the pass rate p the column's groups explain for prompts they have
not seen (cross-fitted: the groups' means come from the other folds of prompts):

    R^2 = 1 - E[(p_i - m_c(i))^2] / E[(p_i - m)^2]

with m_c the shrunk mean of column value c on the other folds (sum k + w m) / (sum n + w), w = 4
groups' rollouts, as the strategy shrinks a group's prior to the pool's) and m the pool's mean
there. p_i is never observed, but (k/n - m)^2 - k (n - k) / (n^2 (n - 1)) is unbiased for (p - m)^2
given p (E[k (n - k)] = n (n - 1) p (1 - p)), so both expectations are estimated without the
binomial noise of groups of n, from any n >= 2. R^2 near 0: the column adds nothing (arith's
`level` on the default testbed, 0.09); near 1: it predicts p (the paper testbed's `level`, 0.87).

What strata save is the groups that would not vary, so the check also scores the column's share
of varying groups (0 < k < n) as a forecast of whether a group varies (cross-fitted Brier skill,
Var(E[V | c]) / (m (1 - m)) in the limit, V a prompt's chance to vary and m its mean): 0.63 for
the paper testbed's level, 0.16 for the default testbed's `answer`, whose R^2 of p is 0.52 but
whose values mostly vary at n = 8.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

SHRINK_GROUPS = 4.0
"""A column value's mean is shrunk to the pool's with the weight of this many groups (as
posterior-signal's strata shrink a group's prior, `_STRATUM_SHRINK`)."""


@dataclass(frozen=True)
class ColumnFit:
    column: str
    values: int
    """Distinct values of the column among the prompts with groups."""
    prompts: int
    groups: int
    r2: float
    """Cross-fitted share of the between-prompt variance of p that the column's means explain."""
    r2_lo: float
    r2_hi: float
    """90% bootstrap interval of r2 over prompts."""
    var_p: float
    """Estimated variance of p between the prompts' groups (binomial noise removed)."""
    vary_rate: float
    """Share of the groups with reward variance (0 < k < n)."""
    vary_skill: float
    """Cross-fitted Brier skill of the column's share of varying groups as a forecast of whether
    a group varies: Var(E[V | c]) / (m (1 - m)) in the limit, V a prompt's chance to vary at the
    groups' sizes and m its mean. What strata can save: a value whose groups rarely vary is skipped."""
    vary_lo: float
    vary_hi: float


def _cross_fit(codes, y, wt, noise, fold, folds: int, w: float) -> tuple[float, float]:
    """1 - SSE(value means) / SSE(pool mean) on held-out folds, each squared error less `noise`
    (its expectation under the record's own sampling noise); and SSE(pool mean) per record."""
    sse_c = sse_0 = 0.0
    ncode = int(codes.max()) + 1
    for f in range(folds):
        tr, te = fold != f, fold == f
        if not te.any() or not tr.any():
            continue
        m = float((wt[tr] * y[tr]).sum() / wt[tr].sum())
        num = np.bincount(codes[tr], weights=wt[tr] * y[tr], minlength=ncode)
        den = np.bincount(codes[tr], weights=wt[tr], minlength=ncode)
        mc = (num + w * wt.mean() * m) / (den + w * wt.mean())  # shrunk with w records' weight
        sse_c += float(((y[te] - mc[codes[te]]) ** 2 - noise[te]).sum())
        sse_0 += float(((y[te] - m) ** 2 - noise[te]).sum())
    return (1.0 - sse_c / sse_0 if sse_0 > 0 else float("nan")), sse_0 / len(y)


def _fits(codes, k, n, v, fold, folds: int) -> tuple[float, float, float]:
    """(R^2 of p, variance of p, Brier skill of "the group varies") of the records; NaN where
    there is nothing to explain (no spread of p beyond two standard errors; no group or every
    group varies)."""
    x, noise = k / n, k * (n - k) / (n * n * (n - 1))
    r2, var_p = _cross_fit(codes, x, n, noise, fold, folds, SHRINK_GROUPS)
    e = (x - (n * x).sum() / n.sum()) ** 2 - noise  # unbiased for (p - m)^2, per record
    if not e.mean() > 2 * e.std() / np.sqrt(len(e)):
        r2 = float("nan")
    ones = np.ones(len(v))
    skill = float("nan")
    if 0 < v.mean() < 1:
        skill, _ = _cross_fit(codes, v, ones, 0 * ones, fold, folds, SHRINK_GROUPS)
    return r2, var_p, skill


def column_fit(
    column: str,
    values: Sequence,
    prompt_ids: Sequence[int],
    successes: Sequence[float],
    sizes: Sequence[int],
    *,
    folds: int = 5,
    boot: int = 200,
    seed: int = 0,
    varies: Sequence[bool] | None = None,
) -> ColumnFit:
    """How well `values` (one per pool prompt) predict the pass rates of the groups
    (prompt_ids[r], successes[r] of sizes[r]; binary rewards, so successes are counts), and
    whether they vary (`varies[r]`, the group's rewards are not all equal; default
    0 < successes < size); groups of fewer than 2 rollouts are ignored.

    The R^2 is that of a prior fitted on these prompts: with few prompts per value the values'
    means are noisy and it is lower than the population's (it rises with the steps read). The
    intervals are basic bootstrap intervals (2 x estimate - quantiles): a resample holds fewer
    distinct prompts per value, which biases the replicates down."""
    pid = np.asarray(prompt_ids, dtype=np.int64)
    k = np.asarray(successes, dtype=np.float64)
    n = np.asarray(sizes, dtype=np.float64)
    if not (len(pid) == len(k) == len(n)):
        raise ValueError("prompt_ids, successes and sizes must have one entry per group")
    if len(pid) and (pid.min() < 0 or pid.max() >= len(values)):
        raise ValueError(f"a prompt id is outside the column's {len(values)} rows")
    if np.any(k < 0) or np.any(k > n):
        raise ValueError("successes must lie in [0, size] for every group")
    if np.any(np.abs(k - np.round(k)) > 1e-6):
        raise ValueError(
            "successes must be whole counts: the check reads binary rewards (a success signal "
            "of 0 or 1 per rollout)"
        )
    v = (k > 0) & (k < n) if varies is None else np.asarray(varies, dtype=bool)
    if len(v) != len(k):
        raise ValueError("varies must have one entry per group")
    keep = n >= 2
    pid, k, n, v = pid[keep], np.round(k[keep]), n[keep], v[keep].astype(np.float64)
    if len(pid) == 0:
        raise ValueError("no group of 2 or more rollouts to fit on")
    _, codes_all = np.unique(np.asarray([str(v) for v in values]), return_inverse=True)
    codes = codes_all[pid]
    prompts = np.unique(pid)
    rng = np.random.default_rng(seed)
    fold_of = np.zeros(len(values), dtype=np.int64)
    fold_of[prompts] = rng.permutation(len(prompts)) % folds
    r2, var_p, skill = _fits(codes, k, n, v, fold_of[pid], folds)
    # bootstrap over prompts: a prompt drawn twice keeps its fold (no leak between folds)
    order = np.argsort(pid, kind="stable")
    starts = np.searchsorted(pid[order], prompts)
    ends = np.searchsorted(pid[order], prompts, side="right")
    reps = []
    for _ in range(boot):
        pick = rng.integers(0, len(prompts), len(prompts))
        rows = np.concatenate([order[starts[j] : ends[j]] for j in pick])
        r, _, sk = _fits(codes[rows], k[rows], n[rows], v[rows], fold_of[pid[rows]], folds)
        reps.append((r, sk))
    q5, q95 = np.full(2, np.nan), np.full(2, np.nan)
    ok = np.isfinite(reps).all(axis=0) if reps else np.zeros(2, dtype=bool)
    if ok.any():
        q5[ok], q95[ok] = np.percentile(np.asarray(reps)[:, ok], [5, 95], axis=0)
    est = np.array([r2, skill])
    lo, hi = 2 * est - q95, 2 * est - q5  # basic bootstrap: NaN where the estimate is
    return ColumnFit(
        column=column,
        values=int(len(np.unique(codes))),
        prompts=int(len(prompts)),
        groups=int(len(pid)),
        r2=float(r2),
        r2_lo=float(lo[0]),
        r2_hi=float(hi[0]),
        var_p=float(var_p),
        vary_rate=float(v.mean()),
        vary_skill=float(skill),
        vary_lo=float(lo[1]),
        vary_hi=float(hi[1]),
    )
