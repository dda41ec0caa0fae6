"""A level's hard kind (Level.subskill_share, subskill_transfer): which prompts it holds, what
moves it, that it is off by default, and that the ceiling oracle refuses it (docs/simulator.md,
"Session 42"). Expected values come from the prompts' pass rates read before and after an
update (logit differences), not from the policy's skill arrays."""

from __future__ import annotations

import json

import numpy as np
import pytest

from rollalloc.sim.policy import SimPolicy, preset_from_dict


def logit(p):
    return np.log(p / (1.0 - p))


def level_preset(
    share=0.3, rho=0.5, learnable=1.0, num_prompts=200, distinct=None, hist=((0.01, 0.9, 1),), **sim
):
    a = {
        "name": "a",
        "share": 0.5,
        "eval_share": 0.5,
        "pass_rate_histogram": [list(b) for b in hist],
        "learnable_share": learnable,
    }
    if share:
        a.update(subskill_share=share, subskill_transfer=rho)
    if distinct:
        a["distinct"] = distinct
    d = {
        "num_prompts": num_prompts,
        "levels": [
            a,
            {"name": "b", "share": 0.5, "eval_share": 0.5, "pass_rate_histogram": [[0.2, 0.8, 1]]},
        ],
        "sim": {
            "eval_prompts": 100,
            "global_gain": 1e-3,
            "cluster_gain": 4e-2,
            "memorize_gain": 0.0,  # pass rates move by the skills alone
            **sim,
        },
    }
    return preset_from_dict(json.loads(json.dumps(d)), "sub")


@pytest.mark.parametrize(
    "kw",
    [
        {"learnable": 0.8},
        # unlearnable_fraction draws from the [0, 0] bin, the hardest: none of them is hard kind
        {"hist": ((0.0, 0.0, 0.4), (0.01, 0.9, 0.6)), "unlearnable_fraction": 0.1},
    ],
)
def test_the_hard_kind_is_the_hardest_share_of_each_splits_learnable_prompts(kw):
    pol = SimPolicy(level_preset(share=0.3, **kw))
    p_pool = pol.success_prob(np.arange(pol.num_prompts))
    p_eval = pol.eval_success_prob()
    for p, cluster, lam, sub in (
        (p_pool, pol.cluster, pol.learnable, pol.sub),
        (p_eval, pol.eval_cluster, pol.eval_learnable, pol.eval_sub),
    ):
        assert np.any(lam == 0)
        a = np.flatnonzero((cluster == 0) & (lam > 0))
        want = set(a[np.argsort(p[a], kind="stable")[: round(0.3 * len(a))]].tolist())  # by hand
        assert set(np.flatnonzero(sub).tolist()) == want
        assert not sub[lam == 0].any() and not sub[cluster == 1].any()


def test_a_copy_is_in_the_hard_kind_with_its_original_and_a_cut_keeps_it():
    # three originals with ~33 copies each: a 30% cut falls inside a set of copies, which goes
    # whole with its original
    pol = SimPolicy(level_preset(share=0.3, distinct=3))
    a = np.flatnonzero(pol.cluster == 0)
    assert np.array_equal(pol.sub, pol.sub[pol.original])
    assert 0 < pol.sub[a].sum() < len(a)
    ids = np.arange(pol.num_prompts)[::-1][: pol.num_prompts // 2]
    want = pol.sub[ids]
    pol.keep(ids)
    assert np.array_equal(pol.sub, want)


def test_at_rho_one_updates_off_the_hard_kind_move_everything_as_without_it():
    """rho 1 and only the level's other prompts trained: the hard kind gets the whole level skill
    and no signal of its own, so every prompt moves as in the same preset without a hard kind
    (which takes the model's original update); under sgd, rms, and noise alike (with noise one
    update: the hard kind's own noise draw, zero here, advances the generator for the next)."""
    for sim in ({}, {"optimizer": "rms"}, {"optimizer": "rms", "noise_scale": 3.0}):
        steps = 1 if "noise_scale" in sim else 4
        pols = [SimPolicy(level_preset(share=sh, rho=1.0, **sim)) for sh in (0.0, 0.3)]
        main = np.flatnonzero((pols[1].cluster == 0) & ~pols[1].sub)[:30]
        u = np.linspace(0.1, 1.0, len(main))
        for pol in pols:
            rng = np.random.default_rng(5)
            for _ in range(steps):
                pol.apply(main, u, energy=np.ones(len(main)), rng=rng)
        every = np.arange(pols[0].num_prompts)
        np.testing.assert_allclose(
            pols[1].success_prob(every), pols[0].success_prob(every), rtol=1e-12
        )
        np.testing.assert_allclose(
            pols[1].eval_success_prob(), pols[0].eval_success_prob(), rtol=1e-12
        )
    assert not pols[0].has_sub and pols[1].has_sub


def test_round_trip_and_off_by_default():
    p = level_preset(share=0.25, rho=0.4)
    again = preset_from_dict(json.loads(json.dumps(p.to_dict())), "again")
    assert again.levels[0].subskill_share == 0.25 and again.levels[0].subskill_transfer == 0.4
    off = level_preset(share=0.0)
    assert "subskill_share" not in off.to_dict()["levels"][0]
    assert not SimPolicy(off).has_sub
    # bit-identity with the model before the hard kind existed: tests/sim/test_wear_preset.py
    # regenerates committed curves of a preset without one


@pytest.mark.parametrize("optimizer", ["sgd", "rms"])
def test_the_hard_kind_learns_from_its_own_groups_and_rho_of_the_level(optimizer):
    """sgd, one update of signal u on level-a prompts outside the hard kind: every level-a prompt
    outside it moves by (global_gain + cluster_gain) u in logit, the hard kind by (global_gain +
    rho cluster_gain) u, level b by global_gain u. Then an update on the hard kind alone: it moves
    by (global_gain + cluster_gain) u, the rest of level a and level b by global_gain u only. Under
    rms the sizes differ, the pattern (who moves with whom) is the same."""
    g, c, rho = 1e-3, 4e-2, 0.5
    pol = SimPolicy(level_preset(share=0.3, rho=rho, optimizer=optimizer))
    every = np.arange(pol.num_prompts)
    a_main = np.flatnonzero((pol.cluster == 0) & ~pol.sub)
    a_sub = np.flatnonzero(pol.sub)
    b = np.flatnonzero(pol.cluster == 1)

    def moves(ids, u):
        before = logit(pol.success_prob(every))
        ev = logit(pol.eval_success_prob())
        pol.apply(ids, np.full(len(ids), u))
        return logit(pol.success_prob(every)) - before, logit(pol.eval_success_prob()) - ev

    d, d_ev = moves(a_main[:5], 1.0)
    if optimizer == "sgd":
        total = 5.0
        np.testing.assert_allclose(d[a_main], (g + c) * total, rtol=1e-6)
        np.testing.assert_allclose(d[a_sub], (g + rho * c) * total, rtol=1e-6)
        np.testing.assert_allclose(d[b], g * total, rtol=1e-6)
    else:  # the level's move m: the hard kind gets rho of it above the shared global part
        m = d[a_main][0] - d[b][0]
        assert m > 0
        np.testing.assert_allclose(d[a_main], d[a_main][0], rtol=1e-9)
        np.testing.assert_allclose(d[a_sub] - d[b][0], rho * m, rtol=1e-6)
    ev_sub, ev_main = pol.eval_sub, (pol.eval_cluster == 0) & ~pol.eval_sub
    np.testing.assert_allclose(
        d_ev[ev_sub] - d_ev[pol.eval_cluster == 1][0],
        rho * (d_ev[ev_main][0] - d_ev[pol.eval_cluster == 1][0]),
        rtol=1e-6,
    )

    d, d_ev = moves(a_sub[:5], 1.0)
    np.testing.assert_allclose(d[a_main], d[b][0], rtol=1e-6)  # the level skill did not move
    assert np.all(d[a_sub] > d[b][0] + 1e-6)
    np.testing.assert_allclose(d_ev[ev_main], d_ev[pol.eval_cluster == 1][0], rtol=1e-6)
    assert np.all(d_ev[ev_sub] > d_ev[pol.eval_cluster == 1][0] + 1e-6)
    if optimizer == "sgd":
        np.testing.assert_allclose(d[a_sub], (g + c) * 5.0, rtol=1e-6)


def test_under_rms_the_hard_kind_shares_its_levels_second_moment():
    """optimizer='rms', the first update: a skill's step is a x / sqrt(v_hat), v_hat = x^2 at the
    first step, so a level without a hard kind moves by the full step size a / K whatever its
    signal. With the level and its hard kind normalised as one block (their squares summed), an
    update with equal signal on both moves each by a / K / sqrt(2), and one on the level alone by
    a / K; with update_cost both parts pay the same second-order cost."""

    def first_moves(share, who, **sim):
        pol = SimPolicy(level_preset(share=share, rho=0.0, optimizer="rms", global_gain=0.0, **sim))
        every = np.arange(pol.num_prompts)
        main = np.flatnonzero((pol.cluster == 0) & ~pol.sub)[:4]
        sub = np.flatnonzero(pol.sub)[:4]
        ids = main if who == "main" else np.concatenate([main, sub])
        before = logit(pol.success_prob(every))
        pol.apply(ids, np.ones(len(ids)))
        d = logit(pol.success_prob(every)) - before
        return d[main[0]], (d[sub[0]] if len(sub) else None)

    lone = first_moves(0.0, "main")[0]  # no hard kind: one skill alone
    assert lone > 0
    main_only = first_moves(0.3, "main")
    assert main_only[0] == pytest.approx(lone, rel=1e-9) and main_only[1] == pytest.approx(0.0)
    both = first_moves(0.3, "both")
    assert both[0] == pytest.approx(lone / np.sqrt(2), rel=1e-9)
    assert both[1] == pytest.approx(lone / np.sqrt(2), rel=1e-9)
    costly = first_moves(0.3, "both", update_cost=0.5)
    assert costly[0] < both[0] and costly[1] == pytest.approx(costly[0], rel=1e-9)


def test_noise_of_the_hard_kind_reaches_its_own_skill_only():
    """noise_scale > 0, updates on the hard kind alone: the level's other prompts move exactly as
    level b's (s_0 alone: the level skill got neither signal nor noise), and the hard kind's move
    depends on the noise draw (it got the noise of its own groups)."""
    moves = []
    for seed in (1, 2):
        pol = SimPolicy(level_preset(share=0.3, rho=0.0, optimizer="rms", noise_scale=50.0))
        sub = np.flatnonzero(pol.sub)[:5]
        main = np.flatnonzero((pol.cluster == 0) & ~pol.sub)
        b = np.flatnonzero(pol.cluster == 1)
        every = np.arange(pol.num_prompts)
        before = logit(pol.success_prob(every))
        rng = np.random.default_rng(seed)
        for _ in range(3):
            pol.apply(sub, np.full(5, 0.2), energy=np.ones(5), rng=rng)
        d = logit(pol.success_prob(every)) - before
        np.testing.assert_allclose(d[main], d[b][0], rtol=1e-9, atol=1e-12)
        moves.append(d[sub[0]] - d[b][0])
    assert abs(moves[0] - moves[1]) > 1e-6


def test_a_sampler_that_stops_drawing_the_hard_kind_leaves_it_behind():
    """rho 0, no contrast_decay: GRPO-like updates on every level-a prompt raise the held-out
    hard kind; the same updates on level a's other prompts alone leave it where the global skill
    puts it (what real MoPPS did to the 2-term carries on ws5)."""
    held = {}
    for who in ("all", "easy only"):
        pol = SimPolicy(level_preset(share=0.4, rho=0.0, global_gain=0.0))
        a = np.flatnonzero(pol.cluster == 0)
        ids = a if who == "all" else a[~pol.sub[a]]
        start = pol.eval_success_prob()[pol.eval_sub].mean()
        for _ in range(20):
            pol.apply(ids, np.full(len(ids), 0.5))
        held[who] = pol.eval_success_prob()[pol.eval_sub].mean() - start
    assert held["easy only"] == pytest.approx(0.0, abs=1e-12)
    assert held["all"] > 0.05


def test_state_survives_save_and_load():
    pol = SimPolicy(level_preset(share=0.3, optimizer="rms"))
    sub = np.flatnonzero(pol.sub)[:6]
    for _ in range(3):
        pol.apply(sub, np.ones(6))
    twin = SimPolicy(level_preset(share=0.3, optimizer="rms"))
    twin.load_state_dict(json.loads(json.dumps(pol.state_dict(), default=lambda x: x.tolist())))
    np.testing.assert_array_equal(twin.eval_success_prob(), pol.eval_success_prob())
    pol.apply(sub, np.ones(6))
    twin.apply(sub, np.ones(6))
    np.testing.assert_array_equal(twin.eval_success_prob(), pol.eval_success_prob())


def test_bad_values_clashes_and_the_oracle_are_refused():
    for bad, match in (({"subskill_share": 1.0}, "subskill_share"),
                       ({"subskill_share": -0.1}, "subskill_share"),
                       ({"subskill_share": True}, "subskill_share"),
                       ({"subskill_transfer": -1.0}, "subskill_transfer"),
                       ({"subskill_transfer": 7.0}, "subskill_transfer"),
                       ({"subskill_transfer": float("inf")}, "subskill_transfer"),
                       ({"subskill_transfer": float("nan")}, "subskill_transfer")):  # fmt: skip
        d = level_preset(share=0.2).to_dict()
        d["levels"][0].update(bad)
        with pytest.raises(ValueError, match=match):
            preset_from_dict(d, "bad")
    d = level_preset(share=0.2).to_dict()
    d["levels"][0]["transfer"] = {"a": 1.0, "b": 0.1}
    with pytest.raises(ValueError, match="subskill_share is not modelled together"):
        SimPolicy(preset_from_dict(d, "clash"))
    for clash in ({"interference": 0.1}, {"relearn": 0.5}):
        with pytest.raises(ValueError, match="subskill_share is not modelled together"):
            SimPolicy(level_preset(share=0.2, **clash))
    from rollalloc.sim.oracle import heldout_gain_weight

    with pytest.raises(ValueError, match="subskill_share must be 0"):
        heldout_gain_weight(SimPolicy(level_preset(share=0.2)))


def test_with_contrast_decay_the_hard_kind_closes_in_only_as_far_as_it_is_taught():
    """contrast_decay > 0, rho 0: updates on level a's other prompts move the held-out hard kind by
    the global skill alone, exactly as far as a held-out prompt of level b that is easier than its
    level's mean (neither closes in: b's has no contrast left, the hard kind was not taught); with
    rho 1 the same updates close the hard kind in on its level's mean, and it moves further."""
    moved = {}
    for rho in (0.0, 1.0):
        pol = SimPolicy(level_preset(share=0.4, rho=rho, contrast_decay=4.0))
        a = np.flatnonzero((pol.cluster == 0) & ~pol.sub)
        easy_b = (pol.eval_cluster == 1) & (pol.eval_difficulty < pol.mean_difficulty[1])
        before = logit(pol.eval_success_prob())
        for _ in range(10):
            pol.apply(a, np.full(len(a), 0.5))
        d = logit(pol.eval_success_prob()) - before
        assert np.ptp(d[easy_b]) < 1e-9 and d[easy_b][0] > 0  # s_0's move
        moved[rho] = (d[pol.eval_sub], d[easy_b][0])
    np.testing.assert_allclose(moved[0.0][0], moved[0.0][1], rtol=1e-9)
    assert np.all(moved[1.0][0] > moved[1.0][1] + 0.05)
