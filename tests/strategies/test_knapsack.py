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
    assert N[:2].tolist() == greedy_allocation(np.array([0.5, 0.3]), 24, 2, 128).tolist()


def test_unseen_prompts_get_n_and_max_n_is_never_exceeded():
    alloc = knapsack(10, train_prompts=4, max_n=12)
    set_estimates(alloc, [0.5, 0.0], trials=16)
    N = alloc.allocate(np.arange(4))  # prompts 2 and 3 unseen
    assert N[2:].tolist() == [8, 8]
    assert N.max() <= 12 and N.sum() == 32


def test_estimate_blends_a_small_group_into_the_window():
    alloc = knapsack(1, train_prompts=1, n=4, min_n=2, history_window=16, min_history=4)
    table = alloc.table

    def tell(rewards):
        req = alloc.ask()
        k = int(req.num_rollouts[0])
        rewards = (rewards * k)[:k]
        h = np.arange(alloc.cum_rollouts, alloc.cum_rollouts + k)
        alloc.tell(Outcome(np.zeros(k, np.int64), h, np.array(rewards, float)))
        assert alloc.ask() is None
        alloc.batch()
        return k

    k1 = tell([1.0, 0.0])  # unseen: n = 4 rollouts, estimate 0.5
    assert k1 == 4 and table.p_hat[0] == pytest.approx(0.5)
    k2 = tell([1.0])  # p = .5: gets all 4 again, all correct -> window of 8 old at .5, 4 new at 1
    m = min(16 - k2, 4)
    assert table.p_hat[0] == pytest.approx((k2 + m * 0.5) / (k2 + m))


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
