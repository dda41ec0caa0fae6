"""benchmarks/ranking_power.py and the weighted draws it gives rollalloc.report.bootstrap.resample.

Expected values come from elsewhere: the reports' own all-seeds path (curves.seed_curves and
curves.crossing), a symmetry argument (two disjoint halves of exchangeable strategies agree by
chance only: E tau = 0), a brute-force enumeration of every bootstrap draw, and strategies without
seed noise (every resample is the data)."""

from __future__ import annotations

import csv
import itertools
import math

import numpy as np
import pytest

from rollalloc.report import bootstrap as bs
from rollalloc.report import curves

XS = np.arange(0, 100_001, 4096, dtype=float)


def _curve(scale: float) -> np.ndarray:
    """0.3 rising linearly to 0.4 at 60k x scale rollouts, then flat."""
    return 0.3 + 0.1 * np.minimum(XS / (60_000 * scale), 1.0)


def _runs(scales: dict[str, list[float]]):
    return {s: {i: (XS, _curve(c)) for i, c in enumerate(v)} for s, v in scales.items()}


def _write_csv(path, runs) -> None:
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["strategy", "seed", "cum_rollouts", "accuracy"])
        for s, by in runs.items():
            for seed, (x, y) in by.items():
                for a, b in zip(x, y):
                    w.writerow([s, seed, a, b])


def _pair_tau(a, b) -> float:
    """Kendall tau-b by counting pairs (independent of fit_testbed_preset.kendall_tau)."""
    c = d = ta = tb = 0
    for i, j in itertools.combinations(range(len(a)), 2):
        x, y = np.sign(a[i] - a[j]), np.sign(b[i] - b[j])
        ta += x == 0
        tb += y == 0
        c += x * y > 0
        d += x * y < 0
    n0 = len(a) * (len(a) - 1) / 2
    return (c - d) / math.sqrt((n0 - ta) * (n0 - tb))


def test_weighted_draws_match_the_default_draws_and_the_all_seeds_summary():
    rng = np.random.default_rng(1)
    runs = _runs({"grpo": list(1 + 0.2 * rng.standard_normal(5)), "a": [0.7, 0.8, 0.9, 0.75]})
    xs = {s: [x for x, _ in v.values()] for s, v in runs.items()}
    ys = {s: [y for _, y in v.values()] for s, v in runs.items()}
    grid = curves.common_grid([x for v in xs.values() for x in v])
    kw = dict(baseline="grpo", fraction=0.9)
    drawn = bs.resample(xs, ys, grid, resamples=50, seed=3, **kw)
    counts = {s: bs.resample_counts(len(xs[s]), 50, bs.strategy_rng(3, s)) for s in xs}
    given = bs.resample(xs, ys, grid, counts=counts, **kw)
    for s in xs:
        np.testing.assert_array_equal(drawn.rollouts[s], given.rollouts[s])
        np.testing.assert_array_equal(drawn.final[s], given.final[s])
    np.testing.assert_array_equal(drawn.target, given.target)
    # one row of equal weights (any scale) is the summary's all-seeds figure
    ones = bs.resample(xs, ys, grid, counts={s: np.full((1, len(xs[s])), 2.0) for s in xs}, **kw)
    _, mean = curves.seed_curves(xs["grpo"], ys["grpo"], grid)
    _, mean_a = curves.seed_curves(xs["a"], ys["a"], grid)
    acc0 = np.mean([y[0] for v in ys.values() for y in v])
    target = curves.target_value(acc0, float(np.nanmax(mean)), 0.9)
    assert ones.target[0] == pytest.approx(target)
    assert ones.rollouts["a"][0] == pytest.approx(curves.crossing(grid, mean_a, target)[0])
    with pytest.raises(ValueError, match="counts"):
        bs.resample(xs, ys, grid, counts={"grpo": np.ones((2, 5)), "a": np.ones((2, 3))}, **kw)


def test_without_seed_noise_every_comparison_is_certain(tmp_path, load_benchmark):
    rp = load_benchmark("ranking_power")
    runs = _runs({"grpo": [1.0] * 4, "a": [0.6] * 4, "b": [0.8] * 4, "c": [1.4] * 4})
    _write_csv(tmp_path / "real.csv", runs)
    real = rp.load_evals([str(tmp_path / "real.csv")], None, None)
    res = rp.analyse(real, real, baseline="grpo", fraction=0.9, arms=[2, 8], resamples=50, seed=0)
    assert res["real_ranking"] == ["a", "b", "grpo", "c"]
    # 1 / 0.6 on the raw curves; the reports' 3-point trailing average delays both crossings
    assert 1.5 < res["real_speedups"]["a"] < 1 / 0.6
    assert res["tau_observed"] == 1.0 and res["speedups_observed_agree"]
    assert res["tau_sim_vs_real"]["share_at_floor"] == 1.0
    for t in res["perfect_predictor"].values():
        assert t["median"] == 1.0 and t["speedups_agree_share"] == 1.0
    assert res["split_halves"]["median"] == 1.0
    # every resample is the data: each real interval is the point, and the same runs are inside it
    for s in ("a", "b", "c"):
        assert res["real_speedup_interval"][s] == pytest.approx([res["real_speedups"][s]] * 2)
    assert all(res["sim_inside_real_interval"].values())
    assert "rms log(sim / real speedup): 0.00 over the 3 of 3" in rp.table(res)
    other = _runs({"grpo": [1.0] * 4, "a": [0.9] * 4, "b": [0.8] * 4, "c": [1.4] * 4})
    res = rp.analyse(real, other, baseline="grpo", fraction=0.9, arms=[2], resamples=50, seed=0)
    assert res["sim_inside_real_interval"] == {"a": False, "b": True, "c": True}
    # a: 1/0.9 against 1/0.6 on the raw curves, 33% short; b, c the same runs
    assert res["speedup_within_tolerance"] == {"a": False, "b": True, "c": True}
    # only a is off (b and c by 0): the rms over three is a's log error / sqrt(3)
    off = math.log(res["sim_speedups"]["a"] / res["real_speedups"]["a"])
    assert -math.log(0.9 / 0.6) < off < -0.2
    assert res["speedup_log_rms"] == pytest.approx(abs(off) / math.sqrt(3))


def test_disjoint_halves_of_exchangeable_strategies_agree_by_chance_only(load_benchmark):
    """Every strategy's seeds drawn from one distribution: two disjoint halves are independent
    benchmarks, so over data sets their tau averages 0 (symmetry); overlapping halves would not."""
    rp = load_benchmark("ranking_power")
    rng = np.random.default_rng(7)
    names = ["grpo", "a", "b", "c", "d"]
    t = []
    for _ in range(150):
        runs = _runs({s: list(1 + 0.15 * rng.standard_normal(8)) for s in names})
        bench = rp.Bench(runs, "grpo", 0.9)
        a, b = zip(*(rp.halves(8, 1, rng) for _ in names))
        assert all((x * y).sum() == 0 and x.sum() == y.sum() == 4 for x, y in zip(a, b))
        sa = rp.scores(bench.stats(dict(zip(names, a))), names, "grpo", "speedups")
        sb = rp.scores(bench.stats(dict(zip(names, b))), names, "grpo", "speedups")
        t.append(_pair_tau(sa[0], sb[0]))
    # sd of one tau of 5 items ~0.35: the mean of 150 within 0.1 of 0 (2.9 standard errors)
    assert abs(np.mean(t)) < 0.1


def test_perfect_predictor_share_matches_an_enumeration_of_every_draw(load_benchmark):
    """3 strategies x 2 seeds whose order depends on the draw: every bootstrap draw of 2 from 2
    (counts (2,0), (1,1), (0,2) with probabilities 1/4, 1/2, 1/4) enumerated, tau against the
    all-seeds ranking counted pair by pair; the Monte Carlo share and median must match."""
    rp = load_benchmark("ranking_power")
    runs = _runs({"grpo": [0.7, 1.1], "a": [0.6, 1.2], "b": [0.95, 1.0]})
    names = list(runs)
    bench = rp.Bench(runs, "grpo", 0.9)
    ref = rp.scores(bench.all_seeds(), names, "grpo", "ranks")[0]
    draws = [((2.0, 0.0), 0.25), ((1.0, 1.0), 0.5), ((0.0, 2.0), 0.25)]
    dist: dict[float, float] = {}
    for combo in itertools.product(draws, repeat=3):
        counts = {s: np.array([c]) for s, (c, _) in zip(names, combo)}
        sc = rp.scores(bench.stats(counts), names, "grpo", "ranks")[0]
        tau = round(_pair_tau(ref, sc), 9)
        dist[tau] = dist.get(tau, 0.0) + float(np.prod([p for _, p in combo]))
    assert len(dist) > 1  # the draw matters
    exact = sum(p for t, p in dist.items() if t >= 0.7 - 1e-12)
    res = rp.analyse(
        runs, None, baseline="grpo", fraction=0.9, arms=[2], resamples=4000, seed=1, by="ranks"
    )
    got = res["perfect_predictor"]["2"]["share_at_floor"]
    assert got == pytest.approx(exact, abs=3.5 * math.sqrt(exact * (1 - exact) / 4000))
    assert 0.0 < exact < 1.0


def test_cli_refuses_a_strategy_without_runs(tmp_path, load_benchmark, capsys):
    rp = load_benchmark("ranking_power")
    _write_csv(tmp_path / "r.csv", _runs({"grpo": [1.0, 1.1], "a": [0.8, 0.9]}))
    with pytest.raises(SystemExit, match="'b' has no evaluations"):
        rp.main(["--real", str(tmp_path / "r.csv"), "--strategies", "grpo,a,b"])
    assert rp.main(["--real", str(tmp_path / "r.csv"), "--resamples", "20"]) == 0
    assert "two disjoint halves" in capsys.readouterr().out
    # a (strategy, seed) in two files: the first file's evaluations are kept, not appended to
    _write_csv(tmp_path / "r2.csv", _runs({"a": [0.5, 0.5, 0.5]}))
    both = rp.load_evals([str(tmp_path / "r.csv"), str(tmp_path / "r2.csv")], None, None)
    assert sorted(both["a"]) == [0, 1, 2]
    np.testing.assert_array_equal(both["a"][0][1], _curve(0.8))
    np.testing.assert_array_equal(both["a"][2][1], _curve(0.5))


def test_seeds_take_a_range_as_the_merge_does(tmp_path, load_benchmark, capsys):
    rp = load_benchmark("ranking_power")
    runs = _runs(
        {"grpo": [1.0, 1.1, 0.9, 1.2], "a": [0.7, 0.8, 0.75, 0.9], "b": [1.3, 1.2, 1.4, 1.1]}
    )
    _write_csv(tmp_path / "real.csv", runs)
    out = {}
    for seeds in ("0,1,2", "0-2"):
        rp.main(["--real", str(tmp_path / "real.csv"), "--seeds", seeds, "--resamples", "20"])
        out[seeds] = capsys.readouterr().out
    assert out["0,1,2"] == out["0-2"]
    rp.main(["--real", str(tmp_path / "real.csv"), "--resamples", "20"])
    assert capsys.readouterr().out != out["0-2"]  # all four seeds: another table
    with pytest.raises(SystemExit):
        rp.main(["--real", str(tmp_path / "real.csv"), "--seeds", "2-0"])
