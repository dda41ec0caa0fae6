"""Seeds by precision: which strategies a benchmark runs one more seed of (docs/testbed.md, "Seeds
by precision").

A benchmark at a fixed seed count spends the same seeds on every strategy, but strategies differ in
how noisy they are and in how far from 1.0 they land: a strategy that never reaches the target is
settled at 10 seeds, a 1.2x one needs 30-45 on the paper testbed. `rollalloc compare --half-width H`
therefore runs in rounds: after every round it builds the report's summary (the same bootstrap),
and for every comparison with the baseline that is not yet decided it runs one more seed of that
strategy, and one more of the baseline (it is in every comparison), until every comparison is
decided or has reached `max_seeds`.

    half-width(X) = (hi - lo) / 2 of the 90% bootstrap interval of X's speedup over the baseline;
                    +inf when the interval is missing or open (X never reaches the target in some
                    resamples but does in others: its upper end is "never" for the baseline)
    decided(X)    = defined, and half-width(X) <= H or hi < 1 - H
        defined   = the verdict is not "undefined" and at most (1 - level) / 2 of the resamples are
                    undefined (a narrow interval over a few defined resamples decides nothing)
        hi < 1-H  = X is slower than the baseline by more than H: a one-sided test repeated at every
                    round (a strategy that never reaches the target in part of the resamples has an
                    interval from 0 whose width more seeds shrink only slowly; the benchmark's
                    question, "does X save rollouts, and how many", is answered)
    open          = {X != baseline : not decided(X) and seeds(X) < max_seeds}
    next round    = open + [baseline] if open (and seeds(baseline) < max_seeds), then padded to a
                    multiple of `workers` with the widest open comparisons (a round that leaves a
                    worker idle at its end costs the same wall time as a full one)

What stopping by width costs (docs/testbed.md, "Seeds by precision", measured on GRPO-vs-GRPO
splits by `benchmarks/power_analysis.py --sequential`, also at a true speedup of 1.2): the interval
is re-checked after every round and the rule stops at the first narrow one, so the final interval
is a little more often too narrow than a fixed-seed one; and a speedup's interval is about
proportional to the speedup, so a strategy (or a baseline) that happens to look slow is settled
sooner. The rule is deterministic given the runs (the bootstrap is seeded), so a resumed benchmark
takes the same decisions and reuses the runs it already has, provided it is given the same
`--seeds`, `--half-width`, `--max-seeds` and `--workers`.
"""

from __future__ import annotations

import math
from typing import Any

UNDEFINED = "undefined"


def speedup_half_width(vs: dict[str, Any]) -> float:
    """Half-width of a `vs_baseline[X]` entry's speedup interval (see the module docstring)."""
    ci = vs.get("speedup_ci")
    if not ci or ci[0] is None or ci[1] is None:
        return math.inf
    lo, hi = float(ci[0]), float(ci[1])
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return math.inf
    return (hi - lo) / 2


def decided(vs: dict[str, Any], half_width: float, level: float = 0.9) -> bool:
    """Whether a comparison needs no more seeds (the module docstring's `decided`)."""
    if vs.get("speedup_verdict") == UNDEFINED:
        return False
    if float(vs.get("speedup_undefined_share") or 0.0) > (1 - level) / 2:
        return False
    if speedup_half_width(vs) <= half_width:
        return True
    ci = vs.get("speedup_ci")
    return bool(ci) and ci[1] is not None and float(ci[1]) < 1 - half_width


def open_comparisons(
    vs_baseline: dict[str, dict[str, Any]], half_width: float, level: float = 0.9
) -> dict[str, float]:
    """{strategy: half-width} of the comparisons not `decided`, widest first."""
    wide = {
        s: speedup_half_width(v)
        for s, v in vs_baseline.items()
        if not decided(v, half_width, level)
    }
    return dict(sorted(wide.items(), key=lambda kv: -kv[1]))


def next_round(
    vs_baseline: dict[str, dict[str, Any]],
    n_seeds: dict[str, int],
    *,
    baseline: str,
    half_width: float,
    max_seeds: int,
    workers: int = 1,
    level: float = 0.9,
) -> list[str]:
    """The strategies to run one more seed of (a name twice: two more seeds); [] when done.

    `vs_baseline` is a summary's (every strategy but the baseline), `n_seeds` the finished seeds
    of every strategy, baseline included."""
    if half_width <= 0:
        raise ValueError(f"half_width must be > 0, got {half_width}")
    if max_seeds < 1 or workers < 1:
        raise ValueError(f"max_seeds and workers must be >= 1, got {max_seeds}, {workers}")
    room = {s: max_seeds - n for s, n in n_seeds.items()}
    wide = [s for s in open_comparisons(vs_baseline, half_width, level) if room.get(s, 0) > 0]
    if not wide:
        return []
    out = list(wide)
    if room.get(baseline, 0) > 0:
        out.append(baseline)
    for s in wide * workers:  # pad with the widest open comparisons that have seeds left
        if len(out) % workers == 0:
            break
        if out.count(s) < room[s]:
            out.append(s)
    return out


def check_settings(
    strategies: list[str], seeds: list[int], half_width: float, max_seeds: int, baseline: str
) -> None:
    """The settings of a benchmark by precision, checked before any run (ValueError naming the
    flag of `rollalloc compare`)."""
    if not half_width > 0:
        raise ValueError(f"--half-width must be > 0, got {half_width}")
    if len(seeds) < 3:
        raise ValueError(
            f"--half-width: the first round (--seeds) needs at least 3 seeds, got {len(seeds)}: "
            "with fewer, the bootstrap interval is too narrow to trust"
        )
    if max_seeds < len(seeds):
        raise ValueError(
            f"--max-seeds {max_seeds} is below the {len(seeds)} seeds of the first round"
        )
    if not [s for s in strategies if s != baseline]:
        raise ValueError(f"--half-width: give a strategy besides {baseline} to compare with it")


def decide(
    summary: dict[str, Any],
    n_seeds: dict[str, int],
    *,
    half_width: float,
    max_seeds: int,
    workers: int = 1,
) -> tuple[dict[str, float], list[str], str | None]:
    """One round's decision from a report summary: (the open comparisons' half-widths, the
    strategies to run one more seed of (`next_round`), and why the rounds stop: None while they go
    on). They stop when the baseline did not learn beyond noise (no speedup means anything), when
    every comparison is decided, or when the open ones are at `max_seeds`."""
    baseline = summary["target"]["baseline"]
    level = float((summary.get("bootstrap") or {}).get("level", 0.9))
    vs = summary["vs_baseline"]
    wide = open_comparisons(vs, half_width, level)
    if not summary["baseline_gain"]["learned"]:
        return wide, [], "the baseline did not learn beyond noise: no speedup means anything"
    add = next_round(
        vs,
        n_seeds,
        baseline=baseline,
        half_width=half_width,
        max_seeds=max_seeds,
        workers=workers,
        level=level,
    )
    if add:
        return wide, add, None
    if not wide:
        return wide, [], "every comparison decided"
    return wide, [], f"at {max_seeds} seeds: " + ", ".join(f"{s} {w:.3f}" for s, w in wide.items())
