"""Rollouts to target (BENCHMARKS.md) on hand-made curves."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rollalloc.report import curves


def test_moving_average_is_trailing_over_three_points():
    y = np.array([0.0, 3.0, 6.0, 9.0, 12.0])
    np.testing.assert_allclose(curves.moving_average(y), [0.0, 1.5, 3.0, 6.0, 9.0])
    y[3] = np.nan
    out = curves.moving_average(y)
    assert np.isnan(out[3:]).all() and out[2] == 3.0


def test_interp_curve_is_nan_beyond_the_last_evaluation():
    got = curves.interp_curve([0, 10, 20], [0.0, 1.0, 3.0], np.array([0, 5, 15, 20, 25.0]))
    np.testing.assert_allclose(got[:4], [0.0, 0.5, 2.0, 3.0])
    assert np.isnan(got[4])
    with pytest.raises(ValueError, match="non-decreasing"):
        curves.interp_curve([0, 10, 5], [0, 1, 2], np.array([0.0]))


def test_common_grid_uses_the_median_evaluation_spacing():
    xs = [np.array([0, 100, 200, 300]), np.array([0, 100, 210, 305])]
    grid = curves.common_grid(xs)
    assert grid[1] == 100 and grid[-1] == 300
    with pytest.raises(ValueError, match="two distinct"):
        curves.common_grid([np.array([0])])


def test_rollouts_to_target_on_linear_curves():
    # acc = x / 1000 per seed, evaluated every 100 rollouts up to 1000
    x = np.arange(0, 1001, 100)
    ys = [x / 1000.0, x / 1000.0 + 0.02, x / 1000.0 - 0.02]
    # smoothed (trailing 3) of a line is the line 100 rollouts late: (x - 100) / 1000 (+- 0.02)
    # from the third grid point on, and interpolating the crossing keeps it on that line:
    # 0.5 is crossed at x = 600, 580 (+0.02) and 620 (-0.02); first grid points would say 600/600/700
    r, per_seed = curves.rollouts_to_target([x, x, x], ys, target=0.5)
    assert r == pytest.approx(600)
    assert per_seed == pytest.approx([600, 580, 620])
    r, per_seed = curves.rollouts_to_target([x, x, x], ys, target=0.537)
    assert r == pytest.approx(637) and per_seed == pytest.approx([637, 617, 657])


def test_never_reached_is_none():
    x = np.arange(0, 501, 100)
    r, per_seed = curves.rollouts_to_target([x, x], [x / 1000.0, x / 2000.0], target=0.45)
    assert r is None and per_seed == [None, None]
    r, per_seed = curves.rollouts_to_target([x, x], [x / 1000.0, x / 2000.0], target=0.35)
    # seed 0's smoothed line (x - 100) / 1000 crosses 0.35 at 450; the mean (0.75 x/1000) never
    assert r is None and per_seed == [pytest.approx(450), None]


def test_seed_mean_only_where_every_seed_has_a_value():
    grid = np.arange(0, 401, 100.0)
    per_seed, mean = curves.seed_curves(
        [np.array([0, 100, 200, 300, 400]), np.array([0, 100, 200])],
        [np.array([0, 0.1, 0.2, 0.3, 0.4]), np.array([0, 0.1, 0.2])],
        grid,
    )
    assert np.isnan(mean[3:]).all() and not np.isnan(per_seed[0]).any()


def test_speedups():
    sp = curves.speedups({"grpo": 1200.0, "pc": 800.0, "dapo": None})
    assert sp["pc"]["grpo"] == pytest.approx(1.5)
    assert sp["grpo"]["pc"] == pytest.approx(800 / 1200)
    assert sp["pc"]["dapo"] is None and sp["dapo"]["grpo"] is None
    assert "pc" not in sp["pc"]


def test_target_value():
    assert curves.target_value(0.3, 0.5, 0.9) == pytest.approx(0.48)


def reference_first_reach(grid, curve, target):
    """Plain loop (with first_reach's documented tolerance of 1e-12 for float round-off): the
    straight line between the last grid point below the target and the first at or above it."""
    prev = None
    for g, c in zip(grid, curve):
        if not np.isnan(c) and c >= target - 1e-12:
            if prev is None or np.isnan(prev[1]):
                return float(g)
            (g0, c0) = prev
            t = min(1.0, (target - c0) / (c - c0))  # c0 < target <= c (up to the tolerance)
            return float(g0 + t * (g - g0))
        prev = (g, c)
    return None


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.floats(0, 1, allow_nan=False), min_size=2, max_size=30),
    st.floats(0, 1, allow_nan=False),
)
def test_vectorised_matches_plain_loops(ys, target):
    y = np.array(ys)
    x = np.arange(len(y)) * 50.0
    grid = curves.common_grid([x])
    smoothed = []
    for k in range(len(y)):  # plain trailing average
        window = y[max(0, k - 2) : k + 1]
        smoothed.append(sum(window) / len(window))
    np.testing.assert_allclose(curves.moving_average(y), smoothed, rtol=1e-12, atol=1e-12)
    r, _ = curves.rollouts_to_target([x], [y], target, grid)
    ref = reference_first_reach(grid, np.array(smoothed), target)
    assert (r is None) == (ref is None) and (r is None or r == pytest.approx(ref, abs=1e-9))
    # the batch version (bootstrap) agrees: +inf for never, NaN for "at the start"
    many = curves.first_reach_many(grid, np.array([smoothed, smoothed]), np.array([target] * 2))
    want = np.inf if ref is None else (np.nan if ref == 0.0 else ref)
    np.testing.assert_allclose(many, [want, want], atol=1e-9)


def test_crossing_status_never_gives_a_fake_zero():
    grid = np.arange(0, 501, 100.0)
    assert curves.crossing(grid, np.array([0.5, 0.5, 0.5, 0.5, 0.5, 0.5]), 0.5) == (0.0, "at_start")
    assert curves.crossing(grid, np.array([0.1, 0.2, 0.2, 0.2, 0.2, 0.2]), 0.5) == (None, "never")
    x, status = curves.crossing(grid, np.array([0.1, 0.2, 0.3, 0.4, 0.5, 0.6]), 0.45)
    assert status == "reached" and x == pytest.approx(350)  # halfway between 300 and 400


def test_five_percent_resolves_with_evaluations_every_eight_percent():
    """Two straight lines 5% apart in slope, evaluated every 8% of the budget: the crossing points
    (hence the speedup) are known in closed form. A trailing 3-point average of a line a*x on the
    grid d is a*(x - d) from the third point on, so the smoothed curve crosses t at t/a + d."""
    budget, d = 1_000_000.0, 80_000.0
    x = np.arange(0, budget + 1, d)
    a_base, a_fast = 0.6 / budget, 1.05 * 0.6 / budget
    t = 0.4
    r_base, _ = curves.rollouts_to_target([x], [a_base * x], t)
    r_fast, _ = curves.rollouts_to_target([x], [a_fast * x], t)
    assert r_base == pytest.approx(t / a_base + d, rel=1e-12)
    assert r_fast == pytest.approx(t / a_fast + d, rel=1e-12)
    expected = (t / a_base + d) / (t / a_fast + d)  # 1.0467...: the 5% minus the smoothing lag
    assert curves.speedups({"base": r_base, "fast": r_fast})["fast"]["base"] == pytest.approx(
        expected, rel=1e-12
    )
    # the first grid point at or above the target would say 800,000 / 720,000 = 1.11: the 4.7%
    # effect more than doubled (another target makes it a tie): one grid step is 8%
    on_grid = np.ceil((t / a_base + d) / d) / np.ceil((t / a_fast + d) / d)
    assert on_grid == pytest.approx(10 / 9) and abs(on_grid - expected) > 0.05
