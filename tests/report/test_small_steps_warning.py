"""summary.json's `small_step_share` and its warning (docs/simulator.md, "Session 44"): the share
of a run's steps that trained at most 1/8 of a full step's groups (its 90th percentile), seed mean."""

from __future__ import annotations

import pytest

from rollalloc.report.summary import ReportInputs, build_summary


def _run(groups, gain):
    evals = [{"cum_rollouts": x, "cum_tokens": x, "accuracy": 0.5 + gain * x / 1000} for x in
             (0, 250, 500, 750, 1000)]  # fmt: skip
    steps = [
        {"groups": g, "effective_prompt_ratio": 1.0, "mean_group_reward_var": 0.1} for g in groups
    ]
    return {"evals": evals, "steps": steps}


def summary(runs, configs=None):
    inputs = ReportInputs(kind="t", task="t", seeds=[0, 1], budget_rollouts=1000, runs=runs,
                          strategy_configs=configs or {}, bootstrap_resamples=200)  # fmt: skip
    return build_summary(inputs)[0]


def test_the_share_of_small_steps_by_hand_and_its_warning():
    runs = {
        "grpo": {0: _run([64] * 20, 0.1), 1: _run([64] * 20, 0.12)},
        # seed 0: every other step one group (10 of 20); seed 1: two of 20 steps of 2 and 8
        # groups (8 = 64 / 8 counts as small, 9 would not): (0.5 + 0.1) / 2 = 0.3
        "paced": {0: _run([64, 1] * 10, 0.1), 1: _run([64] * 18 + [2, 8], 0.1)},
        "nine": {0: _run([64] * 19 + [9], 0.1), 1: _run([64] * 20, 0.1)},
        # the 90th percentile, not the largest step: sorted, index 0.9 * 19 = 17.1 lies between
        # 64 and 200, so the reference is 77.6 (1/8: 9.7) and the 20-group step is not small
        # (under the largest step, 200 / 8 = 25, it would be); a step of no groups is left out
        "burst": {0: _run([64] * 17 + [200, 200, 20], 0.1), 1: _run([64] * 19 + [0], 0.1)},
    }
    s = summary(runs)
    share = {k: v["small_step_share"] for k, v in s["strategies"].items()}
    assert share == {"grpo": 0.0, "paced": pytest.approx(0.3), "nine": 0.0, "burst": 0.0}
    # a strategy whose config names its full step: every step of 4 groups under 64 a step is small
    every = {"grpo": runs["grpo"], "tiny": {0: _run([4] * 20, 0.1), 1: _run([4] * 20, 0.1)}}
    assert summary(every)["strategies"]["tiny"]["small_step_share"] == 0.0  # its own 90th pct
    got = summary(every, {"tiny": {"train_prompts": 64}})["strategies"]["tiny"]
    assert got["small_step_share"] == 1.0
    small = [w for w in s["warnings"] if "of a full step's groups" in w]
    assert len(small) == 1 and small[0].startswith("'paced': 30% of its steps")
    # a run without per-step records has no share and no warning
    runs["paced"] = {0: {**runs["paced"][0], "steps": []}, 1: {**runs["paced"][1], "steps": []}}
    s = summary(runs)
    assert s["strategies"]["paced"]["small_step_share"] is None
    assert not [w for w in s["warnings"] if "of a full step's groups" in w]
