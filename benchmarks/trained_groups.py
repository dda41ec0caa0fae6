"""Which groups each strategy trains on a real run: per task level, the groups, those with reward
variance, their success rates and the distinct prompts, from runs trained with `log_groups`
(steps.jsonl `trained`; docs/testbed.md, "Which groups each strategy trains").

    rollalloc train --config configs/testbed-paper.yaml --strategy mopps --seed 0 \\
        --set log_groups=true --out runs/groups/runs/mopps/seed0
    python benchmarks/trained_groups.py runs/groups/runs

ROOT/STRATEGY/seedN run directories; counts are seed means. With --simulate PRESET the simulator's
runs of the same strategies and seeds are counted the same way (the learner's batches; a preset
with levels), so the two sides' choices can be set side by side (docs/simulator.md).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fit_testbed_preset import pool_levels_of  # noqa: E402

BINS = (0.0, 0.125, 0.25, 0.5, 0.75, 1.0)  # success-rate bins of the groups with variance


def summarise(runs: list[Iterable[tuple[str, int, float]]]) -> dict[str, dict]:
    """runs: per run, (level, prompt id, mean reward) of every group it trained. Returns {level:
    groups, varying (0 < mean < 1), bins (varying groups per BINS interval, the last closed),
    distinct prompts, mean reward}, each count a mean over the runs."""
    by: dict[str, list[tuple[int, int, float]]] = {}
    for r, groups in enumerate(runs):
        for level, pid, m in groups:
            by.setdefault(level, []).append((r, pid, m))
    n = len(runs)
    out = {}
    for level, rows in sorted(by.items()):
        m = np.array([v for _, _, v in rows])
        var = m[(m > 0) & (m < 1)]
        out[level] = {
            "groups": len(m) / n,
            "varying": len(var) / n,
            "bins": (np.histogram(var, bins=BINS)[0] / n).tolist(),
            "distinct": len({(r, p) for r, p, _ in rows}) / n,
            "mean_reward": float(m.mean()),
        }
    return out


def real_groups(run_dir: Path) -> list[tuple[str, int, float]]:
    """(level, prompt id, mean reward) of every group a real run trained (`log_groups`)."""
    run = json.loads((run_dir / "run.json").read_text())
    levels = pool_levels_of(run)
    out = []
    for line in (run_dir / "steps.jsonl").read_text().splitlines():
        t = json.loads(line).get("trained")
        if t is None:
            raise SystemExit(f"{run_dir}: no `trained` records; train with --set log_groups=true")
        out += [(str(levels[p]), p, m) for p, m in zip(t["prompt_ids"], t["mean_reward"])]
    return out


def sim_groups(preset_name: str, strategy: str, seed: int, shape: dict) -> list:
    """The same for a simulated run of the preset at the real run's shape."""
    from rollalloc.sim import roles
    from rollalloc.sim import run as simrun
    from rollalloc.sim.policy import load_preset

    preset = load_preset(preset_name)
    out: list[tuple[str, int, float]] = []
    original = roles.SimLearner.update

    def update(self, batch):
        pol = self.policy
        for pid, _, r in batch.groups():
            out.append((pol.level_names[pol.cluster[pid]], pid, float(np.mean(r))))
        return original(self, batch)

    roles.SimLearner.update = update
    try:
        options = simrun.strategy_options(
            strategy, train_prompts=shape["train_prompts"], group_size=shape["group_size"]
        )
        simrun.simulate_run(
            strategy,
            preset,
            seed,
            budget_rollouts=shape["budget_rollouts"],
            eval_every_rollouts=shape["budget_rollouts"],
            options=options,
        )
    finally:
        roles.SimLearner.update = original
    return out


def table(name: str, s: dict[str, dict]) -> str:
    lines = [f"{name}"]
    for level, r in s.items():
        bins = " ".join(f"{b:5.0f}" for b in r["bins"])
        lines.append(
            f"  {level:6s} groups {r['groups']:6.0f}  varying {r['varying']:6.0f}  "
            f"distinct {r['distinct']:5.0f}  mean reward {r['mean_reward']:.2f}  "
            f"success bins of the varying [{bins}]"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("root", help="ROOT/STRATEGY/seedN run directories (log_groups)")
    ap.add_argument("--simulate", metavar="PRESET", help="also count the simulator's runs")
    args = ap.parse_args(argv)
    print(f"success-rate bins of the groups with variance: {list(BINS)}; counts are seed means")
    for sdir in sorted(p for p in Path(args.root).iterdir() if p.is_dir()):
        runs = sorted(d for d in sdir.glob("seed*") if (d / "run.json").is_file())
        if not runs:
            continue
        real = [real_groups(d) for d in runs]
        print(table(f"{sdir.name} (real, {len(runs)} seeds)", summarise(real)))
        if args.simulate:
            shapes = [json.loads((d / "run.json").read_text())["config"] for d in runs]
            sim = [
                sim_groups(args.simulate, sdir.name, int(d.name[4:]), c)
                for d, c in zip(runs, shapes)
            ]
            print(table(f"{sdir.name} (simulated, {args.simulate})", summarise(sim)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
