"""What the probabilities of the sampled completions say about a prompt's pass rate.

A prompt's pass rate is a sum over completions, p = sum_y pi(y) [y correct]. A group of n samples
shows a few distinct completions with their exact probabilities pi(y): the sampler's log-probs,
which every RL trainer already keeps for its importance ratios. Split the distinct ones into the
correct (C) and the wrong (W):

    m_c = sum_{y in C} pi(y)  <=  p  <=  1 - m_w,        m_w = sum_{y in W} pi(y)

The mass never sampled, u = 1 - m_c - m_w, holds correct completions at a rate r:

    p_hat = m_c + u r
    r = (s + 1) / (n + 2)    unseen="rate": the group's smoothed success rate (s of n), any task
    r = 0 if s > 0           unseen="wrong": tasks with one correct completion (an exact short
                             answer, a label): once it is sampled, all the rest is wrong;
                             and if s = 0, p_hat = E[p | p ~ Uniform(0, u), n draws missed
                             it]: 1 / (n + 2) at u = 1, u / 2 as u -> 0

Short answers: a few completions hold most of the mass, u is small, and with unseen="wrong" p_hat
is the pass rate of the policy that sampled, from a group of any size (on the default testbed's
warm start, groups of 8: mean |p_hat - p| 0.002 against 0.06 with "rate" and 0.11 for (s+1)/(n+2)
alone; benchmarks/likelihood_accuracy.py). Long chains of thought: every completion is new and improbable, u ~ 1, p_hat is the
group's smoothed rate with "rate" (with "wrong", wrongly, ~0 once a success is seen). A fractional
success x counts x of its completion's mass as correct. (docs/likelihood-rank.md)
"""

from __future__ import annotations

import numpy as np

MASS_TOL = 0.01
"""Distinct completions may hold at most 1 + MASS_TOL of probability (float rounding of summed
token log-probs); more means the log-probs are not of the distribution sampled from."""


def sampled_mass(
    counts: np.ndarray, keys: np.ndarray, logprob: np.ndarray, success: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(m_c, m_w), (P,) each: the probability of the distinct correct and wrong completions of each
    group. Rows are grouped: group i is the `counts[i]` rows after the previous groups'.
    A completion sampled twice counts once, at the mean success of its rows."""
    counts = np.asarray(counts, dtype=np.int64)
    g = np.repeat(np.arange(len(counts)), counts)  # (R,) group of each row
    order = np.lexsort((keys, g))  # by group, then by completion
    gs, ks = g[order], np.asarray(keys)[order]
    first = np.ones(len(order), dtype=bool)
    first[1:] = (gs[1:] != gs[:-1]) | (ks[1:] != ks[:-1])
    rows = order[first]  # (D,) one row per distinct completion of each group
    pi = np.exp(np.asarray(logprob, dtype=np.float64)[rows])
    # its success: the mean over its rows (a deterministic verifier gives them all the same)
    which = np.cumsum(first) - 1  # (R,) distinct completion of each sorted row
    xs = np.asarray(success, dtype=np.float64)[order]
    x = np.bincount(which, weights=xs) / np.bincount(which)
    m_c = np.bincount(g[rows], weights=x * pi, minlength=len(counts))
    m_w = np.bincount(g[rows], weights=(1.0 - x) * pi, minlength=len(counts))
    return m_c, m_w


def completion_keys(completions) -> np.ndarray:
    """Outcome.completion_key: (R,) int64, equal for equal token sequences (a hash of the ids;
    Python's hash of a tuple of ints is the same in every process)."""
    return np.array([hash(tuple(int(t) for t in c)) for c in completions], dtype=np.int64)


UNSEEN = ("rate", "wrong")


def pass_rate_estimate(
    m_c: np.ndarray, m_w: np.ndarray, successes: np.ndarray, n: np.ndarray, unseen: str = "rate"
) -> np.ndarray:
    """p_hat = m_c + u r, u = max(0, 1 - m_c - m_w), r as `unseen` says: (P,), in [0, 1]."""
    if unseen not in UNSEEN:
        raise ValueError(f"unseen must be one of {UNSEEN}, got {unseen!r}")
    u = np.maximum(1.0 - m_c - m_w, 0.0)
    if unseen == "rate":
        return np.clip(m_c + u * (successes + 1.0) / (n + 2.0), 0.0, 1.0)
    return np.clip(np.where(successes > 0, m_c, _unsampled_mean(u, n)), 0.0, 1.0)


def _unsampled_mean(u: np.ndarray, n: np.ndarray) -> np.ndarray:
    """E[p | p ~ Uniform(0, u), n draws missed it] = int_0^u p (1-p)^n dp / int_0^u (1-p)^n dp."""
    u = np.clip(np.asarray(u, dtype=np.float64), 0.0, 1.0)
    n = np.asarray(n, dtype=np.float64)
    small = (n + 2) * u < 1e-4  # the closed form cancels there: its series, (u/2)(1 - n u / 6)
    u_ = np.where(small, 0.5, u)
    q = 1.0 - u_
    with np.errstate(divide="ignore"):  # u = 1: log1p(-1) = -inf, q^(n+1) = 0
        z0 = -np.expm1((n + 1) * np.log1p(-u_)) / (n + 1)  # int (1-p)^n = (1 - q^(n+1)) / (n+1)
    z1 = z0 - (1.0 - q ** (n + 2)) / (n + 2)  # int p (1-p)^n = z0 - (1 - q^(n+2)) / (n+2)
    return np.where(small, u / 2 * (1 - n * u / 6), np.maximum(z1, 0.0) / z0)


def short_answer_likelihoods(u: np.ndarray, p: np.ndarray, wrong: int) -> dict:
    """Outcome's `logprob` and `completion_key` of rollouts drawn as u < p, for a simulated pool of
    short answers (SimConfig.short_answers, rollalloc.testing.ShortAnswerPool):
    the same uniform u picks the completion, 0 (correct, probability p) below p, else wrong answer j
    with (1 - p) 2^-j / (1 - 2^-W); {} when `wrong` is 0."""
    if not wrong:
        return {}
    w = 0.5 ** np.arange(1, wrong + 1)
    w = w / w.sum()  # (W,)
    cdf = p[:, None] + (1.0 - p)[:, None] * np.cumsum(w)[None, :-1]  # (R, W-1)
    j = np.where(u < p, 0, 1 + (u[:, None] >= cdf).sum(axis=1))  # (R,)
    prob = np.where(j == 0, p, (1.0 - p) * w[np.maximum(j - 1, 0)])
    return {"logprob": np.log(np.maximum(prob, 1e-300)), "completion_key": j.astype(np.int64)}
