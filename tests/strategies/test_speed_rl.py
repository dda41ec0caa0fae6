"""SPEED-RL on hand-made reward tables: which screens are dropped, binding, carry-over, accounting."""

from __future__ import annotations

import numpy as np
import pytest

from rollalloc.allocator import MaxRoundsError, make_allocator
from rollalloc.testing import BernoulliPool, TablePool, drive


def speed(num_prompts, **kw):
    cfg = {"n_screen": 4, "n_continue": 20, **kw}
    return make_allocator("speed-rl", num_prompts, seed=0, **cfg)


def test_drops_exactly_the_all_equal_screens():
    # successes out of 4 screening rollouts: 0 and 4 are dropped, 1..3 kept.
    table = {i: i % 5 for i in range(10)}
    alloc = speed(10, train_prompts=4, gen_prompts=10)
    req = alloc.ask()
    assert req.phases == ("screen",) * 10 and (req.num_rollouts == 4).all()
    alloc.tell(TablePool(table).generate(req))
    queued = sorted(g.prompt_id for g in alloc.queue)
    assert queued == [i for i in range(10) if table[i] in (1, 2, 3)]
    assert alloc.step_decisions == {"kept": 6, "too_easy": 2, "too_hard": 2}
    assert alloc.cum_discarded == 4 * 4


def test_binding_continues_survivors_in_the_next_screening_request():
    table = {i: 2 for i in range(30)}  # every screen half right: all kept
    alloc = speed(30, train_prompts=3, gen_prompts=3)
    pool = TablePool(table)
    b = drive(alloc, pool, 1)[0]
    r1, r2 = pool.log
    assert r1.phases == ("screen",) * 3
    assert r2.phases == ("continue",) * 3 + ("screen",) * 3
    assert r2.prompt_ids[:3].tolist() == r1.prompt_ids.tolist()  # survivors continued together
    assert (r2.num_rollouts == [20, 20, 20, 4, 4, 4]).all()
    # the trained group is screen ∪ continue, screen rollouts first
    assert b.prompt_ids.tolist() == r1.prompt_ids.tolist() and (b.group_sizes == 24).all()
    assert list(b.phases[:24]) == ["screen"] * 4 + ["continue"] * 20
    assert b.stats.rollouts_by_phase == {"screen": 24, "continue": 60}
    assert len(alloc.queue) == 3 and alloc.live_handles == 3 * 4  # next batch already screened


def test_surplus_groups_carry_to_the_next_step():
    # 6 screened per round, all kept, train 2: round 2 finishes 6 groups, 4 carry over; step 1
    # trains 2 of them without generating; step 2 trains the last 2 and continues the queue.
    alloc = speed(60, train_prompts=2, gen_prompts=6)
    pool = TablePool({i: 1 for i in range(60)})
    b0, b1 = drive(alloc, pool, 2)
    assert b0.num_groups == b1.num_groups == 2
    assert b1.stats.rounds == 0 and b1.stats.rollouts == 0
    finished = pool.log[1].prompt_ids[:6].tolist()
    assert b0.prompt_ids.tolist() + b1.prompt_ids.tolist() == finished[:4]
    assert len(alloc.carry) == 2 and b1.stats.discarded_rollouts == 0


def test_max_rounds_error_or_train():
    pool = TablePool({i: 4 for i in range(40)})  # every screen all correct
    alloc = speed(40, train_prompts=2, gen_prompts=4, max_rounds=3)
    with pytest.raises(MaxRoundsError, match="max_rounds=3"):
        drive(alloc, pool, 1)
    alloc = speed(40, train_prompts=2, gen_prompts=4, max_rounds=3, on_max_rounds="train")
    assert not alloc.fixed_batch
    b = drive(alloc, pool, 1)[0]
    assert b.num_groups == 0 and b.stats.decisions == {"too_easy": 12}


def test_uses_fewer_rollouts_per_trained_group_than_grpo_on_a_mixed_pool():
    # Half the pool is solved or hopeless: SPEED spends 4 screening rollouts on such a prompt, GRPO 24.
    p = BernoulliPool.mixed(2000, seed=0, solved=0.25, hopeless=0.25).p
    s = speed(2000, train_prompts=16)
    g = make_allocator("grpo", 2000, seed=0, train_prompts=16, n=24)
    bs = drive(s, BernoulliPool(p, seed=1), 20)
    bg = drive(g, BernoulliPool(p, seed=1), 20)
    assert all(b.stats.effective_prompt_ratio == 1.0 for b in bs)
    assert np.mean([b.stats.effective_prompt_ratio for b in bg]) < 0.6
    # rollouts spent per group that carries a gradient (the queue and carry are not yet spent)
    per_useful_speed = (s.cum_trained + s.cum_discarded) / sum(b.num_groups for b in bs)
    per_useful_grpo = g.cum_rollouts / sum(
        b.num_groups * b.stats.effective_prompt_ratio for b in bg
    )
    assert per_useful_speed < 0.8 * per_useful_grpo
