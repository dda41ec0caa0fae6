"""rollalloc.allocator.by_shares: each value of a column its share of k (largest remainders), its
own best first; the quota of oracle-greedy and posterior-signal."""

from __future__ import annotations

import itertools

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
    share = {v: k * int((group == v).sum()) / C for v in values}
    rem = {v: share[v] - np.floor(share[v]) for v in values}
    extra = k - sum(int(np.floor(share[v])) for v in values)
    best, best_key = None, None
    for pick in itertools.combinations(range(C), k):
        n = {v: sum(1 for i in pick if group[i] == v) for v in values}
        plus = [v for v in values if n[v] == np.floor(share[v]) + 1]
        if any(n[v] not in (np.floor(share[v]), np.floor(share[v]) + 1) for v in values):
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


def test_a_column_of_many_values_is_ranked_not_served_by_value():
    # 80 candidates, each of its own value (an `answer` column on a small window): with k = 64 every
    # remainder is 0.8, and the slots go to the 64 best, not to the 64 smallest values
    rng = np.random.default_rng(1)
    group = rng.permutation(80)
    order = rng.permutation(80)
    assert set(by_shares(group, order, 64)[:64].tolist()) == set(order[:64].tolist())
