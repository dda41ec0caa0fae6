"""`rollalloc simulate` and `rollalloc report`.

    rollalloc simulate --strategies grpo,dapo,pilot-commit,cero,oracle --preset dapo17k \\
        --seeds 0,1,2 --budget-rollouts 2048000 --out runs/sim \\
        [--config configs/simulate.yaml] [--set options.pilot-commit.n_pilot=4 \\
        --set sim.staleness_decay=1]
    rollalloc report runs/sim        # rebuild plots, summary.json and report.html from the logs

The settings are `SimulateConfig`'s fields, in the grammar of rollalloc.settings (the same as
train's): --config FILE.yaml < flags < --set PATH=VALUE.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class SimulateConfig:
    strategies: list[str] = field(
        default_factory=lambda: ["grpo", "dapo", "pilot-commit", "cero", "oracle"]
    )
    """Strategies to compare: registry names (comma-separated on the command line)."""
    preset: str = "dapo17k"
    """The simulated pool: a built-in preset (dapo17k, deepmath, uniform, testbed-arith, ...) or the
    path of a JSON preset: num_prompts and a pass_rate_histogram or levels, and its sim settings
    (docs/simulator.md; fitted ones in benchmarks/presets/)."""
    seeds: list[int] = field(default_factory=lambda: [0, 1, 2])
    """Seeds of the runs (comma-separated on the command line)."""
    budget_rollouts: int = 2_048_000
    """Rollouts per run, every phase counted."""
    eval_every_rollouts: int | None = None
    """Evaluate each time this many rollouts are spent (None: budget_rollouts / eval_points)."""
    eval_points: int = 50
    """Evaluations per run, when eval_every_rollouts is None."""
    train_prompts: int = 128
    """Groups trained per step."""
    group_size: int = 16
    """Rollouts per trained group for every strategy; each strategy's Config maps it to its
    options (pilot-commit splits it 1:3 into n_pilot / n_commit; docs/options.md)."""
    fraction: float = 0.9
    """Target accuracy = acc0 + fraction (peak(baseline) - acc0)."""
    baseline: str = "grpo"
    """The strategy whose peak sets the target; one of strategies."""
    options: dict[str, Any] = field(default_factory=dict)
    """Strategy options by name, over those derived from group_size: {pilot-commit: {n_pilot: 4}}
    (--set options.pilot-commit.n_pilot=4; in the YAML file also `strategies:` as a mapping)."""
    sim: dict[str, Any] = field(default_factory=dict)
    """SimConfig fields over the preset's (--set sim.staleness_decay=1.0; docs/simulator.md)."""
    out: str | None = None
    """Output directory (required: on the command line or in the file)."""


DEFAULTS: dict[str, Any] = dataclasses.asdict(SimulateConfig())
YAML_KEYS = set(DEFAULTS)
FLAGS = [f.name for f in dataclasses.fields(SimulateConfig) if f.name not in ("options", "sim")]
"""Every field but the two mappings is also a flag (--budget-rollouts, ...)."""


def _old_strategy_form(path: tuple[str, ...]) -> tuple[str, ...] | None:
    """simulate's former `--set STRATEGY.KEY=VALUE`: options.STRATEGY.KEY (with a note)."""
    import rollalloc.sim.oracle  # noqa: F401  (registers "oracle")
    from rollalloc.allocator import available_strategies
    from rollalloc.settings import OPTIONS

    return (OPTIONS, *path) if path[0] in available_strategies() else None


def load_yaml_config(path: str | Path) -> dict[str, Any]:
    """A simulate config file: keys of DEFAULTS; `strategies` may be a list or a mapping
    name -> options."""

    from rollalloc.preflight import read_config_file

    p = Path(path)
    data = read_config_file(p) or {}
    if not isinstance(data, dict):
        raise ValueError(f"{p}: the top level must be a mapping")
    unknown = sorted(set(data) - YAML_KEYS)
    if unknown:
        raise ValueError(f"{p}: unknown key(s) {unknown}; known: {sorted(YAML_KEYS)}")
    data = dict(data)
    if isinstance(data.get("strategies"), dict):
        bad = [
            k for k, v in data["strategies"].items() if v is not None and not isinstance(v, dict)
        ]
        if bad:
            raise ValueError(f"{p}: strategies: the options of {bad[0]!r} must be a mapping")
        opts = {k: dict(v or {}) for k, v in data["strategies"].items()}
        data["strategies"] = list(opts)
        data["options"] = {**opts, **(data.get("options") or {})}
    return data


def resolve_settings(args: argparse.Namespace) -> dict[str, Any]:
    """Merge defaults, --config, flags and --set into one settings dict."""
    from rollalloc.preflight import check_budget, check_fraction, parse_names, parse_seeds
    from rollalloc.settings import apply_sets, flag_values

    st = dataclasses.asdict(SimulateConfig())
    if args.config:
        st.update(load_yaml_config(args.config))
    st.update(flag_values(args, SimulateConfig))
    apply_sets(st, args.set, SimulateConfig, alias=_old_strategy_form)
    st["strategies"] = parse_names(st["strategies"], "--strategies")
    st["seeds"] = parse_seeds(st["seeds"], "--seeds")
    for name in ("options", "sim"):
        if st.get(name) is not None and not isinstance(st[name], dict):
            raise ValueError(f"simulate: {name} must be a mapping, got {st[name]!r}")
    st["sim"] = dict(st.get("sim") or {})
    st["options"] = dict(st.get("options") or {})  # checked by check_strategies
    if not st["out"]:
        raise ValueError("simulate: give --out DIR (or `out:` in the config file)")
    if st["baseline"] not in st["strategies"]:
        raise ValueError(
            f"simulate: the baseline {st['baseline']!r} must be one of --strategies {st['strategies']}"
        )
    for name in ("budget_rollouts", "train_prompts", "group_size", "eval_points"):
        v = st[name]
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"simulate: {name} must be a positive integer, got {v!r}")
    if st["group_size"] < 2:
        raise ValueError(
            f"simulate: group_size must be >= 2, got {st['group_size']} (a group of one rollout "
            "has zero advantage)"
        )
    st["fraction"] = check_fraction(st["fraction"])
    if st["eval_every_rollouts"] is None:
        st["eval_every_rollouts"] = max(1, st["budget_rollouts"] // st["eval_points"])
    every = st["eval_every_rollouts"]
    if isinstance(every, bool) or not isinstance(every, int) or every < 1:
        raise ValueError(f"simulate: eval_every_rollouts must be a positive integer, got {every!r}")
    check_budget(
        st["budget_rollouts"],
        step_rollouts=st["train_prompts"] * st["group_size"],
        eval_every_rollouts=every,
    )
    return st


def check_strategies(st: dict[str, Any], preset: Any = None, sim_cfg: Any = None) -> None:
    """Unknown strategy names, unknown or conflicting options and (with `preset`) options that do
    not fit the pool fail before any run starts."""
    import rollalloc.sim.oracle  # noqa: F401  (registers "oracle")
    from rollalloc.allocator import get_strategy
    from rollalloc.preflight import check_strategy
    from rollalloc.settings import strategy_options_by_name
    from rollalloc.sim.run import strategy_options

    st["options"] = strategy_options_by_name(st["options"], st["strategies"], "simulate")
    policy = None
    for s in st["strategies"]:
        cls = get_strategy(s)  # an unknown name first, before its options
        opts = strategy_options(
            s,
            train_prompts=st["train_prompts"],
            group_size=st["group_size"],
            options=st["options"].get(s),
        )
        wire = getattr(cls, "simulator_options", None)
        if wire is not None and preset is not None:  # what simulate_run wires (the oracle's p)
            if policy is None:
                from rollalloc.sim.policy import SimPolicy

                policy = SimPolicy(preset, sim_cfg)
            opts = {**wire(policy), **opts}
        if preset is not None or wire is None:
            cfg = check_strategy(s, opts, preset.num_prompts if preset is not None else None)
            if cfg.pool_columns() and preset is not None:  # e.g. posterior-signal's strata
                if policy is None:
                    from rollalloc.sim.policy import SimPolicy

                    policy = SimPolicy(preset, sim_cfg)
                have = sorted(policy.pool_columns())
                for name in cfg.pool_columns():
                    if name not in have:
                        raise ValueError(
                            f"{s}: column {name!r} (pool_columns) is not a column of preset "
                            f"{preset.name} (its columns: {have}; `level` needs a preset with "
                            "levels)"
                        )


def cmd_simulate(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from rollalloc.preflight import check_out_dir
    from rollalloc.report import ReportInputs, write_report
    from rollalloc.sim.policy import load_preset
    from rollalloc.sim.run import simulate

    st = resolve_settings(args)
    preset = load_preset(st["preset"])
    sim_cfg = preset.sim.replace(**{"ref_group_size": st["group_size"], **st["sim"]})
    check_strategies(st, preset, sim_cfg)
    check_out_dir(st["out"], resume=False, command="simulate")
    console = Console(stderr=True)
    if not console.is_terminal:  # logs and pipes: wide enough for the whole summary table
        console = Console(stderr=True, width=120)
    total = len(st["strategies"]) * len(st["seeds"]) * st["budget_rollouts"]
    t0 = time.perf_counter()
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.percentage:>3.0f}%"),
        TimeElapsedColumn(),
        console=console,
        disable=args.no_progress,
    ) as bar:
        task = bar.add_task("simulate", total=total)
        done = {"base": 0, "key": None, "last": 0}

        def progress(strategy: str, seed: int, cum: int) -> None:
            if done["key"] != (strategy, seed):
                done["base"] += done["last"]
                done["key"], done["last"] = (strategy, seed), 0
            done["last"] = min(cum, st["budget_rollouts"])
            bar.update(
                task, completed=done["base"] + done["last"], description=f"{strategy} seed {seed}"
            )

        runs, configs = simulate(
            st["strategies"],
            preset,
            st["seeds"],
            budget_rollouts=st["budget_rollouts"],
            eval_every_rollouts=st["eval_every_rollouts"],
            train_prompts=st["train_prompts"],
            group_size=st["group_size"],
            options=st["options"],
            sim_config=sim_cfg,
            progress=progress,
        )
    stopped = {
        f"{s}/{seed}": r["stopped"]
        for s, by in runs.items()
        for seed, r in by.items()
        if r.get("stopped")
    }
    for k, why in stopped.items():
        console.print(f"[yellow]run {k} stopped early: {why}[/yellow]")
    extra = {
        "preset": preset.to_dict() | {"sim": configs.get("simulator")},
        "train_prompts": st["train_prompts"],
        "group_size": st["group_size"],
        "eval_every_rollouts": st["eval_every_rollouts"],
        "stopped_runs": stopped,
        "sim_seconds": round(time.perf_counter() - t0, 2),
        "command": " ".join(sys.argv),
    }
    summary = write_report(
        st["out"],
        ReportInputs(
            kind="simulate",
            task=preset.name,
            seeds=st["seeds"],
            budget_rollouts=st["budget_rollouts"],
            runs=runs,
            strategy_configs={s: configs[s] for s in st["strategies"]},
            baseline=st["baseline"],
            fraction=st["fraction"],
            extra=extra,
        ),
    )
    print_summary(summary, console)
    console.print(f"report: {Path(st['out']) / 'report.html'}")
    return 0


def print_summary(summary: dict[str, Any], console: Any = None) -> None:
    from rich.console import Console
    from rich.table import Table

    console = console or Console()
    if not console.is_terminal:
        console = Console(file=console.file, width=120)
    t = summary["target"]
    table = Table(
        title=f"{summary['task']}: target {t['value']:.4f} (acc0 {summary['initial_accuracy']:.4f})"
    )
    from rollalloc.report.summary import spent_vs_budget

    ran = set(summary["strategies"])
    baseline = t.get("baseline", "grpo")
    # a "vs X" column only for a strategy X that ran
    columns = ["strategy", "rollouts to target", "rollouts spent"]
    columns += [f"speedup vs {b}" for b in dict.fromkeys((baseline, "dapo")) if b in ran]
    if "oracle" in ran:
        columns.append("vs oracle")
    columns += ["final acc", "eff. prompt ratio"]
    for h in columns:
        table.add_column(h, justify="right")

    def fmt(v: Any, spec: str, missing: str = "n/a") -> str:
        return missing if v is None else format(v, spec)

    for s, row in summary["strategies"].items():
        sp = summary["speedup"].get(s, {})
        cells = {
            "strategy": s,
            "rollouts to target": fmt(row["rollouts_to_target"], ",.0f", "never"),
            "rollouts spent": spent_vs_budget(
                row.get("total_rollouts"), summary["budget_rollouts"]
            ),
            "vs oracle": fmt(row.get("ratio_to_oracle"), ".2f"),
            "final acc": fmt(row["final_accuracy"], ".4f"),
            "eff. prompt ratio": fmt(row["mean_effective_prompt_ratio"], ".3f"),
        }
        for b in dict.fromkeys((baseline, "dapo")):
            cells[f"speedup vs {b}"] = "-" if s == b else fmt(sp.get(b), ".2f")
        table.add_row(*(cells[h] for h in columns))
    console.print(table)
    from rollalloc.report.text import print_intervals

    print_intervals(summary, console)  # bootstrap intervals, verdicts and warnings (schema /2)


def cmd_report(args: argparse.Namespace) -> int:
    from rollalloc.report import rebuild_report

    summary = rebuild_report(args.dir)
    print_summary(summary)
    print(f"report: {Path(args.dir) / 'report.html'}")
    return 0


def register(subparsers: Any) -> None:
    """Add `simulate` and `report` to the rollalloc command line."""
    from rollalloc.settings import add_flags, add_set_flag

    p = subparsers.add_parser(
        "simulate",
        help="compare strategies on the simulated policy and write a report",
        description="Run strategies x seeds on a simulated policy (docs/simulator.md) through the "
        "driver loop and write summary.json, curves.csv, steps.jsonl, plots and report.html.",
    )
    p.add_argument("--config", help="YAML file with any of: " + ", ".join(DEFAULTS))
    add_flags(p, SimulateConfig, FLAGS)
    add_set_flag(p, "sim.staleness_decay=1.0")
    p.add_argument("--no-progress", dest="no_progress", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_simulate)

    r = subparsers.add_parser(
        "report", help="rebuild plots, summary.json and report.html of a report directory"
    )
    r.add_argument("dir", help="directory written by `rollalloc simulate` or `rollalloc compare`")
    r.set_defaults(func=cmd_report)
