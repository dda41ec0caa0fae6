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
import pytest

from rollalloc import make_allocator
from rollalloc.likelihood import _unsampled_mean
from rollalloc.testing import BernoulliPool, ShortAnswerPool, drive


def _signal(p: float, n: int, successes_only: bool = False) -> float:
    """E_{k~Bin(n,p)} n v_k / (std_k + 1e-6), v_k = k/n (1 - k/n): the GRPO signal of a group
    (the strategy's S is sqrt((n - 1) / n) of it: the same ranking). successes_only: the part its
    k successful rollouts carry, k (1 - k/n)^2 / (std_k + 1e-6) (asymmetry=1 ranks by twice it)."""
    tot = 0.0
    for k in range(n + 1):
        v = k / n * (1 - k / n)
        part = k * (1 - k / n) ** 2 if successes_only else n * v
        tot += math.comb(n, k) * p**k * (1 - p) ** (n - k) * part / (math.sqrt(v) + 1e-6)
    return tot


def _step_window(alloc, pool, width):
    """One ask/tell/batch step; (the window of `width` candidates it drew, its request, outcome)."""
    order, cursor = alloc._order.copy(), alloc._cursor
    req = alloc.ask()
    out = pool.generate(req)
    alloc.tell(out)
    assert alloc.ask() is None
    alloc.batch()
    return order[cursor : cursor + width], req, out


def _window_scores(window, est, n, successes_only=False):
    """The restated rule: a seen prompt's signal at its estimate; an unseen one (NaN) the mean of
    the seen ones in the window (0 if none)."""
    seen = [int(i) for i in window if not np.isnan(est[i])]
    score = {i: _signal(est[i], n, successes_only) for i in seen}
    mean = sum(score.values()) / len(seen) if seen else 0.0
    score.update({int(i): mean for i in window if np.isnan(est[i])})
    return score


def _assert_chose_the_best(score, window, chosen):
    """Every chosen candidate scores at least every candidate left out (1e-4: the table's grid)."""
    left = [score[int(i)] for i in window if int(i) not in chosen]
    assert min(score[int(i)] for i in chosen) >= max(left) - 1e-4, (sorted(chosen), score)


@pytest.mark.parametrize("asymmetry", [0.0, 1.0])
def test_ranks_the_window_by_the_signal_at_the_sampled_pass_rate(asymmetry):
    """asymmetry=1: by the signal its successful rollouts would carry (a scale apart, its
    table: tests/strategies/test_posterior_signal.py)."""
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
        asymmetry=asymmetry,
    )
    scale = 2.0 * math.sqrt((n - 1) / n) if asymmetry else 1.0  # (the 1e-4 tolerance's scale)
    steps_per_epoch = N // (2 * B)
    est = np.full(N, np.nan)  # what the strategy should believe: p once the answer was seen
    checked = 0
    for _ in range(4 * steps_per_epoch):
        window, req, out = _step_window(alloc, pool, 2 * B)
        if len(window) == 2 * B:  # (a window across an epoch's end is reordered: skipped)
            score = _window_scores(window, est, n, successes_only=asymmetry > 0)
            score = {i: v * scale for i, v in score.items()}
            _assert_chose_the_best(score, window, set(req.prompt_ids.tolist()))
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
        window, req, out = _step_window(alloc, pool, 2 * B)
        if len(window) == 2 * B:
            _assert_chose_the_best(
                _window_scores(window, est, n), window, set(req.prompt_ids.tolist())
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
    _assert_chose_the_best(score, window, chosen)


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


def test_strata_score_an_unseen_candidate_at_its_values_seen_mean():
    # state set by hand: half the pool seen; an unseen candidate's score is the mean signal of the
    # seen prompts of its column value (pool-wide, restated here), a seen one its own
    rng = np.random.default_rng(7)
    N, B, n = 60, 6, 8
    level = np.array(["a", "b", "c"])[rng.integers(0, 3, N)]
    level[:3] = ["a", "b", "c"]
    alloc = make_allocator(
        "likelihood-rank",
        num_prompts=N,
        seed=4,
        train_prompts=B,
        n=n,
        window=3.0,
        strata="level",
        drift=False,
    )
    alloc.set_pool_columns({"level": level})
    t = alloc.table
    seen = rng.random(N) < 0.5
    seen[level == "c"] = False  # a value with nothing seen: the window's seen mean
    t.p_hat[:] = np.where(seen, rng.uniform(0.02, 0.98, N), -1.0)
    sig = {i: _signal(float(t.p_hat[i]), n) for i in np.flatnonzero(seen)}
    by_level = {v: np.mean([sig[i] for i in sig if level[i] == v]) for v in ("a", "b")}
    order, cursor = alloc._order.copy(), alloc._cursor
    req = alloc.ask()
    window = [int(i) for i in order[cursor : cursor + 3 * B]]
    in_window = [sig[i] for i in window if i in sig]
    score = {i: sig[i] if i in sig else by_level.get(level[i], np.mean(in_window)) for i in window}
    chosen = set(req.prompt_ids.tolist())
    _assert_chose_the_best(score, window, chosen)
    # the values' sums follow the table as groups are told (against a recount)
    pool = ShortAnswerPool(p=rng.uniform(0.05, 0.95, N), seed=8)
    alloc.tell(pool.generate(req))
    assert alloc.ask() is None
    alloc.batch()
    drive(alloc, pool, 8)
    seen_now = t.p_hat >= 0
    for j, v in enumerate(sorted(set(level))):
        m = seen_now & (level == v)
        want = sum(_signal(float(q), n) for q in t.p_hat[m]) * math.sqrt((n - 1) / n)
        assert alloc._gsum[j, 1] == m.sum()
        assert alloc._gsum[j, 0] == pytest.approx(want, rel=1e-3)


def test_strata_without_the_column_refuse_the_first_ask():
    alloc = make_allocator(
        "likelihood-rank", num_prompts=20, seed=0, train_prompts=4, n=8, strata="level"
    )
    with pytest.raises(ValueError, match="column was never given"):
        alloc.ask()


def _look_and_commit(alloc, pool):
    """One step with probe > 0: the look round, the commit round, the batch; (look request, its
    outcome, commit request, its outcome)."""
    look = alloc.ask()
    out1 = pool.generate(look)
    alloc.tell(out1)
    commit = alloc.ask()
    out2 = pool.generate(commit)
    alloc.tell(out2)
    assert alloc.ask() is None
    alloc.batch()
    return look, out1, commit, out2


def test_after_a_look_and_its_commit_the_estimate_is_the_pass_rate_of_the_union():
    # unseen="wrong": any success in look or commit gives the pool's own p; with "rate", the union's
    # masses (each the larger part's, as documented) bound it and its s and n are the union's
    rng = np.random.default_rng(9)
    N, B, n = 96, 8, 8
    for unseen in ("wrong", "rate"):
        pool = ShortAnswerPool(p=rng.uniform(0.05, 0.95, N), seed=10)
        alloc = make_allocator(
            "likelihood-rank",
            num_prompts=N,
            seed=5,
            train_prompts=B,
            n=n,
            window=3.0,
            probe=2,
            unseen=unseen,
        )
        for _ in range(6):
            _, out1, commit, out2 = _look_and_commit(alloc, pool)
            for pid in commit.prompt_ids.tolist():
                parts = [(o.completion_key[o.prompt_ids == pid], o.rewards[o.prompt_ids == pid])
                         for o in (out1, out2)]  # fmt: skip
                keys = np.concatenate([k for k, _ in parts])
                x = np.concatenate([r for _, r in parts])
                assert len(keys) == n
                got = float(alloc.table.p_hat[pid])
                if unseen == "wrong" and x.any():
                    assert got == pytest.approx(pool.p[pid], abs=1e-6)
                if unseen == "rate":
                    w = 0.5 ** np.arange(1, pool.wrong + 1) / (1 - 0.5**pool.wrong)
                    mass = [
                        (pool.p[pid] * (k == 0).any(),
                         (1 - pool.p[pid]) * w[np.unique(k[k > 0]) - 1].sum())
                        for k, _ in parts
                    ]  # fmt: skip
                    m_c = max(m for m, _ in mass)
                    m_w = max(m for _, m in mass)
                    want = m_c + (1 - m_c - m_w) * (x.sum() + 1) / (n + 2)
                    assert got == pytest.approx(want, abs=1e-6)


def test_a_stationary_pool_has_no_drift():
    # p never changes: the drift measured on revisits must stay near 0 (a biased residual, e.g.
    # noisy estimates chosen for being high, would move it)
    rng = np.random.default_rng(11)
    for unseen, window in (("wrong", 2.0), ("rate", 2.0), ("wrong", 1.25)):
        pool = ShortAnswerPool(p=rng.uniform(0.02, 0.98, 200), seed=12)
        alloc = make_allocator(
            "likelihood-rank",
            num_prompts=200,
            seed=6,
            train_prompts=16,
            n=8,
            window=window,
            unseen=unseen,
        )
        drive(alloc, pool, 60)
        assert abs(alloc.D) < 0.05, (unseen, window, alloc.D)


def test_the_look_round_combines_the_look_with_the_stored_estimate_as_documented():
    # every candidate seen before (stored p_hat set by hand, drift off): a look of 2 rollouts; the
    # commit goes to the best by the signal at, restated from the pool's own probabilities,
    #   wrong: p if the look found the answer, else min(stored, u)
    #   rate:  c fresh + (1 - c) stored, clipped to [m_c, 1 - m_w]; fresh = m_c + u (s + 1) / (k + 2)
    N, B, k, n = 40, 8, 2, 8
    for unseen in ("wrong", "rate"):
        rng = np.random.default_rng(13)
        pool = ShortAnswerPool(p=rng.uniform(0.05, 0.95, N), seed=14, wrong=3)
        alloc = make_allocator(
            "likelihood-rank", num_prompts=N, seed=7, train_prompts=B, n=n, window=2.5,
            probe=k, unseen=unseen, drift=False,
        )  # fmt: skip
        stored = rng.choice([0.01, 0.99], N)  # far from a look's bounds: the clip binds
        alloc.table.p_hat[:] = stored
        look = alloc.ask()
        out = pool.generate(look)
        alloc.tell(out)
        commit = alloc.ask()
        w = 0.5 ** np.arange(1, pool.wrong + 1) / (1 - 0.5**pool.wrong)
        score = {}
        for i in look.prompt_ids.tolist():
            keys = out.completion_key[out.prompt_ids == i]
            s = float((keys == 0).sum())
            m_c = pool.p[i] if s > 0 else 0.0
            m_w = (1 - pool.p[i]) * w[np.unique(keys[keys > 0]) - 1].sum()
            u = 1 - m_c - m_w
            old = float(np.float32(stored[i]))
            if unseen == "wrong":
                p = pool.p[i] if s > 0 else min(old, u)
            else:
                fresh, c = m_c + u * (s + 1) / (k + 2), m_c + m_w
                p = min(max(c * fresh + (1 - c) * old, m_c), max(1 - m_w, m_c))
            score[i] = _signal(p, n)
        _assert_chose_the_best(score, look.prompt_ids, set(commit.prompt_ids.tolist()))


def test_quota_shares_each_step_by_the_values_share_of_groups_with_variance():
    # values "dead" (p = 0: no group varies), "mid" (p = 0.5, n = 32: every group varies) and
    # "easy" (p = 0.97: V(0.97, 32) = 0.62); restated here: f_g, an EMA of 0.05 per trained group
    # of its value, one group at a time in the order told, and each step's count per value: the
    # floor or ceiling of B x (its candidates x max(f_g, 0.05)) / (the window's sum), from the
    # window drawn
    rng = np.random.default_rng(3)
    N, B, n = 2000, 8, 32  # 60 steps of 32 candidates: within the first epoch
    level = np.array(["dead", "mid", "easy"])[rng.choice(3, N, p=[0.5, 0.3, 0.2])]
    p = np.select([level == "dead", level == "mid"], [0.0, 0.5], 0.97)
    alloc = make_allocator(
        "likelihood-rank",
        num_prompts=N,
        seed=1,
        train_prompts=B,
        n=n,
        window=4.0,
        unseen="wrong",
        strata="level",
        quota=True,
    )
    alloc.set_pool_columns({"level": level})
    pool = ShortAnswerPool(p=p, seed=2)
    f = {"dead": 1.0, "mid": 1.0, "easy": 1.0}
    dead_share = []
    for _ in range(60):  # the dead value's f falls below the floor of 0.05 (a re-check)
        window, req, out = _step_window(alloc, pool, 4 * B)
        weight = {v: sum(max(f[v], 0.05) for i in window if level[i] == v) for v in f}
        total = sum(weight.values())
        got = {v: int(np.sum(level[req.prompt_ids] == v)) for v in f}
        for v in f:
            share = B * weight[v] / total
            assert math.floor(share) <= got[v] <= math.ceil(share), (v, share, got)
        for pid in req.prompt_ids.tolist():  # the told groups, one at a time
            r = out.rewards[out.prompt_ids == pid]
            f[level[pid]] += 0.05 * (float(r.max() > r.min()) - f[level[pid]])
        dead_share.append(got["dead"] / B)
    assert alloc._vary.tolist() == pytest.approx([f["dead"], f["easy"], f["mid"]])  # sorted values
    assert f["dead"] < 0.05 and sum(dead_share[-20:]) > 0  # below the floor, still re-checked
    assert np.mean(dead_share[-5:]) < 0.15 < 0.3 < np.mean(dead_share[:3])  # the dead: let go


def test_quota_needs_strata_and_survives_a_resume(tmp_path):
    with pytest.raises(ValueError, match="set strata too"):
        make_allocator("likelihood-rank", num_prompts=20, seed=0, train_prompts=4, quota=True)
    from rollalloc.state import load_state, save_state

    rng = np.random.default_rng(5)
    N = 200
    level = np.array(["a", "b", "c"])[rng.integers(0, 3, N)]
    p = np.select([level == "a", level == "b"], [0.0, 0.4], 0.9)

    def build(seed=0):
        alloc = make_allocator(
            "likelihood-rank", num_prompts=N, seed=seed, train_prompts=6, n=8, window=3.0,
            unseen="wrong", strata="level", quota=True,
        )  # fmt: skip
        alloc.set_pool_columns({"level": level})
        return alloc

    def trace(batches):
        return [b.prompt_ids.tolist() for b in batches]

    straight = trace(drive(build(), ShortAnswerPool(p=p, seed=1), 30))
    pool = ShortAnswerPool(p=p, seed=1)
    first = build()
    head = trace(drive(first, pool, 12))
    save_state(tmp_path / "a.npz", first.state_dict())
    resumed = build(seed=9)
    resumed.load_state_dict(load_state(tmp_path / "a.npz"))
    assert head + trace(drive(resumed, pool, 18)) == straight


def test_quota_keeps_re_checking_a_value_with_no_variance_at_its_floor():
    # f set by hand: "dead" 0 (no group of it ever varied), "mid" 1; the dead value still gets
    # B x (its candidates x 0.05) / (the window's weight), floor or ceiling (here 2 or 3 of 32;
    # the window of 128 holds more "mid" than their share, so no cap binds)
    N, B = 4000, 32
    level = np.where(np.arange(N) % 8 < 5, "dead", "mid")  # 5 of 8 dead
    alloc = make_allocator(
        "likelihood-rank", num_prompts=N, seed=0, train_prompts=B, n=8, window=4.0,
        strata="level", quota=True,
    )  # fmt: skip
    alloc.set_pool_columns({"level": level})
    alloc._vary[:] = [0.0, 1.0]  # sorted values: dead, mid
    order, cursor = alloc._order.copy(), alloc._cursor
    req = alloc.ask()
    window = order[cursor : cursor + 4 * B]
    dead = int(np.sum(level[window] == "dead"))
    share = B * dead * 0.05 / (dead * 0.05 + (4 * B - dead))
    got = int(np.sum(level[req.prompt_ids] == "dead"))
    assert math.floor(share) <= got <= math.ceil(share) and got >= 1, (share, got)


def test_fill_draws_until_the_candidates_hold_b_groups_with_variance_in_expectation():
    # f set by hand; restated: candidates are drawn in eighths of B (2 here) until the sum of
    # their f (floor 0.05) reaches B and at least B are drawn, at most window x B
    N, B = 4000, 16
    level = np.where(np.arange(N) % 8 < 5, "dead", "mid")
    cases = [
        ("level", None, 4.0),
        ("", 0.5, 4.0),
        ("", 0.1, 3.0),
        ("", 0.01, 100.0),
        ("", 1.0, 4.0),
    ]
    for strata, f, window in cases:  # (0.01: the floor of 0.05 binds before the cap)
        alloc = make_allocator(
            "likelihood-rank", num_prompts=N, seed=2, train_prompts=B, n=8, window=window,
            strata=strata, quota=bool(strata), fill=True,
        )  # fmt: skip
        if strata:
            alloc.set_pool_columns({"level": level})
            alloc._vary[:] = [0.0, 1.0]  # dead, mid
        else:
            alloc._fpool = f
        order, cursor = alloc._order.copy(), alloc._cursor
        req = alloc.ask()
        want, got = 0, 0.0
        while got < B and want < window * B:
            chunk = order[cursor + want : cursor + want + 2]
            got += sum(
                max((0.0 if level[i] == "dead" else 1.0) if strata else f, 0.05) for i in chunk
            )
            want += len(chunk)
        assert alloc._cursor - cursor == want, (strata, f)
        assert len(req.prompt_ids) == B  # the batch stays B groups
        window_ids = set(order[cursor : cursor + want].tolist())
        assert set(req.prompt_ids.tolist()) <= window_ids
    assert want == B  # f = 1: a window of B, GRPO's prompts


def test_fill_without_strata_follows_the_pools_share_of_groups_with_variance():
    # the pool's f restated: an EMA of 0.05 per trained group, one at a time in the order told
    rng = np.random.default_rng(4)
    N, B = 3000, 8
    p = np.where(rng.random(N) < 0.6, 0.0, 0.5)  # 60% never vary
    alloc = make_allocator(
        "likelihood-rank", num_prompts=N, seed=3, train_prompts=B, n=16, window=4.0,
        unseen="wrong", fill=True,
    )  # fmt: skip
    pool = ShortAnswerPool(p=p, seed=5)
    f, widths = 1.0, []
    for _ in range(40):
        cursor = alloc._cursor
        _, req, out = _step_window(alloc, pool, 0)
        widths.append(alloc._cursor - cursor)
        for pid in req.prompt_ids.tolist():
            r = out.rewards[out.prompt_ids == pid]
            f += 0.05 * (float(r.max() > r.min()) - f)
    assert alloc._fpool == pytest.approx(f)
    assert widths[0] == B and np.mean(widths[-10:]) > 1.6 * B  # the window widened


def test_fill_across_epoch_boundaries_keeps_each_prompt_a_candidate_once_an_epoch():
    # a window of 16 drawn in chunks of 1 from a pool of 20: most steps cross an epoch boundary;
    # the prompts drawn earlier in the step must not lose their place in the new epoch (the
    # review's case: without `also`, 960 candidates used 1,194 stream positions)
    N, B = 20, 4
    alloc = make_allocator(
        "likelihood-rank", num_prompts=N, seed=0, train_prompts=B, n=4, window=4.0, fill=True
    )
    pool = BernoulliPool(p=np.zeros(N), seed=0)
    for _ in range(60):
        alloc._fpool = 0.0  # every window at its cap, 16 of the 20
        order, cursor, epoch = alloc._order.copy(), alloc._cursor, alloc.epoch
        req = alloc.ask()
        alloc.tell(pool.generate(req))
        assert alloc.ask() is None
        alloc.batch()
        if alloc.epoch == epoch:  # within an epoch: exactly the stream's next 16
            assert alloc._cursor - cursor == 16 and set(req.prompt_ids) <= set(order[cursor:])
    # 960 candidates over 20 prompts: 48 epochs, each prompt once in each
    assert alloc.epoch in (47, 48)


def test_quota_chooses_the_best_by_signal_within_each_value_and_loads_an_old_state():
    # p_hat set by hand for every prompt: within each value the chosen are its best by the
    # restated signal; then a state saved before quota existed (no "vary", "fpool", "gsum")
    # loads into a quota allocator whose columns were set first, and it goes on
    rng = np.random.default_rng(9)
    N, B, n = 2000, 16, 8
    level = np.array(["a", "b", "c"])[rng.integers(0, 3, N)]

    def build():
        alloc = make_allocator(
            "likelihood-rank", num_prompts=N, seed=0, train_prompts=B, n=n, window=3.0,
            strata="level", quota=True, drift=False,
        )  # fmt: skip
        alloc.set_pool_columns({"level": level})
        return alloc

    alloc = build()
    alloc.table.p_hat[:] = rng.uniform(0.02, 0.98, N)
    order, cursor = alloc._order.copy(), alloc._cursor
    req = alloc.ask()
    window = [int(i) for i in order[cursor : cursor + 3 * B]]
    chosen = set(req.prompt_ids.tolist())
    for v in ("a", "b", "c"):
        mine = [i for i in window if level[i] == v]
        score = {i: _signal(float(alloc.table.p_hat[i]), n) for i in mine}
        if any(i in chosen for i in mine) and any(i not in chosen for i in mine):
            _assert_chose_the_best(score, mine, chosen & set(mine))
    pool = ShortAnswerPool(p=rng.uniform(0, 1, N), seed=3)
    alloc.tell(pool.generate(req))
    assert alloc.ask() is None
    alloc.batch()
    old = alloc.state_dict()
    for key in ("vary", "fpool", "gsum"):
        old["strategy_state"].pop(key)
    resumed = build()
    resumed.load_state_dict(old)
    assert resumed._vary.tolist() == [1.0, 1.0, 1.0] and resumed._fpool == 1.0
    drive(resumed, pool, 2)


def test_quota_under_a_look_counts_the_trained_union_and_shares_among_the_looked():
    # probe=1: f_g is restated from the trained groups only, each the union of its look (1 rollout)
    # and its commit (n - 1), one at a time in the commit's order; the dropped looks do not count.
    # Each commit's count per value is the floor or ceiling of B x (its looked candidates x
    # max(f_g, 0.05)) / (the looked window's sum), f_g as before the step
    rng = np.random.default_rng(11)
    N, B, n = 3000, 8, 4  # groups of 4: a look often differs from its commit
    level = np.array(["hard", "mid", "easy"])[rng.choice(3, N, p=[0.4, 0.3, 0.3])]
    p = np.select([level == "hard", level == "mid"], [0.08, 0.5], 0.9)
    alloc = make_allocator(
        "likelihood-rank", num_prompts=N, seed=3, train_prompts=B, n=n, window=3.0, probe=1,
        unseen="wrong", strata="level", quota=True,
    )  # fmt: skip
    alloc.set_pool_columns({"level": level})
    pool = ShortAnswerPool(p=p, seed=4)
    f = {"easy": 1.0, "hard": 1.0, "mid": 1.0}
    union_differs = 0
    for _ in range(40):
        look, out1, commit, out2 = _look_and_commit(alloc, pool)
        looked = look.prompt_ids
        weight = {v: sum(max(f[v], 0.05) for i in looked if level[i] == v) for v in f}
        total = sum(weight.values())
        for v in f:
            share = B * weight[v] / total
            got = int(np.sum(level[commit.prompt_ids] == v))
            assert math.floor(share) <= got <= math.ceil(share), (v, share, got)
        for pid in commit.prompt_ids.tolist():
            r = np.concatenate([o.rewards[o.prompt_ids == pid] for o in (out1, out2)])
            assert len(r) == n
            r2 = out2.rewards[out2.prompt_ids == pid]
            union_differs += int((r.max() > r.min()) != (r2.max() > r2.min()))
            f[level[pid]] += 0.05 * (float(r.max() > r.min()) - f[level[pid]])
    assert alloc._vary.tolist() == pytest.approx([f["easy"], f["hard"], f["mid"]])
    assert union_differs >= 20  # the commit alone would give another f_g


@pytest.mark.parametrize("bad", [-0.5, 9.0, float("nan"), True, "1"])
def test_asymmetry_outside_zero_to_eight_is_refused_by_name(bad):
    with pytest.raises(ValueError, match=r"asymmetry must be a number in \[0.0, 8.0\]"):
        make_allocator(
            "likelihood-rank", num_prompts=50, seed=0, n=4, train_prompts=8, asymmetry=bad
        )
