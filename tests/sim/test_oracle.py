"""The oracle: sees the true p, spends like GRPO, and is never behind GRPO on any preset."""

from __future__ import annotations

import numpy as np
import pytest

import rollalloc.sim  # noqa: F401  (registers "oracle")
from rollalloc.allocator import available_strategies, make_allocator
from rollalloc.sim.oracle import Oracle, example_success_prob
from rollalloc.sim.policy import available_presets, load_preset
from rollalloc.sim.roles import expected_group_signal
from rollalloc.sim.run import simulate_run, strategy_options
from rollalloc.testing import BernoulliPool, drive


def test_registered_with_an_example_probability_source():
    assert "oracle" in available_strategies()
    cfg = Oracle.example_config()
    assert callable(cfg["success_prob"])


def test_needs_a_probability_source():
    with pytest.raises(ValueError, match="success_prob"):
        make_allocator("oracle", num_prompts=100, seed=0, n=4, train_prompts=8)


def test_picks_the_candidates_with_the_largest_expected_signal():
    def make():
        return make_allocator(
            "oracle",
            num_prompts=200,
            seed=1,
            n=8,
            train_prompts=10,
            candidates=50,
            success_prob=example_success_prob,
        )

    alloc = make()
    pool = BernoulliPool(p=example_success_prob(np.arange(200)))
    for batch in drive(alloc, pool, 6):
        req = pool.log[batch.step]
        assert batch.num_groups == 10 and set(batch.group_sizes.tolist()) == {8}
        assert batch.stats.rollouts == 80  # GRPO's spend: train_prompts x n
        assert batch.stats.decisions["not_chosen"] == 40
        assert req.total == 80 and len(set(req.prompt_ids.tolist())) == 10
    # the chosen prompts are the 10 of the step's 50 candidates with the largest expected signal
    alloc = make()
    draw, seen = alloc._draw, []

    def spy(k):  # record each step's candidates
        seen.append(draw(k))
        return seen[-1]

    alloc._draw = spy
    pool = BernoulliPool(p=example_success_prob(np.arange(200)))
    for step, batch in enumerate(drive(alloc, pool, 5)):
        sig = expected_group_signal(example_success_prob(seen[step]), 8)
        best = seen[step][np.argsort(-sig, kind="stable")[:10]]
        assert sorted(batch.prompt_ids.tolist()) == sorted(best.tolist())
        assert sig.max() > np.sort(sig)[len(sig) // 2]  # a real choice, not a tie


@pytest.mark.parametrize("preset_name", sorted(available_presets()))
def test_oracle_never_behind_grpo(preset_name):
    preset = load_preset(preset_name)
    cfg = preset.sim.replace(ref_group_size=8)
    curves = {}
    for s in ("grpo", "oracle"):
        accs = []
        for seed in (0, 1):
            r = simulate_run(
                s,
                preset,
                seed,
                budget_rollouts=64 * 8 * 30,
                eval_every_rollouts=64 * 8 * 5,
                options=strategy_options(s, train_prompts=64, group_size=8),
                sim_config=cfg,
            )
            accs.append([e["accuracy"] for e in r["evals"]])
        curves[s] = np.mean(accs, axis=0)
    gain = curves["oracle"] - curves["grpo"]
    assert np.all(gain[1:] > 0), f"oracle behind grpo on {preset_name}: {gain}"
