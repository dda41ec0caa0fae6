"""Simulator benchmarks: speed, and rollout efficiency of every strategy on the presets.

    python benchmarks/bench_sim.py speed                  # dapo17k, 128 x 16, 1,000 steps per strategy
    python benchmarks/bench_sim.py efficiency --out runs/bench-sim   # dapo17k + deepmath, 3 seeds

`speed` times one run per strategy for 1,000 steps (GRPO: 2,048,000 rollouts) and splits the time
into the simulator's own roles (SimSampler.generate, SimLearner.update, SimEvaluator.evaluate) and
the rest (the allocator's ask/tell/batch and the loop). Goal: GRPO under 5 s, every strategy within
3x of GRPO. On shared machines only ratios within one run are stable; the core count is printed.

`efficiency` runs `rollalloc simulate` for every strategy on dapo17k and deepmath (3 seeds) and
prints rollouts to target, speedup vs grpo and dapo, ratio to oracle and the mean effective prompt
ratio; the full reports land in OUT/<preset>/.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import rollalloc.sim  # noqa: F401  (registers "oracle")
from rollalloc.sim.policy import load_preset
from rollalloc.sim.roles import SimEvaluator, SimLearner, SimSampler
from rollalloc.sim.run import simulate_run, strategy_options

FIRST = ["grpo", "dapo", "pilot-commit", "cero", "oracle"]


def all_strategies() -> list[str]:
    """Every registered strategy, the issue's five first."""
    from rollalloc.allocator import available_strategies

    return FIRST + [s for s in available_strategies() if s not in FIRST]


def timed(cls, name, bucket):
    """Wrap method `name` of `cls` so that its run time adds to bucket[0]; returns the original."""
    orig = getattr(cls, name)

    def wrapper(self, *a, **kw):
        t = time.perf_counter()
        try:
            return orig(self, *a, **kw)
        finally:
            bucket[0] += time.perf_counter() - t

    setattr(cls, name, wrapper)
    return orig


def speed(args) -> dict:
    preset = load_preset(args.preset)
    cfg = preset.sim.replace(ref_group_size=args.group_size)
    out = {"preset": preset.name, "steps": args.steps, "cpus": os.cpu_count(), "strategies": {}}
    for s in args.strategies:
        bucket = [0.0]
        originals = [
            (SimSampler, "generate", timed(SimSampler, "generate", bucket)),
            (SimLearner, "update", timed(SimLearner, "update", bucket)),
            (SimEvaluator, "evaluate", timed(SimEvaluator, "evaluate", bucket)),
        ]
        t = time.perf_counter()
        try:
            r = simulate_run(
                s,
                preset,
                0,
                budget_rollouts=10**12,
                max_steps=args.steps,
                eval_every_rollouts=args.train_prompts * args.group_size * 20,
                options=strategy_options(
                    s, train_prompts=args.train_prompts, group_size=args.group_size
                ),
                sim_config=cfg,
            )
        finally:
            for cls, name, orig in originals:
                setattr(cls, name, orig)
        total = time.perf_counter() - t
        steps = len(r["steps"])
        out["strategies"][s] = {
            "seconds": round(total, 3),
            "steps": steps,
            "ms_per_step": round(1000 * total / max(steps, 1), 3),
            "simulator_seconds": round(bucket[0], 3),
            "allocator_and_loop_seconds": round(total - bucket[0], 3),
            "rollouts": r["evals"][-1]["cum_rollouts"],
            "stopped": r["stopped"],
        }
        print(f"{s:14s} {json.dumps(out['strategies'][s])}", flush=True)
    base = out["strategies"].get("grpo", {}).get("seconds")
    if base:
        for d in out["strategies"].values():
            d["ratio_to_grpo"] = round(d["seconds"] / base, 2)
    return out


def efficiency(args) -> dict:
    from rollalloc.cli import main

    results = {}
    for preset in args.presets:
        out_dir = os.path.join(args.out, preset)
        argv = [
            "simulate",
            "--preset",
            preset,
            "--strategies",
            ",".join(args.strategies),
            "--seeds",
            args.seeds,
            "--budget-rollouts",
            str(args.budget_rollouts),
            "--train-prompts",
            str(args.train_prompts),
            "--group-size",
            str(args.group_size),
            "--out",
            out_dir,
            "--no-progress",
        ]
        for item in args.set or []:
            argv += ["--set", item]
        t = time.perf_counter()
        rc = main(argv)
        if rc != 0:
            raise SystemExit(rc)
        with open(os.path.join(out_dir, "summary.json")) as f:
            summary = json.load(f)
        results[preset] = {
            "seconds": round(time.perf_counter() - t, 1),
            "target": summary["target"]["value"],
            "initial_accuracy": summary["initial_accuracy"],
            "strategies": {
                s: {
                    "rollouts_to_target": row["rollouts_to_target"],
                    "per_seed": row["per_seed_rollouts_to_target"],
                    "speedup_vs_grpo": summary["speedup"][s].get("grpo"),
                    "speedup_vs_dapo": summary["speedup"][s].get("dapo"),
                    "ratio_to_oracle": row.get("ratio_to_oracle"),
                    "mean_effective_prompt_ratio": row["mean_effective_prompt_ratio"],
                    "final_accuracy": row["final_accuracy"],
                }
                for s, row in summary["strategies"].items()
            },
            "stopped_runs": summary["extra"].get("stopped_runs", {}),
        }
    return results


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = p.add_subparsers(dest="what", required=True)
    sp = sub.add_parser("speed")
    sp.add_argument("--preset", default="dapo17k")
    sp.add_argument("--steps", type=int, default=1000)
    ep = sub.add_parser("efficiency")
    ep.add_argument("--presets", default="dapo17k,deepmath", type=lambda s: s.split(","))
    ep.add_argument("--seeds", default="0,1,2")
    ep.add_argument("--budget-rollouts", dest="budget_rollouts", type=int, default=2_048_000)
    ep.add_argument("--out", default="runs/bench-sim")
    ep.add_argument("--set", action="append", help="passed on to rollalloc simulate")
    for q in (sp, ep):
        q.add_argument(
            "--strategies",
            default=None,
            type=lambda s: s.split(","),
            help="default: all registered",
        )
        q.add_argument("--train-prompts", dest="train_prompts", type=int, default=128)
        q.add_argument("--group-size", dest="group_size", type=int, default=16)
        q.add_argument("--json", help="also write the results to this file")
    args = p.parse_args(argv)
    args.strategies = args.strategies or all_strategies()
    res = speed(args) if args.what == "speed" else efficiency(args)
    print(json.dumps(res, indent=2))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
