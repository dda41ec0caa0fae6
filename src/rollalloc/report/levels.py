"""Held-out gain per level, strategy by strategy: summary.json's `levels`.

A speedup to the overall target can hide a part of the pool that a strategy never taught (on the
paper testbed every strategy that skips learns the 2-term chains less than GRPO and the long ones
more, and one warm start showed a level written off for a whole run: docs/testbed.md, "Which
levels each strategy teaches"; docs/posterior-signal.md, "A level written off"). Where the
held-out evaluations carry an accuracy per level (`accuracy_<level>`: the arith task's `level`
column, a simulator preset's levels), the summary reports, for every level L and strategy s,

    gain_{s,L}   mean over s's seeds of accuracy_L at its last evaluation minus at its first
                 (at equal budget, as the final accuracy, unless a run stopped early)
    diff_{s,L}   gain_{s,L} - gain_{baseline,L}

with percentile intervals over the summary's own draws of the seeds (each
strategy's seeds drawn with replacement, independently; `rollalloc.report.bootstrap`) and a
verdict on diff at the summary's level ("higher", "lower", "within noise"), one per cell. The
summary's `warnings` name a strategy whose diff lies below 0 on some level at the Bonferroni level
over the levels, 1 - (1 - level) / L: with L levels, L calls per strategy would otherwise find a
"lower" level in most reports of strategies that do not differ at all. A level that some run did
not evaluate at its first and last evaluation, or evaluated as a non-number, is left out, with a
warning.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from rollalloc.report import bootstrap as bs

PREFIX = "accuracy_"
NOT_LEVELS = ("exact", "sampled", "greedy")
"""`accuracy_<name>` keys that are another metric, not a level (rollalloc.train.evaluator)."""


def _natural(name: str) -> list[Any]:
    """Sort key: '2x1d' before '10x1d'."""
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]


def _finite(v: Any) -> bool:
    return isinstance(v, (int, float)) and bool(np.isfinite(v))


def level_names(runs: dict[str, dict[int, dict[str, Any]]]) -> list[str]:
    """The levels every run evaluated, as a number, at its first and its last evaluation, in
    natural order."""
    return _levels(runs)[0]


def _levels(runs: dict[str, dict[int, dict[str, Any]]]) -> tuple[list[str], list[str]]:
    """(the levels of `level_names`, the levels some run has but that are left out)."""
    common: set[str] | None = None
    seen: set[str] = set()
    for by_seed in runs.values():
        for run in by_seed.values():
            evals = run.get("evals") or [{}]
            ends = (evals[0], evals[-1])
            named = {k[len(PREFIX) :] for e in ends for k in e if k.startswith(PREFIX)}
            named -= set(NOT_LEVELS)
            seen |= named
            have = {L for L in named if all(_finite(e.get(PREFIX + L)) for e in ends)}
            common = have if common is None else common & have
    kept = sorted(common or (), key=_natural)
    return kept, sorted(seen - set(kept), key=_natural)


def seed_gains(by_seed: dict[int, dict[str, Any]], keys: list[str]) -> np.ndarray:
    """(seeds, keys) last minus first evaluation of each eval key (`accuracy_<level>`,
    `accuracy`), seeds in `by_seed`'s order."""
    return np.array(
        [
            [float(r["evals"][-1][k]) - float(r["evals"][0][k]) for k in keys]
            for r in by_seed.values()
        ],
        dtype=np.float64,
    ).reshape(len(by_seed), len(keys))


def resampled_gains(counts: np.ndarray, g: np.ndarray) -> np.ndarray:
    """(resamples, keys) means of `g` (seeds, keys) over the seeds drawn in each resample,
    `counts` (resamples, seeds) one strategy's draws (`bootstrap.seed_counts`)."""
    return counts @ g / counts.sum(axis=1, keepdims=True)


def _round(x: float) -> float:
    return round(float(x), 6)


def level_table(
    runs: dict[str, dict[int, dict[str, Any]]],
    baseline: str,
    counts: dict[str, np.ndarray] | None = None,
    level: float = bs.DEFAULT_LEVEL,
) -> tuple[dict[str, Any], list[str]]:
    """summary.json's `levels` ({} without levels) and the warnings it gives: `levels[L][s]` =
    gain, gain_ci, per_seed_gain and, for s other than the baseline, diff, diff_ci, diff_verdict
    (UNDEFINED where either side has one seed: the bootstrap cannot see the seed noise).
    `counts`: the summary's draws of the seeds (None: `bootstrap.seed_counts` at its defaults)."""
    names, dropped = _levels(runs)
    warnings = []
    if dropped:
        warnings.append(
            f"level(s) {', '.join(dropped)} left out of the per-level table: not every run has a "
            "number for them at its first and its last evaluation"
        )
    if not names:
        return {}, warnings
    g = {s: seed_gains(by, [PREFIX + L for L in names]) for s, by in runs.items()}
    if counts is None:
        counts = bs.seed_counts(
            {s: len(by) for s, by in runs.items()}, bs.DEFAULT_RESAMPLES, bs.DEFAULT_SEED
        )
    m = {s: resampled_gains(counts[s], g[s]) for s in runs}
    single = {s for s in runs if len(runs[s]) < 2}
    wide = 1.0 - (1.0 - level) / len(names)  # Bonferroni over the levels, for the warning
    table: dict[str, Any] = {L: {} for L in names}
    lower: dict[str, list[str]] = {}
    for s in runs:
        for j, L in enumerate(names):
            ci = bs.interval(m[s][:, j], level)
            cell: dict[str, Any] = {
                "gain": _round(g[s][:, j].mean()),
                "gain_ci": None if ci is None else [_round(c) for c in ci],
                "per_seed_gain": [_round(v) for v in g[s][:, j]],
            }
            if s != baseline:
                d = m[s][:, j] - m[baseline][:, j]
                d_ci = bs.interval(d, level)
                verdict = bs.verdict(d_ci, 0.0, level=level, above=bs.HIGHER, below=bs.LOWER)
                if s in single or baseline in single:
                    verdict = bs.UNDEFINED
                diff = g[s][:, j].mean() - g[baseline][:, j].mean()
                cell["diff"] = _round(diff)
                cell["diff_ci"] = None if d_ci is None else [_round(c) for c in d_ci]
                cell["diff_verdict"] = verdict
                w_ci = bs.interval(d, wide)
                if verdict != bs.UNDEFINED and w_ci is not None and w_ci[1] < 0:
                    lower.setdefault(s, []).append(
                        f"{L} {diff:+.4f} [{w_ci[0]:+.4f}, {w_ci[1]:+.4f}]"
                    )
            table[L][s] = cell
    for s, parts in lower.items():
        shown = "; ".join(parts[:10]) + (f"; and {len(parts) - 10} more" if len(parts) > 10 else "")
        warnings.append(
            f"{s!r}: its held-out accuracy on {len(parts)} of {len(names)} levels rose less (or "
            f"fell more) than under the baseline {baseline!r} by the last evaluation, beyond noise "
            f"(gain minus the baseline's, {wide:.1%} interval, Bonferroni over the levels): "
            f"{shown}; the overall accuracy averages over the levels (summary 'levels')"
        )
    return table, warnings
