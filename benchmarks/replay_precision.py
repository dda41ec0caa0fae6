"""Replay `rollalloc compare --half-width` on runs that already exist (docs/testbed.md, "Power").

Which seeds would a benchmark by precision have run, and how long would it have taken? Given runs
of every strategy at seeds 0..N_s-1 (more than the rule needs), this takes the rule's decisions
round by round (rollalloc.report.precision.next_round, on the same summaries `compare` builds),
reading a strategy's next seed from the existing runs instead of training it, and adds up the wall
time each of those runs took (its run.json), scheduled on `--workers` workers the way `compare`
schedules them (a round starts when the previous one has finished). It stops where the rule stops,
and leaves a strategy at the seeds that exist where it asks for more (said so).

    python benchmarks/replay_precision.py --roots runs/bench20/runs runs/bench45/runs \\
        --first 10 --half-width 0.1
"""

from __future__ import annotations

import argparse
import heapq

from power_analysis import load_seeds

from rollalloc.report import precision
from rollalloc.report.summary import ReportInputs, build_summary


def load(roots: list[str], strategies: list[str]) -> dict[str, dict[int, dict]]:
    """{strategy: {seed: {"evals", "steps", "wall_s"}}} of the finished runs (first root wins)."""
    return {s: load_seeds(roots, s, wall=True) for s in strategies}


def makespan(walls: list[float], workers: int) -> float:
    """Wall time of running `walls` in order on `workers` workers (each job to the first free)."""
    free = [0.0] * workers
    for w in walls:
        heapq.heappush(free, heapq.heappop(free) + w)
    return max(free)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--roots", nargs="+", required=True, help="dirs holding STRATEGY/seedN runs")
    ap.add_argument(
        "--strategies",
        default="grpo,dapo,pilot-commit,cero,knapsack,speed-rl,greso,mopps,posterior-signal",
    )
    ap.add_argument("--first", type=int, default=10, help="seeds of the first round")
    ap.add_argument("--half-width", type=float, default=0.1)
    ap.add_argument("--max-seeds", type=int, default=60)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument(
        "--run-seconds",
        type=float,
        help="every run's wall time (default: each run's own run.json wall_s, which carries the "
        "load of the machine it ran on)",
    )
    args = ap.parse_args()
    names = args.strategies.split(",")
    runs = load(args.roots, names)
    if args.run_seconds:
        for by_seed in runs.values():
            for r in by_seed.values():
                r["wall_s"] = args.run_seconds
    n = {s: args.first for s in names}
    for s in names:
        if any(k not in runs[s] for k in range(args.first)):
            raise SystemExit(f"{s}: seeds 0-{args.first - 1} are not all there")
    # the first round, seed-major as compare runs it
    walls = [runs[s][k]["wall_s"] for k in range(args.first) for s in names]
    wall = makespan(walls, args.workers)
    print("| round | seeds (grpo / others) | open comparisons (half-width) | runs | wall so far |")
    print("|---|---|---|---|---|")
    exhausted: set[str] = set()
    for r in range(1, 1000):
        summary, _ = build_summary(
            ReportInputs(
                kind="compare",
                task="replay",
                seeds=list(range(max(n.values()))),
                budget_rollouts=None,
                runs={s: {k: runs[s][k] for k in range(n[s])} for s in names},
                strategy_configs={s: {} for s in names},
            )
        )
        wide, add, stopped = precision.decide(  # compare's own decision
            summary, n, half_width=args.half_width, max_seeds=args.max_seeds, workers=args.workers
        )
        others = " ".join(f"{s}:{n[s]}" for s in names if s != "grpo")
        opened = ", ".join(f"{s} {w:.3f}" for s, w in wide.items()) or "none"
        print(
            f"| {r} | {n['grpo']} / {others} | {opened} | {sum(n.values())} | {wall / 60:.1f} min |"
        )
        if stopped:
            print(f"stopped: {stopped}")
            break
        out_of = sorted(
            {s for s in add if any(k not in runs[s] for k in range(n[s], n[s] + add.count(s)))}
        )
        if out_of:  # the rule would run them; no run exists: left at what exists, said so
            exhausted.update(out_of)
            add = [s for s in add if s not in out_of]
            if not [s for s in add if s != "grpo"]:
                print(f"stopped: the rule asks for more seeds of {sorted(exhausted)} than exist")
                break
        walls = []
        for s in add:
            walls.append(runs[s][n[s]]["wall_s"])
            n[s] += 1
        wall += makespan(walls, args.workers)
    vs = summary["vs_baseline"]
    print()
    print("| strategy | seeds | speedup vs grpo [90%] | half-width |")
    print("|---|---|---|---|")
    for s in names:
        if s == "grpo":
            continue
        ci = vs[s]["speedup_ci"]
        sp = vs[s]["speedup"]
        print(
            f"| {s} | {n[s]} | {'never' if sp is None else f'{sp:.2f}x'} {ci} "
            f"{vs[s]['speedup_verdict']} | {precision.speedup_half_width(vs[s]):.3f} |"
        )
    print(f"\n{sum(n.values())} runs, projected wall {wall / 60:.0f} min on {args.workers} workers")
    if exhausted:
        print(f"the rule wanted more seeds of {sorted(exhausted)} than exist (counted as they are)")


if __name__ == "__main__":
    main()
