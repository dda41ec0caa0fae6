"""The simulator's pools carry columns (cluster; level with a preset of levels), so posterior-signal's
strata run there as on real runs: each prompt's group is its level, checked against the preset."""

from __future__ import annotations

import numpy as np

import rollalloc.sim.run as sim_run
from rollalloc.sim.policy import SimPolicy, load_preset


def test_pool_columns_are_the_levels_the_preset_draws():
    pr = load_preset("testbed-paper")
    policy = SimPolicy(pr)
    cols = policy.pool_columns()
    assert set(cols) == {"cluster", "level"}
    names = [lv.name for lv in pr.levels]
    assert sorted(set(cols["level"])) == sorted(names)
    # a level is its own cluster
    for name in names:
        at = cols["level"] == name
        assert len(set(cols["cluster"][at])) == 1
    assert set(SimPolicy(load_preset("uniform")).pool_columns()) == {"cluster"}


def test_a_simulated_run_hands_the_levels_to_the_allocator(monkeypatch):
    seen = {}
    real = sim_run.make_allocator

    def spy(*a, **kw):
        alloc = real(*a, **kw)
        seen["alloc"] = alloc
        return alloc

    monkeypatch.setattr(sim_run, "make_allocator", spy)
    pr = load_preset("testbed-paper")
    opts = sim_run.strategy_options(
        "posterior-signal",
        train_prompts=16,
        group_size=32,
        options={"strata": "level", "select": "top", "window": 2, "n_probe": 0},
    )
    out = sim_run.simulate_run(
        "posterior-signal", pr, 0, budget_rollouts=4096, eval_every_rollouts=2048, options=opts
    )
    assert out["stopped"] is None
    levels = SimPolicy(pr).pool_columns()["level"]
    stratum = seen["alloc"].stratum
    for name in set(levels):  # one group per level, and different levels in different groups
        assert len(set(stratum[levels == name])) == 1
    assert len(set(stratum)) == len(set(levels))
    assert np.asarray(seen["alloc"].sema)[:, 0].sum() > 0  # the groups' priors were fitted
