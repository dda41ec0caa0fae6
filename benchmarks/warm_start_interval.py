"""A speedup across warm starts: each warm start's report figure, and an interval over warm starts.

    python benchmarks/warm_start_interval.py ws0=runs/s10-real-report/summary.json \
        ws1=runs/s10-ws1-report/summary.json ... --strategies posterior-signal,pilot-commit,\
posterior-signal/pilot-commit

Each summary.json is one warm start's testbed report (merge_testbed_runs.py; its target is 0.9 of
that warm start's GRPO gain, its speedup and 90% interval over run seeds BENCHMARKS.md's). A warm
start is a draw of the policy a user starts from, so the question "how much faster on a warm start
I have not seen" is answered by the spread of the figures *between* warm starts: the geometric mean
of the k warm starts' speedups and the 90% t-interval of their logs, mean +- t(0.95, k-1) sd /
sqrt(k) (a random-effects view: each figure's own seed noise is part of the spread between them).
"a/b" in --strategies compares a with b instead of the baseline. A warm start where either side
never reaches the target has no ratio: it is reported (who never) and left out of the interval,
named in the output (leaving out a warm start where a never reaches it flatters a). With
`--never budget` such a warm start enters instead as though the side that never reached the target
reached it with the last rollout of the budget: a bound in that side's favour (it reached no sooner,
if ever), marked "<=" or ">=" in its cell, so that the interval no longer drops its worst warm start. Where every figure has its interval,
a line says whether the warm starts differ beyond their own seed noise (Cochran's Q with each
figure's standard error read from its interval; `heterogeneity`).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from functools import lru_cache
from statistics import NormalDist

import numpy as np


@lru_cache(maxsize=64)
def t_quantile(q: float, df: int) -> float:
    """The q quantile (q > 0.5) of Student's t with df degrees of freedom (numerical, no scipy)."""
    x = np.linspace(0.0, 200.0, 400_001)
    c = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
    pdf = np.exp(c - (df + 1) / 2 * np.log1p(x * x / df))
    cdf = 0.5 + np.concatenate([[0.0], np.cumsum((pdf[1:] + pdf[:-1]) / 2 * np.diff(x))])
    return float(np.interp(q, cdf, x))


def across(speedups: list[float], level: float = 0.9) -> tuple[float, list[float] | None]:
    """Geometric mean and the t-interval of the logs (None with fewer than two warm starts)."""
    logs = np.log(np.asarray(speedups, dtype=np.float64))
    mean = float(np.exp(logs.mean()))
    if len(logs) < 2:
        return mean, None
    half = t_quantile(0.5 + level / 2, len(logs) - 1) * logs.std(ddof=1) / math.sqrt(len(logs))
    return mean, [float(np.exp(logs.mean() - half)), float(np.exp(logs.mean() + half))]


def chi2_sf(q: float, df: int) -> float:
    """P(X >= q), X ~ chi-square with df >= 1 degrees of freedom: the regularised upper incomplete
    gamma Q(df/2, q/2), by its series below x = a + 1 and by its continued fraction above (modified
    Lentz; Numerical Recipes' gser / gcf), so that small tails keep their relative accuracy (no
    scipy)."""
    if not (isinstance(df, int) and df >= 1):
        raise ValueError(f"chi2_sf: df must be an integer >= 1, got {df!r}")
    a, x = df / 2.0, q / 2.0
    if x <= 0:
        return 1.0
    log_front = -x + a * math.log(x) - math.lgamma(a)
    if x < a + 1.0:  # P(a, x) by its series, Q = 1 - P
        term = total = 1.0 / a
        for n in range(1, 100_000):
            term *= x / (a + n)
            total += term
            if term < total * 1e-16:
                break
        return max(0.0, 1.0 - math.exp(log_front) * total)
    tiny = 1e-300  # Q(a, x) by its continued fraction
    b = x + 1.0 - a
    c, d = 1.0 / tiny, 1.0 / b
    h = d
    for n in range(1, 100_000):
        an = -n * (n - a)
        b += 2.0
        d = an * d + b
        d = tiny if abs(d) < tiny else d
        c = b + an / c
        c = tiny if abs(c) < tiny else c
        d = 1.0 / d
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-16:
            break
    return math.exp(log_front) * h


def heterogeneity(
    speedups: list[float], intervals: list[list[float]], level: float = 0.9
) -> dict[str, float]:
    """Do the warm starts differ beyond each figure's seed noise? Each figure's standard error of the
    log speedup from its own interval (width / (2 z), z the normal quantile of `level`), Cochran's
    Q = sum w_i (log x_i - m)^2 with w_i = 1 / se_i^2 and m the w-weighted mean, its p-value on
    k - 1 degrees of freedom (the chance of a spread this large if every warm start had the same
    speedup), I^2 = max(0, (Q - (k - 1)) / Q), the share of the spread beyond that noise, and the
    DerSimonian-Laird between-warm-start variance tau^2 = max(0, (Q - (k - 1)) / (sum w - sum w^2 /
    sum w)), reported as its sd. A screen with little power at a handful of warm starts: it assumes
    known, symmetric (log-scale) standard errors, and tau^2 is biased low and cut off at 0."""
    z = NormalDist().inv_cdf(0.5 + level / 2.0)
    x = np.log(np.asarray(speedups, dtype=np.float64))
    bounds = np.asarray(intervals, dtype=np.float64)  # (k, 2)
    if len(x) < 2 or bounds.shape != (len(x), 2):
        raise ValueError("heterogeneity: needs two or more figures, each with [low, high]")
    if not (np.isfinite(bounds).all() and (bounds[:, 0] > 0).all() and (np.diff(bounds) > 0).all()):
        raise ValueError(f"heterogeneity: every interval needs 0 < low < high, got {intervals}")
    lo, hi = np.log(bounds).T
    w = 1.0 / ((hi - lo) / (2.0 * z)) ** 2
    m = float((w * x).sum() / w.sum())
    q = float((w * (x - m) ** 2).sum())
    k = len(x)
    tau2 = max(0.0, (q - (k - 1)) / (w.sum() - (w**2).sum() / w.sum()))
    return {"q": q, "df": k - 1, "p": chi2_sf(q, k - 1), "pooled": math.exp(m),
            "i2": max(0.0, (q - (k - 1)) / q) if q > 0 else 0.0,
            "between_sd": math.sqrt(tau2)}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("summaries", nargs="+", help="LABEL=path/to/summary.json, one per warm start")
    ap.add_argument("--strategies", required=True, help="comma-separated; a/b compares a with b")
    ap.add_argument("--out", help="write the table as JSON here")
    ap.add_argument(
        "--never", choices=("skip", "budget"), default="skip",
        help="a warm start where one side never reaches the target: leave it out (skip), or count "
        "that side as reaching it at the budget, a bound in its favour (budget)",
    )  # fmt: skip
    args = ap.parse_args(argv)
    labelled = []
    for spec in args.summaries:
        label, _, path = spec.partition("=")
        if not path:
            raise SystemExit(f"{spec}: expected LABEL=path/to/summary.json")
        labelled.append((label, json.load(open(path))))
    out, notes = {}, []
    print(
        "| comparison | " + " | ".join(lab for lab, _ in labelled) + " | across warm starts [90%] |"
    )
    print("|" + "---|" * (len(labelled) + 2))
    for item in [s.strip() for s in args.strategies.split(",") if s.strip()]:
        a, _, b = item.partition("/")
        cells, values, never, cis = [], [], [], []
        for label, s in labelled:
            ref = b or s["target"]["baseline"]
            for name in (a, ref):
                if name not in (s.get("speedup") or {}) and name not in (s.get("strategies") or {}):
                    raise SystemExit(f"{label}: no strategy {name!r} in its summary")
            x = (s.get("speedup") or {}).get(a, {}).get(ref)
            ci = (s.get("speedup_ci") or {}).get(a, {}).get(ref)
            if not x:  # a never reaches the target, or the reference never does (no ratio)
                rows = s.get("strategies") or {}
                r_a = (rows.get(a) or {}).get("rollouts_to_target")
                r_ref = (rows.get(ref) or {}).get("rollouts_to_target")
                who = ref if r_ref is None else a
                never.append(label)
                if args.never == "budget" and (r_a is None) != (r_ref is None):
                    budget = float(s["budget_rollouts"])
                    x = (r_ref if r_a is None else budget) / (budget if r_a is None else r_a)
                    values.append(float(x))
                    cells.append(f"{'<=' if r_a is None else '>='}{x:.2f}x ({who} never)")
                    continue
                cells.append(f"{who} never")
                continue
            values.append(float(x))
            if ci and ci[0] and ci[1] and 0 < ci[0] < ci[1]:
                cis.append([float(ci[0]), float(ci[1])])
            f = lambda v: "-" if v is None else f"{v:.2f}"  # noqa: E731
            cells.append(f"{x:.2f}x [{f(ci[0]) if ci else '-'}, {f(ci[1]) if ci else '-'}]")
        mean, ci = across(values) if values else (None, None)
        name = f"{a} vs {b or 'baseline'}"
        out[name] = {"per_warm_start": dict(zip([lab for lab, _ in labelled], cells)),
                     "geometric_mean": mean, "ci90": ci, "never": never}  # fmt: skip
        tail = "-" if mean is None else f"{mean:.2f}x" + (
            f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else "")  # fmt: skip
        print(f"| {name} | " + " | ".join(cells) + f" | {tail}" + (
            f" ({'bounded' if args.never == 'budget' else 'never'} on {', '.join(never)})"
            if never else "") + " |")  # fmt: skip
        if len(cis) >= 2 and len(cis) == len(values):  # every figure with its interval
            h = heterogeneity(values, cis)
            out[name]["heterogeneity"] = h
            notes.append(
                f"{name}: beyond each warm start's seed noise? Cochran's Q {h['q']:.2f} on "
                f"{h['df']} df, p {h['p']:.3f}, I^2 {h['i2']:.0%}; between-warm-start sd of the log speedup "
                f"(DerSimonian-Laird) {h['between_sd']:.3f}; inverse-variance pooled {h['pooled']:.2f}x"
            )
    for note in notes:
        print(note)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
