"""Which groups each strategy trains on a real run: per task level, the groups, those with reward
variance, their success rates and the distinct prompts, from runs trained with `log_groups`
(steps.jsonl `trained`; docs/testbed.md, "Which groups each strategy trains").

    rollalloc train --config configs/testbed-paper.yaml --strategy mopps --seed 0 \\
        --set log_groups=true --out runs/groups/runs/mopps/seed0
    python benchmarks/trained_groups.py runs/groups/runs

ROOT/STRATEGY/seedN run directories; counts are seed means. --column NAME groups by another task
column than the level (e.g. arith's `answer`; docs/columns.md); `pool` is the column value's
prompts in the pool, so distinct / pool is the share ever trained. With --simulate PRESET the simulator's
runs of the same strategies and seeds are counted the same way (the learner's batches; a preset
with levels), so the two sides' choices can be set side by side (docs/simulator.md). With --half-life H each level
also gets its groups' mean recent visits: how often the prompt's string (a copy counts as its
original) was trained in earlier steps, each visit faded by 2^(-steps since / H), the count that
the simulator's repeat_decay weighs under repeat_unit='visits' and repeat_memory H (docs/simulator.md,
"Session 40"). With --replay PRESET each run's trained groups, step by step, also move the
preset's shared logits as the simulated learner would (rollalloc.sim.roles.shared_updates: the
fast component f and the wear w), so a real allocation is scored by the model's update law alone
(docs/simulator.md, "Session 43").
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fit_testbed_preset import (  # noqa: E402
    pool_levels_of,
    real_strategy_options,
    trained_groups_of,
)

BINS = (0.0, 0.125, 0.25, 0.5, 0.75, 1.0)  # success-rate bins of the groups with variance


def summarise(runs: list[Iterable[tuple[str, int, float, bool]]]) -> dict[str, dict]:
    """runs: per run, (level, prompt id, success rate, varies) of every group it trained. Returns
    {level: groups, varying (reward variance), bins (varying groups by success rate per BINS
    interval, the last closed), distinct prompt ids, mean success rate}, counts per run."""
    by: dict[str, list[tuple[int, int, float, bool]]] = {}
    for r, groups in enumerate(runs):
        for level, pid, m, v in groups:
            by.setdefault(level, []).append((r, pid, m, v))
    n = len(runs)
    out = {}
    for level, rows in sorted(by.items()):
        m = np.array([x[2] for x in rows], dtype=float)
        var = m[np.array([x[3] for x in rows], dtype=bool)]
        out[level] = {
            "groups": len(m) / n,
            "varying": len(var) / n,
            "bins": (np.histogram(var, bins=BINS)[0] / n).tolist(),
            "distinct": len({(x[0], x[1]) for x in rows}) / n,
            "success_rate": float(m.mean()),
        }
    return out


def trained_steps(run_dir: Path) -> list[list[tuple[int, float, bool]]] | None:
    """(prompt id, success rate, varies) of each group a real run trained, per step (`log_groups`);
    None for a run without the records."""
    out = []
    for line in (run_dir / "steps.jsonl").read_text().splitlines():
        step = json.loads(line)
        if "trained" not in step:
            return None
        out.append(trained_groups_of(step))
    return out


def real_groups(
    steps: list[list[tuple[int, float, bool]]], levels: np.ndarray
) -> list[tuple[str, int, float, bool]]:
    """(level, prompt id, success rate, varies) of every group of a run's `trained_steps`.
    `levels`: the pool's level (or another column) per prompt, `pool_levels_of(run, column)`."""
    return [(str(levels[p]), p, m, v) for step in steps for p, m, v in step]


def recent_visits(
    steps: list[list[tuple[str, object]]], half_life: float
) -> dict[str, list[float]]:
    """steps: a run's trained groups per step, (level, key) each, key the prompt's original (equal
    for copies). Returns {level: the recent visit count of each group}: the steps before this one
    that trained its key, each weighted 2^(-(t - t') / half_life) (a step is one visit however many
    groups of the key it holds)."""
    count: dict[object, tuple[float, int]] = {}  # key -> (faded visits, at step)
    out: dict[str, list[float]] = {}
    for t, groups in enumerate(steps):
        now = {}
        for _, key in groups:
            if key not in now:
                c, at = count.get(key, (0.0, t))
                now[key] = c * 2.0 ** (-(t - at) / half_life)
        for level, key in groups:
            out.setdefault(level, []).append(now[key])
        for key, c in now.items():
            count[key] = (c + 1.0, t)
    return out


def write_offs(steps: list[list[tuple[str, int, float]]], level: str) -> dict[str, float]:
    """What becomes of `level`'s prompts whose first trained group had no success (a strategy
    that writes a prompt off on one 0/n look never draws it again). steps: a run's groups per step,
    (level, prompt id, success rate) each. Returns the number of such prompts (`first_failed`), of
    them drawn again (`redrawn`) and with a success later (`later_success`), and the groups of the
    last third of the run (by steps) with 1-25% successes (`late_rare`), of them on prompts whose
    every earlier group had none (`late_rare_after_zeros`)."""
    seen: dict[int, list[tuple[int, float]]] = {}
    for t, groups in enumerate(steps):
        for lv, pid, rate in groups:
            if lv == level:
                seen.setdefault(pid, []).append((t, rate))
    first = [h for h in seen.values() if h[0][1] == 0.0]
    late = 2 * len(steps) / 3
    rare = [(t, pid) for pid, h in seen.items() for t, r in h if t >= late and 0.0 < r <= 0.25]
    zeros = sum(all(r == 0.0 for u, r in seen[pid] if u < t) and seen[pid][0][0] < t
                for t, pid in rare)  # fmt: skip
    return {
        "first_failed": len(first),
        "redrawn": sum(len(h) > 1 for h in first),
        "later_success": sum(any(r > 0.0 for _, r in h[1:]) for h in first),
        "late_rare": len(rare),
        "late_rare_after_zeros": zeros,
    }


def few_group_steps(sizes: list[int], below: int = 8) -> tuple[int, int]:
    """(steps that trained fewer than `below` groups, steps): a strategy that paces its budget
    (CERO) takes some optimiser steps on a handful of groups."""
    return sum(n < below for n in sizes), len(sizes)


def pooled(per_run: Iterable[dict[str, list[float]]]) -> dict[str, list[float]]:
    """recent_visits of several runs, each level's counts put together."""
    out: dict[str, list[float]] = {}
    for r in per_run:
        for level, ks in r.items():
            out.setdefault(level, []).extend(ks)
    return out


def real_steps(
    steps: list[list[tuple[int, float, bool]]], levels: np.ndarray, keys: np.ndarray
) -> list[list[tuple[str, object]]]:
    """(level, original key) of each group per step of a run's `trained_steps`; keys: the pool
    prompt's text (a copy's equals its original's)."""
    return [[(str(levels[p]), keys[p]) for p, _, _ in step] for step in steps]


def sim_groups(
    preset_name: str,
    strategy: str,
    seed: int,
    run: dict,
    steps: list | None = None,
    rated_steps: list | None = None,
) -> list:
    """The same for a simulated run of the preset at the real run's shape and strategy options
    (its config's, as fit_testbed_preset.py does; ref_group_size the run's group size). `steps`,
    when given, gets (level, original) of each group per update, as real_steps gives them;
    `rated_steps` (level, prompt id, success rate), as write_offs takes them."""
    from rollalloc.sim import roles
    from rollalloc.sim import run as simrun
    from rollalloc.sim.policy import load_preset

    preset = load_preset(preset_name)
    shape = run["config"]
    preset.sim = preset.sim.replace(ref_group_size=shape["group_size"])
    out: list[tuple[str, int, float, bool]] = []
    original = roles.SimLearner.update

    def update(self, batch):
        pol = self.policy
        this, rated = [], []
        for pid, _, r in batch.groups():
            level = pol.level_names[pol.cluster[pid]]
            out.append((level, pid, float(np.mean(r)), bool(np.ptp(r) > 0)))
            this.append((level, int(pol.original[pid])))
            rated.append((level, int(pid), float(np.mean(r))))
        if steps is not None:
            steps.append(this)
        if rated_steps is not None:
            rated_steps.append(rated)
        return original(self, batch)

    roles.SimLearner.update = update
    try:
        options = real_strategy_options({strategy: {0: {"run": run}}}, strategy, run)
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


def replay_shared(
    preset_name: str, run_dir: Path, points: list[int] | None = None
) -> tuple[list[int], np.ndarray]:
    """A real run's trained groups fed, step by step, through the preset's shared moves
    (rollalloc.sim.roles.shared_updates: the fast component f and the wear w), as the simulated
    learner would move them had it trained those groups. Returns the points (cumulative rollouts;
    default: the run's evaluations) and (points, 2) [f, w] after the last step at or before each.
    A group stands for a simulated prompt of its real prompt's level (a preset with levels named
    as the pool's; its plasticity and learnability count), otherwise for a learnable prompt."""
    from rollalloc.sim import roles
    from rollalloc.sim.policy import SimPolicy, load_preset

    preset = load_preset(preset_name)
    run = json.loads((run_dir / "run.json").read_text())
    cfg = preset.sim.replace(ref_group_size=run["config"]["group_size"])
    pol = SimPolicy(preset, cfg)
    if pol.level_names:
        levels = pool_levels_of(run).astype(str)
        missing = sorted(set(levels.tolist()) - set(pol.level_names))
        if missing:
            raise SystemExit(f"trained_groups: --replay {preset_name} has no level {missing}")
        first = {
            name: int(np.flatnonzero(pol.cluster == c)[0]) for c, name in enumerate(pol.level_names)
        }
        stand_in = np.array([first[lv] for lv in levels], dtype=np.int64)  # real id -> sim id
    seed = run_dir.name[4:]
    rng = np.random.default_rng([int(seed) if seed.isdigit() else 0, 5])  # the learner's fast_rng
    if points is None:
        evals = [json.loads(x) for x in (run_dir / "evals.jsonl").read_text().splitlines()]
        points = [int(e["cum_rollouts"]) for e in evals]
    out, state = np.zeros((len(points), 2)), np.zeros(2)
    j = 0
    for line in (run_dir / "steps.jsonl").read_text().splitlines():
        step = json.loads(line)
        while j < len(points) and points[j] < step["cum_rollouts"]:
            out[j], j = state, j + 1
        n = np.asarray(step["trained"]["group_sizes"], dtype=np.int64)  # (G,)
        if not len(n):  # a step without groups moves nothing
            continue
        k = np.rint(np.asarray(step["trained"]["success_rate"]) * n).astype(np.int64)  # (G,)
        rewards = np.concatenate([np.r_[np.ones(a), np.zeros(b - a)] for a, b in zip(k, n)])
        u = roles.group_signal(rewards, n, None, cfg.adv_eps) / (cfg.ref_group_size / 2.0)
        energy = roles.group_noise_energy(rewards, n, None, cfg.adv_eps, cfg.ref_group_size)
        if pol.level_names:
            ids = stand_in[np.asarray(step["trained"]["prompt_ids"], dtype=np.int64)]
        else:
            ids = np.full(len(n), int(np.flatnonzero(pol.learnable > 0)[0]), dtype=np.int64)
        moved = roles.shared_updates(pol, ids, u, energy, rng)
        state = np.array([moved.get("fast", 0.0), moved.get("wear", 0.0)])
    out[j:] = state
    return list(points), out


def table(
    name: str, s: dict[str, dict], pool: dict[str, int] | None = None, visits: dict | None = None
) -> str:
    lines = [f"{name}"]
    for level, r in s.items():
        bins = " ".join(f"{b:5.0f}" for b in r["bins"])
        size = f"  pool {pool[level]:5d}" if pool else ""
        if visits is not None:
            size += f"  recent visits {np.mean(visits.get(level, [np.nan])):.2f}"
        lines.append(
            f"  {level:6s} groups {r['groups']:6.0f}  varying {r['varying']:6.0f}  "
            f"distinct ids {r['distinct']:5.0f}{size}  success rate {r['success_rate']:.2f}  "
            f"success bins of the varying [{bins}]"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    ap.add_argument("root", help="ROOT/STRATEGY/seedN run directories (log_groups)")
    ap.add_argument("--simulate", metavar="PRESET", help="also count the simulator's runs")
    ap.add_argument("--column", default="level", help="the task column to group by (level)")
    ap.add_argument("--half-life", type=float, metavar="H",
                    help="also each level's mean recent visits, faded with half-life H steps")  # fmt: skip
    ap.add_argument("--write-offs", metavar="LEVEL",
                    help="also what becomes of LEVEL's prompts whose first group had no success")  # fmt: skip
    ap.add_argument("--replay", metavar="PRESET",
                    help="also feed each run's trained groups through PRESET's fast component and "
                    "wear, and print their logits f and w at the run's evaluations")  # fmt: skip
    args = ap.parse_args(argv)
    if args.replay:
        from rollalloc.sim.policy import load_preset

        try:  # a bad preset fails here, before any run is read
            shared = load_preset(args.replay).sim
        except (OSError, ValueError, KeyError, TypeError) as e:
            ap.error(f"--replay {args.replay}: {e}")
        replay_effects = (shared.fast_max > 0, shared.wear_rate > 0)  # (fast, wear)
        if not any(replay_effects):
            ap.error(f"--replay {args.replay}: the preset has no fast component and no wear")
    if args.simulate and args.column != "level":
        ap.error("--simulate counts by level only")
    if args.half_life is not None and not args.half_life > 0:
        ap.error(f"--half-life must be > 0, got {args.half_life}")
    if not Path(args.root).is_dir():
        raise SystemExit(f"trained_groups: no directory {args.root}")
    dirs = sorted(p for p in Path(args.root).iterdir() if p.is_dir())
    if not any((d / "run.json").is_file() for sd in dirs for d in sd.glob("seed*")):
        raise SystemExit(f"trained_groups: no ROOT/STRATEGY/seedN/run.json under {args.root}")
    if args.replay:
        lacking = [d for sd in dirs for d in sd.glob("seed*") if (d / "run.json").is_file()
                   and not (d / "evals.jsonl").is_file()]  # fmt: skip
        if lacking:
            raise SystemExit(f"trained_groups: --replay reads evals.jsonl, missing in {lacking[0]}")
    print(f"success-rate bins of the groups with variance: {list(BINS)}; counts are seed means")
    if args.write_offs is not None:
        print(f"{args.write_offs}, of its prompts whose first trained group had no success: "
              "first_failed (how many), redrawn (trained again), later_success (a success in a "
              "later group); late_rare: its groups in the last third of the steps with 1-25% "
              "successes, late_rare_after_zeros: of them on prompts with only 0-success groups "
              "before")  # fmt: skip
    for sdir in dirs:
        runs = sorted(d for d in sdir.glob("seed*") if (d / "run.json").is_file())
        if not runs:
            continue
        # one pool per strategy folder: its runs differ in seed, not in task
        first = json.loads((runs[0] / "run.json").read_text())
        levels = pool_levels_of(first, args.column)
        if args.write_offs is not None and args.write_offs not in set(levels.astype(str).tolist()):
            raise SystemExit(
                f"trained_groups: --write-offs {args.write_offs!r} is no {args.column} of the pool "
                f"(has {sorted(set(levels.astype(str).tolist()))})"
            )
        logged = [trained_steps(d) for d in runs]
        runs = [d for d, g in zip(runs, logged) if g is not None]
        if not runs:
            print(f"{sdir.name}: no run with `trained` records (train with log_groups)")
            continue
        logged = [g for g in logged if g is not None]
        real = [real_groups(g, levels) for g in logged]
        values, counts = np.unique(levels.astype(str), return_counts=True)
        pool = dict(zip(values.tolist(), counts.tolist()))
        visits = None
        if args.half_life:
            keys = pool_levels_of(first, "prompt")
            visits = pooled(
                recent_visits(real_steps(g, levels, keys), args.half_life) for g in logged
            )
        seeds = f"{len(runs)} seed" + ("s" if len(runs) != 1 else "")
        print(table(f"{sdir.name} (real, {seeds})", summarise(real), pool, visits))
        rated = [[[(str(levels[p]), p, m) for p, m, _ in st] for st in g] for g in logged]
        print(extras(rated, args.write_offs))
        if args.replay:
            print(replay_table(args.replay, runs, *replay_effects))
        if args.simulate:
            sim, steps, rated = [], [], []
            for d in runs:
                steps.append([])
                rated.append([])
                run = json.loads((d / "run.json").read_text())
                sim.append(
                    sim_groups(args.simulate, sdir.name, int(d.name[4:]), run, steps[-1], rated[-1])
                )
            if args.half_life:
                visits = pooled(recent_visits(s, args.half_life) for s in steps)
            print(table(f"{sdir.name} (simulated, {args.simulate})", summarise(sim), None, visits))
            print(extras(rated, args.write_offs))
    return 0


def replay_table(preset: str, runs: list[Path], fast: bool, wear: bool) -> str:
    """replay_shared's f and w, seed means at the first run's evaluation points (every run is
    read at those), at most 13 rows; a column only for an effect the preset has."""
    points, first = replay_shared(preset, runs[0])
    fw = np.mean([first] + [replay_shared(preset, d, points)[1] for d in runs[1:]], axis=0)
    every = -(-len(points) // 12)  # at most 13 rows, the last always
    cols = ["f (fast)"] * fast + ["w (wear)"] * wear + ["f - w"] * (fast and wear)
    lines = [f"  replayed through {preset}: mean of {len(runs)} seed(s) at the first seed's "
             f"evaluations" + (f" (one row in {every} shown)" if every > 1 else "")
             + f"; rollouts, {', '.join(cols)}"]  # fmt: skip
    for i, (x, (f, w)) in enumerate(zip(points, fw)):
        if i % every == 0 or i == len(points) - 1:
            vals = [f"{f:.4f}"] * fast + [f"{w:.4f}"] * wear + [f"{f - w:+.4f}"] * (fast and wear)
            lines.append(f"    {x:8d}  " + "  ".join(vals))
    return "\n".join(lines)


def extras(rated: list[list], level: str | None) -> str:
    """The steps on fewer than 8 groups and, for --write-offs, write_offs; seed means. rated: per
    run, its groups per step as write_offs takes them."""
    counts = [few_group_steps([len(st) for st in r]) for r in rated]
    line = f"  steps on fewer than 8 groups {np.mean([c[0] for c in counts]):.1f} of "
    line += f"{np.mean([c[1] for c in counts]):.0f}"
    if level is not None:
        w = [write_offs(r, level) for r in rated]
        line += f"; {level}: " + "  ".join(f"{k} {np.mean([x[k] for x in w]):.1f}" for k in w[0])
    return line


if __name__ == "__main__":
    raise SystemExit(main())
