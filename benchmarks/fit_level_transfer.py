"""Fit a block transfer matrix between the paper testbed's levels to real GRPO runs only: GRPO on
the whole pool and GRPO on parts of it (`--set pool_levels=[...]`, the same warm start and held-out
set), so that which levels' groups move which held-out levels is seen directly (docs/simulator.md,
"Session 12").

    python benchmarks/fit_level_transfer.py --base-preset runs/s12/levels-base.json \
        --set sim.optimizer=rms --set sim.noise_scale=92.6 ... \
        full=runs/s12/grpo8 short=runs/s12/sub-short long=runs/s12/sub-long --out P.json

Each NAME=DIR is a directory of real GRPO runs (DIR/runs/grpo/seedN, as `rollalloc compare`
writes); the pool of each is read from its run.json (`pool_levels`; None: the whole pool) and the
simulated pool is the base preset's with the other levels' shares set to 0. The levels split into
two blocks, S (`--short`, default 2x1d,3x1d: the levels the warm start never saw) and L (`--long`,
default 4x1d-7x1d: the ones it was trained on). One unit of a level's group signal moves its own
skill by 1 and the skill of another level by

    w_SS (S -> S), w_SL (S -> L), w_LS (L -> S), w_LL (L -> L)

(Level.transfer rows; any other level only itself). `--model displace` instead: the L levels'
plasticity rho_L, and a displacement of the L levels' logits that every update moves `rate` of the
way to -D_SL sigma_S^power, sigma_S the S levels' share of the update's group signal
(sim.displace_rate, Level.displace): a batch of short chains alone drags the long ones down at once,
a mixed batch much less. Fitted, by a pattern search on the summed
held-out loss of every run set (fit_testbed_preset.heldout_loss: the overall gain curve plus each
level's, plus the train reward's gain curve, which sees memorisation), are log2 k_g (the transfer gains' scale), log2 k_m (memorisation's) and the four w;
every --set effect is held fixed. The simulated seeds are the real runs' seeds (--seeds caps their number).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fit_testbed_preset import (  # noqa: E402
    GrpoSim,
    heldout_loss,
    parse_set,
    read_grpo_runs,
    real_grpo_curves,
    real_strategy_options,
    testbed_shape,
    train_levels_loss,
    train_loss,
)

MODELS = {
    # name: (parameters, start, pattern steps)
    "transfer": (
        ("log2_k_g", "log2_k_m", "w_SS", "w_SL", "w_LS", "w_LL"),
        (8.0, 0.0, 0.5, 0.0, 0.0, 0.5),
        (1.0, 1.0, 0.5, 0.5, 0.5, 0.5),
    ),
    "displace": (
        ("log2_k_g", "log2_k_m", "rho_L", "D_SL", "log2_power", "rate"),
        (8.0, 0.0, 0.5, 2.0, 0.0, 0.3),
        (1.0, 1.0, 0.25, 1.0, 0.5, 0.1),
    ),
    # displace, and the S levels' learnable share (Level.learnable_share: their hardest prompts
    # never move, so their held-out accuracy stops rising below 1)
    "displace-cap": (
        ("log2_k_g", "log2_k_m", "rho_L", "D_SL", "log2_power", "rate", "share_S"),
        (8.0, 0.0, 0.2, 2.0, 0.8, 0.05, 0.5),
        (1.0, 1.0, 0.1, 0.5, 0.25, 0.025, 0.1),
    ),
    # displace-cap with a pass-rate ceiling on the S levels (Level.ceiling: they level off below 1)
    "displace-cap-ceil": (
        ("log2_k_g", "log2_k_m", "rho_L", "D_SL", "log2_power", "rate", "share_S", "ceil_S"),
        (8.0, 0.0, 0.2, 2.0, 0.8, 0.05, 0.5, 0.7),
        (1.0, 1.0, 0.1, 0.5, 0.25, 0.025, 0.1, 0.1),
    ),
    # displace (no learnable cap) with the S levels' ceiling
    "displace-ceil": (
        ("log2_k_g", "log2_k_m", "rho_L", "D_SL", "log2_power", "rate", "ceil_S"),
        (8.0, 0.0, 0.2, 2.0, 0.8, 0.05, 0.7),
        (1.0, 1.0, 0.1, 0.5, 0.25, 0.025, 0.1),
    ),
    # displace-cap, the displacement falling along the L levels: D_SL decay^j on the j-th L level
    # (--long order; real GRPO loses most on the 4-term chains and little on the 6-7-term ones)
    "displace-cap-decay": (
        ("log2_k_g", "log2_k_m", "rho_L", "D_SL", "log2_power", "rate", "share_S", "decay"),
        (8.0, 0.0, 0.2, 2.0, 0.8, 0.05, 0.5, 0.5),
        (1.0, 1.0, 0.1, 0.5, 0.25, 0.025, 0.1, 0.1),
    ),
}


def sub_preset(base: dict[str, Any], pool_levels: list[str] | None) -> dict[str, Any]:
    """The base preset with its pool cut to `pool_levels` (their shares kept, the others' 0, the
    pool size the base's count of those levels' prompts: the real task's `pool_levels` count).
    The held-out set has as many prompts of each level as the base's, drawn from the same
    histograms; the draws themselves differ (they follow the pool's in the simulator's stream),
    where the real held-out set is the very same."""
    if pool_levels is None:
        return json.loads(json.dumps(base))
    names = [lv["name"] for lv in base["levels"]]
    unknown = sorted(set(pool_levels) - set(names))
    if unknown:
        raise SystemExit(f"pool_levels {unknown} are not levels of the base preset ({names})")
    d = json.loads(json.dumps(base))
    kept = sum(lv["share"] for lv in d["levels"] if lv["name"] in pool_levels)
    d["num_prompts"] = int(round(base["num_prompts"] * kept))
    for lv in d["levels"]:
        lv["share"] = lv["share"] / kept if lv["name"] in pool_levels else 0.0
    return d


def with_transfer(
    preset: dict[str, Any], w: dict[str, float], short: list[str], long: list[str]
) -> dict[str, Any]:
    """The preset with the block transfer rows of `w` on every level."""
    d = json.loads(json.dumps(preset))
    block = {**{n: "S" for n in short}, **{n: "L" for n in long}}
    for lv in d["levels"]:
        a = lv["name"]
        row = {a: 1.0}
        if a in block:
            for b, kind in block.items():
                if b != a:
                    row[b] = w[f"w_{block[a]}{kind}"]
        lv["transfer"] = row
    return d


def with_displace(
    preset: dict[str, Any], p: dict[str, float], short: list[str], long: list[str]
) -> dict[str, Any]:
    """The preset of the `displace` model: plasticity rho_L on the L levels, every S level's
    displace row D_SL on each L level (D_SL decay^j on the j-th with `decay`), displace_rate and
    displace_power (2^log2_power) set."""
    d = json.loads(json.dumps(preset))
    decay = min(1.0, max(0.0, p.get("decay", 1.0)))
    for lv in d["levels"]:
        if lv["name"] in long:
            lv["plasticity"] = max(0.0, p["rho_L"])
        if lv["name"] in short:
            lv["displace"] = {b: max(0.0, p["D_SL"]) * decay**j for j, b in enumerate(long)}
            if "share_S" in p:
                lv["learnable_share"] = min(1.0, max(0.0, p["share_S"]))
            if "ceil_S" in p:
                lv["ceiling"] = min(1.0, max(0.05, p["ceil_S"]))
    d["sim"] = {
        **d.get("sim", {}),
        "displace_rate": min(1.0, max(0.0, p["rate"])),
        "displace_power": 2.0 ** p["log2_power"],
    }
    return d


def build(model: str, preset, p: dict[str, float], short, long) -> dict[str, Any]:
    """The preset of `model` at the parameter point p (name -> value)."""
    if model == "transfer":
        return with_transfer(preset, {k: p[k] for k in MODELS["transfer"][0][2:]}, short, long)
    return with_displace(preset, p, short, long)  # displace, displace-cap(-decay)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sets", nargs="+", metavar="NAME=DIR", help="real GRPO run sets")
    ap.add_argument(
        "--base-preset", required=True, help="a levels preset (design_testbed --levels)"
    )
    ap.add_argument("--set", action="append", metavar="sim.FIELD=VALUE", help="fixed effects")
    ap.add_argument("--short", default="2x1d,3x1d", help="block S (comma-separated levels)")
    ap.add_argument("--long", default="4x1d,5x1d,6x1d,7x1d", help="block L")
    ap.add_argument("--seeds", type=int, default=8, help="at most this many seeds per set")
    ap.add_argument("--rounds", type=int, default=4, help="pattern-search step halvings")
    ap.add_argument(
        "--model",
        choices=sorted(MODELS),
        default="transfer",
        help="transfer: the block matrix w; displace: L's plasticity rho_L and a displacement "
        "of L by S's share of an update (sim.displace_rate)",
    )
    ap.add_argument("--start", help="start point, comma-separated, in the model's parameter order")
    ap.add_argument(
        "--fit-field",
        action="append",
        default=[],
        metavar="sim.FIELD=START:STEP",
        help="also fit this SimConfig field (>= 0) from START with pattern steps STEP, e.g. "
        "sim.relearn=1:1 (repeatable)",
    )
    ap.add_argument(
        "--normalise",
        action="store_true",
        help="weigh each set's error by 1 / its real held-out gains' sum of squares",
    )
    ap.add_argument(
        "--train-levels",
        type=float,
        default=0.0,
        help="weight of GRPO's per-level train-side curves (mean reward, share of varying "
        "groups; the runs need `log_groups`) in the loss (0: off)",
    )
    ap.add_argument("--out", required=True, help="the fitted preset (JSON)")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    short, long = args.short.split(","), args.long.split(",")
    base = json.loads(Path(args.base_preset).read_text())
    overrides = parse_set(args.set)
    problems = []
    for item in args.sets:
        name, _, d = item.partition("=")
        runs, grpo = read_grpo_runs([d])
        seeds = sorted(grpo)[: args.seeds]
        grpo = {s: grpo[s] for s in seeds}
        run = next(iter(grpo.values()))["run"]
        shape = testbed_shape(run)
        pool = run["config"].get("pool_levels")
        preset = sub_preset(base, pool)
        preset["sim"] = {
            **preset.get("sim", {}),
            "eval_prompts": shape["eval_prompts"],
            "ref_group_size": shape["group_size"],
            **overrides,
        }
        shape["num_prompts"] = preset["num_prompts"]
        options = real_strategy_options(runs, "grpo", run)
        real = real_grpo_curves(grpo)
        if args.train_levels and real["train_levels"] is None:
            raise SystemExit(
                f"--train-levels: {d} has no `trained` records (train with log_groups)"
            )
        problems.append((name, preset, shape, seeds, options, real))
        print(f"{name}: {d}, pool {pool or 'all'} ({preset['num_prompts']} prompts), seeds {seeds}")

    extra = []  # (field, start, step) of --fit-field
    for item in args.fit_field:
        key, _, rest = item.partition("=")
        start, _, step = rest.partition(":")
        extra.append((key.removeprefix("sim."), float(start), float(step or 1.0)))
    params, start, step0 = MODELS[args.model]
    names = params + tuple(f for f, _, _ in extra)
    n_w = len(params)

    def curves_of(x: np.ndarray) -> list[dict[str, Any]]:
        point = dict(zip(params, (float(v) for v in x[:n_w])))
        fields = {f: max(0.0, float(v)) for (f, _, _), v in zip(extra, x[n_w:])}
        out = []
        for _, preset, shape, seeds, options, real in problems:
            p = build(args.model, preset, point, short, long)
            p["sim"] = {**p["sim"], **fields}
            sim = GrpoSim(p, shape, seeds, options)
            out.append(sim.curves(2.0 ** x[0], 2.0 ** x[1], real["grid"]))
        return out

    cache: dict[tuple, float] = {}
    # --normalise: each set's error relative to its own real curves' size (a set of large gains,
    # GRPO on the short chains, would otherwise outweigh the whole pool's)
    scale = {}
    for name, *_, real in problems:
        zero = {
            **real,
            "accuracy": real["accuracy"] * 0 + real["accuracy"][0],
            "levels": {k: v * 0 + v[0] for k, v in real["levels"].items()},
        }
        scale[name] = heldout_loss(real, zero) if args.normalise else 1.0

    def loss(x: np.ndarray) -> float:
        key = tuple(np.round(x, 6))
        if key not in cache:
            total = 0.0
            for p, c in zip(problems, curves_of(x), strict=True):
                curves = [c["accuracy"], *c["levels"].values()]
                if p[5]["train_reward"] is not None:
                    curves.append(c["train_reward"])
                if not all(np.all(np.isfinite(v)) for v in curves):  # broken, not a perfect fit
                    total = float("inf")
                    break
                err = heldout_loss(p[5], c)
                if p[5]["train_reward"] is not None:
                    err += train_loss(p[5], c)
                if args.train_levels:
                    err += args.train_levels * train_levels_loss(p[5], c)
                total += err / scale[p[0]]
            cache[key] = total
        return cache[key]

    first = [float(v) for v in args.start.split(",")] if args.start else list(start)
    if len(first) != n_w:
        raise SystemExit(f"--start needs {n_w} values ({', '.join(params)}), got {len(first)}")
    x = np.array(first + [s for _, s, _ in extra])
    steps = np.array(list(step0) + [s for _, _, s in extra])
    best = loss(x)
    print(f"start {dict(zip(names, x))}: loss {best:.5f}")
    for r in range(args.rounds):
        improved = True
        while improved:
            improved = False
            for i in range(len(x)):
                for sign in (1.0, -1.0):
                    y = x.copy()
                    y[i] += sign * steps[i]
                    v = loss(y)
                    if v < best - 1e-9:
                        x, best, improved = y, v, True
                        print(f"  round {r}: {dict(zip(names, np.round(x, 4)))} loss {best:.5f}")
                        break
        steps = steps / 2.0
    point = dict(zip(params, (float(v) for v in x[:n_w])))
    fields = {f: max(0.0, float(v)) for (f, _, _), v in zip(extra, x[n_w:])}
    k_g, k_m = 2.0 ** x[0], 2.0 ** x[1]
    final = curves_of(x)
    per_set = {}
    for (name, *_, real), c in zip(problems, final, strict=True):
        per_set[name] = round(heldout_loss(real, c), 6)
        print(
            f"\n{name}: held-out SSE {per_set[name]:.5f}, train levels SSE "
            f"{train_levels_loss(real, c):.5f}; final gain real / sim, per level"
        )
        keys = sorted(set(real["levels"]) & set(c["levels"]))
        row = [
            f"all {real['accuracy'][-1] - real['accuracy'][0]:+.3f}/"
            f"{c['accuracy'][-1] - c['accuracy'][0]:+.3f}"
        ]
        row += [
            f"{k} {real['levels'][k][-1] - real['levels'][k][0]:+.3f}/"
            f"{c['levels'][k][-1] - c['levels'][k][0]:+.3f}"
            for k in keys
        ]
        print("  " + "  ".join(row))
    full = {**sub_preset(base, None), "sim": problems[0][1]["sim"]}
    d = build(args.model, full, point, short, long)
    g = GrpoSim(d, problems[0][2], problems[0][3], problems[0][4]).gains(k_g, k_m)
    d["sim"] = {**d["sim"], **{k: float(f"{v:.4g}") for k, v in g.items()}, **fields}
    fitted = {
        **{k: round(v, 4) for k, v in fields.items()},
        "k_g": round(k_g, 4),
        "k_m": round(k_m, 4),
        **{k: round(v, 4) for k, v in point.items() if not k.startswith("log2_k")},
        "loss": round(best, 6),
        "per_set": per_set,
    }
    d["name"] = Path(args.out).stem
    d["source"] = (
        f"benchmarks/fit_level_transfer.py --model {args.model} "
        + " ".join(args.sets)
        + f" --base-preset {args.base_preset}"
        + "".join(f" --set sim.{k}={json.dumps(v)}" for k, v in overrides.items())
        + f": real GRPO runs only; fitted {json.dumps(fitted)}"
    )
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(d, indent=1) + "\n")
    print(
        f"\nfitted {fitted}\nwrote {args.out} ({len(cache)} points, {time.perf_counter() - t0:.0f} s)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
