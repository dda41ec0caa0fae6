"""The seeds-by-precision rule of `rollalloc compare --half-width` (rollalloc.report.precision)."""

from __future__ import annotations

import math

import pytest

from rollalloc.report.precision import next_round, open_comparisons, speedup_half_width


def vs(lo, hi):
    return {"speedup_ci": None if lo is None else [lo, hi]}


def test_half_width_of_an_interval():
    assert speedup_half_width(vs(1.1, 1.3)) == pytest.approx(0.1)
    assert speedup_half_width(vs(0.0, 0.0)) == 0.0  # never reaches in any resample: decided
    assert speedup_half_width(vs(None, None)) == math.inf  # undefined
    assert speedup_half_width(vs(0.9, None)) == math.inf  # open: +inf ("never" for grpo) as null
    assert speedup_half_width({"speedup_ci": [0.0, math.inf]}) == math.inf


def test_open_comparisons_widest_first():
    table = {"a": vs(1.0, 1.3), "b": vs(0.0, 0.0), "c": vs(None, None), "d": vs(1.15, 1.3)}
    assert list(open_comparisons(table, 0.1)) == ["c", "a"]  # d: 0.075, b: 0


def test_next_round_adds_the_open_ones_and_the_baseline():
    table = {"a": vs(1.0, 1.4), "b": vs(1.1, 1.2), "c": vs(0.0, 0.0)}
    n = {"grpo": 10, "a": 10, "b": 10, "c": 10}
    assert next_round(table, n, baseline="grpo", half_width=0.1, max_seeds=60) == ["a", "grpo"]
    # nothing open: done
    assert next_round({"b": vs(1.1, 1.2)}, n, baseline="grpo", half_width=0.1, max_seeds=60) == []


def test_next_round_fills_the_workers_with_the_widest():
    table = {"a": vs(1.0, 1.4), "b": vs(1.0, 1.6), "c": vs(1.0, 1.25)}
    n = {"grpo": 10, "a": 10, "b": 10, "c": 10}
    # open: b (0.3), a (0.2), c (0.125) + grpo = 4 runs: a multiple of 2 and of 4
    assert next_round(table, n, baseline="grpo", half_width=0.1, max_seeds=60, workers=2) == [
        "b",
        "a",
        "c",
        "grpo",
    ]
    # 3 workers: padded to 6 with the widest first
    got = next_round(table, n, baseline="grpo", half_width=0.1, max_seeds=60, workers=3)
    assert got == ["b", "a", "c", "grpo", "b", "a"]
    one = next_round(
        {"a": vs(1.0, 1.4)}, n, baseline="grpo", half_width=0.1, max_seeds=60, workers=3
    )
    assert sorted(one) == ["a", "a", "grpo"]


def test_next_round_respects_max_seeds():
    table = {"a": vs(1.0, 1.4), "b": vs(1.0, 1.6)}
    # b is at the cap: left open, not run; grpo is at the cap: only a runs
    n = {"grpo": 20, "a": 19, "b": 20}
    assert next_round(table, n, baseline="grpo", half_width=0.1, max_seeds=20, workers=2) == ["a"]
    n = {"grpo": 20, "a": 20, "b": 20}
    assert next_round(table, n, baseline="grpo", half_width=0.1, max_seeds=20) == []
    # padding never passes the cap: a has one seed left
    n = {"grpo": 10, "a": 19, "b": 20}
    assert next_round(table, n, baseline="grpo", half_width=0.1, max_seeds=20, workers=4) == [
        "a",
        "grpo",
    ]


@pytest.mark.parametrize("bad", [dict(half_width=0.0), dict(max_seeds=0), dict(workers=0)])
def test_next_round_refuses_bad_settings(bad):
    kw = dict(baseline="grpo", half_width=0.1, max_seeds=10, workers=1) | bad
    with pytest.raises(ValueError):
        next_round({}, {"grpo": 1}, **kw)


def test_a_strategy_slower_by_more_than_h_is_decided_however_wide():
    from rollalloc.report.precision import decided

    # the whole interval below 1 - H: slower than the baseline by more than H, however wide
    assert decided(vs(0.0, 0.81), 0.1) and decided(vs(0.5, 0.85), 0.1)
    assert not decided(vs(0.0, 0.95), 0.1)  # may be within H of the baseline: more seeds
    assert not decided(vs(0.0, 1.28), 0.1)  # may still be faster
    table = {"greso": vs(0.0, 0.81), "mopps": vs(0.0, 1.28)}
    n = {"grpo": 10, "greso": 10, "mopps": 10}
    assert next_round(table, n, baseline="grpo", half_width=0.1, max_seeds=60) == ["mopps", "grpo"]


def test_a_narrow_interval_over_few_defined_resamples_decides_nothing():
    from rollalloc.report.precision import decided

    narrow = {"speedup_ci": [1.18, 1.22], "speedup_verdict": "faster"}
    assert decided(narrow, 0.1)
    assert not decided({**narrow, "speedup_verdict": "undefined"}, 0.1)
    # more than (1 - 0.9) / 2 of the resamples undefined: the interval covers too few of them
    assert not decided({**narrow, "speedup_undefined_share": 0.2}, 0.1)
    assert decided({**narrow, "speedup_undefined_share": 0.04}, 0.1)


def test_decide_says_why_the_rounds_stop():
    from rollalloc.report.precision import decide

    def summary(learned, **table):
        return {
            "target": {"baseline": "grpo"},
            "bootstrap": {"level": 0.9},
            "baseline_gain": {"learned": learned},
            "vs_baseline": table,
        }

    n = {"grpo": 10, "a": 10, "b": 10}
    wide, add, why = decide(
        summary(True, a=vs(1.0, 1.4), b=vs(1.1, 1.2)), n, half_width=0.1, max_seeds=60, workers=2
    )
    assert (wide, add, why) == ({"a": pytest.approx(0.2)}, ["a", "grpo"], None)
    assert decide(summary(True, b=vs(1.1, 1.2)), n, half_width=0.1, max_seeds=60)[2] == (
        "every comparison decided"
    )
    assert decide(summary(True, a=vs(1.0, 1.4)), n, half_width=0.1, max_seeds=10)[2] == (
        "at 10 seeds: a 0.200"
    )
    # a baseline that did not learn: no speedup means anything, however wide the intervals
    wide, add, why = decide(summary(False, a=vs(1.0, 1.4)), n, half_width=0.1, max_seeds=60)
    assert add == [] and why.startswith("the baseline did not learn")
