"""Held-out gain per level, strategy by strategy: summary.json's `levels`.

A speedup to the overall target can hide a part of the pool that a strategy never taught (on the
paper testbed every strategy that skips learns the 2-term chains less than GRPO and the long ones
more, and one warm start showed a level written off for a whole run: docs/testbed.md, "Which
levels each strategy teaches"; docs/posterior-signal.md, "A level written off"). Where the
held-out evaluations carry an accuracy per level (`accuracy_<level>`: the arith task's `level`
column, a simulator preset's levels), the summary reports, for every level L and strategy s,

    gain_{s,L}   mean over s's seeds of accuracy_L at its last evaluation minus at its first
                 (at equal budget, as the final accuracy)
    diff_{s,L}   gain_{s,L} - gain_{baseline,L}

with percentile intervals over the same seed resamples as the rest of the summary (each
strategy's seeds drawn with replacement, independently; `rollalloc.report.bootstrap`) and a
verdict on diff ("higher", "lower", "within noise"). A strategy that learnt a level less than the
baseline beyond noise is named in the summary's `warnings`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rollalloc.report import bootstrap as bs

PREFIX = "accuracy_"
NOT_LEVELS = ("exact", "sampled", "greedy")
"""`accuracy_<name>` keys that are another metric, not a level (rollalloc.train.evaluator)."""


def level_names(runs: dict[str, dict[int, dict[str, Any]]]) -> list[str]:
    """The levels every run evaluated at its first and its last evaluation, sorted."""
    common: set[str] | None = None
    for by_seed in runs.values():
        for run in by_seed.values():
            evals = run.get("evals") or []
            if not evals:
                return []
            have = {
                k[len(PREFIX) :]
                for k in set(evals[0]) & set(evals[-1])
                if k.startswith(PREFIX) and k[len(PREFIX) :] not in NOT_LEVELS
            }
            common = have if common is None else common & have
    return sorted(common or ())


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


def resampled_gains(name: str, g: np.ndarray, resamples: int, seed: int) -> np.ndarray:
    """(resamples, levels) means of `g` (seeds, levels) over the seeds drawn in each resample: the
    draws of `bootstrap.resample` for the same strategy, resamples and seed."""
    counts = bs.resample_counts(len(g), resamples, bs.strategy_rng(seed, name))  # (R, S)
    return counts @ g / len(g)


def _round(x: float) -> float:
    return round(float(x), 6)


def level_table(
    runs: dict[str, dict[int, dict[str, Any]]],
    baseline: str,
    resamples: int = bs.DEFAULT_RESAMPLES,
    seed: int = bs.DEFAULT_SEED,
    level: float = bs.DEFAULT_LEVEL,
) -> tuple[dict[str, Any], list[str]]:
    """summary.json's `levels` ({} without levels) and the warnings it gives: `levels[L][s]` =
    gain, gain_ci, per_seed_gain and, for s other than the baseline, diff, diff_ci, diff_verdict
    (UNDEFINED where either side has one seed: the bootstrap cannot see the seed noise)."""
    names = level_names(runs)
    if not names:
        return {}, []
    g = {s: seed_gains(by, [PREFIX + L for L in names]) for s, by in runs.items()}
    m = {s: resampled_gains(s, g[s], resamples, seed) for s in runs}
    single = {s for s in runs if len(runs[s]) < 2}
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
                d_ci = bs.interval(m[s][:, j] - m[baseline][:, j], level)
                verdict = bs.verdict(d_ci, 0.0, level=level, above=bs.HIGHER, below=bs.LOWER)
                if s in single or baseline in single:
                    verdict = bs.UNDEFINED
                diff = g[s][:, j].mean() - g[baseline][:, j].mean()
                cell["diff"] = _round(diff)
                cell["diff_ci"] = None if d_ci is None else [_round(c) for c in d_ci]
                cell["diff_verdict"] = verdict
                if verdict == bs.LOWER:
                    lower.setdefault(s, []).append(
                        f"{L} {diff:+.4f} [{d_ci[0]:+.4f}, {d_ci[1]:+.4f}]"  # type: ignore[index]
                    )
            table[L][s] = cell
    warnings = [
        f"{s!r} learnt {'a level' if len(parts) == 1 else f'{len(parts)} levels'} of the held-out "
        f"set less than {baseline!r} beyond noise by the end (gain minus {baseline!r}'s, "
        f"{level:.0%} interval): {'; '.join(parts)}; its overall figures hide that (summary "
        "'levels')"
        for s, parts in lower.items()
    ]
    return table, warnings
