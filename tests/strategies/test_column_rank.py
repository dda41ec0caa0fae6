"""column-rank: the rule of its docstring, restated from the groups a run trained.

Expected values are recomputed from scratch each step: the column values' estimates from the list
of every trained group with its age weight 2^(-age / half_life), the expected signal by a Monte
Carlo of GRPO's group statistic (not the strategy's binomial sum), and the choice by sorting.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from rollalloc import make_allocator
from rollalloc.allocator import wire_pool_columns
from rollalloc.strategies.column_rank import expected_signal
from rollalloc.testing import BernoulliPool, drive


def test_expected_signal_is_the_mean_grpo_group_statistic():
    # G(k; n) = sqrt(n(n-1)) sqrt(k/n (1 - k/n)), averaged over k ~ Bin(n, p) by sampling
    rng = np.random.default_rng(0)
    for n in (2, 8, 32):
        p = np.array([0.0, 0.03, 0.3, 0.5, 0.9, 1.0])
        k = rng.binomial(n, p[:, None], size=(len(p), 200_000))
        mc = (math.sqrt(n * (n - 1)) * np.sqrt(k / n * (1 - k / n))).mean(axis=1)
        np.testing.assert_allclose(expected_signal(p, n), mc, atol=0.01 * math.sqrt(n))
    assert expected_signal(np.array([0.0, 1.0]), 8).tolist() == [0.0, 0.0]


def _value_estimates(history, step, labels, half_life, m):
    """p^_g at `step` from (step trained, prompt id, successes, size) of every group before it."""
    V = labels.max() + 1
    K, N = np.zeros(V), np.zeros(V)
    for t, i, s, size in history:
        w = 2.0 ** (-(step - t) / half_life)
        K[labels[i]] += w * s
        N[labels[i]] += w * size
    p_bar = K.sum() / N.sum() if N.sum() > 0 else 0.5
    return (K + m * p_bar) / (N + m)


def test_each_step_takes_the_candidates_whose_value_promises_most_signal():
    N, n, B, H, m = 160, 8, 6, 4.0, 8.0
    rng = np.random.default_rng(1)
    labels = rng.integers(0, 5, N)  # five values with very different pass rates
    p = np.array([0.05, 0.3, 0.5, 0.8, 0.97])[labels] + rng.uniform(-0.03, 0.03, N)
    alloc = make_allocator("column-rank", N, seed=2, n=n, train_prompts=B, window=2.0,
                           half_life=H, prior_weight=m, column="kind")  # fmt: skip
    wire_pool_columns(alloc, {"kind": [f"v{x}" for x in labels]})
    drawn: list[np.ndarray] = []
    draw = alloc.draw
    alloc.draw = lambda k: drawn.append(draw(k)) or drawn[-1]  # record each step's candidates
    batches = drive(alloc, BernoulliPool(p=p, seed=3), steps=40)
    sig = {}
    mc_rng = np.random.default_rng(4)

    def signal(q):  # Monte Carlo of the expected GRPO statistic, cached per distinct estimate
        key = round(float(q), 12)
        if key not in sig:
            k = mc_rng.binomial(n, q, 400_000)
            sig[key] = float((math.sqrt(n * (n - 1)) * np.sqrt(k / n * (1 - k / n))).mean())
        return sig[key]

    history: list[tuple[int, int, float, int]] = []
    close_calls = 0
    for step, (cand, batch) in enumerate(zip(drawn, batches)):
        est = _value_estimates(history, step, labels, H, m)
        score = np.array([signal(est[labels[i]]) for i in cand])
        order = sorted(range(len(cand)), key=lambda j: (-score[j], j))
        want = sorted(int(cand[j]) for j in order[:B])
        # equal estimates (one value) tie exactly and go by stream order; two values whose
        # Monte Carlo scores are this close at the cut cannot be ordered by the test
        gap = score[order[B - 1]] - score[order[B]] if len(cand) > B else 1.0
        if 0 < gap < 0.02:
            close_calls += 1
        else:
            assert sorted(batch.prompt_ids.tolist()) == want, step
        succ = batch.successes if batch.successes is not None else batch.rewards  # (R,)
        k = np.bincount(batch.group_index(), weights=succ, minlength=batch.num_groups)
        for i, s, size in zip(batch.prompt_ids, k, batch.group_sizes):
            history.append((step, int(i), float(s), int(size)))
    assert close_calls < 10
    # the hopeless and the solved value are left out once they are known (later steps)
    late = np.concatenate([b.prompt_ids for b in batches[20:]])
    assert np.isin(labels[late], [1, 2, 3]).mean() > 0.9


def test_a_value_left_out_decays_back_to_the_pool_mean_and_is_tried_again():
    # value 1 looks solved at first (its prompts succeed), so it is left out; with no new groups
    # its counts decay and its estimate returns to the pool's mean, where it ranks with the rest
    N, n, B = 64, 8, 8
    labels = np.arange(N) % 2
    p = np.where(labels == 0, 0.5, 0.99)
    alloc = make_allocator("column-rank", N, seed=0, n=n, train_prompts=B, window=2.0,
                           half_life=2.0, prior_weight=8.0, column="kind")  # fmt: skip
    wire_pool_columns(alloc, {"kind": labels.tolist()})
    batches = drive(alloc, BernoulliPool(p=p, seed=1), steps=60)
    share = [np.mean(labels[b.prompt_ids] == 1) for b in batches]
    assert np.mean(share[2:]) < 0.4  # mostly left out once known
    assert sum(s > 0 for s in share[2:]) >= 3  # but tried again: never starved for good


def test_without_a_column_it_is_grpo_on_a_faster_stream():
    # one value: every candidate ranks equal, so each step takes its first B candidates in stream
    # order; over an epoch of candidates every prompt is a candidate once
    N, B = 40, 4
    alloc = make_allocator("column-rank", N, seed=3, n=4, train_prompts=B, window=1.5)
    drawn = []
    draw = alloc.draw
    alloc.draw = lambda k: drawn.append(draw(k)) or drawn[-1]
    batches = drive(alloc, BernoulliPool(p=np.full(N, 0.5), seed=0), steps=10)
    for cand, batch in zip(drawn, batches):
        assert batch.prompt_ids.tolist() == cand[:B].tolist()


def test_resumes_exactly_from_a_state_dict():
    N, n = 120, 4
    rng = np.random.default_rng(5)
    labels = rng.integers(0, 6, N)
    p = rng.uniform(0, 1, 6)[labels]
    opts = dict(n=n, train_prompts=6, window=1.5, half_life=3.0, column="kind")
    cols = {"kind": labels.tolist()}

    def make():
        a = make_allocator("column-rank", N, seed=7, **opts)
        wire_pool_columns(a, cols)
        return a

    def ids(bs):
        return [b.prompt_ids.tolist() for b in bs]

    full = ids(drive(make(), BernoulliPool(p=p, seed=2), steps=30))
    first, pool = make(), BernoulliPool(p=p, seed=2)
    head = ids(drive(first, pool, steps=17))
    resumed = make()
    resumed.load_state_dict(first.state_dict())
    assert head + ids(drive(resumed, pool, steps=13)) == full


def test_bad_options_and_columns_are_refused():
    with pytest.raises(ValueError, match="window"):
        make_allocator("column-rank", 50, seed=0, n=4, train_prompts=4, window=0.5)
    with pytest.raises(ValueError, match="half_life"):
        make_allocator("column-rank", 50, seed=0, n=4, train_prompts=4, half_life=0)
    a = make_allocator("column-rank", 50, seed=0, n=4, train_prompts=4, column="level")
    with pytest.raises(ValueError, match="no column 'level'"):
        wire_pool_columns(a, {"answer": list(range(50))})
