"""Merge the default-testbed runs of all eight strategies into one report (runs/testbed-all8).

Usage, after `rollalloc compare --task arith --strategies grpo,dapo,pilot-commit,cero --seeds 0,1,2
--budget-rollouts 98304 --out runs/cmp3` and `rollalloc train --config C` for the four peers x 3 seeds
with the same testbed config into runs/cmp3-peers/runs/STRATEGY/seedN:

    python benchmarks/merge_testbed_runs.py
"""

import json
from pathlib import Path

from rollalloc.report import write_report
from rollalloc.train.compare import read_jsonl, speedup_table

runs, cfgs = {}, {}
for root in ("runs/cmp3/runs", "runs/cmp3-peers/runs"):
    for sdir in sorted(Path(root).iterdir()):
        for seed in (0, 1, 2):
            d = sdir / f"seed{seed}"
            if not (d / "run.json").is_file():
                continue
            runs.setdefault(sdir.name, {})[seed] = {
                "evals": read_jsonl(d / "evals.jsonl"),
                "steps": read_jsonl(d / "steps.jsonl"),
            }
            cfgs[sdir.name] = json.loads((d / "run.json").read_text())["config"].get(
                "strategy_config", {}
            )
order = ["grpo", "dapo", "pilot-commit", "cero", "speed-rl", "greso", "mopps", "knapsack"]
runs = {s: runs[s] for s in order if s in runs}
print({s: sorted(v) for s, v in runs.items()})
summary = write_report(
    "runs/testbed-all8",
    kind="compare",
    task="arith",
    seeds=[0, 1, 2],
    budget_rollouts=98304,
    runs=runs,
    strategy_configs={s: cfgs[s] for s in runs},
    baseline="grpo",
    fraction=0.9,
    extra={"merged_from": ["runs/cmp3", "runs/cmp3-peers"]},
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
