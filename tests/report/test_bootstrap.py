"""Bootstrap intervals over seeds (BENCHMARKS.md section 7) against brute force.

With 2-3 seeds per strategy every resample can be enumerated (itertools.product over the seed
indices of every strategy, each combination equally likely when strategies are resampled
independently). The reference below recomputes each resample's curves, target and crossing with
plain Python loops (nothing from rollalloc.report), so the exact distribution of every statistic is
known; the bootstrap at large B must reproduce it and its percentiles.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from rollalloc.report import bootstrap as bs
from rollalloc.report.summary import ReportInputs, build_summary

GRID = [100.0 * k for k in range(11)]  # every run is evaluated exactly on the grid
TOKENS_PER_ROLLOUT = {"grpo": [600, 700, 800], "fast": [500, 500, 900], "flaky": [700, 700]}


def curve(a0, rate, wiggle=0.0):
    return [
        a0 + (0.6 - a0) * (1 - math.exp(-rate * x)) + wiggle * math.sin(0.7 * k) * (k > 0)
        for k, x in enumerate(GRID)
    ]


# seeds differ a lot (rates 1.0 to 3.5 per 1000 rollouts), initial accuracies differ a little, and
# one "flaky" seed never learns: its resamples never reach the target
DATA = {
    "grpo": [curve(0.30, 1.0e-3, 0.004), curve(0.31, 1.6e-3, 0.003), curve(0.29, 2.3e-3, 0.002)],
    "fast": [curve(0.30, 1.4e-3, 0.002), curve(0.30, 2.2e-3, 0.004), curve(0.31, 3.5e-3, 0.003)],
    "flaky": [curve(0.30, 3.0e-3, 0.002), [0.30 + 0.001 * (k % 2) for k in range(11)]],
}
FRACTION = 0.9


def ref_smooth(raw):
    out = []
    for k in range(len(raw)):
        window = raw[max(0, k - 2) : k + 1]
        out.append(sum(window) / len(window))
    return out


def ref_cross(curve_, target):
    """+inf never, NaN at the start, else the straight line between the grid points around it."""
    for k, c in enumerate(curve_):
        if c >= target - 1e-12:
            if k == 0:
                return math.nan
            c0 = curve_[k - 1]
            return GRID[k - 1] + min(1.0, (target - c0) / (c - c0)) * (GRID[k] - GRID[k - 1])
    return math.inf


def ref_ratio(num, den):
    if math.isnan(num) or math.isnan(den) or (math.isinf(num) and math.isinf(den)):
        return math.nan
    if math.isinf(den):
        return 0.0
    if math.isinf(num):
        return math.inf
    return num / den


def ref_resample(picks):
    """Statistics of one resample: picks[s] = the drawn seed indices of strategy s."""
    smooth, finals, tok_rate = {}, {}, {}
    for s, idx in picks.items():
        raw = [sum(DATA[s][i][k] for i in idx) / len(idx) for k in range(len(GRID))]
        smooth[s] = ref_smooth(raw)
        finals[s] = sum(DATA[s][i][-1] for i in idx) / len(idx)
        tok_rate[s] = sum(TOKENS_PER_ROLLOUT[s][i] for i in idx) / len(idx)
    # the initial policy's accuracy from the baseline's drawn runs alone (no other strategy's)
    acc0 = sum(DATA["grpo"][i][0] for i in picks["grpo"]) / len(picks["grpo"])
    peak = max(smooth["grpo"])
    target = acc0 + FRACTION * (peak - acc0)
    x = {s: ref_cross(smooth[s], target) if peak > acc0 else math.nan for s in picks}
    return {
        "x": x,
        "tokens": {s: x[s] * tok_rate[s] for s in picks},  # tokens linear in rollouts per seed
        "final": finals,
        "gain": smooth["grpo"][-1] - acc0,
    }


def exact_distribution():
    """Every resample of every strategy, independently: 27 * 27 * 4 equally likely ones."""
    names = list(DATA)
    tuples = [list(itertools.product(range(len(DATA[s])), repeat=len(DATA[s]))) for s in names]
    return [ref_resample(dict(zip(names, combo))) for combo in itertools.product(*tuples)]


@pytest.fixture(scope="module")
def exact():
    return exact_distribution()


@pytest.fixture(scope="module")
def boot():
    xs = {s: [np.array(GRID)] * len(v) for s, v in DATA.items()}
    ys = {s: [np.array(c) for c in v] for s, v in DATA.items()}
    tokens = {s: [np.array(GRID) * r for r in TOKENS_PER_ROLLOUT[s]] for s in DATA}
    return bs.resample(
        xs,
        ys,
        np.array(GRID),
        baseline="grpo",
        fraction=FRACTION,
        tokens=tokens,
        resamples=40_000,
        seed=0,
    )


def exact_quantile(values, p):
    """Smallest v with P(X <= v) >= p over the (equally likely) defined values."""
    v = sorted(x for x in values if not math.isnan(x))
    return v[max(0, math.ceil(p * len(v) - 1e-9) - 1)]


def ks(samples, values):
    """Largest gap between the bootstrap's CDF and the exact one, at the exact support points, plus
    the gaps in the shares of +inf and NaN."""
    samples = np.asarray(samples, dtype=float)
    ex = np.array(values, dtype=float)
    gap = abs(np.mean(np.isnan(samples)) - np.mean(np.isnan(ex)))
    s, e = samples[~np.isnan(samples)], ex[~np.isnan(ex)]
    for v in np.unique(e):
        tol = 1e-9 * max(1.0, abs(v)) if np.isfinite(v) else 0.0
        gap = max(gap, abs(np.mean(s <= v + tol) - np.mean(e <= v + tol)))
    return gap


def between(lo, v, hi):
    """lo <= v <= hi up to float round-off (the reference sums in another order)."""
    tol = 1e-9 * max(1.0, abs(v)) if np.isfinite(v) else 0.0
    return lo - tol <= v <= hi + tol


def check(samples, values):
    """Same distribution (up to the bootstrap's own noise at B = 40,000), and the interval's ends
    are the exact 5% and 95% quantiles up to +-1% in probability."""
    assert ks(samples, values) < 0.015
    lo, hi = bs.interval(samples, 0.9)
    assert between(exact_quantile(values, 0.04), lo, exact_quantile(values, 0.06))
    assert between(exact_quantile(values, 0.94), hi, exact_quantile(values, 0.96))


def test_speedup_distribution_is_the_exact_independent_resampling(exact, boot):
    check(boot.speedup("fast", "grpo"), [ref_ratio(r["x"]["grpo"], r["x"]["fast"]) for r in exact])
    check(boot.speedup("grpo", "fast"), [ref_ratio(r["x"]["fast"], r["x"]["grpo"]) for r in exact])


def test_never_reaching_enters_as_inf_and_speedup_zero(exact, boot):
    flaky = [r["x"]["flaky"] for r in exact]
    share = np.mean(np.isinf(flaky))
    assert 0.1 < share < 0.9  # the flat seed makes some resamples never reach the target
    assert bs.never_share(boot.rollouts["flaky"]) == pytest.approx(share, abs=0.01)
    check(boot.rollouts["flaky"], flaky)
    check(
        boot.speedup("flaky", "grpo"), [ref_ratio(r["x"]["grpo"], r["x"]["flaky"]) for r in exact]
    )
    check(
        boot.speedup("fast", "flaky"), [ref_ratio(r["x"]["flaky"], r["x"]["fast"]) for r in exact]
    )


def test_rollouts_tokens_finals_and_gain(exact, boot):
    for s in DATA:
        check(boot.rollouts[s], [r["x"][s] for r in exact])
        check(boot.tokens[s], [r["tokens"][s] for r in exact])
        check(boot.final[s], [r["final"][s] for r in exact])
    check(boot.final_diff("fast", "grpo"), [r["final"]["fast"] - r["final"]["grpo"] for r in exact])
    check(boot.baseline_gain_final, [r["gain"] for r in exact])


def test_summary_keys_carry_the_intervals(exact):
    runs = {
        s: {
            i: {
                "evals": [
                    {"cum_rollouts": x, "cum_tokens": x * TOKENS_PER_ROLLOUT[s][i], "accuracy": a}
                    for x, a in zip(GRID, c)
                ],
                "steps": [],
            }
            for i, c in enumerate(v)
        }
        for s, v in DATA.items()
    }
    summary, _ = build_summary(
        ReportInputs(
            kind="t",
            task="t",
            seeds=[0, 1, 2],
            budget_rollouts=1000,
            runs=runs,
            strategy_configs={},
            bootstrap_resamples=40_000,
        )
    )
    sp = [ref_ratio(r["x"]["grpo"], r["x"]["fast"]) for r in exact]
    lo, hi = summary["speedup_ci"]["fast"]["grpo"]
    # (summary.json rounds intervals to 6 decimals)
    assert between(exact_quantile(sp, 0.04) - 1e-6, lo, exact_quantile(sp, 0.06) + 1e-6)
    assert between(exact_quantile(sp, 0.94) - 1e-6, hi, exact_quantile(sp, 0.96) + 1e-6)
    assert summary["vs_baseline"]["fast"]["speedup_ci"] == [lo, hi]
    assert summary["vs_baseline"]["fast"]["speedup_verdict"] == (
        "faster" if lo > 1 else "slower" if hi < 1 else "within noise"
    )
    fl = summary["strategies"]["flaky"]
    assert fl["never_reached_share"] == pytest.approx(
        np.mean([math.isinf(r["x"]["flaky"]) for r in exact]), abs=0.01
    )
    d = [r["final"]["fast"] - r["final"]["grpo"] for r in exact]
    lo, hi = summary["vs_baseline"]["fast"]["final_accuracy_diff_ci"]
    assert exact_quantile(d, 0.04) - 1e-6 <= lo <= exact_quantile(d, 0.06) + 1e-6
    assert exact_quantile(d, 0.94) - 1e-6 <= hi <= exact_quantile(d, 0.96) + 1e-6


def test_interval_is_the_percentile_interval():
    v = np.arange(1.0, 101.0)  # 1..100: 5% of them are <= 5, 95% <= 95
    assert bs.interval(v, 0.9) == (5.0, 95.0)
    assert bs.interval(np.r_[v, [np.nan] * 50], 0.9) == (5.0, 95.0)  # NaN (undefined) left out
    assert bs.interval(np.r_[v[:90], [np.inf] * 10], 0.9) == (5.0, np.inf)
    assert bs.interval(np.full(3, np.nan)) is None


def test_verdicts():
    assert bs.verdict((1.1, 1.5), 1.0) == "faster"
    assert bs.verdict((0.5, 0.9), 1.0) == "slower"
    assert bs.verdict((0.9, 1.1), 1.0) == "within noise"
    assert bs.verdict((1.0, 1.0), 1.0) == "within noise"  # contains 1.0
    assert bs.verdict((1.1, 1.5), 1.0, undefined=0.2) == "undefined"
    assert bs.verdict(None, 1.0) == "undefined"
    assert bs.verdict((0.01, 0.02), 0.0, above="higher", below="lower") == "higher"
    assert bs.verdict((-0.01, 0.02), 0.0, above="higher", below="lower") == "within noise"


def test_deterministic_and_independent_of_other_strategies():
    xs = {s: [np.array(GRID)] * len(v) for s, v in DATA.items()}
    ys = {s: [np.array(c) for c in v] for s, v in DATA.items()}
    a = bs.resample(xs, ys, np.array(GRID), baseline="grpo", fraction=0.9, resamples=500)
    b = bs.resample(xs, ys, np.array(GRID), baseline="grpo", fraction=0.9, resamples=500)
    np.testing.assert_array_equal(a.rollouts["fast"], b.rollouts["fast"])
    c = bs.resample(xs, ys, np.array(GRID), baseline="grpo", fraction=0.9, resamples=500, seed=1)
    assert not np.array_equal(a.rollouts["fast"], c.rollouts["fast"])
    # the finals of fast depend on fast's draws only: dropping flaky changes nothing
    drop = {s: v for s, v in xs.items() if s != "flaky"}
    d = bs.resample(
        drop,
        {s: ys[s] for s in drop},
        np.array(GRID),
        baseline="grpo",
        fraction=0.9,
        resamples=500,
    )
    np.testing.assert_array_equal(a.final["fast"], d.final["fast"])
