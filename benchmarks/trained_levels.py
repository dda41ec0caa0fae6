"""Which levels a strategy trains in the simulator, and at what pass rate (presets with `levels`).

Counts the groups a strategy's learner receives by the prompt's level and records each prompt's
true pass rate at the update, over simulated seeds; prints the share of groups per level and the
mean pass rate of the trained prompts, for each variant given (docs/simulator.md, "Predictions of
session 9": where p_max's simulated loss comes from).

    python benchmarks/trained_levels.py --preset testbed-paper --strategy posterior-signal \\
        --group-size 32 --train-prompts 16 --budget-rollouts 98304 --seeds 0,1,2,3,4 \\
        --variant default: --variant pmax:p_max=0.75
"""

import argparse
import collections

import numpy as np
import yaml

from rollalloc.sim import roles
from rollalloc.sim import run as simrun
from rollalloc.sim.policy import load_preset


def count_levels(preset, strategy, options, seeds, budget, sim_config=None):
    """{level: (share of trained groups, mean pass rate at the update)} over the seeds."""
    groups, pass_sum = collections.Counter(), collections.Counter()
    original = roles.SimLearner.update

    def update(self, batch):
        pol = self.policy
        p = pol.success_prob(np.asarray(batch.prompt_ids))  # (G,) before this update
        for pid, pi in zip(batch.prompt_ids, p):
            name = pol.level_names[pol.cluster[pid]]
            groups[name] += 1
            pass_sum[name] += float(pi)
        return original(self, batch)

    roles.SimLearner.update = update
    try:
        for seed in seeds:
            simrun.simulate_run(
                strategy,
                preset,
                seed,
                budget_rollouts=budget,
                eval_every_rollouts=budget,
                options=options,
                sim_config=sim_config,
            )
    finally:
        roles.SimLearner.update = original
    total = sum(groups.values())
    return {k: (groups[k] / total, pass_sum[k] / groups[k]) for k in sorted(groups)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="testbed-paper")
    ap.add_argument("--strategy", default="posterior-signal")
    ap.add_argument("--group-size", type=int, default=32)
    ap.add_argument("--train-prompts", type=int, default=16)
    ap.add_argument("--budget-rollouts", type=int, default=98304)
    ap.add_argument("--seeds", default="0,1,2,3,4")
    ap.add_argument(
        "--variant",
        action="append",
        default=None,
        help="NAME:KEY=VALUE,... strategy options of one variant (repeatable)",
    )
    ap.add_argument("--sim", action="append", default=[], help="sim.FIELD=VALUE for every variant")
    args = ap.parse_args()
    preset = load_preset(args.preset)
    if not preset.levels:
        raise SystemExit(f"preset {args.preset!r} has no levels")
    cfg = preset.sim.replace(
        **{
            k: yaml.safe_load(v)
            for k, v in (s.removeprefix("sim.").split("=", 1) for s in args.sim)
        }
    )
    seeds = [int(s) for s in args.seeds.split(",")]
    for spec in args.variant or ["default:"]:
        name, _, kv = spec.partition(":")
        opts = {k: yaml.safe_load(v) for k, v in (s.split("=", 1) for s in kv.split(",") if s)}
        options = simrun.strategy_options(
            args.strategy,
            train_prompts=args.train_prompts,
            group_size=args.group_size,
            options=opts,
        )
        res = count_levels(preset, args.strategy, options, seeds, args.budget_rollouts, cfg)
        print(f"{name}: " + "  ".join(f"{k} {s:.3f} (p {p:.2f})" for k, (s, p) in res.items()))


if __name__ == "__main__":
    main()
