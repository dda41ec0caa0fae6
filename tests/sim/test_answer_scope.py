"""answer_scope: which prompts share the simulated answer prior (SimConfig.answer_shift).

On the hard pool half the prompts are 3-digit sums the policy never solves: their groups never
vary, so under 'pool' their answer classes carry no signal and every update pushes the prior
toward the learnable classes as a whole. 'learnable' leaves them outside the prior
(docs/simulator.md, "Session 45")."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from rollalloc.sim.policy import SimPolicy, load_preset
from rollalloc.sim.run import simulate_run, strategy_options

PRESETS = Path(__file__).resolve().parents[2] / "benchmarks" / "presets"
HARD = PRESETS / "testbed-hard-s45-rebuilt.json"  # 3x3d: plasticity 0
K = 4


def hard_policy(scope: str, **sim) -> SimPolicy:
    pre = load_preset(str(HARD))
    cfg = pre.sim.replace(answer_classes=K, answer_noise=0.7, answer_shift=10.0,
                          answer_rate=0.05, answer_scope=scope, **sim)  # fmt: skip
    return SimPolicy(replace(pre, sim=cfg))


def test_prompts_that_cannot_learn_sit_outside_the_prior():
    pol = hard_policy("learnable")
    out = pol.learnable == 0
    hard = pol.level_names.index("3x3d")
    np.testing.assert_array_equal(out, pol.cluster == hard)  # the level of plasticity 0, no more
    assert (pol.answer_class[out] == K).all() and (pol.answer_class[~out] < K).all()
    assert (pol.eval_answer_class < K).all()  # the held-out set has no 3x3d prompt
    # the classes are quantiles among the prompts inside: K equal parts of them
    counts = np.bincount(pol.answer_class[~out], minlength=K)  # copies take their original's
    assert counts.min() > 0.97 * counts.mean() and counts.max() < 1.03 * counts.mean()
    np.testing.assert_allclose(pol.answer_share, counts / counts.sum())
    # a shift: a softmax prior over the inside classes (sum_b pi_b e^off_b = 1), 0 outside
    rng = np.random.default_rng(0)
    ids = rng.choice(pol.num_prompts, 500, replace=False)
    pol._shift_answers(ids, rng.random(500))
    off = pol.answer_offset()
    assert off.shape == (K + 1,) and off[K] == 0.0 and np.abs(off[:K]).max() > 0
    assert np.dot(pol.answer_share, np.exp(off[:K])) == pytest.approx(1.0, abs=1e-12)


def test_one_shift_by_hand_and_a_batch_without_the_unsolvable_half_leaves_the_prior():
    """One update from delta = 0: delta_b = r c (sigma_b - pi_b), by hand. A batch whose signal
    sits on the learnable prompts in their own proportions (GRPO's, where the other half never
    varies) leaves the prior where it is under 'learnable' and moves it under 'pool'."""
    pol = hard_policy("learnable")
    ids = np.flatnonzero(pol.answer_class == 1)[:10]
    pol._shift_answers(ids, np.ones(10))  # all the signal on class 1
    want = 0.05 * 10.0 * (np.eye(K)[1] - pol.answer_share)
    np.testing.assert_allclose(pol.answer_delta, want, atol=1e-15)
    for scope, moves in (("learnable", False), ("pool", True)):
        pol = hard_policy(scope)
        ids = np.arange(pol.num_prompts)
        u = (pol.learnable > 0).astype(float)  # every learnable prompt alike, the rest nothing
        pol._shift_answers(ids, u)
        assert bool(np.abs(pol.answer_delta).max() > 0.1) is moves


def test_learnable_is_pool_where_every_prompt_can_learn():
    pre = load_preset("testbed-arith")  # no level, no unlearnable prompt
    assert SimPolicy(pre).learnable.min() > 0
    kw = dict(budget_rollouts=4096, eval_every_rollouts=2048,
              options=strategy_options("grpo", train_prompts=64, group_size=8))  # fmt: skip
    runs = []
    for scope in ("pool", "learnable"):
        cfg = pre.sim.replace(answer_classes=K, answer_shift=10.0, answer_scope=scope)
        runs.append(
            [e["accuracy"] for e in simulate_run("grpo", replace(pre, sim=cfg), 3, **kw)["evals"]]
        )
    assert runs[0] == runs[1]
    plain = [e["accuracy"] for e in simulate_run("grpo", pre, 3, **kw)["evals"]]
    assert plain != runs[0]  # the shift is on in both


def test_a_bad_scope_is_refused():
    with pytest.raises(ValueError, match="answer_scope"):
        load_preset(str(HARD)).sim.replace(answer_scope="level")
