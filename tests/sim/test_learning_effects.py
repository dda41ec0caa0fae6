"""The learning model's switchable effects (SimConfig: loss_norm, noise_scale,
noise_progress_scale, optimizer, memo_decay, skill_drift, memorize_to_transfer, transfer_asymmetry,
num_minibatches, update_cost, fast_max, ...), each in isolation: what it claims, and off by
default (docs/simulator.md, "Effects that decide between strategies")."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from rollalloc.sim.policy import (
    SimConfig,
    SimPolicy,
    available_presets,
    load_preset,
    preset_from_dict,
)
from rollalloc.sim.roles import SimLearner, SimRollouts, SimSampler, group_noise_energy
from rollalloc.sim.run import simulate_run, strategy_options
from rollalloc.testing import make_batch
from rollalloc.train.loss import policy_loss

EFFECTS_OFF = {
    "memorize_to_transfer": None,
    "loss_norm": "constant",
    "noise_scale": 0.0,
    "noise_progress_scale": None,
    "optimizer": "sgd",
    "memo_decay": 0.0,
    "skill_drift": 0.0,
    "transfer_asymmetry": 0.0,
    "transfer_ramp_steps": 0.0,
    "rms_shared": False,
    "interference": 0.0,
    "relearn": 0.0,
    "displace_rate": 0.0,
    "displace_power": 1.0,
    "num_minibatches": 1,
    "update_cost": 0.0,
    "fast_max": 0.0,
    "fast_rate": 0.0,
    "fast_noise": 0.0,
    "fast_damage": 0.0,
    "fast_updates": 1,
    "repeat_decay": 0.0,
    "repeat_grace": 0,
    "repeat_harm": 0.0,
    "repeat_memory": 0.0,
    "answer_classes": 0,
    "answer_shift": 0.0,
    "wear_rate": 0.0,
    "wear_noise": 0.0,
    "wear_heal": 0.0,
    "wear_unit": "rollouts",
}


def small_preset(hist=((0.0, 1.0, 1.0),), num_prompts=400, **sim):
    d = {
        "num_prompts": num_prompts,
        "pass_rate_histogram": [list(b) for b in hist],
        "sim": {"eval_prompts": 200, **sim},
    }
    return preset_from_dict(json.loads(json.dumps(d)), "small")


FITTED_WITH_EFFECTS = {"testbed-paper"}
"""Presets whose effects were switched on and fitted to real GRPO runs (docs/simulator.md,
"Predicting the paper-regime testbed"); every other preset keeps them off."""


def test_effects_are_off_by_default_and_in_every_preset():
    for name, off in EFFECTS_OFF.items():
        assert getattr(SimConfig(), name) == off
    for name in available_presets():
        cfg = load_preset(name).sim
        assert cfg.memo_gain == cfg.memorize_gain
        if name in FITTED_WITH_EFFECTS:
            # the real trainer's optimiser (AdamW) and loss (token-mean), as its source says
            assert (cfg.optimizer, cfg.loss_norm) == ("rms", "token_mean"), name
            assert "fit" in load_preset(name).source
            continue
        assert {k: getattr(cfg, k) for k in EFFECTS_OFF} == EFFECTS_OFF, name


def test_bad_effect_values_are_refused_with_the_choices():
    with pytest.raises(ValueError, match=r"loss_norm.*'token_mean'"):
        SimConfig().replace(loss_norm="tokens")
    with pytest.raises(ValueError, match=r"optimizer.*'rms'"):
        SimConfig().replace(optimizer="adam")
    for bad in (
        {"noise_scale": -1},
        {"memo_decay": 1.0},
        {"memorize_to_transfer": -2},
        {"transfer_asymmetry": -0.5},
    ):
        with pytest.raises(ValueError, match=next(iter(bad))):
            SimConfig().replace(**bad)


def test_memorisation_to_transfer_ratio():
    """Today's defaults: memorisation is 1000x one group's transfer; the ratio, when set, decides
    memorize_gain and moves a trained prompt's own logit accordingly."""
    d = SimConfig()
    assert d.memorize_gain / (d.global_gain + d.cluster_gain) == pytest.approx(1000.0)
    cfg = SimConfig(memorize_to_transfer=50.0)
    assert cfg.memo_gain == pytest.approx(50.0 * (cfg.global_gain + cfg.cluster_gain))
    pol = SimPolicy(small_preset(), cfg)
    pol.apply(np.array([7]), np.array([1.0]))
    assert pol.memorisation(np.array([7]))[0] == pytest.approx(cfg.memo_gain)
    assert pol.s0 == pytest.approx(cfg.global_gain)


# ------------------------------------------------------------------ token-mean normaliser


def toy_batches():
    """Two informative groups (A), and A plus two zero-variance groups of long rollouts (B)."""
    informative = [([1, 0, 0, 1], [30, 50, 70, 40]), ([1, 1, 1, 0], [20, 25, 35, 90])]
    zero = [([0, 0, 0, 0], [120, 150, 110, 130]), ([1, 1, 1, 1], [40, 60, 50, 30])]
    return informative, informative + zero


def sim_step(groups, loss_norm):
    """s_0's move from one learner step on `groups` (prompts 0, 1, ...), all on-policy."""
    preset = small_preset(ref_group_size=4, loss_norm=loss_norm)
    pol = SimPolicy(preset)
    sampler = SimSampler(pol, 0)
    learner = SimLearner(pol, sampler.store, 0)
    ids = np.repeat(np.arange(len(groups)), 4)
    rewards = np.concatenate([np.array(r, float) for r, _ in groups])
    tokens = np.concatenate([np.array(t, np.int64) for _, t in groups])
    handles = sampler.store.add(SimRollouts(ids, rewards, tokens, 0))
    learner.update(make_batch(np.arange(len(groups)), [4] * len(groups), handles, rewards))
    return pol.s0, pol


def torch_logit_gradients(groups, num_informative):
    """-d loss / d theta_i of the real trainer's loss (train/loss.py policy_loss, token-mean) for
    a toy policy with one logit theta_i per prompt: rollout j's log-prob r log sigmoid(theta) +
    (1 - r) log sigmoid(-theta) spread evenly over its tokens, advantages computed here by hand."""
    theta = torch.zeros(len(groups), dtype=torch.float64, requires_grad=True)
    L = max(max(t) for _, t in groups)
    logp_rows, adv, mask = [], [], []
    for i, (r, t) in enumerate(groups):
        r_t = torch.tensor(r, dtype=torch.float64)
        a = (r_t - r_t.mean()) / (r_t.std() + 1e-6)  # unbiased std, as verl / TRL
        if float(r_t.max() - r_t.min()) == 0.0:
            a = torch.zeros_like(a)
        for j in range(4):
            seq = r[j] * torch.nn.functional.logsigmoid(theta[i]) + (1 - r[j]) * (
                torch.nn.functional.logsigmoid(-theta[i])
            )
            row = torch.zeros(L, dtype=torch.float64)
            row = row + seq / t[j]  # each token carries 1/L_j of the sequence's log-prob
            logp_rows.append(row)
            m = torch.zeros(L, dtype=torch.float64)
            m[: t[j]] = 1.0
            mask.append(m)
            adv.append(a[j])
    logp = torch.stack(logp_rows)  # (B, L)
    loss, _ = policy_loss(logp, logp.detach(), torch.stack(adv), torch.stack(mask))
    loss.backward()
    return -theta.grad[:num_informative].numpy()


def test_token_mean_dilutes_the_informative_groups_as_the_real_loss_does():
    a, b = toy_batches()
    tokens_a = sum(sum(t) for _, t in a)
    tokens_b = sum(sum(t) for _, t in b)
    step_a, pol = sim_step(a, "token_mean")
    step_b, _ = sim_step(b, "token_mean")
    # adding zero-variance groups shrinks the informative groups' update by T_A / T_B ...
    assert step_b / step_a == pytest.approx(tokens_a / tokens_b, rel=1e-9)
    # ... exactly as the real loss's gradient on the prompts' logits does (computed with torch)
    grad_a = torch_logit_gradients(a, 2)
    grad_b = torch_logit_gradients(b, 2)
    np.testing.assert_allclose(grad_b / grad_a, tokens_a / tokens_b, rtol=1e-9)
    # and the sim's step is that gradient times one constant: gain * reference tokens / (n_ref / 2)
    cfg = pol.config
    const = (
        cfg.global_gain
        * cfg.norm_ref_prompts
        * cfg.ref_group_size
        * pol.ref_tokens_per_rollout
        / 2.0
    )
    assert step_a == pytest.approx(const * grad_a.sum(), rel=1e-6)
    assert step_b == pytest.approx(const * grad_b.sum(), rel=1e-6)
    # the constant (Dr. GRPO) normaliser: zero-variance groups change nothing
    assert sim_step(b, "constant")[0] == sim_step(a, "constant")[0]


# ------------------------------------------------------------------ gradient noise


def s0_steps(cfg, signal, energy, repeats, seed=0):
    """s_0's move per step for `repeats` identical steps of groups with these u_g, e_g."""
    pol = SimPolicy(small_preset(), cfg)
    rng = np.random.default_rng(seed)
    ids = np.arange(len(signal)) % pol.num_prompts
    out = []
    for _ in range(repeats):
        before = pol.s0
        pol.apply(ids, np.asarray(signal, float), energy=np.asarray(energy, float), rng=rng)
        out.append(pol.s0 - before)
    return np.array(out)


def test_noise_energy_of_a_reference_group_is_one_and_zero_without_variance():
    r = np.r_[np.ones(8), np.zeros(8), np.ones(16), np.ones(3), np.zeros(5)]
    e = group_noise_energy(r, np.array([16, 16, 8]), ref_group_size=16)
    assert e[0] == pytest.approx(1.0, rel=1e-5) and e[1] == 0.0
    a = (r[32:] - r[32:].mean()) / (r[32:].std(ddof=1) + 1e-6)
    assert e[2] == pytest.approx(np.sum(a**2) / 15, rel=1e-12)  # a plain loop


def test_relative_noise_shrinks_as_one_over_sqrt_informative_sequences():
    cfg = SimConfig(global_gain=1.0, cluster_gain=0.0, memorize_gain=0.0, noise_scale=64.0)
    few = s0_steps(cfg, [1.0] * 16, [1.0] * 16, 4000)
    many = s0_steps(cfg, [1.0] * 64, [1.0] * 64, 4000, seed=1)
    assert few.mean() == pytest.approx(16, rel=0.05) and many.mean() == pytest.approx(64, rel=0.03)
    assert few.std() == pytest.approx(np.sqrt(64 * 16), rel=0.05)  # noise = signal at 64 groups
    rel_few, rel_many = few.std() / few.mean(), many.std() / many.mean()
    assert rel_few / rel_many == pytest.approx(2.0, rel=0.08)  # 4x the sequences, half the noise
    # zero-variance groups carry no noise: adding 48 of them changes nothing
    diluted = s0_steps(cfg, [1.0] * 16 + [0.0] * 48, [1.0] * 16 + [0.0] * 48, 4000)
    np.testing.assert_array_equal(diluted, few)
    # noise off: every step is the signal
    assert np.all(s0_steps(cfg.replace(noise_scale=0.0), [1.0] * 16, [1.0] * 16, 5) == 16.0)


def test_split_noise_only_the_projected_part_spreads_runs():
    """noise_progress_scale set: the trace noise (noise_scale) enters only Adam's second moment, as
    its expectation (a skill's many weights); what moves the skill carries only the projected
    noise. So with no projected noise, runs of different seeds take the same steps however large
    the trace noise; the trace noise still slows them (rms), and plain sgd never sees it."""
    rms = SimConfig(global_gain=1e-3, cluster_gain=0.0, memorize_gain=0.0, optimizer="rms")
    batch = ([1.0] * 16 + [0.0] * 48, [1.0] * 16 + [0.0] * 48)
    quiet = rms.replace(noise_scale=128.0, noise_progress_scale=0.0)
    runs = [s0_steps(quiet, *batch, 50, seed=seed) for seed in range(3)]
    np.testing.assert_array_equal(runs[0], runs[1])
    np.testing.assert_array_equal(runs[0], runs[2])
    # E[x^2] = 16^2 + 128 * 16 per step: the step is 16 / sqrt(16^2 + 128 * 16) = 1/3 of the
    # noise-free one, deterministically
    free = s0_steps(rms, *batch, 50)
    np.testing.assert_allclose(runs[0] / free, 1.0 / 3.0, rtol=1e-9)
    # the projected noise spreads runs; one noise (None) spreads them more than its projection
    proj = s0_steps(rms.replace(noise_scale=128.0, noise_progress_scale=8.0), *batch, 2000)
    one = s0_steps(rms.replace(noise_scale=128.0), *batch, 2000)
    assert 0.0 < proj.std() / proj.mean() < 0.5 * one.std() / one.mean()
    # sgd has no second moment: only the projected noise matters, and set to noise_scale the split
    # model takes exactly the one-noise steps (the same draws)
    sgd = rms.replace(optimizer="sgd", global_gain=1.0)
    np.testing.assert_array_equal(
        s0_steps(sgd.replace(noise_scale=128.0, noise_progress_scale=0.0), *batch, 5), 16.0
    )
    np.testing.assert_array_equal(
        s0_steps(sgd.replace(noise_scale=128.0, noise_progress_scale=128.0), *batch, 50),
        s0_steps(sgd.replace(noise_scale=128.0), *batch, 50),
    )


def test_split_noise_unset_keeps_the_one_noise_runs():
    """noise_progress_scale None is the model before it existed: a run with rms, token-mean and
    noise gives the figure the code of 59bdc4c gave, to the last bit."""
    hist = ((0.0, 0.0, 0.4), (0.02, 0.98, 0.4), (1.0, 1.0, 0.2))
    sim = dict(ref_group_size=8, norm_ref_prompts=16, optimizer="rms", loss_norm="token_mean")
    sim.update(noise_scale=40.0, global_gain=2e-3, cluster_gain=8e-3)
    preset = small_preset(hist, **sim)
    r = simulate_run(
        "grpo",
        preset,
        3,
        budget_rollouts=10**8,
        eval_every_rollouts=10**8,
        options=strategy_options("grpo", train_prompts=16, group_size=8),
        max_steps=30,
    )
    assert r["evals"][0]["accuracy"] == 0.43308048308615116
    assert r["evals"][-1]["accuracy"] == 0.4410082799884825


def test_with_noise_a_dapo_like_filter_beats_no_filter_at_equal_updates():
    """Adam-like (rms) steps on a pool with 75% zero-variance groups: unfiltered batches (32
    informative groups of 128) and DAPO-like ones (128 informative) move the skill equally per
    update without noise (the step is scale-free) and the filter wins only with gradient noise."""
    base = SimConfig(global_gain=1e-3, cluster_gain=0.0, memorize_gain=0.0, optimizer="rms")
    unfiltered = ([1.0] * 32 + [0.0] * 96, [1.0] * 32 + [0.0] * 96)
    filtered = ([1.0] * 128, [1.0] * 128)

    def progress(cfg, batch):
        return s0_steps(cfg, *batch, 400).sum()

    quiet = progress(base, filtered) / progress(base, unfiltered)
    assert quiet == pytest.approx(1.0, rel=1e-9)
    noisy_cfg = base.replace(noise_scale=128.0)
    noisy = progress(noisy_cfg, filtered) / progress(noisy_cfg, unfiltered)
    # E[x / rms(x)]: 128 / sqrt(128^2 + 128^2) vs 32 / sqrt(32^2 + 128 * 32) -> ratio ~1.58
    assert 1.35 < noisy < 1.85
    # plain sgd (the default) pays for the signal: the filter's batch moves 4x, noise or not
    sgd = base.replace(optimizer="sgd")
    assert progress(sgd, filtered) / progress(sgd, unfiltered) == pytest.approx(4.0)


def run_small(strategy, seed, preset, steps, train_prompts=16):
    return simulate_run(
        strategy,
        preset,
        seed,
        budget_rollouts=10**8,
        eval_every_rollouts=10**8,
        options=strategy_options(strategy, train_prompts=train_prompts, group_size=8),
        max_steps=steps,
    )


def test_dapo_vs_grpo_per_update_end_to_end():
    """Through the real strategies, 64 prompts x 8 on a pool of 75% zero-variance groups, rms
    steps: DAPO's held-out gain per update about equals GRPO's without gradient noise (the step is
    scale-free) and clearly beats it with noise (its batch has 4x the informative sequences)."""
    hist = ((0.0, 0.0, 0.45), (0.02, 0.98, 0.25), (1.0, 1.0, 0.30))
    ratio = {}
    for noise_scale in (0.0, 64.0):
        preset = small_preset(
            hist,
            num_prompts=4000,
            ref_group_size=8,
            norm_ref_prompts=64,
            global_gain=2e-3,
            cluster_gain=8e-3,
            memorize_gain=0.0,
            optimizer="rms",
            noise_scale=noise_scale,
        )
        gains = {}
        for s in ("grpo", "dapo"):
            per_seed = []
            for seed in range(4):
                ev = run_small(s, seed, preset, 60, train_prompts=64)["evals"]
                per_seed.append(ev[-1]["expected_accuracy"] - ev[0]["expected_accuracy"])
            gains[s] = float(np.mean(per_seed))
        ratio[noise_scale] = gains["dapo"] / gains["grpo"]
    assert ratio[0.0] == pytest.approx(1.0, abs=0.12)  # measured 1.05
    assert ratio[64.0] > 1.4  # measured 1.70


# ------------------------------------------------------------------ forgetting and drift


def test_memorisation_decays_so_an_untrained_prompt_falls():
    cfg = SimConfig(global_gain=0.0, cluster_gain=0.0, memorize_gain=0.5, memo_decay=0.05)
    pol = SimPolicy(small_preset(), cfg)
    p_init = pol.success_prob(np.array([0]))[0]
    pol.apply(np.array([0]), np.array([2.0]))  # prompt 0 memorised: m = 1
    p_trained = pol.success_prob(np.array([0]))[0]
    for _ in range(20):
        pol.apply(np.array([1, 2]), np.array([1.0, 1.0]))  # other prompts trained
    p_later = pol.success_prob(np.array([0]))[0]
    assert p_init < p_later < p_trained
    want = 1.0 / (1.0 + np.exp(-(1.0 * 0.95**21 - pol.difficulty[0])))
    assert p_later == pytest.approx(want, rel=1e-12)
    # a prompt trained again adds to its decayed memorisation (and decays with that step too)
    pol.apply(np.array([0]), np.array([2.0]))
    assert pol.memorisation(np.array([0]))[0] == pytest.approx((0.95**21 + 1.0) * 0.95)
    # memo_decay = 0: nothing is forgotten
    keep = SimPolicy(small_preset(), cfg.replace(memo_decay=0.0))
    keep.apply(np.array([0]), np.array([2.0]))
    p_kept = keep.success_prob(np.array([0]))[0]
    for _ in range(20):
        keep.apply(np.array([1]), np.array([1.0]))
    assert keep.success_prob(np.array([0]))[0] == p_kept


def test_skill_drift_is_a_random_walk_that_can_lower_held_out_pass_rates():
    cfg = SimConfig(skill_drift=0.01)
    finals = []
    fell = 0
    for seed in range(200):
        pol = SimPolicy(small_preset(), cfg)
        rng = np.random.default_rng(seed)
        p0 = pol.eval_success_prob()
        for _ in range(100):
            pol.apply(np.zeros(0, np.int64), np.zeros(0), rng=rng)  # nothing trained
        finals.append(pol.s0)
        fell += bool((pol.eval_success_prob() < p0 - 1e-9).any())
    assert np.std(finals) == pytest.approx(0.01 * np.sqrt(100), rel=0.15)
    assert abs(np.mean(finals)) < 0.3 * 0.1
    assert fell > 150  # held-out prompts lose pass rate in most runs


def test_effect_state_survives_save_and_load():
    cfg = SimConfig(memo_decay=0.01, optimizer="rms", noise_scale=16.0, skill_drift=1e-3)
    cfg = cfg.replace(fast_max=0.5, fast_rate=0.3, fast_noise=4.0, fast_damage=1e-3)
    cfg = cfg.replace(wear_rate=0.05, wear_noise=8.0, wear_heal=0.1)
    a = SimPolicy(small_preset(), cfg)
    rng = np.random.default_rng(0)
    for k in range(5):
        a.apply(np.array([k, 9]), np.array([1.0, 0.5]), energy=np.ones(2), rng=rng)
        a.fast_step(np.array([k, 9]), np.array([1.0, 0.5]), np.ones(2))
        a.wear_step(np.array([1.0, 0.5]), np.ones(2))
    assert a.fast > 0 and a.wear > 0
    b = SimPolicy(small_preset(), cfg)
    b.load_state_dict(a.state_dict())
    ra, rb = np.random.default_rng(1), np.random.default_rng(1)
    a.apply(np.array([3]), np.array([1.0]), energy=np.ones(1), rng=ra)
    b.apply(np.array([3]), np.array([1.0]), energy=np.ones(1), rng=rb)
    ids = np.arange(a.num_prompts)
    np.testing.assert_array_equal(a.success_prob(ids), b.success_prob(ids))


def test_effects_on_run_deterministically_and_report_their_factors():
    preset = small_preset(
        ref_group_size=8,
        global_gain=2e-3,
        cluster_gain=8e-3,
        loss_norm="token_mean",
        noise_scale=32.0,
        optimizer="rms",
        memo_decay=1e-3,
        skill_drift=1e-3,
    )
    a, b = run_small("grpo", 2, preset, 12), run_small("grpo", 2, preset, 12)
    assert [e["accuracy"] for e in a["evals"]] == [e["accuracy"] for e in b["evals"]]
    rec = a["steps"][-1]["learner"]
    assert rec["norm_factor"] > 0 and rec["noise_energy"] > 0


# ------------------------------------------------------------------ transfer asymmetry


def one_step(groups, **sim):
    """(s_0 move, memorisation of each prompt) after one learner step on `groups` (reward lists
    of 4 rollouts, prompts 0, 1, ...), all on-policy."""
    pol = SimPolicy(small_preset(ref_group_size=4, **sim))
    sampler = SimSampler(pol, 0)
    learner = SimLearner(pol, sampler.store, 0)
    ids = np.repeat(np.arange(len(groups)), 4)
    rewards = np.concatenate([np.array(r, float) for r in groups])
    handles = sampler.store.add(SimRollouts(ids, rewards, np.ones(len(ids), np.int64), 0))
    s0 = pol.s0
    learner.update(make_batch(np.arange(len(groups)), [4] * len(groups), handles, rewards))
    return pol.s0 - s0, pol.memo[: len(groups)].copy()


def test_transfer_asymmetry_one_is_twice_the_successes_gradient():
    """beta = 1: the skills receive exactly twice the GRPO gradient of the group's successful
    rollouts, sum_{j: r_j = 1} A_j (r_j - rbar), computed here from the advantages by hand; the
    memorisation keeps the whole group's gradient (beta = 0's)."""
    groups = [[1, 0, 0, 0], [1, 1, 1, 0], [1, 1, 0, 0], [0, 0, 0, 0]]
    cfg = SimConfig()
    expected = 0.0
    for r in groups:
        r = np.array(r, float)
        if r.std() == 0:
            continue
        a = (r - r.mean()) / (r.std(ddof=1) + cfg.adv_eps)
        expected += 2.0 * float((a * (r - r.mean()))[r == 1].sum())
    expected *= cfg.global_gain / (4 / 2.0)
    ds1, memo1 = one_step(groups, transfer_asymmetry=1.0)
    ds0, memo0 = one_step(groups)
    assert ds1 == pytest.approx(expected, rel=1e-9)
    np.testing.assert_allclose(memo1, memo0, rtol=1e-12)
    # a group with one success of 4 teaches the skills 3x its mirror (one failure): (3/4) / (1/4)
    lo, _ = one_step([[1, 0, 0, 0]], transfer_asymmetry=1.0)
    hi, _ = one_step([[1, 1, 1, 0]], transfer_asymmetry=1.0)
    assert lo / hi == pytest.approx(3.0, rel=1e-9)
    assert one_step([[1, 0, 0, 0]])[0] == pytest.approx(one_step([[1, 1, 1, 0]])[0], rel=1e-12)


def test_transfer_asymmetry_expected_signal_matches_monte_carlo():
    """The ceiling's table E[G c] (c = (2 (1 - k/n))^beta) against a Monte Carlo of the learner's own
    group_signal on Bernoulli groups."""
    from rollalloc.sim.roles import expected_group_signal, group_signal

    rng = np.random.default_rng(0)
    n, reps = 8, 40000
    for p in (0.1, 0.5, 0.85):
        r = (rng.random((reps, n)) < p).astype(float)  # (reps, n)
        g = group_signal(r.ravel(), np.full(reps, n), None, 1e-6)  # (reps,)
        c = (2.0 * (1.0 - r.mean(axis=1))) ** 1.5
        mc = float((g * c).mean())
        got = float(expected_group_signal(np.array([p]), n, transfer_asymmetry=1.5)[0])
        assert got == pytest.approx(mc, rel=0.03), p


# ------------------------------------------------------------------ interference, shared rms


def cluster_steps(cfg, signals, repeats=1, energy=None, seed=0):
    """The skills' moves (s_0, s_1..s_K) per step for `repeats` identical steps in which cluster c
    trains one group of signal signals[c] (0: no group), on a 3-cluster pool."""
    pol = SimPolicy(small_preset(num_clusters=3), cfg)
    ids = np.array([np.flatnonzero(pol.cluster == c)[0] for c, u in enumerate(signals) if u])
    u = np.array([u for u in signals if u], float)
    e = None if energy is None else np.full(len(ids), float(energy))
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(repeats):
        before = np.concatenate([[pol.s0], pol.s])
        pol.apply(ids, u, energy=e, rng=rng)
        out.append(np.concatenate([[pol.s0], pol.s]) - before)
    return np.array(out)


def test_interference_lowers_the_other_clusters_by_gamma_times_the_source():
    """gamma: a group moves its own cluster as without interference and every other cluster by
    -gamma times that; with groups in several clusters the moves add (superposition of the
    no-interference model's one-cluster steps). s_0 is untouched by it."""
    base = SimConfig(num_clusters=3)
    gamma = 0.3
    alone = [cluster_steps(base, [2.0 if c == a else 0.0 for c in range(3)])[0] for a in range(3)]
    expected = np.zeros(4)
    for a, d in enumerate(alone):  # d: s_0 and the source's own move, nothing elsewhere
        expected[0] += d[0]
        for b in range(3):
            expected[1 + b] += d[1 + a] if b == a else -gamma * d[1 + a]
    got = cluster_steps(base.replace(interference=gamma), [2.0, 2.0, 2.0])[0]
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-18)
    one = cluster_steps(base.replace(interference=gamma), [2.0, 0.0, 0.0])[0]
    np.testing.assert_allclose(one[2:], -gamma * alone[0][1], rtol=1e-12)
    np.testing.assert_allclose(one[:2], alone[0][:2], rtol=1e-12)


def test_interference_carries_the_sources_noise_scaled_by_gamma():
    """Monte Carlo: a group of cluster 0 with noise moves cluster 1 with gamma^2 the variance of
    its own cluster's move (each skill's noise is drawn on its own, with the variance its signal
    sources give it, as with a transfer matrix)."""
    cfg = SimConfig(num_clusters=3, noise_scale=4.0, interference=0.5)
    steps = cluster_steps(cfg, [1.0, 0.0, 0.0], repeats=20_000, energy=1.0)
    ratio = steps[:, 2].var() / steps[:, 1].var()
    assert ratio == pytest.approx(0.25, rel=0.05)


def test_shared_rms_steps_in_proportion_to_each_skills_signal():
    """optimizer=rms: each skill's own second moment makes every skill step the same size whatever
    its signal; rms_shared (one second moment for the cluster skills) makes the steps proportional
    to the signals, and for equal signals it is the per-skill model exactly."""
    rms = SimConfig(num_clusters=3, optimizer="rms")
    own = cluster_steps(rms, [3.0, 1.0, 0.0], repeats=5)
    shared = cluster_steps(rms.replace(rms_shared=True), [3.0, 1.0, 0.0], repeats=5)
    np.testing.assert_allclose(own[:, 1] / own[:, 2], 1.0, rtol=1e-9)
    np.testing.assert_allclose(shared[:, 1] / shared[:, 2], 3.0, rtol=1e-9)
    assert np.all(shared[:, 3] == 0) and np.all(own[:, 3] == 0)
    np.testing.assert_allclose(shared[:, 0], own[:, 0], rtol=1e-12)  # s_0 keeps its own
    # the first step by hand: v_hat = mean of the squares (9 + 1 + 0) / 3, a / K the skill's scale
    a = SimPolicy(small_preset(num_clusters=3), rms).first_step_signal()
    want = rms.cluster_gain * (a / 3) * np.array([3.0, 1.0]) / np.sqrt(10.0 / 3.0)
    np.testing.assert_allclose(shared[0, 1:3], want, rtol=1e-9)
    eq_own = cluster_steps(rms, [1.0, 1.0, 1.0], repeats=5)
    eq_shared = cluster_steps(rms.replace(rms_shared=True), [1.0, 1.0, 1.0], repeats=5)
    np.testing.assert_allclose(eq_shared, eq_own, rtol=1e-12)


def test_relearn_speeds_up_a_skill_only_while_it_is_below_its_best():
    """relearn r: a cluster skill that interference pushed below its best moves (1 + r) times as
    far on its own group as without relearn; at or above its best it moves the same."""
    cfg = SimConfig(num_clusters=3, interference=0.5)
    for r, factor in ((0.0, 1.0), (3.0, 4.0)):
        pol = SimPolicy(small_preset(num_clusters=3), cfg.replace(relearn=r))
        own = np.flatnonzero(pol.cluster == 1)[:1]
        other = np.flatnonzero(pol.cluster == 0)[:1]
        pol.apply(own, np.array([1.0]))  # s_1 rises: its best so far
        rise = pol.s[1]
        pol.apply(other, np.array([4.0]))  # interference takes s_1 below its best
        assert pol.s[1] < rise
        before = pol.s[1]
        pol.apply(own, np.array([1.0]))
        assert pol.s[1] - before == pytest.approx(factor * rise, rel=1e-9)


def displace_preset(**sim):
    d = {
        "num_prompts": 40,
        "levels": [
            {
                "name": "s",
                "share": 0.5,
                "eval_share": 0.5,
                "pass_rate_histogram": [[0.5, 0.5, 1]],
                "displace": {"l": 2.0},
            },
            {"name": "l", "share": 0.5, "eval_share": 0.5, "pass_rate_histogram": [[0.5, 0.5, 1]]},
        ],
        "sim": {
            "eval_prompts": 20,
            "global_gain": 0.0,
            "cluster_gain": 0.0,
            "memorize_gain": 0.0,
            **sim,
        },
    }
    return preset_from_dict(json.loads(json.dumps(d)), "disp")


def test_displacement_relaxes_to_minus_d_times_the_share_to_the_power():
    """displace_rate r, power k: an update whose signal is a share sigma from level s moves l's
    displacement r of the way to -D sigma^k; repeated, it converges there (geometric series), and
    the held-out and pool pass rates of l move by exactly that logit shift (no skill moves here)."""
    r, k, D = 0.3, 2.0, 2.0
    pol = SimPolicy(displace_preset(displace_rate=r, displace_power=k))
    s_ids = np.flatnonzero(pol.cluster == 0)[:3]
    l_ids = np.flatnonzero(pol.cluster == 1)[:1]
    ids, u = np.concatenate([s_ids, l_ids]), np.array([1.0, 1.0, 1.0, 1.0])  # sigma_s = 3/4
    pol.apply(ids, u)
    assert pol.delta[1] == pytest.approx(r * -D * 0.75**k, rel=1e-12) and pol.delta[0] == 0.0
    for _ in range(200):
        pol.apply(ids, u)
    assert pol.delta[1] == pytest.approx(-D * 0.75**k, rel=1e-9)
    lo = 1.0 / (1.0 + np.exp(-(0.0 - D * 0.75**k)))  # p0 = 0.5: logit 0, shifted
    np.testing.assert_allclose(pol.eval_success_prob()[pol.eval_cluster == 1], lo, rtol=1e-9)
    np.testing.assert_allclose(pol.success_prob(l_ids), lo, rtol=1e-9)
    np.testing.assert_allclose(pol.eval_success_prob()[pol.eval_cluster == 0], 0.5, rtol=1e-12)
    for _ in range(200):  # batches of l alone: the target is 0 again
        pol.apply(l_ids, np.array([1.0]))
    assert abs(pol.delta[1]) < 1e-9
    off = SimPolicy(displace_preset())  # rate 0: nothing moves
    off.apply(ids, u)
    assert np.all(off.delta == 0.0)


def test_displacement_without_displace_rows_is_refused():
    with pytest.raises(ValueError, match="displace_rate > 0 needs a preset with levels"):
        SimPolicy(small_preset(), SimConfig(displace_rate=0.1))


# ------------------------------------------------------------------ mini-batches and update cost


def learner_step(groups, tokens=None, seed=0, **sim):
    """(s_0 move, cluster skills' moves, memorisation, version) after one learner step on `groups`
    (reward lists of 4 rollouts, prompts 0, 1, ...), all on-policy."""
    pol = SimPolicy(small_preset(ref_group_size=4, num_prompts=400, **sim))
    sampler = SimSampler(pol, seed)
    learner = SimLearner(pol, sampler.store, seed)
    ids = np.repeat(np.arange(len(groups)), 4)
    rewards = np.concatenate([np.array(r, float) for r in groups])
    tok = np.ones(len(ids), np.int64) if tokens is None else np.asarray(tokens, np.int64)
    handles = sampler.store.add(SimRollouts(ids, rewards, tok, 0))
    s0, s = pol.s0, pol.s.copy()
    learner.update(make_batch(np.arange(len(groups)), [4] * len(groups), handles, rewards))
    return pol.s0 - s0, pol.s - s, pol.memo[: len(groups)].copy(), pol.version


GROUPS = [[1, 0, 0, 1], [1, 1, 1, 0], [0, 0, 0, 1], [1, 1, 0, 0], [0, 0, 0, 0], [1, 0, 1, 1]] * 2


def test_minibatches_of_a_constant_normaliser_add_up_to_one_update():
    """sgd with Dr. GRPO's constant normaliser is linear in the groups: the step's groups split
    into 4 updates move every skill and memorisation exactly as one update, and the policy
    version (what staleness counts) advances once per step either way."""
    one = learner_step(GROUPS, num_minibatches=1)
    four = learner_step(GROUPS, num_minibatches=4)
    assert one[0] != 0.0
    assert four[0] == pytest.approx(one[0], rel=1e-12)
    np.testing.assert_allclose(four[1], one[1], rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(four[2], one[2], rtol=1e-12)
    assert one[3] == four[3] == 1


def test_minibatches_under_token_mean_each_divide_by_their_own_tokens():
    """The trainer's loss divides each mini-batch by its own completion tokens
    (train/learner.py: one optimiser step per mini-batch; train/loss.py: token-mean). With one
    group per mini-batch (m = G) and unequal tokens, sgd's step is therefore the sum of the
    steps each group makes when it is a batch of its own."""
    tokens = np.repeat(np.arange(1, len(GROUPS) + 1) * 7, 4)  # group g: 7 (g + 1) per rollout
    split = learner_step(GROUPS, tokens, loss_norm="token_mean", num_minibatches=len(GROUPS))[0]
    alone = [
        learner_step([g], [7 * (i + 1)] * 4, loss_norm="token_mean")[0]
        for i, g in enumerate(GROUPS)
    ]
    assert split == pytest.approx(sum(alone), rel=1e-9)
    whole = learner_step(GROUPS, tokens, loss_norm="token_mean")[0]  # one normaliser for all
    assert abs(split - whole) > 0.5 * abs(whole)


def test_update_cost_makes_a_pure_noise_update_lose_c_of_its_size_on_average():
    """With update_cost c, a step of size z costs c z^2 / a: under rms (z^2 ~ a^2 once v has
    settled) an update with no signal loses about gain * c * a on average (a / K for a cluster
    skill), where without the cost zero-mean noise moves nothing on average."""
    cfg = SimConfig(
        global_gain=1e-3,
        cluster_gain=2e-3,
        memorize_gain=0.0,
        optimizer="rms",
        noise_scale=64.0,
        rms_beta=0.99,
    )
    n = 4000

    def moves(c):
        pol = SimPolicy(small_preset(), cfg.replace(update_cost=c))
        rng = np.random.default_rng(0)
        ids = np.arange(64) % pol.num_prompts
        out = []
        for _ in range(n):
            before = np.concatenate([[pol.s0], pol.s])
            pol.apply(ids, np.zeros(64), energy=np.ones(64), rng=rng)
            out.append(np.concatenate([[pol.s0], pol.s]) - before)
        return np.array(out), pol.first_step_signal(), len(pol.s)

    free, a, k = moves(0.0)
    cost = moves(0.5)[0]
    assert np.all(np.abs(free.mean(axis=0)) < 4 * free.std(axis=0) / np.sqrt(n))  # no drift
    settled = (cost - free)[500:].mean(axis=0)  # the same noise draws: the cost alone
    assert settled[0] == pytest.approx(-1e-3 * 0.5 * a, rel=0.05)
    np.testing.assert_allclose(settled[1:], -2e-3 * 0.5 * a / k, rtol=0.05)
    with pytest.raises(ValueError, match="update_cost.*needs optimizer='rms'"):
        SimConfig(update_cost=0.1)  # under sgd a step has no fixed size


def test_with_noise_and_update_cost_a_larger_batch_pays_per_rollout():
    """McCandlish et al.'s reading of a noisy update: with gradient noise each update's useful part
    shrinks while its second-order cost does not, so at equal rollouts fewer, larger batches can
    win; without the cost (zero-mean noise, scale-free steps) more updates always win."""
    hist = ((0.0, 0.0, 0.5), (0.02, 0.98, 0.5))
    sim = dict(num_prompts=4000, ref_group_size=8, global_gain=2e-4, cluster_gain=8e-4)
    sim.update(memorize_gain=0.0, optimizer="rms", noise_scale=32.0, loss_norm="token_mean")
    gain = {}
    for c in (0.0, 0.3):
        preset = small_preset(hist, **sim, update_cost=c, num_minibatches=4)
        for tp in (16, 128):  # the same rollouts: 24 steps of 128 groups
            ev = [run_small("grpo", seed, preset, 24 * 128 // tp, tp)["evals"] for seed in range(3)]
            gain[c, tp] = np.mean(
                [e[-1]["expected_accuracy"] - e[0]["expected_accuracy"] for e in ev]
            )
    assert gain[0.0, 16] > gain[0.0, 128] > 0  # no cost: more updates per rollout win
    assert gain[0.3, 128] > gain[0.3, 16]  # with the cost the larger batch wins


# ------------------------------------------------------------------ fast shared component


def settle(n, updates=20000, **fast):
    """f after `updates` updates of n informative groups each (u = e = 1: S^2 / E = n)."""
    pol = SimPolicy(small_preset(), SimConfig(**fast))
    ids = np.arange(n) % pol.num_prompts
    for _ in range(updates):
        pol.fast_step(ids, np.ones(n), np.ones(n))
    return pol.fast


def test_fast_component_noise_floor_falls_as_one_over_the_informative_groups():
    """Modelled on the noise floor of SGD at a fixed learning rate (Mandt et al. 2017, arXiv
    1704.04289): the stationary excess scales as noise / batch. Setting the move to 0 gives
    F - f = rho B_f E / (r S^2), here rho B_f / (r n) for n groups of u = e = 1: twice the
    informative groups halve the distance at which f settles; without noise (B_f = 0) f reaches
    F, and without damage too."""
    fast = dict(fast_max=0.5, fast_rate=0.5, fast_noise=4000.0, fast_damage=2e-5)
    gap = {n: 0.5 - settle(n, **fast) for n in (8, 16, 32)}
    assert 0 < gap[32] < gap[16] < gap[8]
    assert gap[8] == pytest.approx(2e-5 * 4000.0 / (0.5 * 8), rel=0.01)  # rho B_f / (r n)
    assert gap[8] / gap[16] == pytest.approx(2.0, rel=0.02)
    assert gap[16] / gap[32] == pytest.approx(2.0, rel=0.02)
    assert settle(8, **dict(fast, fast_noise=0.0)) == pytest.approx(0.5, abs=1e-12)
    assert settle(8, **dict(fast, fast_damage=0.0)) == pytest.approx(0.5, abs=1e-6)


def test_fast_component_learns_nothing_from_an_update_without_signal():
    pol = SimPolicy(
        small_preset(), SimConfig(fast_max=0.5, fast_rate=0.5, fast_noise=4.0, fast_damage=0.1)
    )
    pol.fast_step(np.arange(8), np.zeros(8), np.zeros(8))  # eight zero-variance groups
    assert pol.fast == 0.0


def test_fast_component_moves_once_per_trainer_update_and_lifts_every_learnable_prompt():
    """fast_updates m: one learner step makes m moves of f. Noise-free, each move learns the
    share r of what is left: after m moves f = F (1 - (1 - r)^m) (a geometric series); and every
    learnable prompt's logit, pool and held-out, is up by exactly f."""
    for m in (1, 4):
        pol = SimPolicy(
            small_preset(ref_group_size=4, fast_max=0.8, fast_rate=0.25, fast_updates=m)
        )
        sampler = SimSampler(pol, 0)
        learner = SimLearner(pol, sampler.store, 0)
        before = pol.eval_success_prob(), pol.success_prob(np.arange(pol.num_prompts))
        groups = GROUPS
        ids = np.repeat(np.arange(len(groups)), 4)
        rewards = np.concatenate([np.array(r, float) for r in groups])
        handles = sampler.store.add(SimRollouts(ids, rewards, np.ones(len(ids), np.int64), 0))
        twin = SimPolicy(small_preset(ref_group_size=4))
        twin_sampler = SimSampler(twin, 0)
        twin_learner = SimLearner(twin, twin_sampler.store, 0)
        th = twin_sampler.store.add(SimRollouts(ids, rewards, np.ones(len(ids), np.int64), 0))
        stats = learner.update(
            make_batch(np.arange(len(groups)), [4] * len(groups), handles, rewards)
        )
        twin_learner.update(make_batch(np.arange(len(groups)), [4] * len(groups), th, rewards))
        assert stats["fast"] == pytest.approx(0.8 * (1.0 - 0.75**m), rel=1e-12)
        logit = lambda p: np.log(p / (1.0 - p))  # noqa: E731
        np.testing.assert_allclose(
            logit(pol.eval_success_prob()) - logit(twin.eval_success_prob()), pol.fast, rtol=1e-6
        )
        ids_all = np.arange(pol.num_prompts)
        np.testing.assert_allclose(
            logit(pol.success_prob(ids_all)) - logit(twin.success_prob(ids_all)),
            pol.fast,
            rtol=1e-6,
        )
        assert not np.allclose(before[0], pol.eval_success_prob())


def test_fast_component_off_leaves_the_runs_unchanged_and_bad_values_are_refused():
    base = dict(ref_group_size=8, global_gain=2e-3, cluster_gain=8e-3)
    fast = dict(fast_rate=0.2, fast_noise=16.0, fast_damage=1e-3, fast_updates=4)
    a = run_small("grpo", 1, small_preset(**base), 6)
    b = run_small("grpo", 1, small_preset(**base, **fast, fast_max=0.3), 6)
    c = run_small("grpo", 1, small_preset(**base, **fast), 6)  # fast_max 0: off
    assert [e["accuracy"] for e in a["evals"]] != [e["accuracy"] for e in b["evals"]]
    assert [e["accuracy"] for e in a["evals"]] == [e["accuracy"] for e in c["evals"]]
    assert "fast" not in c["steps"][-1]["learner"] and b["steps"][-1]["learner"]["fast"] > 0
    bads = [{"fast_rate": 1.5}, {"fast_max": -1.0}, {"fast_updates": 0}]
    bads += [{"fast_noise": -1.0}, {"fast_damage": -1.0}]
    for bad in bads:
        with pytest.raises(ValueError, match=next(iter(bad))):
            SimConfig(**bad)


def test_fast_component_reaches_a_prompt_through_its_plasticity_only():
    """A prompt of plasticity lambda gains lambda f (an unlearnable one nothing), and its groups
    count toward S and E as much: a batch of unlearnable groups leaves f where it is. The
    ceiling oracle refuses the component (its value does not model how a batch moves f)."""
    cfg = SimConfig(unlearnable_fraction=0.5, fast_max=0.5, fast_rate=0.5, fast_noise=4.0)
    pol = SimPolicy(small_preset(((0.0, 0.0, 0.6), (0.3, 0.7, 0.4))), cfg)
    dead, live = np.flatnonzero(pol.learnable == 0)[:8], np.flatnonzero(pol.learnable > 0)[:8]
    assert len(dead) == len(live) == 8
    pol.fast_step(dead, np.ones(8), np.ones(8))
    assert pol.fast == 0.0
    before = pol.success_prob(np.arange(pol.num_prompts))
    pol.fast_step(live, np.ones(8), np.ones(8))
    mixed = SimPolicy(small_preset(((0.0, 0.0, 0.6), (0.3, 0.7, 0.4))), cfg)
    mixed.fast_step(np.concatenate([live, dead]), np.ones(16), np.ones(16))
    assert pol.fast > 0 and mixed.fast == pol.fast  # the dead groups add to neither S nor E
    after = pol.success_prob(np.arange(pol.num_prompts))
    np.testing.assert_array_equal(after[pol.learnable == 0], before[pol.learnable == 0])
    assert np.all(after[pol.learnable > 0] > before[pol.learnable > 0])
    from rollalloc.sim.oracle import heldout_gain_weight

    with pytest.raises(ValueError, match="fast_max must be 0"):
        heldout_gain_weight(pol)


# ------------------------------------------------------------------ wear from noisy updates


def test_wear_follows_its_geometric_series_and_one_group_wears_more_than_sixty_four():
    """n informative groups of u = e = 1 make c^2 = n / (n + B_w) (S = n, E = n). Constant
    updates give w_t = omega (1 - c^2) (1 - (1 - h)^t) / h, the sum of a geometric series, so an
    update of one group settles at (64 + B_w) / (1 + B_w) times the wear of an update of 64 (the
    ratio of their noise shares B_w / (n + B_w))."""
    omega, B, h, t = 0.02, 16.0, 0.05, 37
    settled = {}
    for n in (1, 64):
        pol = SimPolicy(small_preset(), SimConfig(wear_rate=omega, wear_noise=B, wear_heal=h))
        for _ in range(t):
            pol.wear_step(np.ones(n), np.ones(n))
        noise_share = B / (n + B)
        assert pol.wear == pytest.approx(omega * noise_share * (1 - (1 - h) ** t) / h, rel=1e-12)
        for _ in range(2000):
            pol.wear_step(np.ones(n), np.ones(n))
        settled[n] = pol.wear
    assert settled[1] / settled[64] == pytest.approx((64 + B) / (1 + B), rel=1e-9)
    pol = SimPolicy(small_preset(), SimConfig(wear_rate=omega, wear_noise=B, wear_heal=h))
    pol.wear_step(np.zeros(8), np.zeros(8))  # eight zero-variance groups: no gradient, no wear
    assert pol.wear == 0.0
    clean = SimPolicy(small_preset(), SimConfig(wear_rate=omega, wear_noise=0.0, wear_heal=h))
    clean.wear_step(np.ones(4), np.ones(4))  # B_w = 0: no update is noise
    assert clean.wear == 0.0


def test_wear_lowers_every_prompt_by_w_in_logits_whatever_its_plasticity():
    """Unlike the fast component (reached through plasticity), wear moves every prompt: the
    unlearnable ones and the learnable ones, pool and held-out, each by exactly w in logits."""
    cfg = SimConfig(unlearnable_fraction=0.5, wear_rate=0.3, wear_noise=4.0, wear_heal=0.0)
    hist = ((0.0, 0.0, 0.6), (0.3, 0.7, 0.4))
    pol, twin = SimPolicy(small_preset(hist), cfg), SimPolicy(small_preset(hist), cfg)
    ids = np.arange(pol.num_prompts)
    pol.wear_step(np.ones(2), np.ones(2))  # c^2 = 2 / 6: w = 0.3 * 2 / 3
    assert pol.wear == pytest.approx(0.2, rel=1e-12)
    logit = lambda p: np.log(p / (1.0 - p))  # noqa: E731
    for got, ref in (
        (pol.success_prob(ids), twin.success_prob(ids)),
        (pol.eval_success_prob(), twin.eval_success_prob()),
    ):
        np.testing.assert_allclose(logit(ref) - logit(got), 0.2, rtol=1e-6)
    assert np.any(pol.learnable == 0) and np.any(pol.learnable > 0)
    from rollalloc.sim.oracle import heldout_gain_weight

    with pytest.raises(ValueError, match="wear_rate must be 0"):
        heldout_gain_weight(pol)


def test_wear_takes_the_trainers_updates_each_on_a_share_of_a_steps_rollouts():
    """A step of one group makes fast_updates = m updates, each with S / m and E / m (the
    trainer splits the rollouts, however few, into its m mini-batches): c^2 = S^2 / (S^2 +
    m B_w E), m times, with S and E the step's own figures as the learner reports them."""
    omega, B, h = 0.05, 3.0, 0.2
    for m in (1, 4):
        pol = SimPolicy(
            small_preset(
                ref_group_size=4, wear_rate=omega, wear_noise=B, wear_heal=h, fast_updates=m
            )
        )
        sampler = SimSampler(pol, 0)
        learner = SimLearner(pol, sampler.store, 0)
        rewards = np.array([1.0, 0.0, 0.0, 1.0])
        handles = sampler.store.add(
            SimRollouts(np.zeros(4, np.int64), rewards, np.ones(4, np.int64), 0)
        )
        stats = learner.update(make_batch(np.array([0]), [4], handles, rewards))
        S, E = stats["signal"], stats["noise_energy"]
        assert S > 0 and E > 0
        noise_share = m * B * E / (S**2 + m * B * E)
        want = sum(omega * noise_share * (1 - h) ** j for j in range(m))
        assert stats["wear"] == pytest.approx(want, rel=1e-12)


def test_wear_in_prompts_counts_the_effective_number_of_prompts():
    """wear_unit='prompts': c^2 = n_eff / (n_eff + B_w), n_eff = (sum u)^2 / sum u^2 (the
    participation ratio). Eight groups of equal signal are 8 prompts, whatever their size; one
    group of 8x the rollouts beside seven of 1x (Knapsack-RL's shape) is about 3 of them,
    though its rollouts' noise energy is that of about 17 reference groups. Checked on one learner
    step of groups of 4 and of 32 rollouts, against a count of the rollouts' successes."""
    omega, B = 0.1, 2.0

    def step_wear(unit, sizes, **sim):
        pol = SimPolicy(
            small_preset(ref_group_size=4, wear_rate=omega, wear_noise=B, wear_unit=unit, **sim)
        )
        sampler = SimSampler(pol, 0)
        learner = SimLearner(pol, sampler.store, 0)
        ids = np.repeat(np.arange(len(sizes)), sizes)
        rewards = np.concatenate([np.tile([1.0, 0.0, 0.0, 1.0], n // 4) for n in sizes])
        h = sampler.store.add(SimRollouts(ids, rewards, np.ones(len(ids), np.int64), 0))
        return learner.update(make_batch(np.arange(len(sizes)), sizes, h, rewards))["wear"]

    # half successes in every group: each group's signal is proportional to its rollouts
    equal = step_wear("prompts", [4] * 8)
    assert equal == pytest.approx(omega * B / (8 + B), rel=1e-9)
    assert step_wear("prompts", [32] * 8) == pytest.approx(equal, rel=1e-9)
    # a half-successful group of n: G = n sigma^2 / std with the unbiased std (GRPO's logit
    # gradient), so a group of 32 carries 9.1 groups of 4 (the std's n / (n - 1))
    sig = {n: n * 0.25 / (np.sqrt(0.25 * n / (n - 1)) + 1e-6) for n in (4, 32)}
    n_eff = (sig[32] + 7 * sig[4]) ** 2 / (sig[32] ** 2 + 7 * sig[4] ** 2)
    assert 2.5 < n_eff < 3.5  # about 3 of the 8
    assert step_wear("prompts", [32] + [4] * 7) == pytest.approx(omega * B / (n_eff + B), rel=1e-9)
    # the trainer's m updates each hold 1/m of every group's rollouts: n_eff is the same in each
    got = step_wear("prompts", [32] + [4] * 7, wear_heal=0.1, fast_updates=4)
    want = sum(omega * B / (n_eff + B) * 0.9**j for j in range(4))
    assert got == pytest.approx(want, rel=1e-9)
    # in rollouts the large group counts as 8 groups: less wear than the same step in prompts
    assert step_wear("rollouts", [32] + [4] * 7) < step_wear("rollouts", [4] * 8)
    with pytest.raises(ValueError, match=r"wear_unit.*'prompts'"):
        SimConfig(wear_unit="groups")


def test_wear_off_leaves_the_runs_unchanged_and_bad_values_are_refused():
    base = dict(ref_group_size=8, global_gain=2e-3, cluster_gain=8e-3)
    a = run_small("grpo", 1, small_preset(**base), 6)
    b = run_small("grpo", 1, small_preset(**base, wear_rate=0.05, wear_noise=8.0, wear_heal=0.1), 6)
    c = run_small("grpo", 1, small_preset(**base, wear_noise=8.0, wear_heal=0.1), 6)  # rate 0: off
    assert [e["accuracy"] for e in a["evals"]] != [e["accuracy"] for e in b["evals"]]
    assert [e["accuracy"] for e in a["evals"]] == [e["accuracy"] for e in c["evals"]]
    assert "wear" not in c["steps"][-1]["learner"] and b["steps"][-1]["learner"]["wear"] > 0
    for bad in ({"wear_rate": -0.1}, {"wear_noise": -1.0}, {"wear_heal": 1.5}, {"wear_rate": True}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            SimConfig(**bad)


# ------------------------------------------------------------------ repeated data (repeat_decay)


def repeat_steps(visits_of, delta, steps, **sim):
    """s_0's move at each of `steps` learner steps, each one group [1, 0, 0, 1] of the prompt
    visits_of(t) (on-policy, sgd), and the memorisation of prompts 0..3 at the end."""
    pol = SimPolicy(small_preset(ref_group_size=4, repeat_decay=delta, **sim))
    sampler = SimSampler(pol, 0)
    learner = SimLearner(pol, sampler.store, 0)
    moves = []
    for t in range(steps):
        i = visits_of(t)
        rewards = np.array([1.0, 0.0, 0.0, 1.0])
        h = sampler.store.add(
            SimRollouts(np.full(4, i), rewards, np.ones(4, np.int64), pol.version)
        )
        s0 = pol.s0
        learner.update(make_batch(np.array([i]), [4], h, rewards))
        moves.append(pol.s0 - s0)
    return np.array(moves), pol.memo[:4].copy()


def test_repeat_decay_the_kth_visit_transfers_exp_minus_delta_k():
    """Muennighoff et al.'s form, restated: the k-th repetition of a datum is worth exp(-k / R*)
    of a fresh one. One prompt trained six times: the skill moves fall as exp(-delta k) of the
    first (k = 0..5), the same group trained on six different prompts moves alike each time, and
    memorisation keeps the whole signal (delta 0's)."""
    delta = 0.3
    same, memo_same = repeat_steps(lambda t: 0, delta, 6)
    fresh, _ = repeat_steps(lambda t: t % 4 if t < 4 else 0, delta, 4)
    off, memo_off = repeat_steps(lambda t: 0, 0.0, 6)
    np.testing.assert_allclose(same / same[0], [np.exp(-delta * k) for k in range(6)], rtol=1e-9)
    np.testing.assert_allclose(fresh, fresh[0], rtol=1e-9)  # four first visits
    np.testing.assert_allclose(off, off[0], rtol=1e-9)
    assert same[0] == pytest.approx(off[0], rel=1e-12)
    np.testing.assert_allclose(memo_same, memo_off, rtol=1e-12)
    # with a grace of 2 visits the decay starts at the 4th: 1, 1, 1, e^-d, e^-2d, e^-3d
    graced, _ = repeat_steps(lambda t: 0, delta, 6, repeat_grace=2)
    want = [np.exp(-delta * max(0, k - 2)) for k in range(6)]
    np.testing.assert_allclose(graced / graced[0], want, rtol=1e-9)
    for bad in ({"repeat_grace": -1}, {"repeat_grace": 1.5}, {"repeat_decay": -0.1}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            SimConfig(**bad)


def test_repeat_decay_counts_rollouts_so_one_large_group_is_two_visits():
    """Exposures are rollouts: one group of 8 on a fresh prompt keeps (1 + exp(-delta)) / 2 of
    what it would transfer without the effect, as two groups of 4 on it do (the first fresh, the
    second on its 2nd visit)."""
    delta = 0.4

    def s0_move(groups, d):
        pol = SimPolicy(small_preset(ref_group_size=4, repeat_decay=d))
        sampler = SimSampler(pol, 0)
        learner = SimLearner(pol, sampler.store, 0)
        s0 = pol.s0
        for rewards in groups:
            r = np.array(rewards, float)
            h = sampler.store.add(
                SimRollouts(np.full(len(r), 5), r, np.ones(len(r), np.int64), pol.version)
            )
            learner.update(make_batch(np.array([5]), [len(r)], h, r))
        return pol.s0 - s0

    share = (1.0 + np.exp(-delta)) / 2.0
    for groups in ([[1, 0, 0, 1, 1, 0, 0, 1]], [[1, 0, 0, 1], [1, 0, 0, 1]]):
        assert s0_move(groups, delta) == pytest.approx(share * s0_move(groups, 0.0), rel=1e-9)


def test_repeat_unit_visits_counts_a_step_as_one_visit_whatever_its_group_size():
    """repeat_unit='visits' (session 39): visit k of a prompt is its k-th step, so one group of 8
    on a fresh prompt (reference 4) transfers all it would without the effect (visit 0, weight 1),
    where 'rollouts' counts it as visits 0 and 1 ((1 + exp(-delta)) / 2); a group of 8 in a later
    step is visit 1 (exp(-delta)), and groups of the reference size weigh alike in both units."""
    delta = 0.4

    def s0_moves(groups, d, unit):
        pol = SimPolicy(small_preset(ref_group_size=4, repeat_decay=d, repeat_unit=unit))
        sampler = SimSampler(pol, 0)
        learner = SimLearner(pol, sampler.store, 0)
        moves = []
        for rewards in groups:
            r = np.array(rewards, float)
            h = sampler.store.add(
                SimRollouts(np.full(len(r), 5), r, np.ones(len(r), np.int64), pol.version)
            )
            s0 = pol.s0
            learner.update(make_batch(np.array([5]), [len(r)], h, r))
            moves.append(pol.s0 - s0)
        return np.array(moves)

    big = [[1, 0, 0, 1, 1, 0, 0, 1]] * 2  # two steps, one group of 8 each
    ref = s0_moves(big, 0.0, "rollouts")
    np.testing.assert_allclose(
        s0_moves(big, delta, "visits") / ref, [1.0, np.exp(-delta)], rtol=1e-9
    )
    by_rollouts = [(1 + np.exp(-delta)) / 2, (np.exp(-2 * delta) + np.exp(-3 * delta)) / 2]
    np.testing.assert_allclose(s0_moves(big, delta, "rollouts") / ref, by_rollouts, rtol=1e-9)
    small = [[1, 0, 0, 1]] * 3
    np.testing.assert_allclose(
        s0_moves(small, delta, "visits"), s0_moves(small, delta, "rollouts"), rtol=1e-12
    )
    with pytest.raises(ValueError, match="repeat_unit.*'rollouts', 'visits'"):
        SimConfig(repeat_unit="groups")


def test_repeat_decay_counts_a_copy_as_its_original_and_survives_save_and_load():
    """Copies of one distinct prompt (Level.distinct) share its visits; the count is state."""
    preset = preset_from_dict(
        {
            "num_prompts": 200,
            "levels": [
                {"name": "rep", "share": 1.0, "eval_share": 1.0, "distinct": 3,
                 "pass_rate_histogram": [[0.3, 0.7, 1.0]]},
            ],
            "sim": {"eval_prompts": 50, "repeat_decay": 0.5, "ref_group_size": 4},
        },
        "rep",
    )  # fmt: skip
    pol = SimPolicy(preset)
    a, b = np.flatnonzero(pol.original == pol.original[0])[:2]
    assert a != b
    pol.count_exposures(np.array([a, a]), np.array([4, 4]))  # two groups in one call: 8 rollouts
    np.testing.assert_allclose(pol.repeat_weight(np.array([b]), np.array([4])), [np.exp(-1.0)])
    twin = SimPolicy(preset)
    twin.load_state_dict(pol.state_dict())
    np.testing.assert_array_equal(twin.exposures, pol.exposures)
    from rollalloc.sim.oracle import heldout_gain_weight

    with pytest.raises(ValueError, match="repeat_decay"):
        heldout_gain_weight(pol)
    with pytest.raises(ValueError, match="repeat_decay"):
        SimConfig(repeat_decay=-0.1)


def test_repeat_unit_visits_counts_two_copies_in_one_step_as_one_visit():
    """Two copies of one original, a group of 4 each in one step (reference 4): 'rollouts' counts
    8 exposures, visits 0 and 1 (each group (1 + e^-d) / 2), 'visits' one visit (1 each); after
    that step the next group on a copy is visit 2 (e^-2d) or visit 1 (e^-d); with repeat_memory
    the 'visits' count fades like the rollouts' (half of one visit after h steps)."""
    d = 0.5

    def pol_with(unit, **extra):
        preset = copies_preset(200, 3)
        sim = {**preset.to_dict()["sim"], "repeat_decay": d, "repeat_unit": unit, **extra}
        return SimPolicy(preset_from_dict({**preset.to_dict(), "sim": sim}, "rep"))

    for unit, first, then in (
        ("rollouts", (1 + np.exp(-d)) / 2, np.exp(-2 * d)),
        ("visits", 1.0, np.exp(-d)),
    ):
        pol = pol_with(unit)
        a, b = np.flatnonzero(pol.original == pol.original[0])[:2]
        pair, four = np.array([a, b]), np.array([4, 4])
        np.testing.assert_allclose(pol.repeat_weight(pair, four), [first, first], rtol=1e-12)
        pol.count_exposures(pair, four)
        np.testing.assert_allclose(pol.repeat_weight(np.array([a]), np.array([4])), [then])
    pol = pol_with("visits", repeat_memory=3.0)
    a = int(np.flatnonzero(pol.original == pol.original[0])[0])
    pol.count_exposures(np.array([a]), np.array([12]))  # one visit, whatever the 12 rollouts
    pol.version += 3  # three steps later: half a visit left
    assert pol.exposures_now(pol.original[[a]])[0] == pytest.approx(2.0)  # 4 rollouts / 2


def copies_preset(num_prompts, distinct):
    """One level of `num_prompts` prompts on `distinct` originals (copies share their visits),
    p in [0.3, 0.7], groups of 4 as the reference."""
    level = {"name": "rep", "share": 1.0, "eval_share": 1.0, "distinct": distinct,
             "pass_rate_histogram": [[0.3, 0.7, 1.0]]}  # fmt: skip
    d = {"num_prompts": num_prompts, "levels": [level],
         "sim": {"eval_prompts": 20, "ref_group_size": 4}}  # fmt: skip
    return preset_from_dict(d, "rep")


def test_repeat_weight_matches_counting_every_exposure_one_by_one():
    """The closed form against a brute-force count: every rollout of a step's block (a prompt's
    original, its copies' groups together, numbered from the rollouts trained before) weighs
    exp(-delta max(0, visit - grace)), visit = its number // ref_group_size; a group gets its
    block's mean; with repeat_harm eta each weighs w - eta (1 - w). Random steps with copies, empty
    groups, prior exposures, grace, delta and eta; copies
    in one step pay as one group of their summed size, in either order; delta 1e-9 is within
    1e-8 of no effect (no 0/0)."""
    preset = copies_preset(60, 7)
    rng = np.random.default_rng(0)
    for trial in range(200):
        delta = float(rng.choice([1e-9, 0.05, 0.3, 1.0, 3.0]))
        grace = int(rng.integers(0, 4))
        eta = float(
            rng.choice([0.0, 0.0, 0.1, 1.0])
        )  # repeat_harm: an exposure weighs w - eta(1-w)
        sim = replace(preset.sim, repeat_decay=delta, repeat_grace=grace, repeat_harm=eta)
        pol = SimPolicy(replace(preset, sim=sim))
        pol.exposures[:] = rng.integers(0, 40, size=len(pol.exposures))
        ids = rng.integers(0, 60, size=int(rng.integers(1, 9)))
        sizes = rng.integers(0, 13, size=len(ids))
        want = np.empty(len(ids))
        for g, i in enumerate(ids):
            o = pol.original[i]
            block = sizes[pol.original[ids] == o].sum()
            start = int(pol.exposures[o])
            w = [np.exp(-delta * max(0, e // 4 - grace)) for e in range(start, start + block)]
            a = [x - eta * (1.0 - x) for x in w]
            want[g] = np.mean(a) if block else np.nan  # an empty block: no signal to weigh
        got, full = pol.repeat_weight(ids, sizes), ~np.isnan(want)
        np.testing.assert_allclose(got[full], want[full], rtol=1e-9, atol=1e-12, err_msg=str(trial))
    pol = SimPolicy(replace(preset, sim=replace(preset.sim, repeat_decay=0.3)))
    a, b = np.flatnonzero(pol.original == pol.original[0])[:2]
    one = pol.repeat_weight(np.array([a]), np.array([8]))
    for pair in ([a, b], [b, a]):
        np.testing.assert_allclose(
            pol.repeat_weight(np.array(pair), np.array([4, 4])), [one[0]] * 2
        )
    tiny = SimPolicy(replace(preset, sim=replace(preset.sim, repeat_decay=1e-9)))
    tiny.exposures[:] = 400
    assert tiny.repeat_weight(np.array([0]), np.array([4]))[0] == pytest.approx(1.0, abs=1e-6)


def test_repeat_memory_fades_each_rollout_by_its_age_and_weighs_the_span_it_covers():
    """repeat_memory h: a rollout trained t learner steps ago counts 2^(-t / h) of an exposure, so
    a prompt's count at a step is the sum over its past rollouts of their faded weights (counted
    here from the training history, event by event), and a block of N new rollouts on count R
    weighs the mean of w(floor(x / m)) over x in [R, R + N) (integrated here on a fine grid).
    Random histories of groups on a few prompts with copies."""
    preset = copies_preset(30, 5)
    rng = np.random.default_rng(1)
    for trial in range(40):
        delta, grace, h = (
            float(rng.choice([0.2, 1.0])),
            int(rng.integers(0, 3)),
            float(rng.choice([0.5, 3.0, 20.0])),
        )
        sim = replace(preset.sim, repeat_decay=delta, repeat_grace=grace, repeat_memory=h)
        pol = SimPolicy(replace(preset, sim=sim))
        history = []  # (version trained, original, rollouts)
        for step in range(int(rng.integers(1, 12))):
            ids = rng.integers(0, 30, size=int(rng.integers(1, 5)))
            sizes = rng.integers(1, 9, size=len(ids))
            got = pol.repeat_weight(ids, sizes)
            for g, i in enumerate(ids):
                o = pol.original[i]
                R = sum(r * 2.0 ** (-(pol.version - v) / h) for v, oo, r in history if oo == o)
                N = sizes[pol.original[ids] == o].sum()
                x = R + (np.arange(200_000) + 0.5) * N / 200_000  # midpoints over [R, R + N)
                want = np.mean(np.exp(-delta * np.maximum(np.floor(x / 4) - grace, 0)))
                assert got[g] == pytest.approx(want, rel=1e-3), (trial, step)
            pol.count_exposures(ids, sizes)
            history += [(pol.version, pol.original[i], n) for i, n in zip(ids, sizes)]
            pol.version += int(rng.integers(1, 3))  # a learner step (or two) later
    with pytest.raises(ValueError, match="repeat_memory"):
        SimConfig(repeat_memory=5.0)  # needs repeat_decay
    with pytest.raises(ValueError, match="repeat_memory"):
        SimConfig(repeat_decay=0.1, repeat_memory=-1.0)
    for name in ("repeat_memory", "repeat_harm"):
        with pytest.raises(ValueError, match=name):
            SimConfig(repeat_decay=0.1, **{name: float("inf")})
    # a state saved before repeat_memory existed (no exposure_version) is not faded on load
    pol = SimPolicy(replace(preset, sim=replace(preset.sim, repeat_decay=0.2, repeat_memory=5.0)))
    pol.version, pol.exposures[:] = 7, 9.0
    old = {k: v for k, v in pol.state_dict().items() if k != "exposure_version"}
    twin = SimPolicy(replace(preset, sim=replace(preset.sim, repeat_decay=0.2, repeat_memory=5.0)))
    twin.load_state_dict(old)
    np.testing.assert_allclose(twin.exposures_now(np.arange(5)), 9.0)


def test_repeat_decay_makes_a_narrow_ranking_pay_less_than_a_wide_one():
    """End to end: on a pool where every prompt stays near p = 1/2 (transfer only), training the
    same 8 prompts over and over moves the held-out set as much as 8 fresh prompts a step without
    the effect, and less with it; the spread-out batch barely notices."""

    def held_out_gain(delta, narrow, **fast):
        sim = dict(ref_group_size=4, repeat_decay=delta, global_gain=1e-3, cluster_gain=0.0,
                   memorize_gain=0.0)  # fmt: skip
        pol = SimPolicy(small_preset(((0.45, 0.55, 1.0),), num_prompts=800, **{**sim, **fast}))
        sampler = SimSampler(pol, 0)
        learner = SimLearner(pol, sampler.store, 0)
        before = pol.eval_success_prob().mean()
        for t in range(40):
            ids = np.arange(8) if narrow else np.arange(8 * t, 8 * t + 8)
            rewards = np.tile([1.0, 0.0, 0.0, 1.0], 8)
            h = sampler.store.add(
                SimRollouts(np.repeat(ids, 4), rewards, np.ones(32, np.int64), pol.version)
            )
            learner.update(make_batch(ids, [4] * 8, h, rewards))
        return pol.eval_success_prob().mean() - before

    assert held_out_gain(0.0, True) == pytest.approx(held_out_gain(0.0, False), rel=1e-9)
    assert held_out_gain(0.2, False) == pytest.approx(held_out_gain(0.0, False), rel=1e-9)
    narrow = held_out_gain(0.2, True)
    # sum_k exp(-0.2 k) over 40 visits / 40: the narrow batch's share of a fresh one's signal
    share = sum(np.exp(-0.2 * k) for k in range(40)) / 40
    assert narrow == pytest.approx(share * held_out_gain(0.0, True), rel=0.05)
    # the fast component (fast_max) sees the whole signal: alone, repeats move it as fresh prompts do
    fast = dict(fast_max=0.5, fast_rate=0.05, fast_noise=8.0, fast_damage=1e-3, global_gain=0.0)
    alone = held_out_gain(0.0, True, **fast)
    assert alone > 0
    assert held_out_gain(0.2, True, **fast) == pytest.approx(alone, rel=1e-12)
    assert held_out_gain(0.2, False, **fast) == pytest.approx(alone, rel=1e-12)
    # repeat_harm: far past the grace a visit unteaches. Each of the narrow batch's visits k weighs
    # w_k - eta (1 - w_k) (counted here from the definition), so with eta large enough the 8
    # prompts trained 40 times end below the start, while fresh prompts never notice it
    harm = dict(repeat_harm=0.5)
    a = [np.exp(-0.2 * k) - 0.5 * (1 - np.exp(-0.2 * k)) for k in range(40)]
    assert sum(a) < 0
    assert held_out_gain(0.2, True, **harm) < 0
    assert held_out_gain(0.2, True, **harm) == pytest.approx(
        np.mean(a) * held_out_gain(0.0, True), rel=0.05
    )
    assert held_out_gain(0.2, False, **harm) == pytest.approx(held_out_gain(0.0, False), rel=1e-9)
    with pytest.raises(ValueError, match="repeat_harm"):
        SimConfig(repeat_harm=0.5)  # needs repeat_decay
    with pytest.raises(ValueError, match="repeat_harm"):
        SimConfig(repeat_decay=0.1, repeat_harm=-0.1)


MEMORY_PRESET = Path(__file__).parents[2] / "benchmarks/presets/testbed-default-s34-memory.json"


def test_a_kept_part_is_the_same_prompts_and_trains_only_them():
    """SimPolicy.keep (the trainer's pool_size / pool_pick in the simulator): the kept prompts keep
    their pass rates and levels, the held-out set is untouched, a run trains only the part, and
    keeping every prompt in order changes nothing (the run without a part is the reference)."""
    pre = load_preset(MEMORY_PRESET)
    full = SimPolicy(pre)
    p = full.success_prob(np.arange(full.num_prompts))
    ids = np.array([17, 3, 900, 4000, 2])
    part = SimPolicy(pre)
    part.keep(ids)
    np.testing.assert_array_equal(part.success_prob(np.arange(5)), p[ids])
    np.testing.assert_array_equal(part.cluster, full.cluster[ids])
    np.testing.assert_array_equal(part.eval_success_prob(), full.eval_success_prob())
    # copies stay copies: two kept prompts share a memorisation exactly when they did before
    same = full.original[ids][:, None] == full.original[ids][None, :]
    np.testing.assert_array_equal(part.original[:, None] == part.original[None, :], same)
    # ... and an original's label is itself, as memorisation's lazy update assumes
    mid = SimPolicy(pre)
    mid.keep(mid.nearest_half(512))
    assert (np.bincount(mid.original) > 1).any()  # the part holds copies
    np.testing.assert_array_equal(mid.original[mid.original], mid.original)
    assert mid.rms_scale == pytest.approx(full.first_step_signal())  # the full pool's step size
    kw = dict(budget_rollouts=8192, eval_every_rollouts=4096,
              options=strategy_options("grpo", train_prompts=64, group_size=8))  # fmt: skip
    plain = simulate_run("grpo", pre, 3, **kw)
    every = simulate_run("grpo", pre, 3, part=lambda pol: np.arange(pol.num_prompts), **kw)
    assert [e["accuracy"] for e in every["evals"]] == [e["accuracy"] for e in plain["evals"]]
    r = simulate_run("grpo", pre, 3, part=lambda pol: pol.nearest_half(100), **kw)
    assert r["concentration"]["prompts_seen"] <= 100
    with pytest.raises(ValueError, match="distinct prompt ids"):
        SimPolicy(pre).keep(np.array([1, 1]))


def test_nearest_half_against_sorting_each_level_by_hand():
    """nearest_half: every kept prompt at least as near 1/2 as every dropped one (by_level: within
    its level, each level holding its share of the pool within one prompt)."""
    pol = SimPolicy(load_preset(MEMORY_PRESET))
    n = pol.num_prompts
    d = np.abs(pol.success_prob(np.arange(n)) - 0.5)
    kept = pol.nearest_half(300)
    dropped = np.setdiff1d(np.arange(n), kept)
    assert len(kept) == 300 and d[kept].max() <= d[dropped].min()
    kept = pol.nearest_half(300, by="level")
    assert len(kept) == 300
    for c in np.unique(pol.cluster):
        mine = np.flatnonzero(pol.cluster == c)
        k = np.intersect1d(mine, kept)
        assert abs(len(k) - 300 * len(mine) / n) < 1
        assert d[k].max() <= d[np.setdiff1d(mine, k)].min()


def test_answer_classes_sort_the_pool_by_p_and_change_nothing_else():
    """answer_classes: K classes of equal pool share (the pool's quantiles), a copy in its
    original's class; with no noise the classes sort the pool by p; the pool, the held-out set and
    a run are the same with classes as without (they only add the column `answer`)."""
    pre = load_preset(MEMORY_PRESET)
    plain = SimPolicy(pre)
    cfg = pre.sim.replace(answer_classes=6, answer_noise=0.0)
    pol = SimPolicy(replace(pre, sim=cfg))
    np.testing.assert_array_equal(pol.initial_pass_rate, plain.initial_pass_rate)
    np.testing.assert_array_equal(pol.eval_success_prob(), plain.eval_success_prob())
    counts = np.bincount(pol.answer_class, minlength=6)
    # copies share their original's class, so a share is exact up to the copies of one original
    assert counts.max() - counts.min() <= np.bincount(pol.original).max() + 1
    noisy = SimPolicy(replace(pre, sim=cfg.replace(answer_noise=0.7)))
    assert (np.bincount(noisy.original) > 1).any()  # the preset's 2x1d has copies
    np.testing.assert_array_equal(noisy.answer_class, noisy.answer_class[noisy.original])
    p = pol.initial_pass_rate
    for a in range(5):  # every prompt of class a is at most as likely to pass as any of a + 1
        assert p[pol.answer_class == a].max() <= p[pol.answer_class == a + 1].min() + 1e-12
    assert "answer" in pol.pool_columns() and "answer" not in plain.pool_columns()
    kw = dict(budget_rollouts=4096, eval_every_rollouts=2048,
              options=strategy_options("grpo", train_prompts=64, group_size=8))  # fmt: skip
    a = simulate_run("grpo", pre, 1, **kw)
    b = simulate_run("grpo", replace(pre, sim=cfg), 1, **kw)
    assert [e["accuracy"] for e in a["evals"]] == [e["accuracy"] for e in b["evals"]]
    with pytest.raises(ValueError, match="answer_shift"):
        SimConfig(answer_shift=1.0)  # needs classes
    with pytest.raises(ValueError, match="answer_rate"):
        SimConfig(answer_classes=4, answer_shift=1.0, answer_rate=0.0)


def test_answer_offset_is_a_softmax_prior_over_explicit_answers():
    """The offset delta_a - log sum_b pi_b e^delta_b, against a softmax over an explicit answer
    vocabulary: a prompt whose correct answer (class a) has probability p and whose wrong mass is
    spread over 40 wrong answers drawn with the pool's class shares; adding delta_b to the logit of
    every answer of class b and renormalising gives the prompt's new p, which must be
    sigmoid(logit p + offset_a) up to the wrong answers' sampling."""
    rng = np.random.default_rng(0)
    pol = SimPolicy(small_preset(num_prompts=600, answer_classes=5, answer_shift=1.0))
    pol.answer_delta = np.array([0.9, -0.4, 0.2, -0.7, 0.0])
    off = pol.answer_offset()
    pi = pol.answer_share
    for a, p in ((0, 0.3), (3, 0.8), (2, 0.5)):
        wrong = rng.choice(5, size=200_000, p=pi)  # the classes of the wrong answers
        logits = np.concatenate([[np.log(p)], np.log((1 - p) / len(wrong)) + np.zeros(len(wrong))])
        logits += np.concatenate([[pol.answer_delta[a]], pol.answer_delta[wrong]])
        q = np.exp(logits - logits.max())
        explicit = q[0] / q.sum()
        model = 1 / (1 + np.exp(-(np.log(p / (1 - p)) + off[a])))
        assert explicit == pytest.approx(model, abs=2e-3)


def test_a_skewed_part_shifts_the_answer_prior_and_a_balanced_one_does_not():
    """End to end (answer_shift): GRPO on the part nearest p = 1/2 (classes skewed to the middle)
    raises the held-out prompts of the classes it favours and lowers every other class; a part
    holding each class's share (nearest 1/2 within each class) moves the prior far less; a
    batch whose signal shares equal the pool's leaves it exactly where it is."""
    pre = load_preset(MEMORY_PRESET)
    cfg = pre.sim.replace(answer_classes=8, answer_noise=0.7, answer_shift=8.0, answer_rate=0.05)
    kw = dict(budget_rollouts=16384, eval_every_rollouts=8192,
              options=strategy_options("grpo", train_prompts=64, group_size=8))  # fmt: skip
    seen = {}

    def keep(by):
        def part(pol):
            seen[by] = pol
            return pol.nearest_half(512, by=by)

        return part

    for by in (None, "answer"):
        simulate_run("grpo", replace(pre, sim=cfg), 0, part=keep(by), **kw)
    skewed, balanced = seen[None], seen["answer"]
    off = skewed.answer_offset()
    ratio = np.bincount(skewed.answer_class, minlength=8) / skewed.num_prompts / skewed.answer_share
    assert (ratio >= 1.5).any() and (ratio <= 0.5).any()
    assert off[ratio >= 1.5].min() > 0 > off[ratio <= 0.5].max()
    assert np.abs(balanced.answer_delta).max() < 0.5 * np.abs(skewed.answer_delta).max()
    pol = SimPolicy(replace(pre, sim=cfg))
    ids = np.arange(pol.num_prompts)
    pol._shift_answers(ids, np.ones(len(ids)))  # sigma = pi exactly
    np.testing.assert_allclose(pol.answer_delta, 0.0, atol=1e-15)


def test_step_noise_scales_a_skill_step_by_its_signal_share_by_hand():
    """step_noise B_s: a skill step moves c^2 = S^2 / (S^2 + B_s E) of what it would. By hand for
    u = (0.5, 1.0), e = (0.2, 0.4), B_s = 10: S = 1.5, E = 0.6, c^2 = 2.25 / 8.25 = 3 / 11; one
    group of u = e = 1 keeps 1 / (1 + B_s), 64 of them 64 / (64 + B_s). Memorisation keeps the
    whole signal; B_s = 0 is the model before (the same run, value for value)."""
    base = dict(global_gain=2e-3, cluster_gain=8e-3)

    def moved(u, e, **sim):
        pol = SimPolicy(small_preset(**base, **sim))
        s0, s, memo = pol.s0, pol.s.copy(), pol.memo.copy()
        ids = np.arange(len(u))
        pol.apply(ids, np.array(u, float), energy=np.array(e, float))
        return pol.s0 - s0, pol.s - s, pol.memo - memo

    # 3 / 11 is what the share means: the mean squared cosine between a step and its signal's
    # direction when noise of total energy B_s E spreads over many directions (Monte Carlo)
    rng = np.random.default_rng(0)
    step = rng.normal(0.0, np.sqrt(10.0 * 0.6 / 4000), (400, 4000))  # (draws, directions)
    step[:, 0] += 1.5  # S along the signal's direction
    assert np.mean(step[:, 0] ** 2 / (step**2).sum(1)) == pytest.approx(3 / 11, rel=0.02)
    plain, on = moved([0.5, 1.0], [0.2, 0.4]), moved([0.5, 1.0], [0.2, 0.4], step_noise=10.0)
    assert plain[0] != 0.0
    assert on[0] == pytest.approx(plain[0] * 3 / 11, rel=1e-12)
    np.testing.assert_allclose(on[1], plain[1] * 3 / 11, rtol=1e-12)
    np.testing.assert_allclose(on[2], plain[2], rtol=1e-12)  # memorisation: the whole signal
    for n, share in ((1, 1 / 11), (64, 64 / 74)):
        ratio = moved([1.0] * n, [1.0] * n, step_noise=10.0)[0] / moved([1.0] * n, [1.0] * n)[0]
        assert ratio == pytest.approx(share, rel=1e-12)
    a = run_small("grpo", 1, small_preset(ref_group_size=8, **base), 6)
    b = run_small("grpo", 1, small_preset(ref_group_size=8, **base, step_noise=0.0), 6)
    assert [e["accuracy"] for e in a["evals"]] == [e["accuracy"] for e in b["evals"]]
    with pytest.raises(ValueError, match="step_noise"):
        SimConfig(step_noise=-1.0)
