"""Which pool prompts a real run learns, and when: a run's per-prompt pass-rate snapshots
(`--set log_pass_rates_every=K`), the prompts of each level binned by their pass rate at the first
snapshot, each bin's mean pass rate at every snapshot (docs/simulator.md, "Session 37").

    rollalloc train ... --set log_pass_rates_every=16 --out RUN
    python benchmarks/pass_rate_trace.py RUN [--levels 2x1d,7x1d] [--edges 0,0.001,0.05,0.2,0.5,1]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from rollalloc.tasks import run_pool
from rollalloc.train.trainer import read_pass_rate_log


def load_trace(run: Path) -> tuple[list[int], np.ndarray]:
    """The snapshots' steps and pass rates (snapshots, pool prompts), in step order."""
    try:
        steps, rates = read_pass_rate_log(run)
    except ValueError as e:
        raise SystemExit(str(e)) from None
    return steps.tolist(), rates


def trace(levels: np.ndarray, rates: np.ndarray, level: str, edges: list[float]) -> list[dict]:
    """Per bin [lo, hi) of the first snapshot's pass rate, among `level`'s prompts: the count, the
    mean pass rate at each snapshot, and the share above 0.2 at the last."""
    mine = rates[:, levels == level]  # (snapshots, prompts of the level)
    out = []
    for lo, hi in zip(edges[:-1], edges[1:]):
        inside = (mine[0] >= lo) & ((mine[0] < hi) | ((hi >= 1.0) & (mine[0] <= 1.0)))
        if inside.any():
            out.append(
                {
                    "bin": [lo, hi],
                    "prompts": int(inside.sum()),
                    "mean": [float(x) for x in mine[:, inside].mean(axis=1)],
                    "above_0.2_at_end": float(np.mean(mine[-1, inside] > 0.2)),
                }
            )
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "run",
        type=Path,
        help="a run directory with run.json and pass_rates/ (train with log_pass_rates_every > 0)",
    )
    ap.add_argument("--levels", default=None, help="comma-separated (default: every level)")
    ap.add_argument(
        "--edges",
        default="0,0.001,0.05,0.2,0.5,1",
        help="bin edges of the first snapshot's pass rate (default: %(default)s)",
    )
    a = ap.parse_args(argv)
    edges = [float(x) for x in a.edges.split(",")]
    if len(edges) < 2 or any(b <= x for x, b in zip(edges, edges[1:])):
        raise SystemExit(f"--edges {a.edges!r}: at least two increasing numbers")
    if not (a.run / "run.json").is_file():
        raise SystemExit(f"{a.run}: no run.json (a `rollalloc train` output directory is needed)")
    run_json = json.loads((a.run / "run.json").read_text())
    if "task" not in run_json.get("config", {}):
        raise SystemExit(f"{a.run}/run.json has no config.task: not a rollalloc run")
    task = run_pool(run_json["config"], run_json.get("pool_part"))
    if "level" not in task.train:
        raise SystemExit(f"task {task.name!r} has no level column")
    levels = np.asarray(task.train["level"])
    steps, rates = load_trace(a.run)
    if rates.shape[1] != len(levels):
        raise SystemExit(f"snapshots hold {rates.shape[1]} prompts, the run's pool {len(levels)}")
    wanted = a.levels.split(",") if a.levels else list(dict.fromkeys(levels.tolist()))
    print("steps " + " ".join(str(s) for s in steps))
    for level in wanted:
        m = levels == level
        if not m.any():
            raise SystemExit(f"--levels: no level {level!r} in the pool")
        print(
            f"{level}: {int(m.sum())} prompts, mean "
            + " ".join(f"{x:.3f}" for x in rates[:, m].mean(1))
        )
        for b in trace(levels, rates, level, edges):
            print(
                f"  start in [{b['bin'][0]:g}, {b['bin'][1]:g}): {b['prompts']:5d} prompts, mean "
                + " ".join(f"{x:.3f}" for x in b["mean"])
                + f"; above 0.2 at the end {b['above_0.2_at_end']:.2f}"
            )


if __name__ == "__main__":
    main()
