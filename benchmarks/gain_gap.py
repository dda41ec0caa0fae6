"""How far one strategy's held-out gain is from another's at chosen rollouts, with the comparison's
bootstrap over seeds (rollalloc.report.bootstrap: each strategy's seeds drawn independently).

    python benchmarks/gain_gap.py CSV [CSV ...] --base grpo --other cero --at 24576,49152,98304

Each run's curve is read minus its own first evaluation and interpolated linearly at each point
(a point beyond a run's last evaluation is refused); the gap is OTHER's seed mean minus BASE's, in points
(x100), with its 90% percentile interval. CSVs as ranking_power.py reads them (strategy, seed,
cum_rollouts, accuracy; a directory: its curves.csv); the first file that has a (strategy, seed)
wins. docs/simulator.md, "Session 43".
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ranking_power import load_evals  # noqa: E402

from rollalloc.report import bootstrap  # noqa: E402


def gains_at(runs: dict[int, tuple[np.ndarray, np.ndarray]], at: list[int]) -> np.ndarray:
    """(seeds, points): each run's accuracy minus its first, interpolated at `at`; runs as
    load_evals gives them (seed -> (rollouts, accuracy), sorted)."""
    return np.array([np.interp(at, x, y) - y[0] for _, (x, y) in sorted(runs.items())])


def gaps(
    base: np.ndarray,
    other: np.ndarray,
    names: tuple[str, str],
    resamples: int = 2000,
    seed: int = 0,
) -> list[tuple[float, tuple[float, float] | None]]:
    """(point estimate, 90% interval) of mean(other) - mean(base) per column, seeds resampled."""
    counts = bootstrap.seed_counts(
        {names[0]: len(base), names[1]: len(other)}, resamples, seed
    )  # (B, seeds) each
    drawn = counts[names[1]] @ other / len(other) - counts[names[0]] @ base / len(base)  # (B, P)
    est = other.mean(axis=0) - base.mean(axis=0)
    return [(float(e), bootstrap.interval(drawn[:, j])) for j, e in enumerate(est)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    ap.add_argument("csv", nargs="+", help="evaluation CSVs (or run directories with curves.csv)")
    ap.add_argument("--base", required=True, help="the strategy subtracted")
    ap.add_argument("--other", required=True, help="the strategy compared")
    ap.add_argument("--at", required=True, help="comma-separated cumulative rollouts")
    ap.add_argument("--seeds", help="comma-separated seeds to use (default: all)")
    args = ap.parse_args(argv)
    try:
        at = [int(x) for x in args.at.split(",")]
        seeds = {int(s) for s in args.seeds.split(",")} if args.seeds else None
    except ValueError as e:
        ap.error(f"--at and --seeds take comma-separated integers ({e})")
    runs = load_evals(args.csv, None, [args.base, args.other])  # exits naming a missing one
    for name in (args.base, args.other):
        if seeds is not None:
            missing = sorted(seeds - set(runs[name]))
            if missing:
                ap.error(f"{name} has no runs of seeds {missing} in {args.csv}")
            runs[name] = {k: v for k, v in runs[name].items() if k in seeds}
        short = [k for k, (x, _) in runs[name].items() if x[-1] < max(at)]
        if short:
            ap.error(f"--at {max(at)} is beyond the last evaluation of {name} seed {short[0]} "
                     f"({runs[name][short[0]][0][-1]:.0f} rollouts)")  # fmt: skip
    base, other = gains_at(runs[args.base], at), gains_at(runs[args.other], at)
    print(f"{args.other} ({len(other)} seeds) minus {args.base} ({len(base)} seeds), held-out "
          "gain over each run's start, points [90% interval]")  # fmt: skip
    for x, (est, ci) in zip(at, gaps(base, other, (args.base, args.other))):
        lo, hi = ci if ci else (np.nan, np.nan)
        print(f"  {x:8d}: {100 * est:+.2f} [{100 * lo:+.2f}, {100 * hi:+.2f}]")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
