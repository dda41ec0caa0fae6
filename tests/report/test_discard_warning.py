"""summary.json's `discarded_share_quarters` and its warning (docs/testbed.md, "A third warm
start"): the share of a run's rollouts that its steps discarded in the first and the last quarter
of the run's rollouts, seed mean; a run that discards at least 80% late, 20 points more than early,
is running out of prompts to train (real Pilot-Commit on the hard pool: 55% -> 92%)."""

from __future__ import annotations

import pytest

from rollalloc.report.summary import ReportInputs, build_summary

WARNS = "of its rollouts in the last quarter of its run"


def _run(discarded, per_step=100):
    """Steps of `per_step` rollouts each, discarding the given counts."""
    evals = [{"cum_rollouts": x, "cum_tokens": x, "accuracy": 0.5 + 0.1 * x / 800} for x in
             (0, 200, 400, 600, 800)]  # fmt: skip
    steps = [
        {
            "step": i,
            "cum_rollouts": per_step * (i + 1),
            "rollouts": per_step,
            "discarded_rollouts": d,
            "groups": 8,
            "effective_prompt_ratio": 1.0,
            "mean_group_reward_var": 0.1,
        }  # fmt: skip
        for i, d in enumerate(discarded)
    ]
    return {"evals": evals, "steps": steps}


def summary(runs):
    inputs = ReportInputs(kind="t", task="t", seeds=[0, 1], budget_rollouts=800, runs=runs,
                          strategy_configs={}, bootstrap_resamples=200)  # fmt: skip
    s = build_summary(inputs)[0]
    return {k: v["discarded_share_quarters"] for k, v in s["strategies"].items()}, [
        w for w in s["warnings"] if WARNS in w
    ]


def test_the_quarters_by_hand_and_the_warning():
    # 8 steps of 100 rollouts end at 100..800: the first quarter holds the steps ending at 100
    # and 200 (<= 0.25 x 800), the last those ending at 700 and 800 (> 600)
    runs = {
        "grpo": {0: _run([0] * 8), 1: _run([0] * 8)},
        # seed 0: (40 + 60) / 200 early, (90 + 90) / 200 late; seed 1: 0.6 and 0.8 -> 0.55, 0.85
        "exhausts": {0: _run([40, 60, 0, 0, 0, 0, 90, 90]), 1: _run([60, 60, 0, 0, 0, 0, 80, 80])},
        "steady": {0: _run([85] * 8), 1: _run([85] * 8)},  # a filter: high but not rising
        "edge": {0: _run([60] * 6 + [80, 80]), 1: _run([60] * 6 + [80, 80])},  # 0.8, +0.2
        "below": {0: _run([50] * 6 + [79, 79]), 1: _run([50] * 6 + [79, 79])},  # 0.79
    }
    shares, warned = summary(runs)
    assert shares["grpo"] == [0.0, 0.0]
    assert shares["exhausts"] == [pytest.approx(0.55), pytest.approx(0.85)]
    assert shares["steady"] == [pytest.approx(0.85), pytest.approx(0.85)]
    assert shares["edge"] == [pytest.approx(0.6), pytest.approx(0.8)]
    assert shares["below"] == [pytest.approx(0.5), pytest.approx(0.79)]
    names = sorted(w.split("'")[1] for w in warned)
    assert names == ["edge", "exhausts"]
    assert any(w.startswith("'exhausts' discarded 85% of its rollouts") and "against 55%" in w
               for w in warned)  # fmt: skip


def test_runs_without_quarters_have_no_share():
    two = {"evals": _run([0])["evals"], "steps": _run([90, 90], per_step=400)["steps"]}
    runs = {
        "grpo": {0: _run([0] * 8), 1: _run([0] * 8)},
        "bare": {0: {**_run([0] * 8), "steps": []}, 1: {**_run([0] * 8), "steps": []}},
        "two": {0: two, 1: two},  # a first step ending past a quarter of the run: no first quarter
    }
    shares, warned = summary(runs)
    assert shares["bare"] is None and shares["two"] is None and not warned


def _with_evictions(run, per_step):
    """`run` with decisions={"evicted": k} on step i (k from per_step; None: no decisions key)."""
    steps = [
        dict(st) if k is None else {**st, "decisions": {"evicted": k, "too_hard": 3}}
        for st, k in zip(run["steps"], per_step, strict=True)
    ]
    return {**run, "steps": steps}


def test_evicted_prompts_summed_per_run_and_named_in_the_warning():
    exhausts = [40, 60, 0, 0, 0, 0, 90, 90]
    runs = {
        "grpo": {0: _run([0] * 8), 1: _run([0] * 8)},
        # seed 0 marks 5 + 7 + 1 = 13 prompts, seed 1 marks 0 + 4 + 3 = 7 (steps without the key
        # count 0): mean 10
        "evicts": {
            0: _with_evictions(_run(exhausts), [5, None, 7, 0, 0, 1, None, None]),
            1: _with_evictions(_run(exhausts), [0, 4, None, None, 3, 0, 0, 0]),
        },
        "keeps": {0: _run(exhausts), 1: _run(exhausts)},  # never reports the decision
        "zero": {  # reports it, never evicts: 0, and the warning says nothing of eviction
            0: _with_evictions(_run(exhausts), [0] * 8),
            1: _with_evictions(_run(exhausts), [0] * 8),
        },
    }
    inputs = ReportInputs(kind="t", task="t", seeds=[0, 1], budget_rollouts=800, runs=runs,
                          strategy_configs={}, bootstrap_resamples=200)  # fmt: skip
    s = build_summary(inputs)[0]
    got = {k: v["evicted_prompts"] for k, v in s["strategies"].items()}
    assert got == {"grpo": None, "evicts": 10, "keeps": None, "zero": 0}
    warned = {w.split("'")[1]: w for w in s["warnings"] if WARNS in w}
    assert sorted(warned) == ["evicts", "keeps", "zero"]
    assert "It evicted 10 prompts (seed mean)" in warned["evicts"]
    assert "evict=false" in warned["evicts"]
    assert "evicted" not in warned["keeps"] and "evicted" not in warned["zero"]
