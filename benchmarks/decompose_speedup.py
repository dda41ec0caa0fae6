"""Decompose each strategy's speedup over the baseline into what it costs per informative group
and how many informative groups it needs (the Pilot-Commit ablation of docs/testbed.md).

    rollouts to target = (rollouts per informative group) x (informative groups to target)

so  speedup = cost ratio x learning ratio, where
    cost ratio     = baseline's rollouts per informative group / the strategy's
                     (the speedup if every informative group taught the same: what skipping
                     degenerate groups buys at most)
    learning ratio = baseline's informative groups to target / the strategy's
                     (below 1: the strategy needs more informative groups, e.g. fewer optimizer
                     steps, stale pilots, a narrower mix of prompts).

An informative group is a trained group with reward variance (effective_prompt_ratio x groups of
a step). Counts up to each strategy's seed-mean rollouts to target (summary.json), averaged over
seeds, interpolated within the step that crosses it. Reads a compare directory (runs/STRATEGY/seedN
and summary.json), e.g.

    python benchmarks/decompose_speedup.py runs/bench20

or a `rollalloc simulate` directory (summary.json and one steps.jsonl with strategy and seed
fields), e.g. the simulated testbed of docs/simulator.md, "Predicting the paper-regime testbed".
"""

import argparse
import json
from pathlib import Path

import numpy as np

from rollalloc.train.compare import read_jsonl


def counts_at(steps: list[dict], rollouts: float) -> tuple[float, float, float]:
    """(optimizer steps, informative groups, discarded rollouts) spent up to `rollouts`."""
    cum = np.array([0.0] + [s["cum_rollouts"] for s in steps])
    inf = np.cumsum([0.0] + [s["effective_prompt_ratio"] * s["groups"] for s in steps])
    disc = np.cumsum([0.0] + [s.get("discarded_rollouts", 0) for s in steps])
    idx = np.arange(len(cum), dtype=np.float64)
    return tuple(float(np.interp(rollouts, cum, y)) for y in (idx, inf, disc))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("root", help="a compare output directory (summary.json, runs/)")
    ap.add_argument("--baseline", default="grpo")
    ap.add_argument(
        "--fraction",
        help="decompose at another target of summary.json's targets_at (e.g. 0.5) instead of "
        "the main one",
    )
    args = ap.parse_args()
    root = Path(args.root)
    summary = json.loads((root / "summary.json").read_text())
    seeds = summary["seeds"]
    merged = {}  # (strategy, seed) -> steps, from a simulate directory's single steps.jsonl
    if not (root / "runs").is_dir() and (root / "steps.jsonl").is_file():
        for rec in read_jsonl(root / "steps.jsonl"):
            merged.setdefault((rec["strategy"], rec["seed"]), []).append(rec)
    rows = {}
    at = summary["targets_at"][args.fraction]["rollouts_to_target"] if args.fraction else None
    for name, s in summary["strategies"].items():
        rtt = s.get("rollouts_to_target") if at is None else at.get(name)
        if rtt is None:
            continue
        per_seed = []
        for seed in s.get("seeds", seeds):  # the strategy's own seeds (a benchmark by precision)
            f = root / "runs" / name / f"seed{seed}" / "steps.jsonl"
            if f.is_file():
                per_seed.append(counts_at(read_jsonl(f), rtt))
            elif (name, seed) in merged:
                per_seed.append(counts_at(merged[(name, seed)], rtt))
        if per_seed:
            n_steps, n_inf, disc = np.mean(per_seed, axis=0)
            rows[name] = dict(rtt=rtt, steps=n_steps, inf=n_inf, disc=disc / rtt, cost=rtt / n_inf)
    base = rows[args.baseline]
    print(
        f"{'strategy':16s} {'rollouts':>9s} {'opt steps':>9s} {'inf groups':>10s} "
        f"{'rollouts/inf':>12s} {'discarded':>9s} {'speedup':>7s} = {'cost':>5s} x {'learning':>8s}"
    )
    for name, r in rows.items():
        cost, learn = base["cost"] / r["cost"], base["inf"] / r["inf"]
        print(
            f"{name:16s} {r['rtt']:9,.0f} {r['steps']:9.1f} {r['inf']:10.1f} {r['cost']:12.1f} "
            f"{r['disc']:9.1%} {base['rtt'] / r['rtt']:7.2f} = {cost:5.2f} x {learn:8.2f}"
        )


if __name__ == "__main__":
    main()
