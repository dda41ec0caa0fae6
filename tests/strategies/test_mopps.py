"""MoPPS: the decayed Beta posterior by hand, and selection of the samples closest to the target."""

from __future__ import annotations

import numpy as np
import pytest

from rollalloc.allocator import make_allocator
from rollalloc.testing import BernoulliPool, drive
from rollalloc.types import Outcome


class Table:
    """Prompt i's first successes[i] rollouts of a request score 1, the rest 0."""

    def __init__(self, successes):
        self.successes = dict(successes)
        self.next_handle = 0

    def generate(self, request):
        ids, rewards = [], []
        for pid, n in zip(request.prompt_ids.tolist(), request.num_rollouts.tolist()):
            s = min(self.successes.get(pid, 0), n)
            ids += [pid] * n
            rewards += [1.0] * s + [0.0] * (n - s)
        h = np.arange(self.next_handle, self.next_handle + len(ids))
        self.next_handle += len(ids)
        return Outcome(np.array(ids), h, np.array(rewards))


def decayed_posterior(prior, evidence, lam):
    """The recursion x <- lam x + (1 - lam) x0 + e_t unrolled: the prior plus the evidence of step
    t = 1..T weighted by lam^(T - t), the newest by 1 (by induction: lam (x0 + S) + (1 - lam) x0 + e
    = x0 + lam S + e)."""
    T = len(evidence)
    return prior + sum(lam ** (T - 1 - t) * e for t, e in enumerate(evidence))


def test_posterior_decays_toward_the_prior_then_takes_the_evidence():
    # Every prompt is selected every step (candidates = pool = batch); n 4, lambda 0.5, Beta(1, 2).
    alloc = make_allocator(
        "mopps", 3, seed=0, train_prompts=3, candidate_ratio=1, n=4, decay=0.5, prior_beta=2.0
    )
    successes = {0: [2, 4], 1: [4, 1], 2: [0, 0]}  # of 4, steps 1 and 2
    for step in range(2):
        drive(alloc, Table({i: s[step] for i, s in successes.items()}), 1)
        a = [decayed_posterior(1.0, s[: step + 1], 0.5) for s in successes.values()]
        b = [
            decayed_posterior(2.0, [4 - x for x in s[: step + 1]], 0.5) for s in successes.values()
        ]
        assert alloc.table.alpha.tolist() == pytest.approx(a)
        assert alloc.table.beta.tolist() == pytest.approx(b)
    # by hand, prompt 0: alpha 1 + 0.5 x 2 + 4 = 6, beta 2 + 0.5 x 2 + 0 = 3
    assert (alloc.table.alpha[0], alloc.table.beta[0]) == pytest.approx((6.0, 3.0))


def test_the_posterior_counts_successes_not_rewards():
    # Rewards in [-1, 1] feed advantages; the Beta posterior counts the verdicts: 1 success of 2.
    alloc = make_allocator(
        "mopps", 1, seed=0, train_prompts=1, candidate_ratio=1, n=2, reward_min=-1.0
    )
    req = alloc.ask()
    alloc.tell(Outcome([0, 0], [0, 1], [1.0, -0.2], success=[1.0, 0.0]))
    assert req.prompt_ids.tolist() == [0]
    assert (alloc.table.alpha[0], alloc.table.beta[0]) == pytest.approx((1 + 1, 1 + 1))


def test_topk_selects_the_samples_closest_to_the_target():
    alloc = make_allocator("mopps", 40, seed=0, train_prompts=3, n=4)
    cands = np.arange(10, 18)
    p = np.array([0.05, 0.45, 0.93, 0.52, 0.7, 0.5, 0.2, 0.61])
    assert alloc.select(cands, p).tolist() == [15, 13, 11]  # |p - .5| = 0, .02, .05


def test_threshold_selects_inside_the_band_then_the_nearest_outside():
    alloc = make_allocator("mopps", 40, seed=0, train_prompts=3, n=4, selection="threshold")
    cands = np.arange(6)
    p = np.array([0.05, 0.35, 0.9, 0.75, 0.69, 0.1])  # inside [.3, .7]: 1 and 4
    chosen = alloc.select(cands, p).tolist()
    assert sorted(chosen[:2]) == [1, 4] and chosen[2] == 3  # .75 is .05 above the band


def test_thompson_draw_picks_uncertain_middle_prompts_once_the_posterior_has_learned():
    # Thirds of the pool at p = 0, 0.5, 1. After a few epochs, nearly all selections are p = 0.5.
    p = np.repeat([0.0, 0.5, 1.0], 100)
    alloc = make_allocator("mopps", 300, seed=1, train_prompts=10, candidate_ratio=16, n=8)
    batches = drive(alloc, BernoulliPool(p, seed=2), 60)
    late = np.concatenate([b.prompt_ids for b in batches[-20:]])
    early = np.concatenate([b.prompt_ids for b in batches[:2]])
    assert np.mean(p[late] == 0.5) > 0.85
    assert np.mean(p[early] == 0.5) < 0.6  # the flat prior cannot tell them apart
    assert all(b.num_groups == 10 and (b.group_sizes == 8).all() for b in batches)
