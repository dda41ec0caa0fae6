"""Pilot-Commit against the reference's rules (databricks/pilot-commit, recipe/pc), by hand.

Expected values follow from the reference's code read as a specification:
- `filter_batch` (the verdict) and `exclude_batch` (the exclusion) are separate: a pilot in the keep
  band at or above exclude_threshold is buffered and trained, and `mark_prompt_for_exclusion` only
  marks it; `apply_exclusions_to_dataset` removes it at the end of the epoch.
- `ReplayBuffer.flush` after each step drops entries with step_now - step_added > max_off_steps.
"""

from __future__ import annotations

import numpy as np

from rollalloc.allocator import make_allocator
from rollalloc.state import ACTIVE, EVICTED
from rollalloc.testing import TablePool


def run_step(alloc, pool):
    """One step of ask/tell; returns the requests and the batch."""
    requests = []
    while (req := alloc.ask()) is not None:
        requests.append(req)
        alloc.tell(pool.generate(req))
    return requests, alloc.batch()


def keep_and_exclude(**kw):
    # Keep band [0.125, 1.0] (p_upper 0) and exclusion at acc >= 0.5: a pilot with 4 of 8 correct is
    # both kept and excluded; 2 of 8 is kept only.
    return make_allocator(
        "pilot-commit",
        6,
        seed=0,
        train_prompts=2,
        gen_prompts=2,
        n_pilot=8,
        n_commit=8,
        p_upper=0.0,
        exclude_threshold=0.5,
        **kw,
    )


def first_pilot_solved_half(alloc):
    """A pool where the first prompt piloted (x) has 4 of 8 correct and every other 2 of 8."""
    x = int(alloc.ask().prompt_ids[0])
    return x, TablePool({i: (4 if i == x else 2) for i in range(6)})


def test_kept_and_excluded_is_trained_this_epoch_and_never_drawn_again():
    alloc = keep_and_exclude()
    x, pool = first_pilot_solved_half(alloc)
    # Pool 6, rounds of 2, 2 trained per step (bind): step 0 trains the 2 prompts of its first
    # pilot round, step 1 the next 2; the draw of step 2 ends epoch 0.
    reqs, b0 = run_step(alloc, pool)
    assert x in reqs[0].prompt_ids.tolist()
    assert x in b0.prompt_ids.tolist()  # kept: trained this epoch, pilot ∪ commit
    assert b0.group_sizes[b0.prompt_ids.tolist().index(x)] == 16
    assert b0.stats.decisions.get("evicted") == 1 and "too_easy" not in b0.stats.decisions
    assert alloc.table.status[x] == ACTIVE  # marked, not yet evicted
    run_step(alloc, pool)
    assert alloc.epoch == 0 and alloc.table.status[x] == ACTIVE
    later = []
    for _ in range(8):  # epochs 1.. (5 prompts each, 2 per round)
        reqs, _ = run_step(alloc, pool)
        later += [p for r in reqs for p in r.prompt_ids.tolist()]
    assert alloc.epoch >= 3
    assert alloc.table.status[x] == EVICTED
    assert x not in later
    assert set(later) == set(range(6)) - {x}  # 2 of 8 is kept and never excluded


def test_pending_exclusion_survives_a_checkpoint():
    alloc = keep_and_exclude()
    x, pool = first_pilot_solved_half(alloc)
    run_step(alloc, pool)
    state = alloc.state_dict()
    twin = keep_and_exclude()
    twin.load_state_dict(state)
    twin_pool = TablePool(pool.successes)
    twin_pool.next_handle = pool.next_handle
    for _ in range(6):
        reqs, _ = run_step(alloc, pool)
        twin_reqs, _ = run_step(twin, twin_pool)
        assert [r.prompt_ids.tolist() for r in reqs] == [r.prompt_ids.tolist() for r in twin_reqs]
        assert all(x not in r.prompt_ids.tolist() for r in twin_reqs if twin.epoch > 0)
    assert twin.table.status[x] == EVICTED


def test_too_easy_and_excluded_is_evicted_at_the_end_of_the_epoch():
    # Default band [0.125, 0.75], exclusion at 1.0: 8 of 8 is too easy and marked.
    alloc = make_allocator(
        "pilot-commit", 4, seed=0, train_prompts=1, gen_prompts=1, n_pilot=8, n_commit=8
    )
    x = int(alloc.ask().prompt_ids[0])
    pool = TablePool({i: (8 if i == x else 4) for i in range(4)})
    seen_after = []
    reqs, b = run_step(alloc, pool)
    assert b.stats.decisions.get("too_easy") == 1 and b.stats.decisions.get("evicted") == 1
    assert alloc.table.status[x] == ACTIVE
    for _ in range(6):
        reqs, _ = run_step(alloc, pool)
        if alloc.epoch > 0:
            seen_after += [p for r in reqs for p in r.prompt_ids.tolist()]
    assert alloc.table.status[x] == EVICTED and x not in seen_after


def test_staleness_boundary_is_max_off_steps_inclusive():
    # max_variance commits the highest pilot std first, ties the most recent. The first prompt
    # piloted (low: 2 of 8, std .43) waits while prompts with 4 of 8 (std .5) are committed:
    #   step 0: pilot [low, a]; commit a with pilots b, c       buffer low0 b0 c0
    #   step 1: commit b (tie at step 0: earlier) with d, e      buffer low0 c0 d1 e1
    #   step 2: commit d (most recent) with f, g                 buffer low0 c0 e1 f2 g2
    #   after step 2: low is 2 - 0 = 2 = max_off_steps old: kept (2 > 2 is false)
    #   step 3: commit f with h, i; after it low and c are 3 > 2 old: both dropped as stale.
    alloc = make_allocator(
        "pilot-commit",
        40,
        seed=0,
        train_prompts=1,
        gen_prompts=2,
        n_pilot=8,
        n_commit=8,
        max_off_steps=2,
        buffer_sampling="max_variance",
    )
    low = int(alloc.ask().prompt_ids[0])
    pool = TablePool({i: (2 if i == low else 4) for i in range(40)})
    stale = []
    for step in range(4):
        _, b = run_step(alloc, pool)
        stale.append(b.stats.decisions.get("stale", 0))
        buffered = {g.prompt_id: g.step for g in alloc.buffer}
        if step <= 2:
            assert buffered.get(low) == 0, f"after step {step} the low pilot must still wait"
    assert low not in {g.prompt_id for g in alloc.buffer}
    assert stale == [0, 0, 0, 2]
    assert sorted(alloc.step - 1 - g.step for g in alloc.buffer) == [0, 0, 1, 2]
    assert np.all(b.group_sizes == 16)
