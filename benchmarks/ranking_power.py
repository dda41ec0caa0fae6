"""How much of a ranking of strategies do N seeds resolve, and how well does the simulator predict it?
(docs/simulator.md, "How many real seeds the floor needs").

Issue 15's floor compares the simulator's ranking of the strategies with the real one by Kendall's
tau (>= 0.7) and every speedup over GRPO within 25%. The real ranking is itself an estimate from a
few seeds per strategy: a second real benchmark with other seeds would rank differently. This script
puts the number on both sides, from the runs alone (evaluation CSVs: the `--export` files of
`merge_testbed_runs.py`, or a `rollalloc simulate` / `compare` output's curves.csv):

* **observed**: the ranking of every strategy on all its seeds, real and simulated, and their tau;
* **sim vs real, with its interval**: both sides' seeds resampled (each strategy on its own, as the
  reports' bootstrap does), tau of every pair of resampled rankings: median, 90% interval, and the
  share of resamples at or above the floor;
* **a perfect predictor against m real seeds** (the noise ceiling): the predictor knows the ranking
  of all real seeds; a benchmark of m seeds per strategy is drawn from them (m draws with
  replacement; m can exceed the number of seeds: the observed seeds stand for the population, so
  the spread of a mean of m is the observed spread / sqrt(m)); tau of its ranking against the
  known one, and the share of draws where every speedup is within 25% of the known one ("never" on
  both sides agrees, on one side only misses);
* **split halves** (no resampling assumption): the seeds of every strategy split at random into two
  disjoint halves, tau of the two halves' rankings: what two real benchmarks of n/2 seeds agree on.

Ranking rule (as `fit_testbed_preset.rank_key`): rollouts to the target (0.9 of the baseline's gain,
each resample's target from its own baseline curves; never = last), then final accuracy, higher
first. Resampled rankings are computed with rollalloc.report.bootstrap, the reports' own code.

    python benchmarks/ranking_power.py --real benchmarks/results/paper-testbed-s12-peers.csv \\
        --sim runs/s12/sim-capRms --strategies grpo,dapo,pilot-commit,cero,speed-rl,greso,mopps,knapsack
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from rollalloc.preflight import parse_seeds
from rollalloc.report import bootstrap as bs
from rollalloc.report import curves

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fit_testbed_preset import SPEEDUP_TOLERANCE, TAU_FLOOR, kendall_tau, rank_key  # noqa: E402

Runs = dict[str, dict[int, tuple[np.ndarray, np.ndarray]]]  # strategy -> seed -> (rollouts, acc)


def load_evals(paths: list[str], seeds: set[int] | None, strategies: list[str] | None) -> Runs:
    """Per strategy and seed the (cum_rollouts, accuracy) evaluations of CSV files (a directory: its
    curves.csv); the first file that has a (strategy, seed) wins."""
    runs: dict[str, dict[int, list[tuple[float, float]]]] = {}
    for p in paths:
        path = Path(p) / "curves.csv" if Path(p).is_dir() else Path(p)
        if not path.is_file():
            raise SystemExit(f"{p}: no such evaluation CSV (or directory with curves.csv)")
        here: dict[tuple[str, int], list[tuple[float, float]]] = {}
        with open(path, newline="") as f:
            for row in csv.DictReader(f):
                s, seed = row["strategy"], int(row["seed"])
                if (seeds is None or seed in seeds) and (strategies is None or s in strategies):
                    here.setdefault((s, seed), []).append(
                        (float(row["cum_rollouts"]), float(row["accuracy"]))
                    )
        for (s, seed), ev in here.items():  # an earlier file's (strategy, seed) is kept
            runs.setdefault(s, {}).setdefault(seed, ev)
    out: Runs = {}
    for s in strategies or sorted(runs):
        if s not in runs:
            raise SystemExit(f"strategy {s!r} has no evaluations in {paths}")
        out[s] = {}
        for seed, ev in sorted(runs[s].items()):
            a = np.array(sorted(ev))
            out[s][seed] = (a[:, 0], a[:, 1])
    return out


class Bench:
    """One set of runs and the statistics of any weighting of its seeds (rollalloc's bootstrap)."""

    def __init__(self, runs: Runs, baseline: str, fraction: float):
        if baseline not in runs:
            raise SystemExit(f"the baseline {baseline!r} has no runs")
        self.names = list(runs)
        self.n = {s: len(runs[s]) for s in runs}
        self.xs = {s: [x for x, _ in runs[s].values()] for s in runs}
        self.ys = {s: [y for _, y in runs[s].values()] for s in runs}
        flat = [x for v in self.xs.values() for x in v]
        self.grid = curves.baseline_grid(flat, self.xs[baseline])  # as a summary's grid
        self.baseline, self.fraction = baseline, fraction

    def stats(self, counts: dict[str, np.ndarray]) -> bs.Resamples:
        return bs.resample(
            self.xs, self.ys, self.grid, baseline=self.baseline, fraction=self.fraction,
            counts=counts,
        )  # fmt: skip

    def reports_draws(self) -> bs.Resamples:
        """The reports' own resamples (bootstrap's default draws: 2000, each strategy's RNG of its
        name), so an interval here is the one `merge_testbed_runs.py` prints."""
        return bs.resample(
            self.xs, self.ys, self.grid, baseline=self.baseline, fraction=self.fraction
        )

    def all_seeds(self) -> bs.Resamples:
        return self.stats({s: np.ones((1, self.n[s])) for s in self.names})


def positions(res: bs.Resamples, names: list[str]) -> np.ndarray:
    """(R, k): each strategy's place (1 = best) in every resample by `rank_key` (rollouts to
    target, never last; then final accuracy, higher first; then the name)."""
    r = len(next(iter(res.rollouts.values())))
    out = np.zeros((r, len(names)), dtype=int)
    for i in range(r):
        key = {s: rank_key(_row(res, s, i), s) for s in names}
        for place, s in enumerate(sorted(names, key=key.__getitem__), start=1):
            out[i, names.index(s)] = place
    return out


def _row(res: bs.Resamples, s: str, i: int) -> dict[str, float | None]:
    """Resample i of strategy s as a summary row (rank_key's input; never -> None)."""
    x = float(res.rollouts[s][i])
    return {
        "rollouts_to_target": x if np.isfinite(x) else None,
        "final_accuracy": float(res.final[s][i]),
    }


def speedups(res: bs.Resamples, names: list[str], baseline: str) -> np.ndarray:
    """(R, k): the baseline's rollouts to target over each strategy's (0: never reached)."""
    out = np.stack([bs.ratio(res.rollouts[baseline], res.rollouts[s]) for s in names], axis=1)
    return np.where(np.isfinite(out), out, 0.0)


def taus(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Kendall tau-b of every row pair (a broadcasts against b)."""
    a, b = np.broadcast_arrays(a, b)
    return np.array([kendall_tau(list(x), list(y)) for x, y in zip(a, b)])


def draws(n: int, m: int, r: int, rng: np.random.Generator) -> np.ndarray:
    """(r, n) counts of m seeds drawn uniformly with replacement from n."""
    return rng.multinomial(m, np.full(n, 1.0 / n), size=r).astype(np.float64)


def halves(n: int, r: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Two (r, n) 0/1 weightings: a random n // 2 of the seeds and n // 2 of the others."""
    h = n // 2
    a, b = np.zeros((r, n)), np.zeros((r, n))
    for i in range(r):
        p = rng.permutation(n)
        a[i, p[:h]], b[i, p[h : 2 * h]] = 1.0, 1.0
    return a, b


def summarise(t: np.ndarray) -> dict[str, Any]:
    """Median, 90% percentile interval (the reports' `bootstrap.interval`) and share at the floor
    of the defined taus."""
    t = t[~np.isnan(t)]
    return {
        "median": float(np.median(t)),
        "interval": list(bs.interval(t)),
        "share_at_floor": float(np.mean(t >= TAU_FLOOR - 1e-12)),
        "resamples": int(len(t)),
    }


def speedups_close(ref: np.ndarray, got: np.ndarray, base_col: int) -> np.ndarray:
    """(..., k-1) bool: each strategy's speedup within SPEEDUP_TOLERANCE of the reference's, never
    (0) agreeing only with never; the baseline's column skipped."""
    cols = [j for j in range(ref.shape[-1]) if j != base_col]
    ref, got = np.broadcast_arrays(ref[..., cols], got[..., cols])
    both = (ref > 0) & (got > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        close = np.abs(got / np.where(ref > 0, ref, 1.0) - 1.0) <= SPEEDUP_TOLERANCE + 1e-12
    return np.where(both, close, (ref == 0) & (got == 0))


def speedups_agree(ref: np.ndarray, got: np.ndarray, base_col: int) -> np.ndarray:
    """(R,) bool: every strategy's speedup within SPEEDUP_TOLERANCE of the reference's
    (`speedups_close` of all)."""
    return speedups_close(ref, got, base_col).all(axis=1)


def scores(res: bs.Resamples, names: list[str], baseline: str, by: str) -> np.ndarray:
    """(R, k) what tau compares: `speedups` (higher better; never = 0, ties kept: the `check`
    subcommand of fit_testbed_preset.py) or `ranks` (minus the strict place of `positions`: the
    `compare` subcommand's order, never ranked by final accuracy)."""
    if by == "speedups":
        return speedups(res, names, baseline)
    if by == "ranks":
        return -positions(res, names)
    raise ValueError(f"tau by {by!r}: speedups or ranks")


def analyse(
    real: Runs,
    sim: Runs | None,
    *,
    baseline: str,
    fraction: float,
    arms: list[int],
    resamples: int,
    seed: int,
    by: str = "speedups",
) -> dict[str, Any]:
    names = list(real)
    if sim is not None:
        missing = [s for s in names if s not in sim]
        if missing:
            raise SystemExit(f"the simulated runs lack {missing}")
        sim = {s: sim[s] for s in names}
    rng = np.random.default_rng(seed)
    rb = Bench(real, baseline, fraction)
    b_col = names.index(baseline)
    ref = rb.all_seeds()
    ref_pos, ref_sp = positions(ref, names)[0], speedups(ref, names, baseline)[0]
    ref_sc = scores(ref, names, baseline, by)
    out: dict[str, Any] = {
        "tau_by": by,
        "strategies": names,
        "real_seeds": rb.n,
        "real_ranking": [names[j] for j in np.argsort(ref_pos)],
        "real_speedups": dict(zip(names, map(float, ref_sp))),
    }
    if sim is not None:
        sb = Bench(sim, baseline, fraction)
        s_all = sb.all_seeds()
        s_pos, s_sp = positions(s_all, names)[0], speedups(s_all, names, baseline)[0]
        s_sc = scores(s_all, names, baseline, by)
        out["sim_seeds"] = sb.n
        out["sim_ranking"] = [names[j] for j in np.argsort(s_pos)]
        out["sim_speedups"] = dict(zip(names, map(float, s_sp)))
        out["tau_observed"] = float(taus(ref_sc, s_sc)[0])
        out["speedups_observed_agree"] = bool(speedups_agree(ref_sp[None], s_sp[None], b_col)[0])
        close = speedups_close(ref_sp[None], s_sp[None], b_col)[0]
        both = [j for j in range(len(names)) if j != b_col and ref_sp[j] > 0 and s_sp[j] > 0]
        out["speedup_log_rms"] = (
            float(np.sqrt(np.mean(np.log(s_sp[both] / ref_sp[both]) ** 2))) if both else None
        )  # over the strategies that reach the target on both sides
        out["speedup_log_rms_over"] = [names[j] for j in both]
        out["speedup_within_tolerance"] = dict(
            zip([s for s in names if s != baseline], map(bool, close))
        )
        rr = rb.stats({s: draws(rb.n[s], rb.n[s], resamples, rng) for s in names})
        ss = sb.stats({s: draws(sb.n[s], sb.n[s], resamples, rng) for s in names})
        # the real speedups' 90% intervals as the reports give them (never = 0) and whether each
        # simulated speedup is inside (no interval where every resample is undefined)
        out["real_speedup_interval"], out["sim_inside_real_interval"] = {}, {}
        rep = rb.reports_draws()
        for s in names:
            ci = bs.interval(bs.ratio(rep.rollouts[baseline], rep.rollouts[s]))
            if s != baseline and ci is not None:
                out["real_speedup_interval"][s] = list(ci)
                out["sim_inside_real_interval"][s] = bool(ci[0] <= s_sp[names.index(s)] <= ci[1])
        out["tau_sim_vs_real"] = summarise(
            taus(scores(rr, names, baseline, by), scores(ss, names, baseline, by))
        )
    ceiling = {}
    for m in arms:
        res = rb.stats({s: draws(rb.n[s], m, resamples, rng) for s in names})
        t = summarise(taus(ref_sc, scores(res, names, baseline, by)))
        t["speedups_agree_share"] = float(
            np.mean(speedups_agree(ref_sp[None], speedups(res, names, baseline), b_col))
        )
        ceiling[str(m)] = t
    out["perfect_predictor"] = ceiling
    a, b = zip(*(halves(rb.n[s], resamples, rng) for s in names))
    ha = scores(rb.stats(dict(zip(names, a))), names, baseline, by)
    hb = scores(rb.stats(dict(zip(names, b))), names, baseline, by)
    out["split_halves"] = {
        "seeds_per_half": {s: rb.n[s] // 2 for s in names},
        **summarise(taus(ha, hb)),
    }
    return out


def _num(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}"


def table(res: dict[str, Any]) -> str:
    f = lambda t: (  # noqa: E731
        f"{t['median']:.2f} [{t['interval'][0]:.2f}, {t['interval'][1]:.2f}] | "
        f"{t['share_at_floor']:.0%}"
    )
    sp = lambda v: "never" if not v else f"{v:.2f}x"  # noqa: E731
    lines = [
        f"tau of the {'speedups (never = 0, ties kept)' if res['tau_by'] == 'speedups' else 'strict ranks'}",
        f"real ranking (all seeds): {' > '.join(res['real_ranking'])}",
    ]
    if "sim_ranking" in res:
        lines += [
            f"sim ranking (all seeds):  {' > '.join(res['sim_ranking'])}",
            "",
            f"| strategy | real speedup [90%] | sim speedup | within {SPEEDUP_TOLERANCE:.0%} | "
            "sim inside the real interval |",
            "|---|---|---|---|---|",
        ]
        inside, close = res["sim_inside_real_interval"], res["speedup_within_tolerance"]
        for s in res["real_ranking"]:
            lo, hi = res["real_speedup_interval"].get(s, (None, None))
            ci = f" [{sp(lo)}, {sp(hi)}]" if lo is not None else ""
            yes = {True: "yes", False: "no"}
            lines.append(
                f"| {s} | {sp(res['real_speedups'][s])}{ci} | {sp(res['sim_speedups'][s])} | "
                f"{yes.get(close.get(s), '')} | {yes.get(inside.get(s), '')} |"
            )
        lines += [
            "",
            f"tau, all seeds: {res['tau_observed']:.3f}; every speedup within "
            f"{SPEEDUP_TOLERANCE:.0%}: {'yes' if res['speedups_observed_agree'] else 'no'} "
            f"({sum(close.values())} of {len(close)}); "
            f"inside the real 90% interval: {sum(inside.values())} of {len(inside)}; "
            f"rms log(sim / real speedup): {_num(res['speedup_log_rms'])} over the "
            f"{len(res['speedup_log_rms_over'])} of {len(close)} that reach the target on both "
            "sides",
        ]
    lines += [
        "",
        f"| comparison | tau median [90%] | share >= {TAU_FLOOR} | share with every speedup "
        f"within {SPEEDUP_TOLERANCE:.0%} |",
        "|---|---|---|---|",
    ]
    if "tau_sim_vs_real" in res:
        lines.append(f"| sim vs real, both resampled | {f(res['tau_sim_vs_real'])} | |")
    for m, t in res["perfect_predictor"].items():
        lines.append(
            f"| a perfect predictor vs {m} real seeds per strategy | {f(t)} | "
            f"{t['speedups_agree_share']:.0%} |"
        )
    h = res["split_halves"]
    per = sorted(set(h["seeds_per_half"].values()))
    lines.append(
        f"| two disjoint halves of the real seeds ({'/'.join(map(str, per))} each) | {f(h)} | |"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--real", action="append", required=True, help="evaluation CSV (repeatable)")
    ap.add_argument("--sim", action="append", help="a simulate output dir or CSV (repeatable)")
    ap.add_argument("--strategies", help="comma-separated (default: every real strategy)")
    ap.add_argument("--seeds", help="real seeds to use: 0,1,2 or 0-9 (default: all)")
    ap.add_argument("--baseline", default="grpo")
    ap.add_argument("--fraction", type=float, default=0.9)
    ap.add_argument(
        "--arms", default="", help="seeds per strategy of the perfect predictor's benchmarks "
        "(comma-separated; default: n/2, n, 2n, 4n of the real seeds' median n)",
    )  # fmt: skip
    ap.add_argument(
        "--tau", choices=("speedups", "ranks"), default="speedups",
        help="tau of the speedups (never = 0, tied; `fit_testbed_preset.py check`) or of the "
        "strict ranks (never ranked by final accuracy; `compare`)",
    )  # fmt: skip
    ap.add_argument("--resamples", type=int, default=1000)
    ap.add_argument("--rng-seed", type=int, default=0)
    ap.add_argument("--out", help="write the table (markdown) and the numbers (.json) here")
    args = ap.parse_args(argv)
    strategies = [s for s in (args.strategies or "").split(",") if s] or None
    try:
        seeds = set(parse_seeds(args.seeds)) if args.seeds else None
    except ValueError as e:
        ap.error(str(e))
    if args.resamples < 10:
        raise SystemExit(f"--resamples must be >= 10, got {args.resamples}")
    real = load_evals(args.real, seeds, strategies)
    few = {s: len(v) for s, v in real.items() if len(v) < 2}
    if few:
        raise SystemExit(f"every strategy needs at least 2 real seeds: {few}")
    sim = load_evals(args.sim, None, list(real)) if args.sim else None
    n = int(np.median([len(v) for v in real.values()]))
    arms = [int(a) for a in args.arms.split(",") if a] or sorted({max(2, n // 2), n, 2 * n, 4 * n})
    res = analyse(
        real, sim, baseline=args.baseline, fraction=args.fraction, arms=arms,
        resamples=args.resamples, seed=args.rng_seed, by=args.tau,
    )  # fmt: skip
    text = table(res)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
        Path(args.out).with_suffix(".json").write_text(json.dumps(res, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
