"""`rollalloc compare` / `rollalloc demo`: several strategies x seeds on one task, one report.

Every run starts from the same warm-start checkpoint (built once here, before any run, so that all
runs load it from the cache), uses the same held-out set and the same rollout budget, and the runs
are written like any `rollalloc train` run under `OUT/runs/STRATEGY/seedS/`. Runs execute as child
processes, `workers` at a time with `threads` torch threads each (on a 2-core machine: 2 x 1). A run
whose run.json exists with the same configuration is reused. The report is rollalloc.report's, the
same code as `rollalloc simulate`'s. With `half_width` (`--half-width`) the seeds are chosen by
precision: the given seeds are the first round, then rounds of one more seed of every strategy whose
speedup over grpo is not decided yet (rollalloc.report.precision).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from rollalloc.train.config import TrainConfig, config_from_dict


def run_config(base: dict[str, Any], strategy: str, seed: int, out: Path) -> TrainConfig:
    """One run's config: `base` with its `options.<strategy>` (rollalloc.settings) merged over
    strategy_config."""
    from rollalloc.settings import config_for_strategy

    d = {
        **config_for_strategy(base, strategy),
        "strategy": strategy,
        "seed": seed,
        "out": str(out / "runs" / strategy / f"seed{seed}"),
    }
    d["progress"] = False
    return config_from_dict(d)


def check_compare(
    base: dict[str, Any],
    strategies: list[str],
    seeds: list[int],
    out: str | Path,
    half_width: float | None = None,
    max_seeds: int | None = None,
) -> dict[tuple[str, int], TrainConfig]:
    """Every run's TrainConfig, checked (names, options, pool size, prompt lengths, the settings
    of seeds by precision) before the warm start: a bad strategy fails here, not after the others
    trained."""
    from rollalloc.train.preflight import check_config, check_task
    from rollalloc.train.trainer import build_task

    if "grpo" not in strategies:
        raise ValueError("compare: the strategies must include grpo (the baseline)")
    if half_width is not None:
        from rollalloc.report.precision import check_settings

        if max_seeds is None:
            raise ValueError("compare: seeds by precision needs max_seeds")
        check_settings(strategies, seeds, half_width, max_seeds, "grpo")
    out = Path(out)
    configs = {(s, seed): run_config(base, s, seed, out) for s in strategies for seed in seeds}
    for cfg in configs.values():
        check_config(cfg)
    task = build_task(next(iter(configs.values())))
    for cfg in configs.values():
        check_task(cfg, task)
    return configs


def _done(cfg: TrainConfig) -> bool:
    run_json = Path(cfg.out) / "run.json"
    if not run_json.is_file():
        return False
    try:
        return json.loads(run_json.read_text())["config"] == cfg.to_dict()
    except (ValueError, KeyError):
        return False


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def compare(
    base: dict[str, Any],
    strategies: list[str],
    seeds: list[int],
    out: str | Path,
    *,
    workers: int = 2,
    threads: int = 1,
    log=print,
    half_width: float | None = None,
    max_seeds: int | None = None,
) -> dict[str, Any]:
    """Run every strategy x seed from `base` (a TrainConfig mapping), then write the report.

    With `half_width`, `seeds` (at least 3) are the first round: after each round, one more seed
    of every strategy whose speedup over grpo is not decided (its interval wider than
    +-half_width, rollalloc.report.precision), and of grpo, numbered on from the largest seed,
    until every comparison is decided or at `max_seeds`; summary.json's `extra.precision` records
    the rounds and why they stopped."""
    from rollalloc.report import ReportInputs, precision, write_report
    from rollalloc.report.summary import build_summary
    from rollalloc.train.preflight import check_config
    from rollalloc.train.trainer import build_task, prepare_policy
    from rollalloc.train.warmstart import format_histogram

    out = Path(out)
    base = {**base, "threads": threads}
    configs = check_compare(base, strategies, seeds, out, half_width, max_seeds)
    out.mkdir(parents=True, exist_ok=True)
    first = next(iter(configs.values()))
    t0 = time.perf_counter()
    task = build_task(first)
    _, warm_meta = prepare_policy(first, task, log=log)  # once, before any run: all hit the cache
    if warm_meta.get("pass_rates"):
        log(format_histogram(warm_meta["pass_rates"]))
    if (warm_meta.get("memorisation") or {}).get("warning"):
        log("compare: WARNING " + warm_meta["memorisation"]["warning"])
    log(
        f"compare: warm start ready ({time.perf_counter() - t0:.0f} s); "
        f"{len(configs)} runs, {workers} at a time, {threads} thread(s) each"
    )
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
    failed: list[str] = []
    _run_all(configs, workers, env, failed, t0, log)
    seeds_of = {s: list(seeds) for s in strategies}
    loaded: dict[tuple[str, int], dict[str, Any]] = {}  # finished runs, read once

    def inputs(extra: dict[str, Any] | None = None) -> ReportInputs:
        runs: dict[str, dict[int, dict[str, Any]]] = {}
        order = {s: i for i, s in enumerate(strategies)}  # the strategies as given, seeds sorted
        for (s, seed), cfg in sorted(configs.items(), key=lambda kv: (order[kv[0][0]], kv[0][1])):
            if (s, seed) not in loaded:
                if not _done(cfg):
                    continue
                d = Path(cfg.out)
                loaded[(s, seed)] = {
                    "evals": read_jsonl(d / "evals.jsonl"),
                    "steps": read_jsonl(d / "steps.jsonl"),
                }
            runs.setdefault(s, {})[seed] = loaded[(s, seed)]
        return ReportInputs(
            kind="compare",
            task=first.task,
            seeds=sorted({seed for by_seed in runs.values() for seed in by_seed}),
            budget_rollouts=first.budget_rollouts or 0,
            runs=runs,
            strategy_configs={s: configs[(s, seeds_of[s][0])].strategy_options() for s in runs},
            baseline="grpo",
            fraction=0.9,
            extra=extra,
        )

    rounds: list[dict[str, Any]] = []
    stopped, wide = None, {}
    while half_width is not None:  # every exit follows a summary of the runs the report holds
        summary, _ = build_summary(inputs())
        n_seeds = {s: len(ss) for s, ss in seeds_of.items()}
        wide, add, stopped = precision.decide(
            summary, n_seeds, half_width=half_width, max_seeds=max_seeds, workers=workers
        )
        if failed:
            stopped = "failed runs"
            break
        rounds.append({"seeds": n_seeds, "open": {s: _finite(w) for s, w in wide.items()}})
        if stopped:
            break
        widths = ", ".join(f"{s} {w:.3f}" for s, w in wide.items())
        log(f"compare: round {len(rounds)}: one more seed of {', '.join(add)} ({widths})")
        new = []
        for s in add:
            seed = max(seeds_of[s]) + 1
            seeds_of[s].append(seed)
            configs[(s, seed)] = cfg = run_config(base, s, seed, out)
            check_config(cfg)
            new.append(cfg)
        _run_all({(c.strategy, c.seed): c for c in new}, workers, env, failed, t0, log)
    if failed:
        log("compare: FAILED runs (left out of the report): " + "; ".join(failed))
    unused = sorted(
        str(d.relative_to(out))
        for d in (out / "runs").glob("*/seed*")
        if (d / "run.json").is_file() and (d.parent.name, _seed_of(d)) not in configs
    )
    if unused:
        log(
            f"compare: {len(unused)} finished run(s) in {out / 'runs'} are not part of this "
            f"comparison (left out of the report): {', '.join(unused[:10])}"
            + (" ..." if len(unused) > 10 else "")
        )
    stopped_runs = {}  # runs whose strategy gave up (run.json `stopped`): in the report as they are
    for (s, seed), cfg in configs.items():
        run_json = Path(cfg.out) / "run.json"
        why = json.loads(run_json.read_text()).get("stopped") if run_json.is_file() else None
        if why:
            stopped_runs[f"{s}/{seed}"] = why
            log(f"compare: run {s}/{seed} {why}")
    extra: dict[str, Any] = {
        "warm_start": warm_meta,
        "testbed": {k: v for k, v in base.items() if k not in ("out", "progress")},
        "failed_runs": failed,
        "unused_runs": unused,
        "stopped_runs": stopped_runs,
    }
    final = inputs()
    if half_width is not None:
        log(f"compare: seeds by precision stopped: {stopped}")
        extra["precision"] = {
            "half_width": half_width,
            "max_seeds": max_seeds,
            "workers": workers,
            "first_seeds": list(seeds),
            "seeds": {s: len(by_seed) for s, by_seed in final.runs.items()},
            "rounds": rounds,
            "stopped": stopped,
            "left_open": {s: _finite(w) for s, w in wide.items()},
        }
    extra["compare_wall_s"] = time.perf_counter() - t0
    final.extra = extra
    return write_report(out, final)


def _seed_of(d: Path) -> int | None:
    try:
        return int(d.name[4:])
    except ValueError:
        return None


def _finite(x: float) -> float | None:
    return round(x, 4) if math.isfinite(x) else None


def _run_all(
    configs: dict[tuple[str, int], TrainConfig],
    workers: int,
    env: dict[str, str],
    failed: list[str],
    t0: float,
    log,
) -> None:
    """Run every config not yet done, `workers` at a time, seed-major (a benchmark stopped early has
    every strategy at the same seeds); failures are appended to `failed`."""
    queue = [c for c in sorted(configs.values(), key=lambda c: c.seed) if not _done(c)]
    running: list[tuple[subprocess.Popen, TrainConfig, Any]] = []
    while queue or running:
        while queue and len(running) < workers:
            cfg = queue.pop(0)
            run_dir = Path(cfg.out)
            run_dir.mkdir(parents=True, exist_ok=True)
            (run_dir / "config.json").write_text(json.dumps(cfg.to_dict(), indent=1))
            logf = open(run_dir / "train.log", "a")
            cmd = [
                sys.executable,
                "-m",
                "rollalloc.cli",
                "train",
                "--config",
                str(run_dir / "config.json"),
                "--no-progress",
                # the comparison checked its --out; a run left unfinished continues from its
                # checkpoint, a fresh one starts ("resume: no checkpoint")
                "--resume",
            ]
            running.append(
                (subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT, env=env), cfg, logf)
            )
            log(f"compare: started {cfg.strategy} seed {cfg.seed}")
        time.sleep(0.5)
        for item in list(running):
            proc, cfg, logf = item
            if proc.poll() is None:
                continue
            running.remove(item)
            logf.close()
            if proc.returncode != 0:
                failed.append(f"{cfg.strategy} seed {cfg.seed} (see {cfg.out}/train.log)")
            else:
                fin = json.loads((Path(cfg.out) / "run.json").read_text())["final_eval"]
                log(
                    f"compare: {cfg.strategy} seed {cfg.seed} done, final accuracy "
                    f"{fin['accuracy']:.3f} ({time.perf_counter() - t0:.0f} s)"
                )


def speedup_table(summary: dict[str, Any]) -> str:
    """Plain-text table of rollouts-to-target, rollouts spent and speedups from a summary.json
    mapping."""
    from rollalloc.report.summary import spent_vs_budget

    strategies = summary.get("strategies", {})
    speed = summary.get("speedup", {})
    budget = summary.get("budget_rollouts")
    others = [s for s in strategies]
    lines = [
        f"target accuracy {summary.get('target', {}).get('value', float('nan')):.3f} "
        f"(initial {summary.get('initial_accuracy', float('nan')):.3f})",
        f"{'strategy':<14}{'rollouts->target':>18}{'rollouts spent':>32}{'final acc':>11}"
        "  speedup vs " + ", ".join(others),
    ]
    for s, st in strategies.items():
        rtt = st.get("rollouts_to_target")
        sp = speed.get(s, {})
        cells = ", ".join("-" if sp.get(o) is None else f"{sp[o]:.2f}x" for o in others)
        lines.append(
            f"{s:<14}{('never' if rtt is None else f'{rtt:,.0f}'):>18}"
            f"{spent_vs_budget(st.get('total_rollouts'), budget):>32}"
            f"{st.get('final_accuracy', float('nan')):>11.3f}  {cells}"
        )
    from rollalloc.report import warnings_text

    lines += warnings_text(summary)  # the baseline did not learn, the warm start memorised, ...
    failed = (summary.get("extra") or {}).get("failed_runs")
    if failed:
        lines.append("FAILED runs (left out of the table): " + "; ".join(failed))
    return "\n".join(lines)
