"""The sampled mass of a group's completions (rollalloc.likelihood) and its checks in tell().

Expected values: the masses by a plain loop over a dict of distinct completions; the pass rate by
the pool's own definition (ShortAnswerPool: completion 0 with probability p is the only correct one).
"""

from __future__ import annotations

import numpy as np
import pytest

from rollalloc import make_allocator
from rollalloc.likelihood import pass_rate_estimate, sampled_mass
from rollalloc.testing import ShortAnswerPool
from rollalloc.types import Outcome


def _brute_mass(counts, keys, logprob, success):
    out, r = [], 0
    for n in counts:
        seen: dict[int, tuple[float, float]] = {}
        for j in range(r, r + n):
            seen.setdefault(int(keys[j]), (float(np.exp(logprob[j])), float(success[j])))
        out.append(
            (sum(pi * x for pi, x in seen.values()), sum(pi * (1 - x) for pi, x in seen.values()))
        )
        r += n
    return np.array(out).reshape(-1, 2)


def test_sampled_mass_equals_a_loop_over_distinct_completions():
    rng = np.random.default_rng(0)
    for _ in range(50):
        counts = rng.integers(1, 9, size=rng.integers(1, 7))
        R = int(counts.sum())
        keys = rng.integers(0, 4, size=R)  # repeats within and across groups
        # one log-prob and one verdict per (group, completion), as a sampler would give
        g = np.repeat(np.arange(len(counts)), counts)
        lp_table = np.log(rng.dirichlet(np.ones(4), size=len(counts))) - 0.1
        x_table = rng.random((len(counts), 4)).round(1)
        logprob, success = lp_table[g, keys], x_table[g, keys]
        m_c, m_w = sampled_mass(counts, keys, logprob, success)
        want = _brute_mass(counts, keys, logprob, success)
        np.testing.assert_allclose(np.c_[m_c, m_w], want, rtol=1e-12, atol=1e-15)


def test_pass_rate_of_short_answers_is_exact_once_the_answer_is_sampled():
    p = np.r_[np.linspace(0.05, 0.95, 19), 0.0, 0.0, 0.01]
    pool = ShortAnswerPool(p=p, seed=3)
    alloc = make_allocator("grpo", num_prompts=len(p), seed=0, train_prompts=len(p), n=8)
    req = alloc.ask()
    out = pool.generate(req)
    g = req.expand()
    m_c, m_w = sampled_mass(req.num_rollouts, out.completion_key, out.logprob, out.rewards)
    s = np.bincount(g, weights=out.rewards, minlength=len(p))[req.prompt_ids]
    truth = p[req.prompt_ids]
    assert np.all(m_c <= truth + 1e-12) and np.all(truth <= 1 - m_w + 1e-12)  # the bounds
    hit = s > 0
    assert hit.sum() >= 15 and (~hit).sum() >= 3
    est = pass_rate_estimate(m_c, m_w, s, req.num_rollouts, "wrong")
    np.testing.assert_allclose(est[hit], truth[hit], atol=1e-12)
    # no success: E[p | p ~ U(0, u), missed by n draws], by Monte Carlo
    u = 1 - m_c - m_w
    rng = np.random.default_rng(0)
    for i in np.flatnonzero(~hit):
        q = rng.uniform(0, u[i], 400_000)
        w = (1 - q) ** req.num_rollouts[i]
        assert abs(est[i] - (q * w).sum() / w.sum()) < 2e-3 * max(u[i], 0.05)
    # "rate": the unsampled mass at (s + 1) / (n + 2), i.e. between the bounds
    rate = pass_rate_estimate(m_c, m_w, s, req.num_rollouts, "rate")
    assert np.all((m_c - 1e-12 <= rate) & (rate <= 1 - m_w + 1e-12))


def test_all_new_completions_give_the_smoothed_rate():
    # long chains of thought: every completion distinct and improbable, nothing is covered
    counts = np.array([8, 8])
    keys = np.arange(16)
    logprob = np.full(16, -40.0)
    success = np.r_[np.ones(3), np.zeros(5), np.zeros(8)]
    m_c, m_w = sampled_mass(counts, keys, logprob, success)
    est = pass_rate_estimate(m_c, m_w, np.array([3.0, 0.0]), counts, "rate")
    np.testing.assert_allclose(est, [4 / 10, 1 / 10], atol=1e-12)


def _told(alloc, pool):
    req = alloc.ask()
    return req, pool.generate(req)


@pytest.mark.parametrize(
    "corrupt, match",
    [
        (lambda o: {"logprob": o.logprob}, "come together"),
        (lambda o: {"completion_key": o.completion_key}, "come together"),
        (lambda o: {"logprob": -o.logprob + 0.5, "completion_key": o.completion_key}, "<= 0"),
        (lambda o: {"logprob": o.logprob * np.nan, "completion_key": o.completion_key}, "<= 0"),
        (lambda o: {"logprob": o.logprob[:-1], "completion_key": o.completion_key}, "one value"),
        (
            lambda o: {"logprob": o.logprob, "completion_key": o.completion_key + 0.5},
            "integers",
        ),
        (  # every rollout a distinct completion of probability 0.9: mass 7.2
            lambda o: {
                "logprob": np.full(len(o), np.log(0.9)),
                "completion_key": np.arange(len(o)),
            },
            "probability .* > 1",
        ),
    ],
)
def test_bad_likelihoods_raise_before_anything_changes(corrupt, match):
    pool = ShortAnswerPool(p=np.full(16, 0.5), seed=1)
    alloc = make_allocator("likelihood-rank", num_prompts=16, seed=0, train_prompts=4, n=8)
    req, out = _told(alloc, pool)
    bad = Outcome(out.prompt_ids, out.handles, out.rewards, **corrupt(out))
    with pytest.raises(ValueError, match=match):
        alloc.tell(bad)
    assert alloc.table.trials.sum() == 0 and alloc.ask() is req  # nothing changed, still pending
    alloc.tell(out)


def test_short_answers_are_drawn_with_the_probabilities_they_report():
    # Monte Carlo: each completion's frequency is the probability its log-prob reports
    p = np.array([0.0, 0.3, 0.9, 1.0])
    pool = ShortAnswerPool(p=p, seed=7, wrong=5)
    alloc = make_allocator("grpo", num_prompts=4, seed=0, train_prompts=4, n=40000)
    req = alloc.ask()
    out = pool.generate(req)
    g = req.expand()
    for i in range(4):
        rows = g == req.prompt_ids[i]
        keys, lp = out.completion_key[rows], out.logprob[rows]
        assert np.array_equal(out.rewards[rows] == 1, keys == 0)  # key 0 is the correct answer
        probs = {}
        for k in np.unique(keys):
            probs[int(k)] = float(np.exp(lp[keys == k][0]))
            assert np.all(lp[keys == k] == lp[keys == k][0])
            freq = np.mean(keys == k)
            assert abs(freq - probs[int(k)]) < 4 * np.sqrt(probs[int(k)] / 40000) + 1e-9
        assert sum(probs.values()) <= 1 + 1e-12
        true_p = p[req.prompt_ids[i]]
        assert abs(probs.get(0, 0.0) - true_p) < 1e-12 or (true_p == 0 and 0 not in probs)


def test_a_completion_told_with_two_verdicts_counts_at_their_mean():
    # a stochastic verifier: the same completion judged 1, 1 and 0 is 2/3 correct
    m_c, m_w = sampled_mass(
        np.array([4]), np.array([1, 1, 1, 2]), np.log([0.5, 0.5, 0.5, 0.3]), np.array([1, 1, 0, 0])
    )
    np.testing.assert_allclose([m_c[0], m_w[0]], [0.5 * 2 / 3, 0.5 / 3 + 0.3], atol=1e-12)


def test_strategies_that_do_not_read_the_mass_ignore_bad_log_probs():
    pool = ShortAnswerPool(p=np.full(16, 0.5), seed=1)
    for name, raises in (("grpo", False), ("likelihood-rank", True)):
        alloc = make_allocator(name, num_prompts=16, seed=0, train_prompts=4, n=8)
        req, out = _told(alloc, pool)
        bad = Outcome(out.prompt_ids, out.handles, out.rewards, logprob=-out.logprob + 1.0,
                      completion_key=out.completion_key)  # fmt: skip
        if raises:
            with pytest.raises(ValueError, match="<= 0"):
                alloc.tell(bad)
        else:
            alloc.tell(bad)  # grpo never reads them: a run is not stopped by them


def test_unsampled_mean_is_monte_carlo_and_below_u_down_to_tiny_u():
    from rollalloc.likelihood import _unsampled_mean

    rng = np.random.default_rng(3)
    for u in (1.0, 0.3, 1e-2, 1e-5, 1e-9, 0.0):
        for n in (1, 8, 64):
            got = float(_unsampled_mean(np.array([u]), np.array([n]))[0])
            assert 0.0 <= got <= u
            if u >= 1e-2:
                q = rng.uniform(0, u, 400_000)
                w = (1 - q) ** n
                assert abs(got - (q * w).sum() / w.sum()) < 3e-3 * u
            else:  # the mean of U(0, u), weighted by (1 - p)^n ~ 1
                assert got == pytest.approx(u / 2, rel=1e-3)
