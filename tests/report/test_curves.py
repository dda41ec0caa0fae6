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
    # smoothed (trailing 3): at grid k the mean is (k-1)*0.1, so >= 0.5 first at k = 6 -> x = 600
    r, per_seed = curves.rollouts_to_target([x, x, x], ys, target=0.5)
    assert r == 600
    assert per_seed == [600, 600, 700]  # +0.02 reaches 0.5 at 0.52 (k=6); -0.02 needs k=7


def test_never_reached_is_none():
    x = np.arange(0, 501, 100)
    r, per_seed = curves.rollouts_to_target([x, x], [x / 1000.0, x / 2000.0], target=0.45)
    assert r is None and per_seed == [None, None]
    r, per_seed = curves.rollouts_to_target([x, x], [x / 1000.0, x / 2000.0], target=0.35)
    assert r is None and per_seed == [500, None]  # the mean (0.75 x/1000) never gets there


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
    """Plain loop (with first_reach's documented tolerance of 1e-12 for float round-off)."""
    for g, c in zip(grid, curve):
        if not np.isnan(c) and c >= target - 1e-12:
            return float(g)
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
    assert r == reference_first_reach(grid, np.array(smoothed), target)
