"""rollalloc.metrics.concentration against a brute-force count, and on simulated runs."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rollalloc.metrics import concentration
from rollalloc.sim.policy import load_preset
from rollalloc.sim.run import simulate_run, strategy_options


def brute(trials):
    t = sorted((int(x) for x in trials), reverse=True)
    k = math.ceil(len(t) / 10)
    mean = sum(t) / len(t)
    std = math.sqrt(sum((x - mean) ** 2 for x in t) / len(t))
    return {
        "prompts_seen": sum(x > 0 for x in t),
        "share_top_tenth": sum(t[:k]) / sum(t),
        "max_per_prompt": t[0],
        "cv": std / mean,
    }


@pytest.mark.parametrize("n", [1, 7, 10, 11, 400, 1001])
def test_concentration_matches_a_brute_force_count(n):
    rng = np.random.default_rng(n)
    for trials in (rng.integers(0, 50, n), rng.geometric(0.05, n), np.full(n, 24)):
        got, want = concentration(trials), brute(trials)
        assert got["prompts_seen"] == want["prompts_seen"]
        assert got["max_per_prompt"] == want["max_per_prompt"]
        assert got["share_top_tenth"] == pytest.approx(want["share_top_tenth"], rel=1e-12)
        assert got["cv"] == pytest.approx(want["cv"], rel=1e-9, abs=1e-12)
    assert concentration(np.zeros(5))["prompts_seen"] == 0


def test_grpo_over_whole_epochs_spreads_evenly_and_mopps_does_not():
    """GRPO over exactly three epochs of a 4,096-prompt pool: every prompt 24 rollouts (share of
    the top tenth 0.1, cv 0); MoPPS on the same pool and budget puts more on its favourites."""
    pre = load_preset("testbed-arith")
    out = {}
    for s in ("grpo", "mopps"):
        opts = strategy_options(s, train_prompts=64, group_size=8)
        r = simulate_run(s, pre, 0, budget_rollouts=98304, eval_every_rollouts=98304, options=opts)
        out[s] = r["concentration"]
    assert out["grpo"] == {
        "prompts_seen": 4096, "share_top_tenth": pytest.approx(0.1, abs=1e-3),
        "max_per_prompt": 24, "cv": 0.0,
    }  # fmt: skip
    assert out["mopps"]["share_top_tenth"] > 0.2 and out["mopps"]["max_per_prompt"] > 48
