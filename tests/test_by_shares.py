"""rollalloc.allocator.by_shares: each value of a column its share of k (largest remainders), its
own best first; the quota of oracle-greedy and posterior-signal."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np

from rollalloc.allocator import by_shares


def _brute(group, order, k):
    """Every way of choosing k candidates, kept if each value has the floor or the ceiling of its
    share, the ceilings going to the values of largest remainder, and each value's chosen are a
    prefix of its candidates in `order`; among those, the choice whose candidates' positions in
    `order`, sorted, are smallest (lexicographically): the best by rank wherever shares allow."""
    C = len(group)
    pos = {int(i): p for p, i in enumerate(order)}
    values = sorted(set(group.tolist()))
    share = {v: Fraction(k * int((group == v).sum()), C) for v in values}  # exact
    rem = {v: share[v] - int(share[v]) for v in values}
    extra = k - sum(int(share[v]) for v in values)
    best, best_key = None, None
    for pick in itertools.combinations(range(C), k):
        n = {v: sum(1 for i in pick if group[i] == v) for v in values}
        plus = [v for v in values if n[v] == int(share[v]) + 1]
        if any(n[v] not in (int(share[v]), int(share[v]) + 1) for v in values):
            continue
        if len(plus) != extra or min((rem[v] for v in plus), default=1) < max(
            (rem[v] for v in values if v not in plus), default=0
        ):
            continue  # an extra slot went past a value of larger remainder
        prefix = all(
            sorted(pos[i] for i in pick if group[i] == v)
            == sorted(pos[int(i)] for i in order if group[i] == v)[: n[v]]
            for v in values
        )
        if not prefix:
            continue
        key = sorted(pos[i] for i in pick)
        if best_key is None or key < best_key:
            best, best_key = set(pick), key
    return best


def test_by_shares_matches_a_brute_force_choice_on_small_random_cases():
    rng = np.random.default_rng(0)
    for _ in range(150):
        C = int(rng.integers(1, 9))
        group = rng.integers(0, int(rng.integers(1, 5)), size=C)
        order = rng.permutation(C)
        k = int(rng.integers(1, C + 1))
        got = by_shares(group, order, k)
        assert sorted(got.tolist()) == list(range(C))  # a permutation of the candidates
        assert set(got[:k].tolist()) == _brute(group, order, k), (group, order, k)
        chosen = set(got[:k].tolist())  # best first, then the rest in `order`'s order
        assert got.tolist() == [i for i in order if i in chosen] + [
            i for i in order if i not in chosen
        ]


def test_equal_shares_tie_exactly():
    # C = 6, k = 2, counts 1 / 4 / 1: shares 1/3, 4/3, 1/3, every remainder 1/3 (in floating point
    # 0.333... and 0.333...26, which would give the extra slot to value 0 or 2 by rounding). Value 1
    # has its floor of 1; the extra goes to the value whose next candidate ranks best: value 1's
    # second (position 1 of `order`), before value 0's first (position 2)
    group = np.array([1, 1, 1, 1, 0, 2])
    order = np.array([0, 1, 4, 5, 2, 3])
    assert set(by_shares(group, order, 2)[:2].tolist()) == {0, 1}


def test_a_column_of_many_values_is_ranked_not_served_by_value():
    # 80 candidates, each of its own value (an `answer` column on a small window): with k = 64 every
    # remainder is 0.8, and the slots go to the 64 best, not to the 64 smallest values
    rng = np.random.default_rng(1)
    group = rng.permutation(80)
    order = rng.permutation(80)
    assert set(by_shares(group, order, 64)[:64].tolist()) == set(order[:64].tolist())


def test_weighted_shares_match_a_brute_force_choice_where_no_cap_binds():
    # weight: a value's share is k x its candidates' share of the total weight (integer weights,
    # so the shares are exact fractions here); cases where a share exceeds its value's count, or
    # two remainders tie (ties break by floating point), are left to the next test
    rng = np.random.default_rng(2)
    done = 0
    while done < 120:
        C = int(rng.integers(2, 9))
        group = rng.integers(0, int(rng.integers(1, 4)), size=C)
        w = rng.integers(1, 5, size=C)
        order = rng.permutation(C)
        k = int(rng.integers(1, C + 1))
        values = sorted(set(group.tolist()))
        W = {v: int(w[group == v].sum()) for v in values}
        share = {v: Fraction(k * W[v], int(w.sum())) for v in values}
        rem = [share[v] - int(share[v]) for v in values]
        if any(share[v] > int((group == v).sum()) for v in values) or len(set(rem)) < len(rem):
            continue
        # the unweighted brute force on a group whose counts are the weights: each candidate of
        # value v stands for W_v / count_v of it, so the shares are the same
        got = by_shares(group, order, k, weight=w.astype(float))
        chosen = set(got[:k].tolist())
        for v in values:
            n_v = sum(1 for i in chosen if group[i] == v)
            assert n_v in (int(share[v]), int(share[v]) + 1), (group, w, order, k)
            mine = [int(i) for i in order if group[i] == v]
            assert sorted(i for i in chosen if group[i] == v) == sorted(mine[:n_v])  # its best
        plus = [v for v in values if sum(1 for i in chosen if group[i] == v) > int(share[v])]
        rest = [v for v in values if v not in plus]
        if plus and rest:  # the extra slots went to the largest remainders
            assert min(share[v] - int(share[v]) for v in plus) > max(
                share[v] - int(share[v]) for v in rest
            )
        done += 1


def test_a_weighted_share_beyond_a_values_count_takes_all_of_it_and_the_rest_follows_order():
    # value 0: two candidates carrying nearly all the weight (share 3.9 of 4, capped at 2); the
    # two slots left go one each to the values of largest remainder (1: 0.06, 2: 0.04), their
    # best by `order` (uncapped, value 0 would take 3 and value 1 the last two: {0, 1, 2, 3})
    group = np.array([0, 0, 1, 1, 1, 2])
    w = np.array([10.0, 10.0, 0.1, 0.1, 0.1, 0.2])
    order = np.array([2, 3, 0, 1, 5, 4])
    got = by_shares(group, order, 4, weight=w)
    assert set(got[:4].tolist()) == {0, 1, 2, 5}
    # no weight at all: the counts' shares, as without weights
    zero = by_shares(group, order, 4, weight=np.zeros(6))
    assert zero.tolist() == by_shares(group, order, 4).tolist()


def _water_filled(group, w, k):
    """Each value's share by bisection on lambda: sum_v min(count_v, lambda W_v) = k (the capped
    values' slots left to the others in proportion to weight): an independent statement."""
    values = sorted(set(group.tolist()))
    cnt = {v: int((group == v).sum()) for v in values}
    W = {v: float(w[group == v].sum()) for v in values}
    lo, hi = 0.0, 1e12
    for _ in range(200):
        lam = (lo + hi) / 2
        if sum(min(cnt[v], lam * W[v]) for v in values) < k:
            lo = lam
        else:
            hi = lam
    return {v: min(cnt[v], hi * W[v]) for v in values}


def test_weighted_shares_with_caps_are_water_filled():
    rng = np.random.default_rng(5)
    for _ in range(300):
        C = int(rng.integers(2, 12))
        group = rng.integers(0, int(rng.integers(1, 5)), size=C)
        w = rng.choice([0.05, 0.25, 1.0, 3.0, 100.0], size=C)
        w = np.array([w[np.flatnonzero(group == g)[0]] for g in group])  # one weight per value
        order = rng.permutation(C)
        k = int(rng.integers(1, C + 1))
        share = _water_filled(group, w, k)
        got = by_shares(group, order, k, weight=w)
        chosen = got[:k].tolist()
        assert sorted(got.tolist()) == list(range(C))
        for v, sh in share.items():
            n_v = sum(1 for i in chosen if group[i] == v)
            assert math.floor(sh + 1e-6) <= n_v <= math.ceil(sh - 1e-6), (group, w, order, k, share)
            mine = [int(i) for i in order if group[i] == v]
            assert sorted(i for i in chosen if group[i] == v) == sorted(mine[:n_v])


def test_what_a_capped_value_leaves_is_shared_by_weight_not_by_rank():
    # value 0 (weight 100) is capped at its one candidate; the 5 slots left split 2.5 / 2.5
    # between the equal-weight values 1 and 2 (the extra to value 1, whose next candidate ranks
    # first), not 4 / 1 by rank (the review's case)
    group = np.array([0, 1, 1, 1, 1, 2, 2, 2, 2])
    order = np.array([1, 2, 3, 4, 0, 5, 6, 7, 8])
    w = np.array([100.0, 1, 1, 1, 1, 1, 1, 1, 1])
    got = by_shares(group, order, 6, weight=w)[:6]
    assert np.bincount(group[got], minlength=3).tolist() == [1, 3, 2]
