"""GRESO on hand-made reward tables: streaks, the skip probability, p_easy/p_hard, rounds."""

from __future__ import annotations

import numpy as np
import pytest

from rollalloc.allocator import make_allocator
from rollalloc.strategies.greso import EASY, HARD
from rollalloc.testing import BernoulliPool, TablePool, drive


class FixedUniforms:
    """Stands in for the allocator's generator: `random(k)` returns the given values in turn."""

    def __init__(self, rng, values):
        self.rng, self.values = rng, list(values)

    def random(self, k):
        out, self.values = self.values[:k], self.values[k:]
        return np.array(out)

    def __getattr__(self, name):  # permutation etc. for the epoch stream
        return getattr(self.rng, name)


def greso(num_prompts, **kw):
    return make_allocator("greso", num_prompts, seed=0, **{"n": 4, **kw})


def test_streaks_count_consecutive_zero_variance_groups_of_one_kind():
    # skip_floor 1 never skips; one round of all 4 prompts per step.
    alloc = greso(
        4, train_prompts=4, gen_prompts=4, skip_floor=1.0, max_rounds=1, on_max_rounds="train"
    )
    history = {0: [4, 4, 4], 1: [0, 0, 2], 2: [4, 0, 0], 3: [2, 4, 4]}  # successes out of 4
    for step in range(3):
        drive(alloc, TablePool({i: h[step] for i, h in history.items()}), 1)
    assert alloc.table.streak.tolist() == [3, 0, 2, 2]
    assert alloc.table.streak_kind.tolist() == [EASY, 0, HARD, EASY]


# 1 - max(p^k, 0.01) by hand for p_easy 0.7 and p_hard 0.4 (0.7^7 = 0.0823543, 0.7^10 = 0.0282475249;
# 0.4^7 = 0.0016384 and 0.4^10 are below the floor): no streak, no skip.
SKIP_BY_HAND = {
    0: (0.0, 0.0),
    1: (0.3, 0.6),
    2: (0.51, 0.84),
    3: (0.657, 0.936),
    7: (0.9176457, 0.99),
    10: (0.9717524751, 0.99),
}


@pytest.mark.parametrize("k", sorted(SKIP_BY_HAND))
def test_skip_probability_is_one_minus_max_p_to_the_k_and_floor(k):
    alloc = greso(10, train_prompts=2, p_easy=0.7, p_hard=0.4)
    t = alloc.table
    t.streak[:2] = k
    t.streak_kind[:2] = [EASY, HARD]
    got = alloc.skip_probability(np.array([0, 1, 2]))
    assert got.tolist() == pytest.approx([*SKIP_BY_HAND[k], 0.0], abs=1e-12)


def test_skip_decision_compares_the_draw_with_the_probability():
    # 6 prompts, all on an easy streak of 1 with p_easy 0.5: skipped iff u < 0.5.
    alloc = greso(6, train_prompts=1, gen_prompts=3, min_gen_prompts=1)
    alloc.table.streak[:] = 1
    alloc.table.streak_kind[:] = EASY
    order = alloc._order.tolist()
    alloc.rng = FixedUniforms(alloc.rng, [0.1, 0.9, 0.49, 0.5, 0.2, 0.3] + [0.95] * 10)
    req = alloc.ask()
    # chunk 1 (3 prompts): u .1 skip, .9 keep, .49 skip; chunk 2 (2): .5 keep, .2 skip;
    # chunk 3 (1): .3 skip; then the epoch wraps and the next new prompt is kept (u .95).
    assert len(req) == 3 and req.prompt_ids.tolist()[:2] == [order[1], order[3]]
    assert alloc.step_decisions["skipped_easy"] == 4


def test_skip_rate_matches_the_formula_statistically():
    alloc = greso(20000, train_prompts=100, gen_prompts=2000, p_hard=0.5)
    alloc.table.streak[:] = 3
    alloc.table.streak_kind[:] = HARD
    alloc.ask()
    skipped = alloc.step_decisions["skipped_hard"]
    rate = skipped / (skipped + 2000)
    assert rate == pytest.approx(1 - 0.5**3, abs=0.01)


def test_rounds_filter_zero_variance_and_size_the_next_round():
    # train 6, first round 12 prompts; 4 of them half right (kept), the other 8 all wrong, every
    # prompt outside the first round half right. By hand: 2 groups still needed, the round kept a
    # third of its prompts, so 1.25 x 2 = 2.5 expected keeps need 7.5 prompts: 8 (rounded up, in
    # [min_gen_prompts 2, 12]). The reference (ray_trainer.py) truncates with int(): 7.
    # (With most of the first round kept or none, the size sits at a clip and shows nothing.)
    alloc = greso(100, train_prompts=6, gen_prompts=12, min_gen_prompts=2)
    req = alloc.ask()
    first = req.prompt_ids.tolist()
    pool = TablePool({i: (0 if i in first[4:] else 2) for i in range(100)})
    alloc.tell(pool.generate(req))
    assert alloc.step_decisions == {"kept": 4, "too_hard": 8}
    assert alloc._next_size == 8
    b = drive(alloc, pool, 1)[0]
    assert b.num_groups == 6 and b.stats.effective_prompt_ratio == 1.0
    assert len(pool.log) == 2 and len(pool.log[1]) == 8  # epoch 0: nothing is skipped
    assert b.stats.decisions["surplus"] == 4 + 8 - 6


def test_p_easy_and_p_hard_adapt_only_after_the_first_epoch():
    # All prompts all correct: the easy share (1.0) is above target/3, the hard share (0) below.
    pool = TablePool({i: 4 for i in range(8)})
    alloc = greso(8, train_prompts=1, gen_prompts=4, max_rounds=2, on_max_rounds="train")
    drive(alloc, pool, 1)
    assert alloc.epoch == 0 and (alloc.p_easy, alloc.p_hard) == (0.5, 0.5)
    while alloc.epoch == 0:
        drive(alloc, pool, 1)
    before = alloc.p_easy, alloc.p_hard
    drive(alloc, pool, 1)
    assert alloc.p_easy == pytest.approx(before[0] - 0.01)
    assert alloc.p_hard == pytest.approx(min(before[1] + 0.01, 0.95))
    for _ in range(60):
        drive(alloc, pool, 1)
    assert alloc.p_easy == pytest.approx(0.05) and alloc.p_hard == pytest.approx(0.95)


def test_skipping_saves_rollouts_against_dapo_on_a_stable_pool():
    # A pool whose solved / hopeless prompts stay so: after the first epoch GRESO skips most of
    # them before rollout and needs fewer rollouts per trained group than DAPO.
    p = BernoulliPool.mixed(400, seed=0, solved=0.3, hopeless=0.3).p
    g = greso(400, train_prompts=16)
    d = make_allocator("dapo", 400, seed=0, train_prompts=16, n=4, gen_prompts=24)
    drive(g, BernoulliPool(p, seed=1), 120)
    drive(d, BernoulliPool(p, seed=1), 120)
    assert g.cum_rollouts < 0.8 * d.cum_rollouts


def reference_streaks(records):
    """(easy, hard) trailing counts of the reference's DataProfiler (presampling_selector.py):
    easy counts trailing records >= 0.98 (`< 0.98` ends it); hard is 0 when the last record is
    > 0.11, else counts trailing records <= 0.11."""
    easy = hard = 0
    for r in reversed(records):
        if r < 0.98:
            break
        easy += 1
    if records[-1] <= 0.11:
        for r in reversed(records):
            if r > 0.11:
                break
            hard += 1
    return easy, hard


@pytest.mark.parametrize("n", [4, 8, 9, 10, 16, 49, 50, 64])
def test_streak_cutoffs_agree_with_the_reference_for_every_n(n):
    # Successes of n per step. Prompt 0: none, one, none (hard streak 3 where 1/n <= 0.11, n >= 10);
    # prompt 1: all, all but one (easy streak 2 where (n-1)/n >= 0.98, n >= 50); prompt 2: one, none;
    # prompt 3: none, all, all but one.
    history = {0: [0, 1, 0], 1: [n, n, n - 1], 2: [1, 1, 0], 3: [0, n, n - 1]}
    alloc = greso(
        4, n=n, train_prompts=4, gen_prompts=4, skip_floor=1.0, max_rounds=1, on_max_rounds="train"
    )
    trained = []
    for step in range(3):
        b = drive(alloc, TablePool({i: h[step] for i, h in history.items()}), 1)[0]
        trained.append(set(b.prompt_ids.tolist()))
    for i, h in history.items():
        easy, hard = reference_streaks([s / n for s in h])
        assert (easy == 0) or (hard == 0)
        want_kind = EASY if easy else HARD if hard else 0
        assert (int(alloc.table.streak[i]), int(alloc.table.streak_kind[i])) == (
            easy + hard,
            want_kind,
        ), f"prompt {i}, history {h} of {n}"
    # the streak decides skipping only: a group with variance is trained whatever its kind
    assert 0 in trained[1] and 2 in trained[0] and 2 not in trained[2]
