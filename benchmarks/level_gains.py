"""Held-out gain per task level at the end of the budget, strategy by strategy, with 90% bootstrap
intervals over seeds, and each strategy's difference from the baseline (docs/testbed.md, "Which
levels each strategy teaches"). Reads the evaluations exported by merge_testbed_runs.py --export
(benchmarks/results/*.csv) or run directories (ROOT/STRATEGY/seedN/evals.jsonl).

    python benchmarks/level_gains.py --csv benchmarks/results/paper-testbed-s12-peers.csv
    python benchmarks/level_gains.py --roots runs/s12/real/runs runs/s12/sub-short/runs=short

A root may carry a suffix `=TAG`: its strategies are listed as STRATEGY:TAG (GRPO on part of the
pool beside GRPO on the whole pool). The gain of a run is its last evaluation minus its first
(the same warm start for every run of a config); the interval of a mean is the percentile
interval of 2,000 resamples of the seeds (rollalloc.report.bootstrap), of a difference the
two strategies' seeds resampled independently.
"""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path

import numpy as np

from rollalloc.report.bootstrap import interval, seed_counts
from rollalloc.report.levels import PREFIX, level_names, resampled_gains, seed_gains


def from_csv(path: str) -> dict[str, dict[int, list[dict[str, float]]]]:
    """runs[strategy][seed] = evaluations in order, from an exported CSV."""
    runs: dict[str, dict[int, list[dict[str, float]]]] = {}
    with open(path) as f:
        for row in csv.DictReader(f):
            ev = {
                k: float(v)
                for k, v in row.items()
                if (k.startswith("accuracy") or k == "cum_rollouts") and v not in ("", None)
            }
            runs.setdefault(row["strategy"], {}).setdefault(int(row["seed"]), []).append(ev)
    for seeds in runs.values():
        for evs in seeds.values():
            evs.sort(key=lambda e: e["cum_rollouts"])
    return runs


def from_roots(roots: list[str]) -> dict[str, dict[int, list[dict[str, float]]]]:
    """runs[strategy(:tag)][seed] = evaluations of the finished runs under each root."""
    runs: dict[str, dict[int, list[dict[str, float]]]] = {}
    for item in roots:
        root, _, tag = item.partition("=")
        for sdir in sorted(p for p in Path(root).iterdir() if p.is_dir()):
            for d in sorted(sdir.glob("seed*")):
                ev_path, run_path = d / "evals.jsonl", d / "run.json"
                if not (ev_path.is_file() and run_path.is_file() and d.name[4:].isdigit()):
                    continue
                run = json.loads(run_path.read_text())
                evs = [
                    json.loads(line) for line in ev_path.read_text().splitlines() if line.strip()
                ]
                budget = run.get("config", {}).get("budget_rollouts")
                if budget and evs and evs[-1]["cum_rollouts"] < budget:
                    continue  # unfinished
                name = f"{sdir.name}:{tag}" if tag else sdir.name
                runs.setdefault(name, {})[int(d.name[4:])] = evs
    return runs


def gains(runs: dict[int, list[dict[str, float]]], keys: list[str]) -> np.ndarray:
    """(seeds, keys) last-minus-first evaluation of each run (rollalloc.report.levels, which
    summary.json's `levels` uses too)."""
    return seed_gains({seed: {"evals": evs} for seed, evs in runs.items()}, keys)


def resampled_means(name: str, g: np.ndarray, resamples: int) -> np.ndarray:
    """(resamples, keys) means over resampled seeds of `g` (seeds, keys): the summary's draws."""
    return resampled_gains(seed_counts({name: len(g)}, resamples, 0)[name], g)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--csv", help="evaluations exported by merge_testbed_runs.py --export")
    src.add_argument("--roots", nargs="+", help="ROOT[=TAG] directories of STRATEGY/seedN runs")
    ap.add_argument("--baseline", default="grpo")
    ap.add_argument("--strategies", help="comma-separated, in this order (default: all)")
    ap.add_argument("--resamples", type=int, default=2000)
    args = ap.parse_args(argv)
    runs = from_csv(args.csv) if args.csv else from_roots(args.roots)
    if args.baseline not in runs:
        raise SystemExit(f"no {args.baseline!r} runs (have {sorted(runs)})")
    names = (
        args.strategies.split(",")
        if args.strategies
        else sorted(runs, key=lambda s: (s != args.baseline, s))
    )
    missing = [s for s in names if s not in runs]
    if missing:
        raise SystemExit(f"unknown strategies {missing} (have {sorted(runs)})")
    levels = level_names({s: {k: {"evals": v} for k, v in by.items()} for s, by in runs.items()})
    keys = ["accuracy"] + [PREFIX + L for L in levels]
    labels = ["all"] + levels
    g_base = gains(runs[args.baseline], keys)  # (seeds, keys)
    base = resampled_means(args.baseline, g_base, args.resamples)
    print("held-out gain by the end, points [90%]; second line: minus the baseline's [90%]")
    print(f"| strategy | seeds | {' | '.join(labels)} |")
    print("|---|---|" + "---|" * len(labels))
    for s in names:
        g = gains(runs[s], keys)
        m = resampled_means(s, g, args.resamples)
        cells = []
        for j in range(len(keys)):
            lo, hi = interval(m[:, j])
            cells.append(f"{100 * g[:, j].mean():+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}]")
        print(f"| {s} | {len(g)} | {' | '.join(cells)} |")
        if s != args.baseline:
            d = m - base
            gb = g_base.mean(0)
            cells = []
            for j in range(len(keys)):
                lo, hi = interval(d[:, j])
                mark = "" if lo <= 0 <= hi else "*"
                cells.append(
                    f"{100 * (g[:, j].mean() - gb[j]):+.1f}{mark} [{100 * lo:+.1f}, {100 * hi:+.1f}]"
                )
            print(f"| - {args.baseline} | | {' | '.join(cells)} |")
    print("(* the interval excludes 0)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
