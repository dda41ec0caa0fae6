"""Power of a testbed benchmark from its baseline's runs alone (docs/testbed.md, "Power").

How wide is the 90% interval of a speedup over GRPO, at N seeds per strategy and a target fraction
f, for a strategy whose runs are as noisy as GRPO's? Answered from GRPO's own seeds, before (and
independently of) any other strategy: split GRPO's seeds at random into two disjoint arms of N, call
one arm "grpo" and the other "grpo-b", and build the benchmark's summary (the same bootstrap as
every report, rollalloc.report) for the pair. The true speedup of grpo-b is 1.0; the interval's
half-width (hi - lo) / 2 is what the benchmark can resolve. Repeated over random splits, medians
reported. N can be at most half the seeds; each row also extrapolates, as 1 / sqrt(N) from its own
N, the seeds per arm the goal needs (printed as such). The null's true speedup is 1.0: where a
strategy's seed-to-seed spread is a fixed share of its rollouts, a real speedup of s has an interval
about s times as wide (0.100 at 1.0 is about 0.12 at 1.2), and a strategy noisier than GRPO needs
more seeds than the null says.

    python benchmarks/power_analysis.py --roots runs/bench20/runs runs/bench45/runs \\
        --fractions 0.5,0.75,0.9 --splits 20

`--sequential FIRST` checks the seeds-by-precision rule of `rollalloc compare --half-width` the
same way: each split's arms start at FIRST seeds and grow by one per round until the comparison is
decided; it reports the seeds that took and how often the final interval holds the true 1.0 (the
coverage that stopping on the interval's width could erode).
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np

from rollalloc.report.summary import ReportInputs, build_summary
from rollalloc.train.compare import read_jsonl


def load_seeds(roots: list[str], strategy: str, wall: bool = False) -> dict[int, dict]:
    """{seed: {"evals", "steps"}} of `strategy`'s finished runs under the roots (first wins);
    `wall`: also "wall_s", the run's wall time from its run.json."""
    runs: dict[int, dict] = {}
    for root in roots:
        base = Path(root) / strategy
        if not base.is_dir():
            continue
        for d in sorted(p for p in base.glob("seed*") if p.is_dir() and p.name[4:].isdigit()):
            seed = int(d.name[4:])
            if seed in runs or not (d / "run.json").is_file():
                continue
            runs[seed] = {
                "evals": read_jsonl(d / "evals.jsonl"),
                "steps": read_jsonl(d / "steps.jsonl"),
            }
            if wall:
                runs[seed]["wall_s"] = float(json.loads((d / "run.json").read_text())["wall_s"])
    return runs


def null_half_width(
    runs: dict[int, dict], n: int, fraction: float, rng: np.random.Generator, resamples: int
) -> tuple[float, float]:
    """One random split into two arms of n seeds: (half-width of grpo-b's speedup interval,
    point speedup). inf where the interval is open (an arm never reaches the target)."""
    seeds = rng.permutation(sorted(runs))[: 2 * n].tolist()
    arms = {"grpo": seeds[:n], "grpo-b": seeds[n:]}
    pair = {name: {s: runs[s] for s in ss} for name, ss in arms.items()}
    summary, _ = build_summary(
        ReportInputs(
            kind="compare",
            task="power",
            seeds=sorted(seeds),
            budget_rollouts=None,
            runs=pair,
            strategy_configs={"grpo": {}, "grpo-b": {}},
            fraction=fraction,
            bootstrap_resamples=resamples,
        )
    )
    vs = summary["vs_baseline"]["grpo-b"]
    lo, hi = vs["speedup_ci"] or (None, None)
    if lo is None or hi is None or not (math.isfinite(lo) and math.isfinite(hi)):
        return math.inf, vs["speedup"] or math.nan
    return (hi - lo) / 2, vs["speedup"]


def faster(run: dict, speedup: float) -> dict:
    """A run made `speedup` times faster: its rollout axis divided by `speedup`."""

    def scaled(recs: list[dict]) -> list[dict]:
        return [{**r, "cum_rollouts": r["cum_rollouts"] / speedup} for r in recs]

    return {"evals": scaled(run["evals"]), "steps": scaled(run["steps"])}


def sequential_null(
    runs: dict[int, dict],
    first: int,
    goal: float,
    rng: np.random.Generator,
    resamples: int,
    speedup: float = 1.0,
) -> tuple[int, float, bool]:
    """The rule of `rollalloc compare --half-width` (rollalloc.report.precision) on one random
    split of the baseline's seeds into two arms that start with `first` seeds each and grow by one
    each per round, until the comparison is decided or the seeds run out; the second arm's runs
    made `speedup` times faster (`faster`). Returns (seeds per arm at the end, final half-width,
    whether the final interval holds the true speedup)."""
    from rollalloc.report import precision

    order = rng.permutation(sorted(runs)).tolist()
    a, b = order[::2], order[1::2]
    for n in range(first, min(len(a), len(b)) + 1):
        pair = {
            "grpo": {s: runs[s] for s in a[:n]},
            "grpo-b": {s: faster(runs[s], speedup) for s in b[:n]},
        }
        summary, _ = build_summary(
            ReportInputs(
                kind="compare",
                task="power",
                seeds=sorted(a[:n] + b[:n]),
                budget_rollouts=None,
                runs=pair,
                strategy_configs={"grpo": {}, "grpo-b": {}},
                bootstrap_resamples=resamples,
            )
        )
        vs = summary["vs_baseline"]["grpo-b"]
        if precision.decided(vs, goal):
            break
    ci = vs["speedup_ci"] or [None, None]
    holds = ci[0] is not None and ci[0] <= speedup and (ci[1] is None or ci[1] >= speedup)
    return n, precision.speedup_half_width(vs), holds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--roots", nargs="+", required=True, help="dirs holding STRATEGY/seedN runs")
    ap.add_argument("--baseline", default="grpo")
    ap.add_argument("--fractions", default="0.5,0.75,0.9")
    ap.add_argument("--arms", default="", help="seeds per arm to measure (default: 5, 10, max)")
    ap.add_argument("--splits", type=int, default=20, help="random splits per setting")
    ap.add_argument("--resamples", type=int, default=1000)
    ap.add_argument("--goal", type=float, default=0.1, help="half-width asked for")
    ap.add_argument(
        "--sequential",
        type=int,
        metavar="FIRST",
        help="instead: the seeds-by-precision rule from FIRST seeds per arm, over --splits splits "
        "(seeds at the end, half-width, coverage of the true 1.0)",
    )
    ap.add_argument(
        "--speedup",
        type=float,
        default=1.0,
        help="with --sequential: make the second arm this much faster (its rollout axis divided "
        "by it), to check the coverage away from 1.0",
    )
    args = ap.parse_args()
    runs = load_seeds(args.roots, args.baseline)
    if len(runs) < 4:
        raise SystemExit(f"need at least 4 {args.baseline} seeds, found {len(runs)}")
    top = len(runs) // 2
    if args.sequential:
        rng = np.random.default_rng(args.sequential)
        got = [
            sequential_null(runs, args.sequential, args.goal, rng, args.resamples, args.speedup)
            for _ in range(args.splits)
        ]
        n, hw, holds = (np.array(x) for x in zip(*got))
        print(
            f"{args.baseline} vs itself x {args.speedup}, seeds by precision from "
            f"{args.sequential} per arm "
            f"(at most {top}), goal {args.goal}, {args.splits} splits: seeds per arm at the end "
            f"median {np.median(n):.0f} (range {n.min()}-{n.max()}); decided in "
            f"{np.mean(hw <= args.goal):.0%}; final interval holds {args.speedup} in "
            f"{np.mean(holds):.0%}"
        )
        return
    arms = [int(a) for a in args.arms.split(",")] if args.arms else sorted({5, 10, top} - {0})
    arms = [a for a in arms if 2 <= a <= top]
    print(f"{args.baseline}: {len(runs)} seeds; null comparisons {args.baseline} vs itself")
    print("| fraction | seeds per arm | median half-width | open intervals | seeds for the goal |")
    print("|---|---|---|---|---|")
    for f in [float(x) for x in args.fractions.split(",")]:
        for n in arms:
            rng = np.random.default_rng([round(f * 1000), n])  # per setting: order-free
            hw = np.array(
                [null_half_width(runs, n, f, rng, args.resamples)[0] for _ in range(args.splits)]
            )
            finite = hw[np.isfinite(hw)]
            med = float(np.median(hw))
            need = math.ceil(n * (med / args.goal) ** 2) if math.isfinite(med) else None
            print(
                f"| {f} | {n} | {med:.3f} | {len(hw) - len(finite)} of {len(hw)} | "
                f"{need if need is not None else '-'} (extrapolated) |"
            )


if __name__ == "__main__":
    main()
