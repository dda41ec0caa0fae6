"""likelihood-rank: the ranking restated by brute force, the drift against a known shift.

Expected values: each step's choice is the top train_prompts of the window by the expected GRPO
signal of a group of n at the prompt's estimate, computed here as a direct binomial sum (not the
package's interpolated table); the estimate is the pool's own p (ShortAnswerPool, unseen="wrong",
once the correct answer was sampled) or the last group's (s + 1) / (n + 2) without log-probs; the
drift is the logit shift the test applies to the pool.
"""

from __future__ import annotations

import math

import numpy as np

from rollalloc import make_allocator
from rollalloc.likelihood import _unsampled_mean
from rollalloc.testing import BernoulliPool, ShortAnswerPool, drive


def _signal(p: float, n: int) -> float:
    """E_{k~Bin(n,p)} n v_k / (std_k + 1e-6), v_k = k/n (1 - k/n): the GRPO signal of a group."""
    tot = 0.0
    for k in range(n + 1):
        v = k / n * (1 - k / n)
        tot += math.comb(n, k) * p**k * (1 - p) ** (n - k) * n * v / (math.sqrt(v) + 1e-6)
    return tot


def test_ranks_the_window_by_the_signal_at_the_sampled_pass_rate():
    rng = np.random.default_rng(0)
    N, B, n = 200, 16, 8
    p = rng.uniform(0.2, 1.0, N)  # every correct answer sampled in a group of 8 w.p. >= 0.83
    pool = ShortAnswerPool(p=p, seed=5)
    alloc = make_allocator(
        "likelihood-rank",
        num_prompts=N,
        seed=1,
        train_prompts=B,
        n=n,
        window=2.0,
        unseen="wrong",
        drift=False,
    )
    steps_per_epoch = N // (2 * B)
    est = np.full(N, np.nan)  # what the strategy should believe: p once the answer was seen
    checked = 0
    for step in range(4 * steps_per_epoch):
        order_before = alloc._order.copy(), alloc._cursor
        req = alloc.ask()
        out = pool.generate(req)
        alloc.tell(out)
        assert alloc.ask() is None
        alloc.batch()
        order, cursor = order_before
        window = order[cursor : cursor + 2 * B]
        if len(window) == 2 * B:  # (a window across an epoch's end is reordered: skipped)
            seen = [int(i) for i in window if not np.isnan(est[i])]
            score = {i: _signal(est[i], n) for i in seen}
            mean = sum(score.values()) / len(seen) if seen else 0.0
            score.update({int(i): mean for i in window if np.isnan(est[i])})  # unseen: the mean
            chosen = set(req.prompt_ids.tolist())
            worst_in = min(score[i] for i in chosen)
            best_out = max(score[i] for i in window if int(i) not in chosen)
            assert worst_in >= best_out - 1e-4, (step, worst_in, best_out)
            checked += 1
        g = req.expand()
        s = np.bincount(g, weights=out.rewards, minlength=N)
        w = 0.5 ** np.arange(1, pool.wrong + 1) / (1 - 0.5**pool.wrong)  # the pool's wrong shares
        for i in req.prompt_ids.tolist():
            if s[i] > 0:
                est[i] = p[i]
            else:  # no success: the mass never sampled bounds p (tested in test_likelihood.py)
                seen_wrong = np.unique(out.completion_key[g == i])
                u = 1 - (1 - p[i]) * w[seen_wrong - 1].sum()
                est[i] = _unsampled_mean(np.array([u]), np.array([n]))[0]
    assert checked >= 3 * steps_per_epoch


def _logit(p):
    return np.log(p) - np.log1p(-p)


def test_drift_is_the_logit_shift_of_the_pool_between_visits():
    rng = np.random.default_rng(1)
    N, B, n, delta = 64, 16, 16, 0.6
    base = rng.uniform(0.3, 0.7, N)
    pool = ShortAnswerPool(p=base.copy(), seed=2)
    alloc = make_allocator(
        "likelihood-rank",
        num_prompts=N,
        seed=0,
        train_prompts=B,
        n=n,
        window=1.0,
        unseen="wrong",
    )
    drive(alloc, pool, N // B)  # epoch 1: every prompt once
    assert alloc.D == 0.0
    pool.p = 1 / (1 + np.exp(-(_logit(base) + delta)))  # every prompt gained delta in logit
    drive(alloc, pool, N // B)  # epoch 2: every prompt revisited
    assert abs(alloc.D - delta) < 0.02, alloc.D
    drive(alloc, pool, N // B)  # epoch 3: nothing changed since
    assert abs(alloc.D - delta) < 0.02, alloc.D


def test_without_log_probs_it_ranks_by_the_last_groups_smoothed_rate():
    rng = np.random.default_rng(2)
    N, B, n = 120, 12, 8
    pool = BernoulliPool(p=rng.uniform(0.0, 1.0, N), seed=4)
    alloc = make_allocator(
        "likelihood-rank",
        num_prompts=N,
        seed=3,
        train_prompts=B,
        n=n,
        window=2.0,
        unseen="wrong",  # ignored without log-probs: the rate is all there is
    )
    est = np.full(N, np.nan)
    checked = 0
    for _ in range(40):
        order, cursor = alloc._order.copy(), alloc._cursor
        req = alloc.ask()
        out = pool.generate(req)
        alloc.tell(out)
        assert alloc.ask() is None
        alloc.batch()
        window = order[cursor : cursor + 2 * B]
        if len(window) == 2 * B:
            seen = [int(i) for i in window if not np.isnan(est[i])]
            score = {i: _signal(est[i], n) for i in seen}
            mean = sum(score.values()) / len(seen) if seen else 0.0
            score.update({int(i): mean for i in window if np.isnan(est[i])})
            chosen = set(req.prompt_ids.tolist())
            assert (
                min(score[i] for i in chosen)
                >= max(score[int(i)] for i in window if int(i) not in chosen) - 1e-4
            )
            checked += 1
        s = np.bincount(req.expand(), weights=out.rewards, minlength=N)
        est[req.prompt_ids] = (s[req.prompt_ids] + 1) / (n + 2)
    assert checked >= 30 and alloc.D == 0.0 and alloc.coverage == 0.0


def test_old_estimates_are_shifted_by_the_drift_since_they_were_made():
    rng = np.random.default_rng(3)
    N, B = 40, 8
    alloc = make_allocator(
        "likelihood-rank", num_prompts=N, seed=1, train_prompts=B, n=8, window=2.5
    )
    t = alloc.table
    t.p_hat[:] = rng.uniform(0.02, 0.98, N)
    t.d[:] = rng.uniform(-2.0, 2.0, N)  # the drift when each estimate was made
    alloc.D = 1.0
    order, cursor = alloc._order.copy(), alloc._cursor
    req = alloc.ask()
    window = order[cursor : cursor + 20]
    p_now = 1 / (1 + np.exp(-(_logit(t.p_hat[window].astype(float)) + 1.0 - t.d[window])))
    score = {int(i): _signal(q, 8) for i, q in zip(window, p_now)}
    chosen = set(req.prompt_ids.tolist())
    assert len(chosen) == B
    assert (
        min(score[i] for i in chosen)
        >= max(score[int(i)] for i in window if int(i) not in chosen) - 1e-4
    )


def test_a_look_of_one_ranks_by_the_current_pass_rate_and_trains_on_it():
    rng = np.random.default_rng(4)
    N, B, n = 160, 16, 8
    pool = ShortAnswerPool(p=rng.uniform(0.3, 1.0, N), seed=6)
    alloc = make_allocator(
        "likelihood-rank",
        num_prompts=N,
        seed=2,
        train_prompts=B,
        n=n,
        window=2.0,
        probe=1,
        unseen="wrong",
    )
    compared = 0
    for step in range(12):
        if step == 6:  # the pool changes: the look sees today's p, not the stored one
            pool.p = rng.uniform(0.3, 1.0, N)
        look = alloc.ask()
        assert look.phases == ("pilot",) * 2 * B and np.all(look.num_rollouts == 1)
        out = pool.generate(look)
        alloc.tell(out)
        commit = alloc.ask()
        assert commit.phases == ("commit",) * B and np.all(commit.num_rollouts == n - 1)
        alloc.tell(pool.generate(commit))
        assert alloc.ask() is None
        batch = alloc.batch()
        chosen = set(commit.prompt_ids.tolist())
        assert set(batch.prompt_ids.tolist()) == chosen and np.all(batch.group_sizes == n)
        # every trained group holds its look: the look's handle is among the group's handles
        look_handle = dict(zip(out.prompt_ids.tolist(), out.handles.tolist()))
        for pid, handles, _ in batch.groups():
            assert look_handle[pid] in handles.tolist()
        assert len(batch.released) == B and batch.stats.discarded_rollouts == B  # dropped looks
        # among candidates whose look was correct, the chosen carry the larger signal at today's p
        hit = [int(i) for i, r in zip(out.prompt_ids, out.rewards) if r == 1]
        inside = [_signal(pool.p[i], n) for i in hit if i in chosen]
        outside = [_signal(pool.p[i], n) for i in hit if i not in chosen]
        if inside and outside:
            assert min(inside) >= max(outside) - 1e-4
            compared += 1
    assert compared >= 10
