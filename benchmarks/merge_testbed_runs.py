"""Merge testbed runs made by separate commands into one report (summary.json, curves, report.html).

Default: the runs of all eight strategies on the default testbed (runs/testbed-all8), after
`rollalloc compare --task arith --strategies grpo,dapo,pilot-commit,cero --seeds 0,1,2
--budget-rollouts 98304 --out runs/cmp3` and `rollalloc train` for the four peers x 3 seeds with the
same testbed config into runs/cmp3-peers/runs/STRATEGY/seedN:

    python benchmarks/merge_testbed_runs.py

Any other set, e.g. the Pilot-Commit ablations of docs/testbed.md (each a directory
runs/cmp3-ablation/runs/NAME/seedN written by `rollalloc train --out ...`; NAME is the label in the
report, the baseline must be among them):

    python benchmarks/merge_testbed_runs.py --roots runs/cmp3/runs runs/cmp3-ablation/runs \\
        --out runs/cmp3-ablation-report
"""

import argparse
import json
from pathlib import Path

from rollalloc.report import write_report
from rollalloc.train.compare import read_jsonl, speedup_table

ORDER = ["grpo", "dapo", "pilot-commit", "cero", "speed-rl", "greso", "mopps", "knapsack"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--roots", nargs="+", default=["runs/cmp3/runs", "runs/cmp3-peers/runs"])
    ap.add_argument("--out", default="runs/testbed-all8")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--baseline", default="grpo")
    ap.add_argument("--fraction", type=float, default=0.9)
    args = ap.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]

    runs, cfgs, budgets = {}, {}, set()
    for root in args.roots:
        for sdir in sorted(Path(root).iterdir()):
            for seed in seeds:
                d = sdir / f"seed{seed}"
                if not (d / "run.json").is_file():
                    continue
                runs.setdefault(sdir.name, {})[seed] = {
                    "evals": read_jsonl(d / "evals.jsonl"),
                    "steps": read_jsonl(d / "steps.jsonl"),
                }
                config = json.loads((d / "run.json").read_text())["config"]
                cfgs[sdir.name] = config.get("strategy_config", {})
                budgets.add(config["budget_rollouts"])
    if args.baseline not in runs:
        raise SystemExit(f"no runs of the baseline {args.baseline!r} under {args.roots}")
    if len(budgets) != 1:
        raise SystemExit(f"the runs have different budgets {sorted(budgets)}: not comparable")
    names = [s for s in ORDER if s in runs] + sorted(set(runs) - set(ORDER))
    runs = {s: runs[s] for s in names}
    print({s: sorted(v) for s, v in runs.items()})
    summary = write_report(
        args.out,
        kind="compare",
        task="arith",
        seeds=seeds,
        budget_rollouts=budgets.pop(),
        runs=runs,
        strategy_configs={s: cfgs[s] for s in runs},
        baseline=args.baseline,
        fraction=args.fraction,
        extra={"merged_from": args.roots},
    )
    print(speedup_table(summary))
    t5 = summary["targets_at"]["0.5"]
    print("0.5 target", t5["value"], t5["rollouts_to_target"])
    for s, v in summary["strategies"].items():
        print(
            s,
            v["per_seed_rollouts_to_target"],
            round(v["mean_effective_prompt_ratio"], 2),
            v["total_rollouts"],
        )


if __name__ == "__main__":
    main()
