"""A level-to-level transfer matrix for the simulator, measured on the real policy from GRPO's groups
(benchmarks/measure_group_value.py), written into a preset with levels (Level.transfer).

    python benchmarks/transfer_matrix.py --preset LEVELS.json V_warm.json:sgd V_step32.json:adam \
        --out PRESET.json

measure_group_value.py gives, per informative group of pool level a, the first-order change of each
held-out level b's accuracy when the optimiser steps on that group alone (`transfer[a][b]`, relative
to GRPO's mean group). The simulator moves level b's skill s_b by cluster_gain W[a, b] u_g for a
group of level a with signal u_g (docs/simulator.md, "Levels"), and held-out level b's accuracy by
slope_b ds_b, slope_b = mean_{j in b} p_j (1 - p_j). So

    W[a, b] = transfer[a][b] / (slope_b * lambda_a * mean u_g over the informative groups of level a)

slope_b = mean_{j in b} lambda_j p_j (1 - p_j) (the simulator's d acc_b / d s_b), with p_j the
preset's held-out pass rates of level b, the learnable ones shifted in logit so that their mean is
the accuracy measured at that checkpoint; lambda the levels' plasticity (the simulator multiplies a
group's signal and a prompt's skill by it, so it is divided out here: a real measurement holds it
already); u_g = G(k) / (n / 2) from each group's k. Every checkpoint of a file is one measurement. Rows of levels with
fewer than --min-groups informative groups are 0 (too few to measure: they teach nothing); columns
of levels outside the held-out set are 0. Each measurement's W is scaled to max |W| = 1 and the
measurements averaged (the overall scale is the fit's k_g). Negative entries are interference: a
level's groups lower another level.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from rollalloc.sim.policy import SimPolicy, preset_from_dict
from rollalloc.sim.roles import signal_of_successes


def level_slopes(preset: dict, accuracy: dict[str, float]) -> dict[str, float]:
    """slope_b = mean lambda_j p_j (1 - p_j) over the preset's held-out prompts of level b, the
    learnable ones' logits shifted (by lambda_j times one skill shift) so that the level's mean pass
    rate is `accuracy[b]`."""
    pol = SimPolicy(preset_from_dict(preset, "transfer-matrix"))
    p = pol.eval_success_prob()  # (M,)
    logit = np.log(p / (1.0 - p))
    out = {}
    for j, name in enumerate(pol.level_names):
        at = pol.eval_cluster == j
        x, lam = logit[at], pol.eval_learnable[at]
        if name not in accuracy or not len(x):
            continue
        lo, hi = -20.0, 20.0
        for _ in range(100):  # bisection on the skill shift: the mean pass rate rises with it
            mid = 0.5 * (lo + hi)
            if np.mean(1.0 / (1.0 + np.exp(-(x + lam * mid)))) < accuracy[name]:
                lo = mid
            else:
                hi = mid
        q = 1.0 / (1.0 + np.exp(-(x + lam * 0.5 * (lo + hi))))
        out[name] = float(np.mean(lam * q * (1.0 - q)))
    return out


def matrix(preset: dict, spec: str, min_groups: int) -> tuple[list[str], np.ndarray]:
    """(level names, W (L, L)) of one measurement FILE[:MODE], scaled to max |W| = 1: the mean of
    its checkpoints' matrices, each so scaled."""
    path, _, mode = spec.partition(":")
    mode = mode or "sgd"
    d = json.load(open(path))
    names = [lv["name"] for lv in preset["levels"]]
    mats = [_one(preset, res, int(d["group_size"]), mode, min_groups, spec) for res in d["results"]]
    return names, np.mean(mats, axis=0)


def _one(preset: dict, res: dict, n: int, mode: str, min_groups: int, spec: str) -> np.ndarray:
    names = [lv["name"] for lv in preset["levels"]]
    lam = {lv["name"]: float(lv.get("plasticity", 1.0)) for lv in preset["levels"]}
    slopes = level_slopes(preset, res["heldout_accuracy"])
    transfer = res[mode]["transfer"]
    levels = np.array(res["raw"]["levels"])
    u = signal_of_successes(np.array(res["raw"]["k"]), n) / (n / 2.0)  # (K,)
    W = np.zeros((len(names), len(names)))
    for a, src in enumerate(names):
        m = levels == src
        if m.sum() < min_groups or src not in transfer or lam[src] <= 0:
            continue  # a level of plasticity 0 pushes no skill in the simulator
        for b, dst in enumerate(names):
            if dst in transfer[src] and slopes.get(dst, 0.0) > 0:
                W[a, b] = transfer[src][dst] / (slopes[dst] * lam[src] * float(u[m].mean()))
    top = np.abs(W).max()
    if top <= 0:
        raise ValueError(f"{spec}: no level has {min_groups} informative groups")
    return W / top


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("measurements", nargs="+", help="measure_group_value.py JSON[:sgd|adam]")
    ap.add_argument(
        "--preset", required=True, help="a preset with levels (design_testbed.py --levels)"
    )
    ap.add_argument(
        "--late",
        nargs="+",
        metavar="JSON[:MODE]",
        help="measurements later in a run: written as each level's transfer_late row (the "
        "simulator ramps W from the early rows to these over sim.transfer_ramp_steps updates)",
    )
    ap.add_argument("--min-groups", type=int, default=20)
    ap.add_argument("--out", required=True, help="the preset with each level's transfer row")
    args = ap.parse_args(argv)
    preset: dict[str, Any] = json.load(open(args.preset))
    if not preset.get("levels"):
        raise SystemExit(f"{args.preset}: not a preset with levels")
    for key, specs in (("transfer", args.measurements), ("transfer_late", args.late)):
        if not specs:
            continue
        mats = [matrix(preset, s, args.min_groups) for s in specs]
        names = mats[0][0]
        W = np.mean([m for _, m in mats], axis=0)
        print(f"{key}: W[a, b] (rows: the group's level a, columns: the skill b it moves)")
        print("      " + " ".join(f"{b:>7}" for b in names))
        for a, row in zip(names, W):
            print(f"{a:6}" + " ".join(f"{w:7.3f}" for w in row))
        for a, lv in enumerate(preset["levels"]):
            lv[key] = {b: round(float(W[a, j]), 6) for j, b in enumerate(names) if W[a, j]}
    preset["source"] = (
        f"{preset.get('source', '')}; transfer: benchmarks/transfer_matrix.py "
        f"{' '.join(args.measurements)}{' --late ' + ' '.join(args.late) if args.late else ''} "
        f"--min-groups {args.min_groups}"
    ).lstrip("; ")
    Path(args.out).write_text(json.dumps(preset, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
