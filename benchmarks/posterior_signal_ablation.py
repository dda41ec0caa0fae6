"""Issue 17: ablations of posterior-signal (each part switched off by one option) in the simulator.

    python benchmarks/posterior_signal_ablation.py --preset dapo17k --seeds 0 [--budget 2048000]

One GRPO run per seed gives the target (acc0 + 0.9 (peak(grpo) - acc0), the 3-point smoothed curve
of that seed, as summary.json's per-seed values); each variant's rollouts (and tokens) to that target
are interpolated between evaluations as there. Prints one JSON line per variant and a markdown table.
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from rollalloc.report.curves import crossing, moving_average
from rollalloc.sim.policy import load_preset
from rollalloc.sim.run import simulate_run, strategy_options

VARIANTS = {
    "posterior-signal (the default)": {},
    "no probes (n_probe=0)": {"n_probe": 0},
    "probes always (probe_if_cheaper=false)": {"probe_if_cheaper": False},
    "no dry-step sizing (resize_short=false)": {"resize_short": False},
    "dropped probes on top (probes_on_top=true)": {"probes_on_top": True},
    "no drift, no self-shift (lr_drift=0)": {"lr_drift": 0.0},
    "no self-shift (self_shift=false)": {"self_shift": False},
    "no pool prior (pool_prior=false)": {"pool_prior": False},
    "no forgetting (half_life=0)": {"half_life": 0.0},
    "stricter skip (tau=0.85)": {"tau": 0.85},
    "re-check skipped prompts (recheck=true)": {"recheck": True},
    "narrow window (window=4)": {"window": 4},
    "rank by expected signal, sized (select=top, resize=true)": {"select": "top", "resize": True},
}


def to_target(evals, target, key="cum_rollouts"):
    x = np.array([e[key] for e in evals], dtype=np.float64)
    y = moving_average(np.array([e["accuracy"] for e in evals]))
    r, _ = crossing(x, y, target)
    if r is None or key == "cum_rollouts":
        return r
    return r


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="dapo17k")
    ap.add_argument("--seeds", default="0")
    ap.add_argument("--budget", type=int, default=2048000)
    ap.add_argument("--train-prompts", type=int, default=128)
    ap.add_argument("--group-size", type=int, default=16)
    ap.add_argument("--only", default="", help="comma-separated variant numbers (0-based)")
    a = ap.parse_args()
    preset = load_preset(a.preset)
    every = a.budget // 50
    rows = {}
    for seed in [int(s) for s in a.seeds.split(",")]:
        base = simulate_run(
            "grpo",
            preset,
            seed,
            budget_rollouts=a.budget,
            eval_every_rollouts=every,
            options=strategy_options(
                "grpo", train_prompts=a.train_prompts, group_size=a.group_size
            ),
        )["evals"]
        acc = moving_average(np.array([e["accuracy"] for e in base]))
        target = acc[0] + 0.9 * (np.nanmax(acc) - acc[0])
        g = to_target(base, target)
        for i, (name, opts) in enumerate(VARIANTS.items()):
            if a.only and str(i) not in a.only.split(","):
                continue
            opts = dict(opts)
            ev = simulate_run(
                "posterior-signal",
                preset,
                seed,
                budget_rollouts=a.budget,
                eval_every_rollouts=every,
                options=strategy_options(
                    "posterior-signal",
                    train_prompts=a.train_prompts,
                    group_size=a.group_size,
                    options=opts,
                ),
            )["evals"]
            r = to_target(ev, target)
            x = np.array([e["cum_rollouts"] for e in ev], dtype=np.float64)
            tok = np.interp(r, x, [e["cum_tokens"] for e in ev]) if r is not None else None
            rec = {
                "preset": a.preset,
                "seed": seed,
                "variant": name,
                "options": opts,
                "rollouts_to_target": r,
                "tokens_to_target": tok,
                "grpo": g,
                "speedup_vs_grpo": (g / r) if (g and r) else None,
                "final_accuracy": ev[-1]["accuracy"],
            }
            print(json.dumps(rec), flush=True)
            rows.setdefault(name, []).append(rec)
    print(f"\n{a.preset}, seeds {a.seeds}, budget {a.budget:,}: rollouts to GRPO's 0.9 target")
    print("| variant | rollouts to target | speedup vs grpo | final acc |")
    print("|---|---|---|---|")
    for name, rs in rows.items():
        r = [x["rollouts_to_target"] for x in rs]
        rv = "never" if None in r else f"{np.mean(r) / 1e3:,.0f}k"
        sp = [x["speedup_vs_grpo"] for x in rs]
        spv = "-" if None in sp else f"{np.mean(sp):.2f}"
        print(f"| {name} | {rv} | {spv} | {np.mean([x['final_accuracy'] for x in rs]):.4f} |")


if __name__ == "__main__":
    main()
