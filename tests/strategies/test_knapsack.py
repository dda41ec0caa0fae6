"""Knapsack-RL: greedy allocation equals the brute-force optimum; budget rules by hand."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from rollalloc.allocator import make_allocator
from rollalloc.strategies.knapsack import greedy_allocation, knapsack_value, marginal_value
from rollalloc.testing import BernoulliPool, drive
from rollalloc.types import Outcome


def brute_force(p, budget, min_n, max_n):
    """Best total value over every allocation with sum(N - min_n) <= budget."""
    best = -1.0
    for N in itertools.product(range(min_n, max_n + 1), repeat=len(p)):
        if sum(N) - min_n * len(p) <= budget:
            best = max(best, float(knapsack_value(np.array(N, float), p).sum()))
    return best


@pytest.mark.parametrize("seed", range(6))
def test_greedy_equals_brute_force_optimum(seed):
    rng = np.random.default_rng(seed)
    p = rng.uniform(0.02, 0.98, size=4)
    if seed == 0:
        p = np.array([0.5, 0.1, 0.9, 0.03])  # a symmetric pair and a near-hopeless prompt
    budget, min_n, max_n = int(rng.integers(0, 14)), 2, 7
    N = greedy_allocation(p, budget, min_n, max_n)
    assert N.min() >= min_n and N.max() <= max_n
    assert N.sum() == min(min_n * 4 + budget, max_n * 4)
    got = float(knapsack_value(N.astype(float), p).sum())
    assert got == pytest.approx(brute_force(p, budget, min_n, max_n), rel=1e-12)


def prob_group_has_variance(N: int, p: float) -> float:
    """P(N Bernoulli(p) rewards are not all equal), by enumerating all 2^N outcomes."""
    total = 0.0
    for outcome in itertools.product((0, 1), repeat=N):
        k = sum(outcome)
        if 0 < k < N:
            total += p**k * (1 - p) ** (N - k)
    return total


# The reference's InfoGain weight p (1 - p)^2 (exploration_utils.py: `success_rate * ((1 -
# success_rate) ** 2)`; the paper: InfoGain(p) ~ p (1 - p)^2), by hand at a few p. It is not
# symmetric: it peaks at p = 1/3 (d/dp = (1 - p)(1 - 3p)), so a hard prompt outweighs an easy one.
WEIGHT_BY_HAND = {0.1: 0.081, 0.25: 9 / 64, 1 / 3: 4 / 27, 0.5: 1 / 8, 0.75: 3 / 64, 0.9: 0.009}


@pytest.mark.parametrize("p", sorted(WEIGHT_BY_HAND))
def test_value_is_variance_probability_times_the_reference_weight(p):
    for N in range(1, 11):
        want = prob_group_has_variance(N, p) * WEIGHT_BY_HAND[p]
        assert float(knapsack_value(np.float64(N), np.float64(p))) == pytest.approx(want, rel=1e-12)
    grid = np.linspace(0.001, 0.999, 999)
    assert grid[np.argmax(knapsack_value(np.float64(400), grid))] == pytest.approx(1 / 3, abs=1e-3)


def test_value_is_concave_in_the_rollouts():
    p = np.linspace(0.01, 0.99, 50)[None, :]
    N = np.arange(1, 30, dtype=float)[:, None]  # where differences of V are still exact enough
    assert marginal_value(N[:-1], p) == pytest.approx(np.diff(knapsack_value(N, p), axis=0))
    gain = marginal_value(np.arange(1, 128, dtype=float)[:, None], p)
    assert (gain > 0).all() and (np.diff(gain, axis=0) < 0).all()


def test_more_rollouts_go_to_hard_but_solvable_prompts():
    N = greedy_allocation(np.array([0.5, 0.05, 0.95]), budget=60, min_n=2, max_n=128)
    # V weighs p(1-p)^2: a rarely solved prompt is worth most per success found
    assert N[1] > N[0] > N[2] and N.sum() == 66


def knapsack(num_prompts, **kw):
    cfg = {"n": 8, "min_n": 2, "max_n": 128, "min_history": 8, **kw}
    return make_allocator("knapsack", num_prompts, seed=0, **cfg)


def set_estimates(alloc, p_hat, trials=16):
    alloc.table.p_hat[: len(p_hat)] = p_hat
    alloc.table.trials[: len(p_hat)] = trials


def test_budget_rules_and_fallback_by_hand():
    # p = .5, .5 (uncertain), 0 (hopeless), 1 (solved); budget 4 x 8 = 32.
    alloc = knapsack(10, train_prompts=4)
    set_estimates(alloc, [0.5, 0.5, 0.0, 1.0])
    N = alloc.allocate(np.arange(4))
    # min 2 each -> 24 left; each p = .5 prompt needs int(ln .1 / ln .5) = 3 < 24 in all, so the
    # other 18 go to the p = 0 prompt; the 6 that remain go to the uncertain prompts, 3 each.
    assert int(math.log(0.1) / math.log(0.5)) == 3
    assert N.tolist() == [5, 5, 20, 2]
    assert alloc._fallback == 18


def test_without_fallback_the_uncertain_prompts_get_everything():
    alloc = knapsack(10, train_prompts=4, fallback=False)
    set_estimates(alloc, [0.5, 0.3, 0.0, 1.0])
    N = alloc.allocate(np.arange(4))
    assert N[2:].tolist() == [2, 2] and N.sum() == 32
    # the 24 rollouts left after min 2 each, split between p = .5 and .3 by brute force
    p = np.array([0.5, 0.3])
    best = max(
        ((a, b) for a in range(2, 29) for b in range(2, 29) if a + b <= 28),
        key=lambda n: float(knapsack_value(np.array(n, float), p).sum()),
    )
    assert N[:2].tolist() == list(best)


def test_unseen_prompts_get_n_and_max_n_is_never_exceeded():
    alloc = knapsack(10, train_prompts=4, max_n=12)
    set_estimates(alloc, [0.5, 0.0], trials=16)
    N = alloc.allocate(np.arange(4))  # prompts 2 and 3 unseen
    assert N[2:].tolist() == [8, 8]
    assert N.max() <= 12 and N.sum() == 32


def reference_estimate(groups, window):
    """The reference's rule (KnapsackRL rl_dataset.py, update_sample_state, epoch estimation on,
    robust on), on plain lists: the last group's mean when it has at least `window` rewards, else
    the mean of the last `window` rewards of the whole history, newest last."""
    last = groups[-1]
    if len(last) >= window:
        return float(np.mean(last))
    flat = [x for g in groups for x in g]
    return float(np.mean(flat[-window:]))


def tell_one(alloc, successes_for):
    """One step: every prompt of the request gets the successes `successes_for(prompt, k)`."""
    req = alloc.ask()
    ids, rewards = [], []
    for pid, k in zip(req.prompt_ids.tolist(), req.num_rollouts.tolist()):
        ids += [pid] * k
        rewards += list(successes_for(pid, k))
    h = np.arange(alloc.cum_rollouts, alloc.cum_rollouts + len(ids))
    alloc.tell(Outcome(np.array(ids, np.int64), h, np.array(rewards, float)))
    assert alloc.ask() is None
    alloc.batch()
    return req


def test_estimate_forgets_beyond_the_window_7_8_then_8_8_twice_is_solved():
    # The reference's window of the last 16: after 7/8, 8/8, 8/8 it holds the last two groups,
    # 16 of 16 correct: p = 1.0, a solved prompt (the old blend said 0.969 and never reached 1).
    alloc = knapsack(1, train_prompts=1, history_window=16)
    for correct in (7, 8, 8):
        req = tell_one(alloc, lambda pid, k, c=correct: [1.0] * c + [0.0] * (k - c))
        assert req.num_rollouts.tolist() == [8]
    assert alloc.table.p_hat[0] == 1.0
    alloc.ask()  # the next allocation treats it as solved: n_positive (then the fallback)
    assert alloc.step_decisions["p1"] == 1


def test_window_order_within_a_group_the_last_told_is_newest():
    # window 4: the group [1, 0, 0, 0], then one success. The reference keeps the newest rewards:
    # the last three told of the old group and the new one, 0, 0, 0, 1: mean 0.25 (the first three
    # would give 0.5).
    alloc = knapsack(1, train_prompts=1, n=4, min_n=2, history_window=4, min_history=4)
    tell_one(alloc, lambda pid, k: [1.0, 0.0, 0.0, 0.0][:k])
    assert alloc.table.p_hat[0] == 0.25
    assert alloc._remember(0, np.array([1.0])) == 0.25
    assert alloc._bits[0] == 0b0001 and alloc._hist_len[0] == 4


@pytest.mark.parametrize(
    "window,continuous", [(16, False), (5, False), (16, True), (70, False), (40, True)]
)
def test_estimate_equals_the_reference_rule_on_ragged_groups(window, continuous):
    # 6 prompts, 3 per step with a budget of 8 each: Knapsack's groups are ragged (2 to 20), so
    # windows cut into older groups and some groups exceed the window.
    rng = np.random.default_rng(window + continuous)
    alloc = knapsack(6, train_prompts=3, min_n=2, max_n=20, history_window=window, min_history=4)
    p = rng.uniform(0.05, 0.95, 6)
    history = {i: [] for i in range(6)}

    def successes(pid, k):
        u = rng.random(k)
        x = np.round(np.clip(p[pid] + u - 0.5, 0, 1), 3) if continuous else (u < p[pid]) * 1.0
        history[pid].append(x.tolist())
        return x

    sizes = set()
    for _ in range(40):
        req = tell_one(alloc, successes)
        sizes |= set(req.num_rollouts.tolist())
        for pid in req.prompt_ids.tolist():
            want = reference_estimate(history[pid], window)
            tol = 2e-3 if continuous else 0.0  # float16 storage of continuous successes
            assert alloc.table.p_hat[pid] == pytest.approx(want, abs=tol)
    assert min(sizes) < 8 < max(sizes), "groups should be ragged"
    assert (alloc._ring is not None) == (continuous or window > 64)


@pytest.mark.parametrize("continuous", [False, True])
def test_window_survives_a_checkpoint(continuous):
    rng = np.random.default_rng(1)

    def successes(pid, k):
        u = rng.random(k)
        return np.round(u, 2) if continuous else (u < 0.5).astype(float)

    alloc = knapsack(6, train_prompts=3, max_n=20, min_history=4)
    for _ in range(6):
        tell_one(alloc, successes)
    twin = knapsack(6, train_prompts=3, max_n=20, min_history=4)
    twin.load_state_dict(alloc.state_dict())
    x = np.array([1.0, 0.0, 1.0])
    assert twin._remember(2, x) == alloc._remember(2, x)
    assert np.array_equal(twin._hist_len, alloc._hist_len)


def test_window_is_compact():
    alloc = knapsack(1000, train_prompts=4)
    assert alloc._bits.nbytes + alloc._hist_len.nbytes == 3 * 1000 and alloc._ring is None


def test_ragged_groups_constant_count_and_budget_on_a_pool():
    alloc = knapsack(500, train_prompts=16)
    batches = drive(alloc, BernoulliPool.mixed(500, seed=0), 120)
    assert all(b.num_groups == 16 and b.group_sizes.sum() <= 128 for b in batches)
    late = batches[-30:]
    assert any(len(set(b.group_sizes.tolist())) > 2 for b in late), "groups are ragged"
    assert (
        max(int(b.group_sizes.max()) for b in late)
        > 8
        > min(int(b.group_sizes.min()) for b in late)
    )
