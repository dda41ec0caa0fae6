"""What an allocator left of the pool, level by level: the share of each level's prompts that a run's
last checkpoint holds as evicted (never asked again) or deferred (back next epoch), seed mean.

    python benchmarks/evicted_levels.py ROOT/runs/pilot-commit [ROOT/runs/pcNE ...]

Each argument is a strategy's directory of seedS/ runs of `rollalloc train` (run.json and
checkpoints/step-*/allocator.npz; the trainer keeps the last checkpoint of a finished run). The
level of a prompt is the pool's `level` column, rebuilt from run.json as the run built it. On the
hard pool Pilot-Commit with pilots of 2 ends with 90-100% of every learnable level evicted
(docs/testbed.md, "Eviction switched off").
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from rollalloc.state import DEFERRED, EVICTED, load_state
from rollalloc.tasks import run_pool


def last_state(run: Path) -> dict:
    """The allocator state of a run's last checkpoint."""
    found = sorted(run.glob("checkpoints/step-*/allocator.npz"))
    if not found:
        raise SystemExit(f"{run}: no checkpoints/step-*/allocator.npz (an unfinished run?)")
    return load_state(found[-1])


def level_shares(runs: list[Path]) -> dict[str, tuple[float, float]]:
    """{level: (evicted share, deferred share)}, each the mean over the runs."""
    shares: dict[str, list[tuple[float, float]]] = {}
    for run in runs:
        rj = json.loads((run / "run.json").read_text())
        levels = np.asarray(run_pool(rj["config"], rj.get("pool_part")).train["level"])
        status = np.asarray(last_state(run)["table"]["columns"]["status"])
        if len(status) != len(levels):
            raise SystemExit(
                f"{run}: {len(status)} prompts in the allocator, {len(levels)} in the pool"
            )
        for lv in sorted(set(levels.tolist())):
            on = levels == lv
            shares.setdefault(lv, []).append(
                (float((status[on] == EVICTED).mean()), float((status[on] == DEFERRED).mean()))
            )
    return {lv: tuple(np.mean(v, axis=0).tolist()) for lv, v in shares.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("strategies", nargs="+", help="directories of seedS/ runs")
    args = ap.parse_args()
    for d in map(Path, args.strategies):
        runs = sorted(p for p in d.glob("seed*") if (p / "run.json").is_file())
        if not runs:
            raise SystemExit(f"{d}: no finished seedS/ runs")
        print(f"{d.name} ({len(runs)} runs): level evicted / deferred")
        for lv, (ev, de) in level_shares(runs).items():
            print(f"  {lv:>6} {ev:6.2f} {de:6.2f}")


if __name__ == "__main__":
    main()
