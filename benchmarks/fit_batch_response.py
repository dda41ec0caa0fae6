"""Fit the simulator's gradient noise and update cost to how real GRPO responds to its batch
(docs/simulator.md, "Session 29: the batch response"). GRPO runs only: no other strategy is read.

    python benchmarks/fit_batch_response.py --preset benchmarks/presets/testbed-hard-s27-tm.json \\
        --csv benchmarks/results/hard-testbed-s27.csv --csv benchmarks/results/hard-testbed-s29.csv \\
        --variant grpo=64,4 --variant grpo128=128,4 --variant grpo256=256,4 \\
        --noise 16,32,64,128 --cost 0,0.1,0.2,0.3,0.4 --out benchmarks/presets/testbed-hard-s29.json

A variant is NAME=TRAIN_PROMPTS,NUM_MINIBATCHES[,POOL_SIZE[,PICK]]: the real runs named NAME in the
CSVs (GRPO with that many prompts a step and optimiser updates a step, and on a pool of POOL_SIZE
prompts, the trainer's `pool_size`: more visits of each prompt at the same budget; PICK `mid`,
`mid-level` or `mid-answer`: the trainer's `pool_pick`, the part nearest p = 1/2 at the start, not
a random one; `mid-answer` needs the preset's SimConfig.answer_classes). For every pair (noise_scale N,
update_cost c) of the grid, the simulator runs GRPO with `optimizer=rms`, the preset's pool and
loss normaliser, and each variant's batch and updates; one speed k (a factor on global_gain and
cluster_gain) is fitted by a log-grid search to all the variants at once. The loss is the RMS
difference between the seed-mean held-out accuracy gains (over each side's first evaluation) at
every evaluation point of every variant, plus --target-weight times the RMS log error of the
variants' speedups over the first one (`speedup_error`; GRPO's own step speedups, docs/simulator.md,
"Session 31"). Prints the grid's losses; writes the best pair's preset, with the first variant's updates a step
(the trainer's `learner.num_minibatches`) as its `num_minibatches`.

With --fast (docs/simulator.md, "Session 30") it fits the fast shared component instead: the
preset's skills at one update a step, speed x k, and SimConfig.fast_max / fast_rate / fast_noise /
fast_damage, each variant's updates a step as fast_updates; a coordinate search on log scales from
each --fast-start, the best kept. The preset it writes has the first variant's updates a step as
its fast_updates. --repeat-decay "0,0.1,0.3:6,0.3:6:0.5,0.3:6:0.5:16" runs that search at each
(repeat_decay, repeat_grace, repeat_harm, repeat_memory) point and keeps the best ("Session 32",
"Session 34"); only variants with a POOL_SIZE (prompts visited more often) tell the points apart.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import functools
import json
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

from rollalloc.report.curves import common_grid, first_reach, interp_curve, moving_average
from rollalloc.report.summary import ReportInputs
from rollalloc.sim.policy import load_preset
from rollalloc.sim.run import simulate_run, strategy_options
from rollalloc.tasks import pick_strata


@functools.lru_cache(maxsize=4)
def preset(path: str):
    """The preset at `path`, read once per process (the fits evaluate many points on it)."""
    return load_preset(path)


def real_gains(paths: list[str], names: list[str], seeds: set[int] | None) -> dict[str, dict]:
    """name -> {"x": cum_rollouts (E,), "gain": seed-mean accuracy - its first value (E,), "seeds"}."""
    by: dict[str, dict[int, dict[int, float]]] = {}
    source: dict[tuple[str, int], str] = {}
    for spec in paths:
        path, only = spec, None  # FILE:NAME,NAME reads only those strategies of FILE
        if not Path(spec).exists() and ":" in spec:
            path, _, keep = spec.rpartition(":")
            only = set(keep.split(","))
        with open(path, newline="") as f:
            for row in csv.DictReader(f):
                name, seed = row["strategy"], int(row["seed"])
                if only is not None and name not in only:
                    continue
                if name in names and (seeds is None or seed in seeds):
                    if source.setdefault((name, seed), path) != path:
                        raise SystemExit(
                            f"{name} seed {seed} is in {source[name, seed]} and {path}"
                        )
                    by.setdefault(name, {}).setdefault(seed, {})[int(row["cum_rollouts"])] = float(
                        row["accuracy"]
                    )
    out = {}
    for name in names:
        runs = by.get(name)
        if not runs:
            raise SystemExit(f"no real runs named {name!r} in {paths}")
        xs = sorted(set.intersection(*(set(r) for r in runs.values())))
        if len(xs) < 2 or any(len(r) != len(xs) for r in runs.values()):
            raise SystemExit(f"{name}: its seeds were not evaluated at the same rollouts")
        acc = np.array([[r[x] for x in xs] for r in runs.values()]).mean(axis=0)
        out[name] = {"x": np.array(xs), "gain": acc - acc[0], "seeds": len(runs)}
    return out


PICKS = ("random", "mid", "mid-level", "mid-answer")
VARIANT_FORM = (
    "NAME=TRAIN_PROMPTS,MINIBATCHES[,POOL_SIZE[,PICK]] (PICK: random, mid, mid-level, mid-answer)"
)


def parse_variant(v: str) -> tuple[str, tuple]:
    """'NAME=TP,M[,POOL[,PICK]]' -> (NAME, (TP, M[, POOL[, PICK]])); SystemExit naming the form."""
    name, _, rest = v.partition("=")
    *nums, last = rest.split(",")
    pick = last if last in PICKS else None
    try:
        vals = tuple(int(t) for t in (nums if pick else [*nums, last]))
    except ValueError:
        vals = ()
    if not name or len(vals) not in (2, 3) or (pick and len(vals) != 3):
        raise SystemExit(f"--variant {v!r}: write {VARIANT_FORM}")
    return name, (*vals, pick) if pick else vals


def part_of_pool(pre, size: int):
    """Preset `pre` cut to a random part of `size` prompts, as the trainer's `pool_size` cuts the
    real pool: each level keeps its share, and a level of n prompts on D originals (Level.distinct;
    n / D copies each) keeps about D (1 - (1 - f)^(n / D)) of them, f = size / num_prompts, the
    expected number of originals a uniform f-part of it holds. (The simulated pool and held-out
    set are drawn anew for the new size, from the same distributions.)"""
    f = size / pre.num_prompts
    if not 0 < f <= 1:
        raise SystemExit(f"pool_size {size}: must lie in [1, {pre.num_prompts}] (the preset's)")

    def cut(lv):  # the level's originals a uniform f-part of it holds, in expectation
        if lv.distinct is None:
            return lv
        copies = lv.share * pre.num_prompts / lv.distinct  # n / D
        kept = round(lv.distinct * (1 - (1 - f) ** copies))
        return dataclasses.replace(lv, distinct=max(1, min(round(lv.share * size), kept)))

    levels = None if pre.levels is None else [cut(lv) for lv in pre.levels]
    return dataclasses.replace(pre, num_prompts=size, levels=levels)


def sim_gain(
    pre, sim, tp, m, group_size, budget, every, seeds, x, pool=None, pick="random"
) -> np.ndarray:
    """Seed-mean simulated GRPO accuracy gain at rollouts x, on Preset `pre` with `sim` overrides,
    tp prompts a step and m updates a step; `pool`: a pool of that many prompts drawn as the
    preset's (the real trainer's `pool_size`), None: the preset's; `pick` 'mid' / 'mid-level' /
    'mid-answer': instead the `pool` prompts of the preset's pool nearest p = 1/2 at the start
    (the trainer's pool_pick; SimPolicy.nearest_half)."""
    cfg = pre.sim.replace(**sim, num_minibatches=m)
    part = None
    if pick != "random":
        by = pick_strata(pick)
        part = lambda pol: pol.nearest_half(int(pool), by=by)  # noqa: E731
    elif pool is not None:
        pre = part_of_pool(pre, int(pool))
    opts = strategy_options("grpo", train_prompts=tp, group_size=group_size)
    curves = []
    for seed in seeds:
        r = simulate_run(
            "grpo",
            pre,
            seed,
            budget_rollouts=budget,
            eval_every_rollouts=every,
            options=opts,
            sim_config=cfg,
            part=part,
        )
        if r["stopped"]:
            raise RuntimeError(f"simulated GRPO (train_prompts={tp}, seed {seed}): {r['stopped']}")
        ex = np.array([e["cum_rollouts"] for e in r["evals"]], dtype=float)
        ea = np.array([e["accuracy"] for e in r["evals"]])
        curves.append(interp_curve(ex, ea, x))  # NaN beyond a run's last evaluation
    a = np.mean(curves, axis=0)
    return a - a[0]


TARGET_FRACTION = ReportInputs.fraction  # of the baseline's peak gain, as the reports' default


def to_target(curves: dict[str, tuple[np.ndarray, np.ndarray]], baseline: str) -> dict[str, float]:
    """Rollouts to the baseline's target of every variant's seed-mean gain curve {name: (x, gain)},
    as the reports compute it: every curve on the variants' common grid (a variant evaluated less
    often is interpolated), a trailing 3-point average, the target 0.9 of the baseline's peak gain
    (gains start at 0: each side's runs start from one warm start), the crossing interpolated;
    +inf where never reached; NaN for all if the baseline never gains."""
    grid = common_grid([x for x, _ in curves.values()])
    smooth = {n: moving_average(interp_curve(x, g, grid)) for n, (x, g) in curves.items()}
    target = TARGET_FRACTION * float(np.nanmax(smooth[baseline]))
    if not target > 0:  # the baseline never gained: no target, no speedup
        return {n: np.nan for n in curves}
    out = {}
    for n, g in smooth.items():
        hit = first_reach(grid, g, target)
        out[n] = np.inf if hit is None else hit
    return out


def speedup(to: dict[str, float], base: str, name: str) -> str:
    """The speedup of `name` over `base` from `to_target`'s rollouts, as text ("never")."""
    if np.isnan(to[base]):
        return "undefined (the baseline never gains)"
    return "never" if not np.isfinite(to[name]) else f"{to[base] / to[name]:.2f}x"


def speedup_error(args, real, gains) -> float:
    """RMS over the variants other than the baseline (the first) of log(simulated speedup / real
    speedup), each side to its own baseline's target; a variant that never reaches it counts as
    reaching it at twice the budget. A simulated baseline that never gains gives twice the largest
    log speedup there can be, log(2 x budget / evaluation spacing); a real one is an error."""
    names = list(gains)
    cap = 2.0 * args.budget
    sim = to_target({n: (real[n]["x"], gains[n]) for n in names}, names[0])
    obs = to_target({n: (real[n]["x"], real[n]["gain"]) for n in names}, names[0])
    if np.isnan(obs[names[0]]):
        raise SystemExit(f"the real {names[0]} never gains: its speedups are undefined")
    if np.isnan(sim[names[0]]):
        return float(2.0 * np.log(cap / args.every))

    def log_speedup(t):
        return {n: np.log(min(t[names[0]], cap) / min(t[n], cap)) for n in names[1:]}

    s, o = log_speedup(sim), log_speedup(obs)
    return float(np.sqrt(np.mean([(s[n] - o[n]) ** 2 for n in names[1:]])))


def variants_loss(args, real, variants, pre, sim, *, fast: bool):
    """(loss, {variant: simulated gain}) of simulated GRPO with `sim` overrides against the real
    gains. The loss is the rmse over every variant's evaluations after the first (NaN past a
    simulated run's end left out), plus --target-weight x `speedup_error`. A variant's updates a
    step go to the skills (num_minibatches) or, with `fast`, to the fast component alone
    (fast_updates; the skills at one update a step)."""
    gains, err = {}, []
    for name, (tp, m, *pool) in variants.items():
        over = dict(sim, fast_updates=m) if fast else sim
        g = sim_gain(
            pre,
            over,
            tp,
            1 if fast else m,
            args.group_size,
            args.budget,
            args.every,
            args.sim_seeds,
            real[name]["x"],
            *pool,
        )
        gains[name] = g
        err.append((g - real[name]["gain"])[1:])
    e = np.concatenate(err)
    loss = float(np.sqrt(np.mean(e[~np.isnan(e)] ** 2)))
    if args.target_weight:
        loss += args.target_weight * speedup_error(args, real, gains)
    return loss, gains


def fit_pair(args, real, variants, noise, cost):
    """Best speed k for one (noise, cost) pair: (loss, k, {variant: simulated gain})."""
    pre = preset(args.preset)
    base = pre.sim
    cache: dict[float, tuple[float, dict]] = {}

    def loss(log2k: float):
        log2k = round(log2k, 6)
        if log2k not in cache:
            k = 2.0**log2k
            sim = dict(
                optimizer="rms",
                noise_scale=noise,
                update_cost=cost,
                global_gain=base.global_gain * k,
                cluster_gain=base.cluster_gain * k,
            )
            cache[log2k] = variants_loss(args, real, variants, pre, sim, fast=False)
        return cache[log2k][0]

    best = min(np.arange(-3.0, 6.01, 1.0), key=loss)
    for step in (0.5, 0.25, 0.125):
        best = min((best - step, best, best + step), key=loss)
    return cache[round(best, 6)][0], 2.0**best, cache[round(best, 6)][1]


FAST_PARAMS = ("k", "fast_max", "fast_rate", "fast_noise", "fast_damage")


def fast_loss(args, real, variants, theta: tuple[float, ...]):
    """(loss, {variant: simulated gain}) of the fast component's parameters theta (FAST_PARAMS):
    the preset's skills at one update a step, speed x k, and the fast component seeing each
    variant's updates a step (fast_updates)."""
    pre = preset(args.preset)
    k, F, r, B, rho = theta
    sim = dict(
        global_gain=pre.sim.global_gain * k,
        cluster_gain=pre.sim.cluster_gain * k,
        fast_max=F,
        fast_rate=r,
        fast_noise=B,
        fast_damage=rho,
    )
    if getattr(args, "delta", None) is not None:  # one point of the --repeat-decay grid
        sim.update(zip(REPEAT_FIELDS, args.delta))
    return variants_loss(args, real, variants, pre, sim, fast=True)


def fit_fast(args, real, variants, ex):
    """The best of a coordinate search from each start of --fast-start (';'-separated)."""
    starts = []
    for start in args.fast_start.split(";"):
        theta = tuple(float(t) for t in start.split(","))
        if len(theta) != len(FAST_PARAMS):
            raise SystemExit(
                f"--fast-start: each start needs {len(FAST_PARAMS)} values ({', '.join(FAST_PARAMS)})"
            )
        starts.append(theta)
    fits = []
    for theta in starts:
        print("start " + ", ".join(f"{n} {v:.4g}" for n, v in zip(FAST_PARAMS, theta)))
        fits.append(search_fast(args, real, variants, ex, theta))
    return min(fits, key=lambda f: f[0])


REPEAT_FIELDS = ("repeat_decay", "repeat_grace", "repeat_harm", "repeat_memory")


def repeat_grid(spec: str) -> list[tuple[float, int, float, float]]:
    """--repeat-decay "0.1,0.2:4,0.2:4:0.5,0.2:4:0.5:16" -> [(0.1, 0, 0.0, 0.0), (0.2, 4, 0.0,
    0.0), (0.2, 4, 0.5, 0.0), (0.2, 4, 0.5, 16.0)]: REPEAT_FIELDS points (an empty field: 0)."""
    out = []
    for item in spec.split(","):
        parts = item.split(":")
        if len(parts) > len(REPEAT_FIELDS):
            raise SystemExit(f"--repeat-decay {item!r}: write DECAY[:GRACE[:HARM[:MEMORY]]]")
        d, g, h, mem = (parts + ["0"] * 3)[:4]
        out.append((float(d), int(g or 0), float(h or 0), float(mem or 0)))
    return out


def fit_fast_grid(args, real, variants, ex):
    """fit_fast at every point of --repeat-decay (None: the preset's), a table printed:
    (the REPEAT_FIELDS point of the best fit or None, loss, theta, gains)."""
    grid = None if args.repeat_decay is None else repeat_grid(args.repeat_decay)
    fits = []
    for d in grid or [None]:
        if d is not None:
            print(", ".join(f"{f} {v:g}" for f, v in zip(REPEAT_FIELDS, d)))
        at = argparse.Namespace(**vars(args), delta=d)
        fits.append((d, *fit_fast(at, real, variants, ex)))
    if grid is not None:
        print("repeat_decay  grace  harm   memory  loss     " + "  ".join(FAST_PARAMS))
        for d, loss, theta, _ in fits:
            print(
                f"{d[0]:12g}  {d[1]:5d}  {d[2]:5g}  {d[3]:6g}  {loss:.5f}  "
                + "  ".join(f"{v:.4g}" for v in theta)
            )
    return min(fits, key=lambda f: f[1])


def search_fast(args, real, variants, ex, theta):
    """Coordinate search on log scales from theta, each sweep's candidates in parallel: every
    parameter x 2^(+-step), the step halved when no candidate improves the loss by 1e-6 or more."""
    seen = {theta: fast_loss(args, real, variants, theta)}  # theta -> (loss, gains)
    best, gains = seen[theta]
    rate = FAST_PARAMS.index("fast_rate")
    step = 1.0
    while step >= args.fast_tol:
        cands = []
        for i in range(len(theta)):
            for sign in (1.0, -1.0):
                t = list(theta)
                t[i] *= 2.0 ** (sign * step)
                t[rate] = min(t[rate], 1.0)  # a share
                if tuple(t) != theta:
                    cands.append(tuple(t))
        todo = [c for c in cands if c not in seen]
        for c, r in zip(todo, ex.map(fast_loss, *zip(*[(args, real, variants, c) for c in todo]))):
            seen[c] = r
        i = int(np.argmin([seen[c][0] for c in cands]))
        if seen[cands[i]][0] < best - 1e-6:
            (best, gains), theta = seen[cands[i]], cands[i]
            print(
                f"  loss {best:.5f} at "
                + ", ".join(f"{n} {v:.4g}" for n, v in zip(FAST_PARAMS, theta))
            )
        else:
            step /= 2.0
    return best, theta, gains


def write_preset(args, k: float, fields: dict, what: str, loss: float, err: float) -> None:
    """--preset with the skills' gains x k and `fields` set in its sim, to --out; its source
    records the fit: loss, its parts (err: the rms log speedup error), simulated seeds, starts."""
    d = json.loads(Path(args.preset).read_text())
    sim = d.setdefault("sim", {})
    sim.update(
        global_gain=sim.get("global_gain", 4e-5) * k,
        cluster_gain=sim.get("cluster_gain", 1.6e-4) * k,
        **fields,
    )
    d["name"] = Path(args.out).stem
    d["source"] = (
        d.get("source", "")
        + f" Then benchmarks/fit_batch_response.py {what}: gains x {k:.4g}, "
        + ", ".join(f"{f} {v:g}" for f, v in fields.items() if not isinstance(v, str))
        + f", simulated seeds {args.sim_seeds}"
        + (f", starts {args.fast_start!r}" if args.fast else "")
        + (
            f", the best of the repeat_decay grid {args.repeat_decay!r}"
            if args.repeat_decay
            else ""
        )
        + (
            f", --target-weight {args.target_weight:g}: loss {loss:.5f} (curve rmse "
            f"{loss - args.target_weight * err:.5f} + {args.target_weight:g} x rms log speedup "
            f"error {err:.3f})."
            if args.target_weight
            else f", rmse {loss:.5f} (rms log speedup error {err:.3f})."
        )
    )
    Path(args.out).write_text(json.dumps(d, indent=1) + "\n")
    print(f"wrote {args.out}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--preset", required=True)
    ap.add_argument(
        "--csv",
        action="append",
        required=True,
        help="real evaluation CSV (repeatable); FILE:NAME,... reads only those strategies of it",
    )
    ap.add_argument(
        "--variant",
        action="append",
        required=True,
        help=VARIANT_FORM,
    )
    ap.add_argument("--seeds", default=None, help="real seeds to use (default: all)")
    ap.add_argument("--sim-seeds", default="0,1,2,3")
    ap.add_argument("--noise", default="16,32,64,128")
    ap.add_argument("--cost", default="0,0.1,0.2,0.3,0.4")
    ap.add_argument("--group-size", type=int, default=8)
    ap.add_argument("--budget", type=int, default=98304)
    ap.add_argument("--every", type=int, default=4096)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", default=None, help="write the best pair's preset here")
    ap.add_argument(
        "--fast",
        action="store_true",
        help="fit the fast component (SimConfig.fast_*) and the skills' speed instead of the "
        "(noise, cost) grid",
    )
    ap.add_argument(
        "--fast-start",
        default="0.3,0.45,0.8,128,0.004;1,0.2,0.3,256,0.001",
        help="starts of the search, ';'-separated, each " + ",".join(FAST_PARAMS),
    )
    ap.add_argument("--fast-tol", type=float, default=0.125, help="smallest log2 step")
    ap.add_argument(
        "--repeat-decay",
        default=None,
        help="with --fast: a grid of SimConfig.repeat_decay[:repeat_grace[:repeat_harm"
        "[:repeat_memory]]] points (comma-separated), the search run at each and the best kept (pool_size variants are what tell them apart); "
        "default: the preset's",
    )
    ap.add_argument(
        "--target-weight",
        type=float,
        default=0.0,
        help="add this x the RMS log error of the variants' speedups over the first variant, to "
        "its target (GRPO's speedups from its own steps; 0: curves alone)",
    )
    args = ap.parse_args()
    if args.repeat_decay is not None and not args.fast:
        ap.error("--repeat-decay needs --fast (the grid is searched with the fast component)")
    variants = dict(parse_variant(v) for v in args.variant)
    args.sim_seeds = [int(s) for s in args.sim_seeds.split(",")]
    seeds = None if args.seeds is None else {int(s) for s in args.seeds.split(",")}
    real = real_gains(args.csv, list(variants), seeds)
    first = next(iter(variants))
    t_real = to_target({n: (r["x"], r["gain"]) for n, r in real.items()}, first)
    if np.isnan(t_real[first]):
        raise SystemExit(f"the real {first} never gains: no target, no speedups to fit or report")
    print(
        f"real speedups over {first}: "
        + ", ".join(f"{n} {speedup(t_real, first, n)}" for n in t_real if n != first)
    )
    if args.fast:
        with ProcessPoolExecutor(args.jobs) as ex:
            delta, loss, theta, gains = fit_fast_grid(args, real, variants, ex)
        t_sim = to_target({n: (real[n]["x"], g) for n, g in gains.items()}, first)
        for name, g in gains.items():
            print(
                f"{name}: real final {real[name]['gain'][-1]:+.4f}, simulated {g[-1]:+.4f}; "
                f"speedup real {speedup(t_real, first, name)}, "
                f"simulated {speedup(t_sim, first, name)}"
            )
        err = speedup_error(args, real, gains)
        print(f"speedup error (rms log) {err:.3f}")
        print(f"loss {loss:.5f}: " + ", ".join(f"{n} {v:.4g}" for n, v in zip(FAST_PARAMS, theta)))
        if args.out:
            k, F, r, B, rho = theta
            fields = dict(fast_max=F, fast_rate=r, fast_noise=B, fast_damage=rho)
            fields["fast_updates"] = next(iter(variants.values()))[1]  # the trainer's updates
            if delta is not None:
                fields.update(zip(REPEAT_FIELDS[:2], delta[:2]))
                fields.update((f, v) for f, v in zip(REPEAT_FIELDS[2:], delta[2:]) if v)
            what = f"--fast (GRPO's batch response, variants {variants})"
            write_preset(args, k, fields, what, loss, err)
        return
    grid = [(float(n), float(c)) for n in args.noise.split(",") for c in args.cost.split(",")]
    with ProcessPoolExecutor(args.jobs) as ex:
        fits = list(ex.map(fit_pair, *zip(*[(args, real, variants, n, c) for n, c in grid])))
    print(
        "real final gains: "
        + ", ".join(f"{n} {real[n]['gain'][-1]:+.4f} ({real[n]['seeds']} seeds)" for n in variants)
    )
    print("noise  cost   k      loss     final gains (sim)")
    for (n, c), (loss, k, gains) in sorted(zip(grid, fits), key=lambda t: t[1][0]):
        finals = ", ".join(f"{name} {g[-1]:+.4f}" for name, g in gains.items())
        print(f"{n:5.0f}  {c:4.2f}  {k:6.3f}  {loss:.5f}  {finals}")
    (n, c), (loss, k, gains) = min(zip(grid, fits), key=lambda t: t[1][0])
    if args.out:
        fields = dict(optimizer="rms", noise_scale=n, update_cost=c)
        fields["num_minibatches"] = next(iter(variants.values()))[1]  # the trainer's updates
        what = f"(GRPO's batch response, variants {variants})"
        write_preset(args, k, fields, what, loss, speedup_error(args, real, gains))


if __name__ == "__main__":
    main()
