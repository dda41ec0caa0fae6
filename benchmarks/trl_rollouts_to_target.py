"""Rollouts to target on rollalloc's testbed trained through TRL (RollallocGRPOTrainer).

Runs each strategy (default: grpo and pilot-commit) for each seed up to the same rollout budget from
the same cached warm start, evaluates the same held-out set against cumulative rollouts (every phase
counted), and writes summary.json in the schema of BENCHMARKS.md (`rollalloc.summary/2`, kind
"trl-compare"), curves per run (evals_<strategy>_<seed>.jsonl) and per-step allocator statistics
(steps_<strategy>_<seed>.jsonl). The same task, model, warm start, strategy options and evaluator
as `rollalloc train` / `rollalloc compare`, so its numbers sit beside rollalloc's own trainer's.

    nice -n 10 python benchmarks/trl_rollouts_to_target.py --out runs/trl_rtt
    python benchmarks/trl_rollouts_to_target.py --strategies grpo pilot-commit --seeds 0 1 --budget 60000

CPU-bound: on 2 shared cores a 40k-rollout run of one strategy takes minutes.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace
from pathlib import Path

from rollalloc.integrations.trl.testbed import build_testbed_trainer
from rollalloc.report.summary import ReportInputs, build_summary
from rollalloc.train.config import TrainConfig


def run_one(cfg: TrainConfig, budget: int, out: Path) -> dict:
    for stale in (out / "evals.jsonl",):
        stale.unlink(missing_ok=True)
    t0 = time.perf_counter()
    trainer, evals = build_testbed_trainer(cfg, output_dir=out, budget_rollouts=budget)
    trainer.train()
    if trainer.rollouts_generated != trainer.allocator.cum_rollouts:
        raise RuntimeError(
            f"accounting mismatch: TRL generated {trainer.rollouts_generated} rollouts, the allocator "
            f"counted {trainer.allocator.cum_rollouts}"
        )
    return {"evals": evals.evals, "steps": trainer.step_stats, "wall_s": time.perf_counter() - t0}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--strategies", nargs="+", default=["grpo", "pilot-commit"])
    ap.add_argument("--seeds", nargs="+", type=int, default=[0])
    ap.add_argument("--budget", type=int, default=40_000, help="rollouts per run (every phase)")
    ap.add_argument("--train-prompts", type=int, default=None, help="default: TrainConfig's")
    ap.add_argument("--group-size", type=int, default=None, help="default: TrainConfig's")
    ap.add_argument("--lr", type=float, default=None, help="default: TrainConfig's learner.lr")
    ap.add_argument("--eval-every", type=int, default=None, help="default: TrainConfig's")
    ap.add_argument("--eval-prompts", type=int, default=None, help="default: TrainConfig's (all)")
    ap.add_argument(
        "--fraction", type=float, default=0.9, help="target = acc0 + f (peak(grpo) - acc0)"
    )
    ap.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    ap.add_argument(
        "--config", default=None, help="JSON file of TrainConfig fields (overrides defaults)"
    )
    ap.add_argument("--out", default="runs/trl_rollouts_to_target")
    ap.add_argument(
        "--reuse",
        action="store_true",
        help="load a (strategy, seed) run already written in --out instead of training it again",
    )
    a = ap.parse_args()
    if "grpo" not in a.strategies:
        raise SystemExit("--strategies must include grpo: the target is defined by its peak")

    base = TrainConfig()
    if a.config:
        from rollalloc.train.config import config_from_dict

        values = json.loads(Path(a.config).read_text())
        base = config_from_dict({"budget_rollouts": a.budget, **values})
    overrides = {
        "train_prompts": a.train_prompts,
        "group_size": a.group_size,
        "eval_every_rollouts": a.eval_every,
        "eval_prompts": a.eval_prompts,
        "threads": a.threads,
    }
    base = replace(base, **{k: v for k, v in overrides.items() if v is not None})
    if a.lr is not None:
        base = replace(base, learner=replace(base.learner, lr=a.lr))
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    runs: dict[str, dict[int, dict]] = {}
    configs: dict[str, dict] = {}
    for strategy in a.strategies:
        for seed in a.seeds:
            cfg = replace(base, strategy=strategy, seed=seed)
            configs[strategy] = cfg.strategy_options(constant_batch=True)  # TRL's fixed batch
            evals_file, steps_file = (
                out / f"evals_{strategy}_{seed}.jsonl",
                out / f"steps_{strategy}_{seed}.jsonl",
            )
            if a.reuse and evals_file.exists() and steps_file.exists():
                print(f"== {strategy} seed {seed}: reusing {evals_file}", flush=True)
                runs.setdefault(strategy, {})[seed] = {
                    "evals": [json.loads(x) for x in evals_file.read_text().splitlines()],
                    "steps": [json.loads(x) for x in steps_file.read_text().splitlines()],
                    "wall_s": None,
                }
                continue
            print(f"== {strategy} seed {seed}: {configs[strategy]}", flush=True)
            run = run_one(cfg, a.budget, out / f"{strategy}_{seed}")
            runs.setdefault(strategy, {})[seed] = run
            with open(evals_file, "w") as f:
                f.writelines(json.dumps(e) + "\n" for e in run["evals"])
            with open(steps_file, "w") as f:
                f.writelines(json.dumps(s) + "\n" for s in run["steps"])
    summary, _ = build_summary(
        ReportInputs(
            kind="trl-compare",
            task=base.task,
            seeds=a.seeds,
            budget_rollouts=a.budget,
            runs=runs,
            strategy_configs=configs,
            fraction=a.fraction,
            extra={
                "trainer": "trl",
                "train_config": {
                    k: v for k, v in base.to_dict().items() if k not in ("strategy", "seed")
                },
                "run_wall_s": {
                    s: {str(k): r["wall_s"] for k, r in by.items()} for s, by in runs.items()
                },
            },
        )
    )
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    print(
        f"initial accuracy {summary['initial_accuracy']:.4f}, target {summary['target']['value']:.4f}"
    )
    for s, v in summary["strategies"].items():
        print(
            f"{s:14s} rollouts_to_target {v['rollouts_to_target']}  final {v['final_accuracy']}  "
            f"peak {v['peak_accuracy']}  effective prompt ratio {v['mean_effective_prompt_ratio']}"
        )
    print("speedup", json.dumps(summary["speedup"]))
    print(f"wrote {out / 'summary.json'}")


if __name__ == "__main__":
    main()
