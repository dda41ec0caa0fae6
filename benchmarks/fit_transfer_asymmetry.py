"""Fit the simulator's transfer asymmetry (SimConfig.transfer_asymmetry, beta) to the group values
measured on the real policy (benchmarks/measure_group_value.py), GRPO's groups only.

    python benchmarks/fit_transfer_asymmetry.py V_warm.json:sgd V_step32.json:adam [--out B.json]

The learning model credits a group of n rollouts with k correct with GRPO's signal G(k) towards the
skills, times c(k) = (2 (1 - k/n))^beta (docs/simulator.md, "Effects"). Each skill is a level's own
cluster (plus the global skill), so to first order the held-out value of an informative group i of
level L is v_i = a_L G(k_i) c(k_i), with one free scale a_L per level (per file and level when
several files are pooled). For each beta on a grid the scales are least squares in closed form;
beta minimises the summed squared error over the informative groups, values divided by each file's
GRPO reference (its mean group). The 90% interval resamples all the informative groups read
(bootstrap). Within a level, groups with few successes come more often from the level's harder
prompts, so beta holds "rare successes teach more" and "harder prompts of a level teach more"
together; the model applies it to the group's success rate either way.
`FILE:MODE` picks the preconditioner of the measurement (sgd, or adam where the checkpoint had one;
default sgd).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import numpy as np

from rollalloc.sim.roles import signal_of_successes

BETAS = np.round(np.arange(0.0, 4.0001, 0.05), 2)


def load(spec: str) -> dict[str, np.ndarray]:
    """Informative groups of one measurement: value / reference, k, n, level (string arrays)."""
    path, _, mode = spec.partition(":")
    mode = mode or "sgd"
    d = json.load(open(path))
    n = int(d["group_size"])
    out: dict[str, list] = {"v": [], "k": [], "level": []}
    for res in d["results"]:
        raw = res["raw"]
        if mode not in raw["values"]:
            raise ValueError(f"{path}: no {mode!r} values (have {sorted(raw['values'])})")
        ref = float(res[mode]["reference_value_per_group"])
        if ref <= 0:
            raise ValueError(
                f"{path} ({res['checkpoint']}, {mode}): GRPO's mean group value {ref} <= 0"
            )
        out["v"] += (np.asarray(raw["values"][mode], dtype=np.float64) / ref).tolist()
        out["k"] += list(raw["k"])
        out["level"] += [f"{spec}|{res['checkpoint']}|{lv}" for lv in raw["levels"]]
    return {
        "v": np.array(out["v"]),
        "k": np.array(out["k"], dtype=np.float64),
        "n": np.full(len(out["v"]), n, dtype=np.float64),
        "level": np.array(out["level"]),
    }


def sse_curve(v: np.ndarray, k: np.ndarray, n: np.ndarray, level: np.ndarray) -> np.ndarray:
    """Summed squared error of v ~ a_level G(k) c_beta(k) at each beta of BETAS, a fitted per level."""
    g = signal_of_successes(k, n)
    inv = np.unique(level, return_inverse=True)[1]
    out = np.empty(len(BETAS))
    for b, beta in enumerate(BETAS):
        x = g * (2.0 * (1.0 - k / n)) ** beta
        num = np.bincount(inv, weights=v * x)
        den = np.maximum(np.bincount(inv, weights=x * x), 1e-30)
        a = num / den
        out[b] = float(((v - a[inv] * x) ** 2).sum())
    return out


def fit(data: dict[str, np.ndarray], resamples: int = 500, seed: int = 0) -> dict[str, Any]:
    sse = sse_curve(data["v"], data["k"], data["n"], data["level"])
    best = float(BETAS[int(np.argmin(sse))])
    rng = np.random.default_rng(seed)
    m = len(data["v"])
    boot = []
    for _ in range(resamples):
        j = rng.integers(0, m, m)
        s = sse_curve(data["v"][j], data["k"][j], data["n"][j], data["level"][j])
        boot.append(float(BETAS[int(np.argmin(s))]))
    lo, hi = np.percentile(boot, [5, 95])
    if best in (BETAS[0], BETAS[-1]) and best != 0.0:
        print(f"warning: beta {best} at the edge of the grid [0, {BETAS[-1]}]", file=sys.stderr)
    return {
        "beta": best,
        "ci90": [float(lo), float(hi)],
        "groups": m,
        "sse_ratio_symmetric": float(sse[0] / sse.min()),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("measurements", nargs="+", help="measure_group_value.py JSON[:sgd|adam]")
    ap.add_argument("--resamples", type=int, default=500)
    ap.add_argument("--out", help="write the fits as JSON here")
    args = ap.parse_args(argv)
    parts = [load(s) for s in args.measurements]
    results = {}
    for spec, d in zip(args.measurements, parts):
        results[spec] = fit(d, args.resamples)
    if len(parts) > 1:
        pooled = {k: np.concatenate([d[k] for d in parts]) for k in parts[0]}
        results["pooled"] = fit(pooled, args.resamples)
    for name, r in results.items():
        print(
            f"{name}: beta {r['beta']:.2f} [{r['ci90'][0]:.2f}, {r['ci90'][1]:.2f}] "
            f"({r['groups']} informative groups; symmetric model's error x{r['sse_ratio_symmetric']:.3f})"
        )
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
