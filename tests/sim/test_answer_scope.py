"""answer_scope: which prompts share the simulated answer prior (SimConfig.answer_shift).

On the hard pool half the prompts are 3-digit sums the policy never solves: their groups never
vary, so under 'pool' their answer classes carry no signal and every update pushes the prior
toward the other classes as a whole. 'solvable' leaves prompts that can never be solved (cannot
learn, start below 1e-3) outside the prior; the `answer` column strategies read is unchanged
(docs/simulator.md, "Session 45")."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from rollalloc.sim.policy import Level, SimPolicy, load_preset
from rollalloc.sim.run import simulate_run, strategy_options

PRESETS = Path(__file__).resolve().parents[2] / "benchmarks" / "presets"
HARD = PRESETS / "testbed-hard-s45-rebuilt.json"  # 3x3d: plasticity 0, pass rate 0
K = 4


def policy(scope: str, path=HARD, **sim) -> SimPolicy:
    pre = load_preset(str(path))
    cfg = pre.sim.replace(answer_classes=K, answer_noise=0.7, answer_shift=10.0,
                          answer_rate=0.05, answer_scope=scope, **sim)  # fmt: skip
    return SimPolicy(replace(pre, sim=cfg))


def test_prompts_that_can_never_be_solved_sit_outside_the_prior():
    pol = policy("solvable")
    out = pol.prior_class == K
    hard = pol.level_names.index("3x3d")
    level = pol.cluster == hard
    # the unsolvable level's prompts below 1e-3 (all but 2 of its 4,070), no other
    np.testing.assert_array_equal(out, level & (pol.initial_pass_rate < 1e-3))
    assert out.sum() >= level.sum() - 2 and (pol.learnable[out] == 0).all()
    assert (pol.eval_prior_class < K).all()  # the held-out set has no 3x3d prompt
    np.testing.assert_array_equal(pol.prior_class, pol.prior_class[pol.original])  # copies
    # the prior's classes are quantiles among the prompts inside: K about equal parts of them
    counts = np.bincount(pol.prior_class[~out], minlength=K)  # copies take their original's
    assert counts.min() > 0.97 * counts.mean() and counts.max() < 1.03 * counts.mean()
    np.testing.assert_allclose(pol.answer_share, counts / counts.sum())
    # what a strategy sees is the pool's classes, whatever the scope
    np.testing.assert_array_equal(pol.answer_class, policy("pool").answer_class)
    assert set(pol.pool_columns()["answer"].tolist()) == set(range(K))
    # a shift: a softmax prior over the inside classes (sum_b pi_b e^off_b = 1), 0 outside
    rng = np.random.default_rng(0)
    ids = rng.choice(pol.num_prompts, 500, replace=False)
    pol._shift_answers(ids, rng.random(500))
    off = pol.answer_offset()
    assert off.shape == (K + 1,) and off[K] == 0.0 and np.abs(off[:K]).max() > 0
    assert np.dot(pol.answer_share, np.exp(off[:K])) == pytest.approx(1.0, abs=1e-12)


def test_a_level_that_cannot_learn_but_varies_stays_inside():
    d = json.loads(HARD.read_text())
    for lv in d["levels"]:
        if lv["name"] == "2x1d":
            lv["plasticity"] = 0.0  # solvable (p ~ 0.84), learns nothing
    pre = load_preset(str(HARD))
    levels = [Level(**{k: v for k, v in lv.items()}) for lv in d["levels"]]
    cfg = pre.sim.replace(answer_classes=K, answer_shift=10.0, answer_scope="solvable")
    pol = SimPolicy(replace(pre, levels=levels, sim=cfg))
    two = pol.level_names.index("2x1d")
    assert (pol.learnable[pol.cluster == two] == 0).all()
    assert (pol.prior_class[pol.cluster == two] < K).all()
    assert (pol.prior_class[pol.initial_pass_rate < 1e-3] == K).all()


def test_one_shift_by_hand_and_outside_signal_counts_for_nothing():
    """One update from delta = 0: delta_b = r c (sigma_b - pi_b), by hand, whatever signal the
    outside prompts are given. A batch whose signal sits on the solvable prompts in their own
    proportions (GRPO's, where the other half never varies) leaves the prior where it is under
    'solvable' and moves it under 'pool'."""
    pol = policy("solvable")
    one = np.flatnonzero(pol.prior_class == 1)[:10]
    out = np.flatnonzero(pol.prior_class == K)[:30]
    pol._shift_answers(np.concatenate([one, out]), np.ones(40))  # the outside 30 count nothing
    want = 0.05 * 10.0 * (np.eye(K)[1] - pol.answer_share)
    np.testing.assert_allclose(pol.answer_delta, want, atol=1e-15)
    pol._shift_answers(out, np.ones(30))  # no signal inside: the prior stays
    np.testing.assert_allclose(pol.answer_delta, want, atol=1e-15)
    for scope, moves in (("solvable", False), ("pool", True)):
        pol = policy(scope)
        ids = np.arange(pol.num_prompts)
        u = (
            (pol.prior_class < K).astype(float)
            if scope == "solvable"
            else (pol.learnable > 0) * 1.0
        )
        pol._shift_answers(ids, u)
        assert bool(np.abs(pol.answer_delta).max() > 0.1) is moves


def test_held_out_prompts_outside_keep_their_pass_rate():
    """testbed-hard-s27 makes half of its [0, 0] bin unlearnable (unlearnable_fraction), pool and
    held-out alike: those held-out prompts are outside and a shifted prior leaves them be."""
    pol = policy("solvable", path=PRESETS / "testbed-hard-s27.json")
    out = pol.eval_prior_class == K
    assert out.any() and (~out).any() and (pol.prior_class == K).any()
    before = pol.eval_success_prob()
    pol.answer_delta = np.array([2.0, -1.0, 0.5, -2.0])
    after = pol.eval_success_prob()
    np.testing.assert_array_equal(after[out], before[out])
    inside = ~out & (before > 1e-6) & (before < 1 - 1e-6)
    assert (np.abs(after[inside] - before[inside]) > 0).all()


def test_solvable_is_pool_where_no_prompt_is_outside():
    pre = load_preset("testbed-arith")  # no level, no unlearnable prompt
    assert SimPolicy(pre).learnable.min() > 0
    kw = dict(budget_rollouts=4096, eval_every_rollouts=2048,
              options=strategy_options("grpo", train_prompts=64, group_size=8))  # fmt: skip
    runs = []
    for scope in ("pool", "solvable"):
        cfg = pre.sim.replace(answer_classes=K, answer_shift=10.0, answer_scope=scope)
        evals = simulate_run("grpo", replace(pre, sim=cfg), 3, **kw)["evals"]
        runs.append([e["accuracy"] for e in evals])
    assert runs[0] == runs[1]
    plain = [e["accuracy"] for e in simulate_run("grpo", pre, 3, **kw)["evals"]]
    assert plain != runs[0]  # the shift is on in both


def test_a_bad_scope_is_refused():
    with pytest.raises(ValueError, match="answer_scope"):
        load_preset(str(HARD)).sim.replace(answer_scope="learnable")


def test_sigma_counted_prompt_by_prompt_from_the_definition():
    """A random update over pool prompts of every kind, counted one prompt at a time from the
    definition: sigma_b is class b's share of the summed |u| of the prompts inside the prior, a
    prompt outside being one of the unsolvable level below 1e-3 (read from its level and pass
    rate, not from the class); from delta = 0 one update gives delta = r c (sigma - pi)."""
    pol = policy("solvable")
    hard = pol.level_names.index("3x3d")
    rng = np.random.default_rng(1)
    ids = rng.choice(pol.num_prompts, 3000, replace=False)
    u = rng.normal(size=3000)  # signs too: sigma counts |u|
    mass = np.zeros(K)
    for i, ui in zip(ids, u, strict=True):
        if pol.cluster[i] == hard and pol.initial_pass_rate[i] < 1e-3:
            continue
        mass[pol.prior_class[i]] += abs(ui)
    pol._shift_answers(ids, u)
    want = 0.05 * 10.0 * (mass / mass.sum() - pol.answer_share)
    np.testing.assert_allclose(pol.answer_delta, want, rtol=1e-12, atol=1e-15)
