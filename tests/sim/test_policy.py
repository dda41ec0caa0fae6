"""The simulated policy and its roles: presets, signal, learning, staleness, transfer, determinism."""

from __future__ import annotations

import json

import numpy as np
import pytest

from rollalloc.sim.policy import (
    SimConfig,
    SimPolicy,
    available_presets,
    load_preset,
    preset_from_dict,
)
from rollalloc.sim.roles import (
    RolloutStore,
    SimEvaluator,
    SimLearner,
    SimRollouts,
    SimSampler,
    expected_group_signal,
    group_signal,
)
from rollalloc.sim.run import simulate_run, strategy_options
from rollalloc.testing import make_batch
from rollalloc.types import Request

SMALL = {"num_prompts": 400, "pass_rate_histogram": [[0.0, 1.0, 1.0]], "sim": {"eval_prompts": 200}}


def small_preset(**sim):
    d = json.loads(json.dumps(SMALL))
    d["sim"].update(sim)
    return preset_from_dict(d, "small")


def roles(preset, seed=0):
    policy = SimPolicy(preset)
    sampler = SimSampler(policy, seed)
    return policy, sampler, SimLearner(policy, sampler.store, seed), SimEvaluator(policy, seed)


def test_builtin_presets_load_and_match_their_histograms():
    assert {"dapo17k", "deepmath", "uniform"} <= set(available_presets())
    dapo = load_preset("dapo17k")
    assert dapo.num_prompts == 17398
    pol = SimPolicy(dapo)
    p = pol.initial_pass_rate
    # the [0, 0] bin holds 40% of the prompts, all below zero_bin_max
    assert abs(np.mean(p <= dapo.sim.zero_bin_max) - 0.40) < 0.02
    assert abs(pol.learnable.mean() - 0.90) < 0.01  # unlearnable_fraction 0.10
    # "most groups are zero-variance" at n = 16 (the assumption stated in the preset)
    assert np.mean(p**16 + (1 - p) ** 16) > 0.5
    assert load_preset("deepmath").num_prompts == 103022


def test_json_pool_description(tmp_path):
    path = tmp_path / "pool.json"
    path.write_text(json.dumps({"num_prompts": 50, "pass_rate_histogram": [[0.2, 0.4, 1]]}))
    pre = load_preset(str(path))
    assert pre.num_prompts == 50 and pre.name == "pool" and pre.sim == SimConfig()
    p = SimPolicy(pre).initial_pass_rate
    assert p.min() >= 0.2 and p.max() <= 0.4


@pytest.mark.parametrize(
    "bad, match",
    [
        ({"pass_rate_histogram": [[0, 1, 1]]}, "num_prompts"),
        ({"num_prompts": 10, "pass_rate_histogram": [[0.5, 0.2, 1]]}, r"pass_rate_histogram\[0\]"),
        ({"num_prompts": 10, "pass_rate_histogram": [[0, 1, 0]]}, "sum to 0"),
        ({"num_prompts": 10, "pass_rate_histogram": [[0, 1, 1]], "colour": 1}, "colour"),
        ({"num_prompts": 10, "pass_rate_histogram": [[0, 1, 1]], "sim": {"gain": 1}}, "gain"),
        (
            {"num_prompts": 10, "pass_rate_histogram": [[0, 1, 1]], "sim": {"staleness_decay": 2}},
            "staleness_decay",
        ),
    ],
)
def test_bad_pool_descriptions_name_the_problem(bad, match):
    with pytest.raises(ValueError, match=match):
        preset_from_dict(bad, "bad")


def test_unknown_preset_lists_the_builtin_ones():
    with pytest.raises(ValueError, match="dapo17k"):
        load_preset("no-such-preset")


def test_group_signal_matches_a_plain_loop():
    rng = np.random.default_rng(0)
    sizes = np.array([1, 2, 5, 8, 16, 3])
    rewards = (rng.random(sizes.sum()) < 0.5).astype(float)
    weights = rng.random(sizes.sum())
    got = group_signal(rewards, sizes, weights, eps=1e-6)
    want, start = [], 0
    for n in sizes:
        r, w = rewards[start : start + n], weights[start : start + n]
        start += n
        if n == 1:
            want.append(0.0)  # no baseline: advantage 0
            continue
        adv = (r - r.mean()) / (r.std(ddof=1) + 1e-6)
        want.append(float(np.sum(w * adv * (r - r.mean()))))
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_signal_is_zero_for_all_equal_groups_and_largest_at_one_half():
    sizes = np.array([8, 8, 8, 8])
    rewards = np.concatenate(
        [np.zeros(8), np.ones(8), np.r_[np.ones(4), np.zeros(4)], np.r_[1, np.zeros(7)]]
    )
    g = group_signal(rewards, sizes)
    assert g[0] == 0 and g[1] == 0
    assert g[2] > g[3] > 0
    e = expected_group_signal(np.linspace(0, 1, 101), 16)
    assert e[0] == 0 and e[-1] == 0 and np.argmax(e) == 50


def test_expected_group_signal_matches_monte_carlo():
    rng = np.random.default_rng(1)
    for p, n in [(0.1, 16), (0.5, 8), (0.93, 32)]:
        r = (rng.random((20000, n)) < p).astype(float)
        mc = group_signal(r.reshape(-1), np.full(20000, n)).mean()
        assert abs(expected_group_signal(np.array([p]), n)[0] - mc) < 0.03 * max(mc, 0.1)


def test_zero_variance_group_moves_nothing():
    policy, sampler, learner, evaluator = roles(small_preset())
    ids = np.array([3, 3, 3, 3, 9, 9, 9, 9])
    handles = sampler.store.add(
        SimRollouts(ids, np.r_[np.ones(4), np.zeros(4)], np.ones(8, np.int64), 0)
    )
    before = policy.state_dict()
    acc0 = evaluator.evaluate()
    info = learner.update(make_batch([3, 9], [4, 4], handles, np.r_[np.ones(4), np.zeros(4)]))
    after = policy.state_dict()
    assert info["signal"] == 0.0
    assert after["s0"] == before["s0"]
    np.testing.assert_array_equal(after["s"], before["s"])
    np.testing.assert_array_equal(after["memo"], before["memo"])
    assert evaluator.evaluate()["accuracy"] == acc0["accuracy"]
    assert policy.version == 1  # the step happened, it just carried no signal


def test_mixed_group_moves_its_prompt_its_cluster_and_held_out_prompts():
    policy, sampler, learner, evaluator = roles(small_preset())
    pid = 5
    r = np.r_[np.ones(8), np.zeros(8)]
    handles = sampler.store.add(SimRollouts(np.full(16, pid), r, np.ones(16, np.int64), 0))
    p_before = policy.success_prob(np.arange(policy.num_prompts))
    eval_before = policy.eval_success_prob()
    learner.update(make_batch([pid], [16], handles, r))
    p_after = policy.success_prob(np.arange(policy.num_prompts))
    eval_after = policy.eval_success_prob()
    assert np.all(p_after >= p_before) and np.all(eval_after >= eval_before)
    gain = p_after - p_before
    others = np.arange(policy.num_prompts) != pid
    same = (policy.cluster == policy.cluster[pid]) & others
    assert gain[pid] > 10 * gain[others].max()  # memorisation is prompt-specific
    assert gain[same].mean() > gain[~same & others].mean() > 0  # cluster > global transfer
    assert eval_after.mean() > eval_before.mean()  # transfer reaches the held-out set


def test_stale_rollouts_move_less_by_the_documented_rule():
    moves = []
    for version in (4, 0):
        policy, sampler, learner, _ = roles(small_preset(staleness_decay=0.8))
        r = np.r_[np.ones(8), np.zeros(8)]
        handles = sampler.store.add(SimRollouts(np.full(16, 7), r, np.ones(16, np.int64), 0))
        policy.version = version  # trained `version` updates after generation
        learner.update(make_batch([7], [16], handles, r))
        moves.append(policy.s0)
    assert moves[0] == pytest.approx(0.8**4 * moves[1])


def test_learner_rejects_released_handles_and_wrong_prompts():
    policy, sampler, learner, _ = roles(small_preset())
    out = sampler.generate(Request(0, 1, [1, 2], [4, 4], ("rollout", "rollout")))
    with pytest.raises(ValueError, match="different prompt"):
        learner.update(make_batch([2, 1], [4, 4], out.handles, out.rewards))
    sampler.release(out.handles[:1])
    with pytest.raises(ValueError, match="released"):
        learner.update(make_batch([1, 2], [4, 4], out.handles, out.rewards))


def test_rollout_store_grows_without_losing_live_rollouts():
    store = RolloutStore(capacity=8)
    old = store.add(SimRollouts(np.array([1, 2]), np.array([1.0, 0.0]), np.array([5, 6]), 0))
    for k in range(20):
        h = store.add(SimRollouts(np.full(7, k), np.zeros(7), np.ones(7, np.int64), k))
        store.release(h)
    rows = store.get(old)  # kept alive
    assert rows.prompt.tolist() == [1, 2] and rows.tokens.tolist() == [5, 6]
    assert store.capacity >= 8 and len(store) == 2


def test_sampler_rewards_follow_p_and_report_tokens():
    policy, sampler, _, _ = roles(small_preset())
    ids = np.arange(0, 400, 40)
    req = Request(0, 1, ids, np.full(len(ids), 2000), ("rollout",) * len(ids))
    out = sampler.generate(req)
    means = np.bincount(np.searchsorted(ids, out.prompt_ids), weights=out.rewards) / 2000
    np.testing.assert_allclose(means, policy.success_prob(ids), atol=0.04)
    assert out.tokens.min() >= 1 and out.tokens.max() <= policy.config.max_tokens
    assert out.policy_version == 0


def run_small(strategy, seed, preset=None, budget=16 * 8 * 40, **sim):
    preset = preset or small_preset(global_gain=2e-3, cluster_gain=8e-3, ref_group_size=8, **sim)
    return simulate_run(
        strategy,
        preset,
        seed,
        budget_rollouts=budget,
        eval_every_rollouts=16 * 8 * 5,
        options=strategy_options(strategy, train_prompts=16, group_size=8),
    )


def test_deterministic_per_seed():
    a, b, c = run_small("grpo", 3), run_small("grpo", 3), run_small("grpo", 4)

    def trace(r):
        return [(e["cum_rollouts"], e["accuracy"]) for e in r["evals"]], [
            (s["effective_prompt_ratio"], s["learner"]["signal"]) for s in r["steps"]
        ]

    assert trace(a) == trace(b)
    assert trace(a) != trace(c)


def test_held_out_accuracy_rises_under_grpo():
    r = run_small("grpo", 0)
    acc = [e["accuracy"] for e in r["evals"]]
    assert acc[-1] > acc[0] + 0.02
    assert all(b >= a for a, b in zip(acc, acc[1:]))  # GRPO on binary rewards only pushes up


def test_overfitting_a_few_prompts_does_not_look_like_progress():
    """Training the same 4 prompts over and over memorises them (train p -> 1) while the held-out
    set gains far less than GRPO spending the same rollouts over the pool."""
    preset = small_preset(global_gain=2e-3, cluster_gain=8e-3, ref_group_size=8)
    policy, sampler, learner, evaluator = roles(preset)
    few = np.array([10, 11, 12, 13])
    acc0 = evaluator.evaluate()["accuracy"]
    rollouts = 0
    for step in range(40):
        out = sampler.generate(Request(step, 1, few, np.full(4, 32), ("rollout",) * 4))
        learner.update(make_batch(few, [32] * 4, out.handles, out.rewards, step))
        sampler.release(out.handles)
        rollouts += len(out.handles)
    overfit_gain = evaluator.evaluate()["accuracy"] - acc0
    assert policy.success_prob(few).min() > 0.95  # memorised
    grpo = run_small("grpo", 0, preset=preset, budget=rollouts)
    grpo_gain = grpo["evals"][-1]["accuracy"] - grpo["evals"][0]["accuracy"]
    assert grpo_gain > 3 * overfit_gain


@pytest.mark.parametrize(
    "field, bad, says",
    [
        ("fast_rate", 2.0, r"fast_rate: invalid value 2\.0 \(must be in \[0, 1\]\)"),
        ("p_floor", 0.7, r"p_floor: invalid value 0\.7 \(must be in \(0, 0\.5\)\)"),
        ("zero_bin_max", 0.00001, r"zero_bin_max: .* \(must be in \(p_floor = "),
        (
            "num_minibatches",
            1.5,
            r"num_minibatches: invalid value 1\.5 \(must be an integer >= 1\)",
        ),
        ("global_gain", float("nan"), r"global_gain: invalid value nan \(must be >= 0\)"),
        ("optimizer", "adam", r"optimizer: invalid value 'adam' \(one of \["),
    ],
)
def test_a_bad_sim_config_value_names_its_valid_range(field, bad, says):
    with pytest.raises(ValueError, match=says):
        SimConfig(**{field: bad})


def test_sim_config_integers_are_any_integer_but_not_a_bool():
    assert SimConfig(num_minibatches=np.int64(4)).num_minibatches == 4
    with pytest.raises(ValueError, match=r"fast_updates: invalid value True \(must be an integer"):
        SimConfig(fast_updates=True)
