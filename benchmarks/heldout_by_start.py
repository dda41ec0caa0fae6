"""Where on the held-out set strategies differ: each held-out prompt's exact pass rate under the
warm start and under each run's final checkpoint, per level and bin of the warm start's pass rate,
and a level's hardest prompts one by one (docs/simulator.md, "Session 42": real MoPPS on a
disjoint warm start leaves the 2-term sums with a carry where they started, GRPO lifts them).

    rollalloc train --config configs/testbed.yaml --strategy mopps --seed 0 ... --out ROOT/mopps/seed0
    python benchmarks/heldout_by_start.py ROOT [--level 2x1d] [--edges 0,0.001,0.05,0.2,0.5,1]
        [--simulate PRESET --sim-seeds 10,11]

ROOT/STRATEGY/seedN run directories of one warm start (run.json and a checkpoint); exact pass
rates as the trainer's eval_metric='exact' computes them (P(answer + EOS | prompt) at the runs'
temperature). The warm start is read from the runs' cache (run.json's warm_start key under the
config's cache_dir, relative to the working directory) unless --warm-start DIR names it.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # fit_testbed_preset, beside this file


def by_start(
    levels: np.ndarray, p0: np.ndarray, finals: dict[str, np.ndarray], edges: list[float]
) -> list[dict]:
    """levels (M,), p0 (M,) the warm start's pass rate of each held-out prompt, finals {strategy:
    (R, M) final pass rates of its R runs}. One row per level and bin [lo, hi) of p0 (the last bin
    closed) holding prompts: the level, the bin, the count, the mean p0 and each strategy's mean
    final pass rate (over its runs and the bin's prompts)."""
    rows = []
    for level in sorted(set(levels.tolist())):
        for k, (lo, hi) in enumerate(zip(edges[:-1], edges[1:])):
            last = k == len(edges) - 2
            inside = (levels == level) & (p0 >= lo) & ((p0 < hi) | (last & (p0 <= hi)))
            if not inside.any():
                continue
            rows.append(
                {
                    "level": level,
                    "bin": [lo, hi],
                    "prompts": int(inside.sum()),
                    "start": float(p0[inside].mean()),
                    **{s: float(f[:, inside].mean()) for s, f in finals.items()},
                }
            )
    return rows


def simulated(preset_name: str, runs: dict[str, dict], seeds: list[int]):
    """The same for the simulator: levels (M,), the simulated start p0 (M,) and {strategy: (S, M)}
    final held-out pass rates of runs of the preset at each strategy's real run's shape and options
    (`runs`: strategy -> one of its run.json; as trained_groups.sim_groups sets them up)."""
    from fit_testbed_preset import real_strategy_options

    from rollalloc.sim.policy import SimPolicy, load_preset
    from rollalloc.sim.run import simulate_run

    finals, start = {}, None
    for s, run in runs.items():
        preset = load_preset(preset_name)
        cfg = run["config"]
        preset.sim = preset.sim.replace(ref_group_size=cfg["group_size"])
        start = start or SimPolicy(preset)
        options = real_strategy_options({s: {0: {"run": run}}}, s, run)
        out = []
        for seed in seeds:
            kept: list = []

            def part(pol, kept=kept):  # the run's own policy object, whole pool kept
                kept.append(pol)
                return np.arange(pol.num_prompts)

            simulate_run(
                s, preset, seed, budget_rollouts=cfg["budget_rollouts"],
                eval_every_rollouts=cfg["budget_rollouts"], options=options, part=part,
            )  # fmt: skip
            out.append(kept[0].eval_success_prob())
        finals[s] = np.array(out)
    levels = np.array(start.level_names)[start.eval_cluster]
    return levels, start.eval_success_prob(), finals


def show(rows: list[dict], strategies: list[str], edges: list[float]) -> None:
    """Print by_start's rows; a bin is [lo, hi), the last [lo, hi] (closed)."""
    for row in rows:
        lo, hi = row["bin"]
        cells = "  ".join(f"{s} {row[s]:.3f}" for s in strategies)
        shut = "]" if hi == edges[-1] else ")"
        print(f"{row['level']:6s} [{lo:g}, {hi:g}{shut}  n {row['prompts']:3d}"
              f"  start {row['start']:.3f}  {cells}")  # fmt: skip


def final_checkpoint(run: Path) -> Path:
    steps = sorted((run / "checkpoints").glob("step-*"))
    if not steps:
        raise SystemExit(f"heldout_by_start: {run} has no checkpoint (checkpoints/step-*)")
    return steps[-1]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    ap.add_argument("root", help="ROOT/STRATEGY/seedN run directories of one warm start")
    ap.add_argument("--warm-start", metavar="DIR", help="the warm start (default: the runs' cache)")
    ap.add_argument("--level", default="2x1d", help="the level whose hardest prompts are listed")
    ap.add_argument("--edges", default="0,0.001,0.05,0.2,0.5,1", help="bins of the start's rate")
    ap.add_argument("--list", type=int, default=20, metavar="K", help="list its K hardest (20)")
    ap.add_argument(
        "--simulate", metavar="PRESET", help="also the simulator's runs (a levels preset)"
    )
    ap.add_argument("--sim-seeds", default="10,11", help="the simulated seeds (10,11)")
    args = ap.parse_args(argv)
    try:
        edges = [float(x) for x in args.edges.split(",")]
    except ValueError:
        ap.error(f"--edges must be numbers separated by commas, got {args.edges!r}")
    if len(edges) < 2 or any(b <= a for a, b in zip(edges, edges[1:])):
        ap.error(f"--edges must rise, at least two, got {args.edges!r}")
    if args.list < 0:
        ap.error(f"--list must be >= 0, got {args.list}")
    try:
        seeds = [int(x) for x in args.sim_seeds.split(",")]
    except ValueError:
        ap.error(f"--sim-seeds must be integers separated by commas, got {args.sim_seeds!r}")
    if not Path(args.root).is_dir():
        raise SystemExit(f"heldout_by_start: no directory {args.root}")
    runs = {
        s.name: sorted(d for d in s.glob("seed*") if (d / "run.json").is_file())
        for s in sorted(p for p in Path(args.root).iterdir() if p.is_dir())
    }
    runs = {s: r for s, r in runs.items() if r}
    if not runs:
        raise SystemExit(f"heldout_by_start: no ROOT/STRATEGY/seedN/run.json under {args.root}")
    meta = {d: json.loads((d / "run.json").read_text()) for r in runs.values() for d in r}
    for d, m in meta.items():
        if not isinstance(m.get("warm_start"), dict) or not m["warm_start"].get("key"):
            raise SystemExit(f"heldout_by_start: {d}/run.json names no warm start (warm_start.key)")
    keys = {m["warm_start"]["key"] for m in meta.values()}
    if len(keys) != 1:
        raise SystemExit(f"heldout_by_start: the runs have different warm starts {sorted(keys)}")
    for r in runs.values():  # a missing checkpoint fails here, before any model is loaded
        for d in r:
            final_checkpoint(d)

    from rollalloc.tasks import run_pool

    first = next(iter(meta.values()))
    cfg = first["config"]
    ev = run_pool(cfg, first.get("pool_part")).eval
    prompts, answers = list(ev["prompt"]), [str(a) for a in ev["answer"]]
    levels = np.asarray(ev["level"]).astype(str)
    if args.level not in set(levels.tolist()):
        raise SystemExit(
            f"heldout_by_start: no held-out level {args.level!r} (has {sorted(set(levels.tolist()))})"
        )

    import torch
    from safetensors.torch import load_model

    from rollalloc.train.evaluator import exact_pass_rates
    from rollalloc.train.model import load_policy

    warm = Path(
        args.warm_start or Path(cfg.get("cache_dir", ".cache/rollalloc")) / "warmstart" / keys.pop()
    )
    if not warm.is_dir():
        raise SystemExit(f"heldout_by_start: no warm start at {warm} (pass --warm-start DIR)")
    torch.set_num_threads(1)
    model, tok = load_policy(warm)

    def rates() -> np.ndarray:
        return exact_pass_rates(model, tok, prompts, answers, temperature=cfg["temperature"])

    p0 = rates()
    finals = {}
    for s, r in runs.items():
        out = []
        for d in r:
            load_model(model, str(final_checkpoint(d) / "model.safetensors"))
            out.append(rates())
        finals[s] = np.array(out)  # (R, M)
    print(f"held-out exact pass rate by the warm start's ({warm}); runs per strategy: "
          + ", ".join(f"{s} {len(r)}" for s, r in runs.items()))  # fmt: skip
    show(by_start(levels, p0, finals, edges), list(runs), edges)
    outside = int(((p0 < edges[0]) | (p0 > edges[-1])).sum())
    if outside:
        print(f"({outside} held-out prompts start outside the edges and are in no bin)")
    if args.simulate:
        one = {s: meta[r[0]] for s, r in runs.items()}
        lv, q0, sim = simulated(args.simulate, one, seeds)
        print(f"simulated ({args.simulate}, seeds {args.sim_seeds}), by the simulated start:")
        show(by_start(lv, q0, sim, edges), list(runs), edges)
    at = np.flatnonzero(levels == args.level)
    print(f"the {min(args.list, len(at))} hardest of {args.level} at the start:")
    for i in at[np.argsort(p0[at], kind="stable")][: args.list]:
        cells = "  ".join(f"{s} {finals[s][:, i].mean():.3f}" for s in runs)
        print(f"  {prompts[i]:>12s} {answers[i]:>5s}  start {p0[i]:.4f}  {cells}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
