"""Fit the simulator's answer-prior shift (SimConfig.answer_shift c, answer_rate r) to real GRPO on
chosen and random parts of the default pool (docs/simulator.md, "Session 35"). GRPO runs only: no
other strategy is read. Everything else is the preset's; answer_classes and answer_noise are set
beforehand from the real pass rates' dependence on the answer (not fitted here).

    R=benchmarks/results
    python benchmarks/fit_answer_shift.py --preset benchmarks/presets/testbed-default-s34-memory.json \\
        --csv $R/default-testbed-s13.csv:grpo --csv $R/default-testbed-s34-parts.csv \\
        --csv $R/default-testbed-s34-mid.csv --csv $R/default-testbed-s35-chosen.csv \\
        --variant grpo=64,4 --variant grpoQ128=64,4,128 --variant grpoQ512=64,4,512 \\
        --variant grpoMid512=64,4,512,mid --variant grpoMidLvl512=64,4,512,mid-level \\
        --variant grpoMidAns512=64,4,512,mid-answer --seeds 0,1,2,3,4,5,6,7,8,9,10 \\
        --classes 12 --noise 0.7 --shift 0,1,2,4,8 --rate 0.01,0.03,0.1 --out P.json

A variant is NAME=TRAIN_PROMPTS,UPDATES[,POOL_SIZE[,PICK]] as in fit_batch_response.py (the
preset's fast component sees UPDATES a step, the skills one, as that script's --fast fit). For
every (c, r, speed k) of the grid the loss is the RMS difference between simulated and real seed-mean
held-out gains at every evaluation after the first of every variant; the best point's preset is
written with its fit recorded in `source`.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fit_batch_response import (  # noqa: E402
    VARIANT_FORM,
    parse_variant,
    preset,
    real_gains,
    variants_loss,
)


def point_loss(args, real, variants, c: float, r: float, k: float = 1.0, eta: float | None = None):
    """(loss, {variant: simulated gain}) at answer_shift c, answer_rate r, the skills' speed
    (global_gain, cluster_gain) times k and repeat_harm eta (None: the preset's): the --fast
    loss of fit_batch_response.py (its fast component sees each variant's updates a step)."""
    pre = preset(args.preset)
    sim = dict(answer_classes=args.classes, answer_noise=args.noise, answer_shift=c,
               global_gain=pre.sim.global_gain * k, cluster_gain=pre.sim.cluster_gain * k,
               repeat_harm=pre.sim.repeat_harm if eta is None else eta)  # fmt: skip
    if c > 0:
        sim["answer_rate"] = r
    return variants_loss(args, real, variants, pre, sim, fast=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", required=True)
    ap.add_argument("--csv", action="append", required=True, help="FILE or FILE:NAME,...")
    ap.add_argument("--variant", action="append", required=True, help=VARIANT_FORM)
    ap.add_argument("--seeds", default=None, help="real seeds to use (default: all)")
    ap.add_argument("--sim-seeds", default="0,1")
    ap.add_argument("--classes", type=int, default=12)
    ap.add_argument("--noise", type=float, default=0.7)
    ap.add_argument("--shift", default="0,1,2,4,8")
    ap.add_argument("--rate", default="0.01,0.03,0.1")
    ap.add_argument("--speed", default="1", help="factors on the skills' gains, refitted with c")
    ap.add_argument("--harm", default=None, help="repeat_harm values (default: the preset's)")
    ap.add_argument("--budget", type=int, default=98304)
    ap.add_argument("--every", type=int, default=8192)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--out", default=None, help="write the best point's preset here")
    args = ap.parse_args()
    args.group_size, args.target_weight = 8, 0.0  # what variants_loss reads beside the grid
    variants = dict(parse_variant(v) for v in args.variant)
    args.sim_seeds = [int(s) for s in args.sim_seeds.split(",")]
    seeds = None if args.seeds is None else {int(s) for s in args.seeds.split(",")}
    real = real_gains(args.csv, list(variants), seeds)
    speeds = [float(k) for k in args.speed.split(",")]
    harms = [None] if args.harm is None else [float(e) for e in args.harm.split(",")]
    grid = [(0.0, 0.0, k, e) for k in speeds for e in harms] + [
        (float(c), float(r), k, e) for c in args.shift.split(",") if float(c) > 0
        for r in args.rate.split(",") for k in speeds for e in harms
    ]  # fmt: skip
    with ProcessPoolExecutor(args.jobs) as ex:
        fits = list(ex.map(point_loss, *zip(*[(args, real, variants, *g) for g in grid])))
    print("real final: " + ", ".join(f"{n} {real[n]['gain'][-1] * 100:+.2f}" for n in variants))
    for (c, r, k, e), (loss, gains) in sorted(zip(grid, fits), key=lambda t: t[1][0]):
        finals = ", ".join(f"{n} {g[-1] * 100:+.2f}" for n, g in gains.items())
        print(
            f"shift {c:g} rate {r:g} speed {k:g} harm {e}: loss {loss:.5f} | {finals}", flush=True
        )
    (c, r, k, e), (loss, _) = min(zip(grid, fits), key=lambda t: t[1][0])
    if args.out:
        pre = preset(args.preset)
        sim = pre.sim.replace(answer_classes=args.classes, answer_noise=args.noise,
                              answer_shift=c, global_gain=pre.sim.global_gain * k,
                              cluster_gain=pre.sim.cluster_gain * k,
                              repeat_harm=pre.sim.repeat_harm if e is None else e,
                              **({"answer_rate": r} if c > 0 else {}))  # fmt: skip
        what = (f"{pre.source}; answer classes {args.classes} (noise {args.noise}, set from the "
                f"answer's R^2 of p), shift {c:g} rate {r:g}, skills' speed x {k:g}, repeat_harm "
                f"{pre.sim.repeat_harm if e is None else e:g}, fitted by "
                f"benchmarks/fit_answer_shift.py to GRPO variants {sorted(variants)} "
                f"(loss {loss:.5f})")  # fmt: skip
        out = dataclasses.replace(pre, sim=sim, source=what)
        Path(args.out).write_text(json.dumps(out.to_dict(), indent=1) + "\n")
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
