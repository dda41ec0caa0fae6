"""`rollalloc train | compare | demo | columns` (registered into rollalloc.cli; torch is imported lazily)."""

from __future__ import annotations

import argparse
import json
from typing import Any

DEMO_STRATEGIES = "grpo,dapo,pilot-commit,cero"
DEMO_BUDGET = 65_536
"""Rollouts per strategy in `rollalloc demo`: the paper-regime testbed (PAPER_TESTBED), one seed,
two thirds of its budget (docs/testbed.md)."""
DEFAULT_MAX_SEEDS = 60
"""`rollalloc compare --half-width`: the most seeds of any strategy (`--max-seeds`)."""


TRAIN_FLAGS = (
    "task",
    "model",
    "budget_rollouts",
    "max_steps",
    "group_size",
    "train_prompts",
    "threads",
    "device",
    "backend",
)
"""TrainConfig fields that are flags of train and compare (help and type from the dataclass); any
field is reachable with --set PATH=VALUE."""


def _base_from_args(args: argparse.Namespace) -> dict[str, Any]:
    """The TrainConfig mapping of the command line: --config < flags < --set (rollalloc.settings).
    For `train`, `options.<strategy>` is resolved into strategy_config here; `compare` keeps
    `options` for each run's config (train.compare.run_config)."""
    from rollalloc.settings import apply_sets, config_for_strategy, flag_values
    from rollalloc.settings import strategy_options_by_name as by_name
    from rollalloc.train.config import TrainConfig, load_config, merge

    base: dict[str, Any] = load_config(args.config) if getattr(args, "config", None) else {}
    over = flag_values(args, TrainConfig)
    if getattr(args, "task_config_json", None):
        try:
            tc = json.loads(args.task_config_json)
        except json.JSONDecodeError as e:
            raise ValueError(
                f"--task-config {args.task_config_json!r}: not JSON ({e.msg})"
            ) from None
        if not isinstance(tc, dict):
            raise ValueError("--task-config must be a JSON object")
        over["task_config"] = tc
    if getattr(args, "no_progress", False):
        over["progress"] = False
    d = apply_sets(merge(base, over), getattr(args, "set", None), TrainConfig)
    if getattr(args, "command", "train") == "train":
        strategy = d.get("strategy", TrainConfig.strategy)
        by_name(d.get("options"), [strategy], "train")
        d = config_for_strategy(d, strategy)
    return d


def _common(p: argparse.ArgumentParser) -> None:
    from rollalloc.settings import add_flags, add_set_flag
    from rollalloc.train.config import TrainConfig

    p.add_argument("--config", help="YAML/JSON file of TrainConfig fields")
    p.add_argument(
        "--task-config", dest="task_config_json", help="JSON object of task options (task_config)"
    )
    add_flags(p, TrainConfig, TRAIN_FLAGS, backend={"choices": ("hf", "vllm")})
    add_set_flag(p, "learner.lr=2e-5")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def _quiet_hf() -> None:
    """No tqdm "Loading weights" / download bars from transformers and huggingface_hub in the
    output of train and compare (their logs are ours)."""
    import os

    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
    except ImportError:  # pragma: no cover
        pass


def preflight_train(args: argparse.Namespace, resume: bool):
    """The TrainConfig of `rollalloc train` and its task, every input checked before the warm
    start: config, strategy and options, device, run directory, task file and prompt lengths."""
    from rollalloc.preflight import check_out_dir
    from rollalloc.train.config import config_from_dict
    from rollalloc.train.preflight import check_config, check_task
    from rollalloc.train.trainer import build_task

    cfg = config_from_dict(_base_from_args(args))
    check_config(cfg)
    check_out_dir(cfg.out, resume=resume, command="train")
    task = build_task(cfg)
    check_task(cfg, task)
    return cfg, task


def cmd_train(args: argparse.Namespace) -> int:
    from rollalloc.train.trainer import train

    cfg, task = preflight_train(args, args.resume)
    _quiet_hf()
    summary = train(cfg, resume=args.resume, task=task)
    fin, ini = summary["final_eval"], summary["initial_eval"]
    budget = f" of {cfg.budget_rollouts:,}" if cfg.budget_rollouts else ""
    print(
        f"{cfg.strategy} seed {cfg.seed}: {summary['steps']} steps, "
        f"{summary['cum_rollouts']:,}{budget} rollouts; accuracy {ini['accuracy']:.3f} -> "
        f"{fin['accuracy']:.3f}"
        + (
            f" (greedy {ini['accuracy_greedy']:.3f} -> {fin['accuracy_greedy']:.3f})"
            if "accuracy_greedy" in fin
            else ""
        )
        + f"; logs in {cfg.out}"
    )
    if summary.get("stopped"):
        print(f"{cfg.strategy} seed {cfg.seed}: {summary['stopped']}")
    return 0


def _run_compare(
    base: dict[str, Any],
    strategies: str,
    seeds: str,
    out: str,
    workers: int,
    threads: int,
    resume: bool = False,
    half_width: float | None = None,
    max_seeds: int | None = None,
) -> dict[str, Any]:
    from pathlib import Path

    from rollalloc.preflight import check_out_dir, parse_names, parse_seeds
    from rollalloc.settings import strategy_options_by_name
    from rollalloc.train.compare import check_compare, compare, speedup_table

    names = parse_names(strategies, "--strategies")
    strategy_options_by_name(base.get("options"), names, "compare")  # options.NAME: NAME runs
    seed_list = parse_seeds(seeds, "--seeds")
    for flag, v in (("--workers", workers), ("--threads-per-run", threads)):
        if v < 1:
            raise ValueError(f"{flag} must be >= 1, got {v}")
    if half_width is None and max_seeds is not None:
        raise ValueError("--max-seeds is a setting of --half-width (seeds by precision); give both")
    if half_width is not None and max_seeds is None:
        max_seeds = DEFAULT_MAX_SEEDS
    check_out_dir(out, resume=resume, command="compare")
    # every run's config and the precision settings, before the warm start
    check_compare(base, names, seed_list, out, half_width, max_seeds)
    _quiet_hf()
    summary = compare(
        base,
        names,
        seed_list,
        out,
        workers=workers,
        threads=threads,
        half_width=half_width,
        max_seeds=max_seeds,
    )
    print(speedup_table(summary))
    print(f"report: {Path(out) / 'report.html'}")
    return summary


def cmd_compare(args: argparse.Namespace) -> int:
    base = _base_from_args(args)
    base.pop("out", None)
    if "budget_rollouts" not in base and "max_steps" not in base:
        raise ValueError("compare: give --budget-rollouts")
    summary = _run_compare(
        base,
        args.strategies,
        args.seeds,
        args.out,
        args.workers,
        args.threads_per_run,
        args.resume,
        args.half_width,
        args.max_seeds,
    )
    return 1 if (summary.get("extra") or {}).get("failed_runs") else 0


def cmd_demo(args: argparse.Namespace) -> int:
    from rollalloc.train.config import PAPER_TESTBED

    base = {**PAPER_TESTBED, "budget_rollouts": args.budget_rollouts or DEMO_BUDGET}
    _run_compare(base, DEMO_STRATEGIES, "0", args.out, args.workers, 1, args.resume)
    return 0


def cmd_columns(args: argparse.Namespace) -> int:
    """Which pool column predicts pass rates, from the groups a run trained (rollalloc.columns)."""
    import math
    from pathlib import Path

    from rollalloc.columns import column_fit
    from rollalloc.tasks import run_pool

    run = Path(args.run)
    if not (run / "run.json").is_file() or not (run / "steps.jsonl").is_file():
        raise FileNotFoundError(f"{run}: not a run directory (no run.json and steps.jsonl)")
    if args.steps is not None and args.steps < 1:
        raise ValueError(f"--steps must be >= 1, got {args.steps}")
    if args.columns is not None and not [c for c in args.columns.split(",") if c.strip()]:
        raise ValueError(f"--columns {args.columns!r} names no column")
    if args.json and (Path(args.json).is_dir() or not Path(args.json).parent.is_dir()):
        raise ValueError(f"--json {args.json}: not a file in an existing folder")
    run_json = json.loads((run / "run.json").read_text())
    cfg, part = run_json["config"], run_json.get("pool_part")  # part: pool_pick='mid'
    pid: list[int] = []
    k: list[float] = []
    n: list[int] = []
    varies: list[bool] = []
    with open(run / "steps.jsonl") as fh:
        for i, line in enumerate(fh):
            if args.steps is not None and i >= args.steps:
                break
            try:
                rec = json.loads(line).get("trained")
            except json.JSONDecodeError as e:
                raise ValueError(f"{run}/steps.jsonl line {i + 1}: not JSON ({e.msg})") from None
            if rec is None:  # log_groups may have been switched on at a resume
                continue
            for j, (p, size) in enumerate(zip(rec["prompt_ids"], rec["group_sizes"])):
                s = rec["success_rate"][j] * size  # column_fit refuses a fraction (binary rewards)
                pid.append(p)
                n.append(size)
                k.append(s)
                varies.append(rec["varies"][j] if "varies" in rec else 0 < round(s) < size)
    if not pid:
        raise ValueError(
            f"{run}/steps.jsonl has no per-group records: train with --set log_groups=true "
            "(a few GRPO steps are enough)"
        )
    task = run_pool(cfg, part)
    have = [c for c in task.train if c != "prompt"]
    names = [c.strip() for c in args.columns.split(",") if c.strip()] if args.columns else have
    if not names:
        raise ValueError(
            f"the pool has no column but the prompt (its columns: {sorted(task.train)})"
        )
    missing = [c for c in names if c not in task.train]
    if missing:
        raise ValueError(
            f"the pool has no column {missing[0]!r} (its columns: {sorted(task.train)})"
        )
    fits = sorted(
        (column_fit(c, task.train[c], pid, k, n, varies=varies) for c in names),
        key=lambda f: -f.vary_skill if math.isfinite(f.vary_skill) else math.inf,
    )
    best = fits[0]
    if cfg.get("strategy", "grpo") != "grpo":
        print(
            f"note: {run} trained with {cfg['strategy']}, which chooses its prompts: the groups "
            "are not a sample of the pool; a few steps of grpo are"
        )
    print(
        f"{run}: {best.groups} groups on {best.prompts} prompts, {best.vary_rate:.0%} of them "
        f"with reward variance; sd of pass rates between prompts {math.sqrt(max(best.var_p, 0)):.2f}. "
        "Per column, on prompts it has not seen (cross-fitted, 90% bootstrap intervals): R^2 of "
        "p, the share of the variance of pass rates its values explain (a prior fitted on this "
        "many prompts per value: more steps, more); varies, the skill of its values at telling "
        "which groups vary (what strata save)"
    )

    def num(x: float, lo: float, hi: float) -> str:
        return f"{x:.2f} [{lo:.2f}, {hi:.2f}]" if math.isfinite(x) else "n/a"

    print(f"{'column':<16} {'values':>7} {'prompts/value':>14}  {'R^2 of p':<20} varies")
    for f in fits:
        r2, vary = num(f.r2, f.r2_lo, f.r2_hi), num(f.vary_skill, f.vary_lo, f.vary_hi)
        print(f"{f.column:<16} {f.values:>7} {f.prompts / f.values:>14.1f}  {r2:<20} {vary}")
    if not math.isfinite(best.r2) and not math.isfinite(best.vary_skill):
        print("no spread in pass rates and variance: nothing for a column to tell apart")
    elif best.vary_rate >= 0.8:
        print("most groups vary: strata (or any skip) have little to save here (docs/columns.md)")
    elif best.vary_skill >= 0.3:
        print(f"strata={best.column}: its values tell which groups vary (docs/columns.md)")
    else:
        print("no column tells which groups vary: strata would add little (docs/columns.md)")
    if args.json:
        rows = [
            {
                a: (None if isinstance(b, float) and not math.isfinite(b) else b)
                for a, b in f.__dict__.items()
            }
            for f in fits
        ]
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")
    return 0


def register(subparsers) -> None:
    from rollalloc.settings import add_flags
    from rollalloc.train.config import TrainConfig

    p = subparsers.add_parser(
        "train",
        help="GRPO-family training run with one strategy",
        description="Train one strategy on a task (the built-in CPU testbed by default): warm "
        "start (cached), then ask/generate/tell/update until the rollout budget; writes "
        "run.json, steps.jsonl, evals.jsonl and checkpoints into --out (docs/trainer.md). Any "
        "TrainConfig field can be set with --config FILE or --set PATH=VALUE, a strategy option "
        "with --set options.STRATEGY.KEY=VALUE (docs/options.md lists them).",
    )
    _common(p)
    add_flags(p, TrainConfig, ("strategy", "seed", "out"))
    p.add_argument("--resume", action="store_true", help="continue from the run's last checkpoint")
    p.set_defaults(func=cmd_train)

    p = subparsers.add_parser(
        "compare",
        help="strategies x seeds on one task; writes a report",
        description="Run every strategy x seed from one shared warm start, then write "
        "summary.json, curves.csv, plots and report.html with rollouts to target "
        "(docs/benchmarks.md). Takes the same options as `train`.",
    )
    _common(p)
    p.add_argument(
        "--strategies",
        default=DEMO_STRATEGIES,
        help=f"comma-separated names (default: {DEMO_STRATEGIES})",
    )
    p.add_argument("--seeds", default="0", help="seeds: 0,1,2 or a range 0-9 (default: 0)")
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument(
        "--half-width",
        type=float,
        metavar="H",
        help="seeds by precision: --seeds (at least 3) is the first round; then, round after "
        "round, one more seed of every strategy whose 90%% speedup interval over grpo is wider "
        "than +-H (unless it lies below 1 - H: slower), and of grpo, numbered on from the "
        "largest seed, until every comparison is decided or at --max-seeds. A failed run stops "
        "the rounds. Resume with the same --seeds, --half-width, --max-seeds and --workers "
        "(docs/testbed.md, 'Seeds by precision')",
    )
    p.add_argument(
        "--max-seeds",
        type=int,
        metavar="N",
        help=f"with --half-width: the most seeds of any strategy (default: {DEFAULT_MAX_SEEDS})",
    )
    p.add_argument("--workers", type=int, default=2, help="runs in parallel (default: 2)")
    p.add_argument(
        "--threads-per-run", type=int, default=1, help="torch threads of each run (default: 1)"
    )
    p.add_argument(
        "--resume",
        action="store_true",
        help="continue a comparison in --out: finished runs are reused, the others resumed",
    )
    p.set_defaults(func=cmd_compare)

    p = subparsers.add_parser(
        "columns",
        help="which pool column predicts pass rates (for posterior-signal's strata)",
        description="Read the groups a run trained (trained with --set log_groups=true; a few "
        "GRPO steps are enough) and report, for each pool column, the share of the variance of "
        "pass rates between prompts that the column's values explain on prompts they have not "
        "seen (docs/columns.md).",
    )
    p.add_argument("run", help="a run directory of `rollalloc train` with log_groups=true")
    p.add_argument("--columns", help="comma-separated columns (default: every one but prompt)")
    p.add_argument("--steps", type=int, help="use the first N steps' groups (default: all)")
    p.add_argument("--json", help="also write the fits to this file")
    p.set_defaults(func=cmd_columns)

    p = subparsers.add_parser(
        "demo", help="four strategies on a reduced paper-regime testbed (groups of 32), one seed"
    )
    p.add_argument("--out", default="runs/demo", help="output directory")
    p.add_argument("--budget-rollouts", type=int, help=f"rollouts per strategy ({DEMO_BUDGET})")
    p.add_argument("--workers", type=int, default=2, help="runs in parallel")
    p.add_argument("--resume", action="store_true", help="continue the demo in --out")
    p.set_defaults(func=cmd_demo)
