"""Hand-made reward tables with exactly known decisions for grpo, dapo and pilot-commit."""

from __future__ import annotations

import numpy as np
import pytest

from rollalloc import testing
from rollalloc.allocator import MaxRoundsError, make_allocator
from rollalloc.state import DEFERRED, EVICTED
from rollalloc.testing import BernoulliPool, drive


class TablePool(testing.TablePool):
    """Pilot-Commit's commits score at the pilot's rate (successes[i] of 8), rounded down."""

    def successes_for(self, prompt_id, n, phase):
        s = self.successes.get(prompt_id, 0)
        return s * n // 8 if phase == "commit" else min(s, n)


def one_step(alloc, pool):
    return drive(alloc, pool, 1)[0]


# ------------------------------------------------------------------ grpo


def test_grpo_covers_each_prompt_once_per_epoch():
    alloc = make_allocator("grpo", 12, seed=0, train_prompts=4, n=3)
    batches = drive(alloc, BernoulliPool(np.full(12, 0.5)), 6)
    first, second = batches[:3], batches[3:]
    assert sorted(np.concatenate([b.prompt_ids for b in first]).tolist()) == list(range(12))
    assert sorted(np.concatenate([b.prompt_ids for b in second]).tolist()) == list(range(12))
    assert all((b.group_sizes == 3).all() for b in batches)
    assert alloc.cum_rollouts == 6 * 4 * 3 and alloc.epoch == 1


def test_grpo_small_steps_follow_every_k_full_steps_and_keep_the_shuffle():
    """Sizes written out by hand for k = 2 (full, full, small, full, full, small, ...); the
    prompts are the plain GRPO shuffle of the same seed, cut at other places."""
    small = make_allocator("grpo", 40, seed=5, train_prompts=4, n=3, small_every=2, small_prompts=1)
    plain = make_allocator("grpo", 40, seed=5, train_prompts=4, n=3)
    assert not small.fixed_batch and plain.fixed_batch
    sb = drive(small, BernoulliPool(np.full(40, 0.5)), 8)
    pb = drive(plain, BernoulliPool(np.full(40, 0.5)), 7)
    assert [len(b.prompt_ids) for b in sb] == [4, 4, 1, 4, 4, 1, 4, 4]
    assert (
        np.concatenate([b.prompt_ids for b in sb]).tolist()
        == np.concatenate([b.prompt_ids for b in pb])[:26].tolist()
    )
    assert small.cum_rollouts == 26 * 3
    with pytest.raises(ValueError, match="small_prompts must be below train_prompts"):
        make_allocator("grpo", 20, train_prompts=4, n=3, small_every=1, small_prompts=4)
    with pytest.raises(ValueError, match="small_every must be an integer >= 0"):
        make_allocator("grpo", 20, train_prompts=4, n=3, small_every=-1)


# ------------------------------------------------------------------ dapo


def test_dapo_rounds_and_surplus():
    # 12 prompts; ids divisible by 3 are half right (kept), the others all right (zero variance).
    pool = TablePool({i: (4 if i % 3 == 0 else 8) for i in range(12)})
    alloc = make_allocator("dapo", 12, seed=0, train_prompts=3, n=8, gen_prompts=4)
    b = one_step(alloc, pool)
    kept = [[p for p in r.prompt_ids.tolist() if p % 3 == 0] for r in pool.log]
    cum = np.cumsum([len(k) for k in kept])
    assert cum[-1] >= 3 and (len(cum) == 1 or cum[-2] < 3)  # rounds stop once 3 are kept
    assert b.stats.rounds == len(pool.log)
    flat = sum(kept, [])
    assert b.prompt_ids.tolist() == flat[:3]
    surplus = len(flat) - 3
    zero_var = 4 * len(pool.log) - len(flat)
    assert b.stats.discarded_rollouts == 8 * (zero_var + surplus)
    expected = {"kept": len(flat), "zero_variance": zero_var, "surplus": surplus}
    assert b.stats.decisions == {k: v for k, v in expected.items() if v}
    assert b.stats.rollouts_by_phase == {"rollout": 32 * len(pool.log)}
    assert len(b.released) == 8 * (zero_var + surplus) and b.stats.effective_prompt_ratio == 1.0


def test_dapo_max_rounds_error_or_train():
    pool = TablePool({i: 8 for i in range(20)})  # every group zero-variance
    alloc = make_allocator("dapo", 20, seed=0, train_prompts=2, n=4, gen_prompts=4, max_rounds=3)
    with pytest.raises(MaxRoundsError, match="max_rounds=3"):
        one_step(alloc, pool)
    alloc = make_allocator(
        "dapo", 20, seed=0, train_prompts=2, n=4, gen_prompts=4, max_rounds=3, on_max_rounds="train"
    )
    b = one_step(alloc, pool)
    assert b.num_groups == 0 and b.stats.rounds == 3 and b.stats.discarded_rollouts == 48


# ------------------------------------------------------------------ pilot-commit


@pytest.mark.parametrize(
    "k,decision",
    [(0, "too_hard"), (1, "kept"), (4, "kept"), (6, "kept"), (7, "too_easy"), (8, "too_easy")],
)
def test_pilot_commit_threshold_edges(k, decision):
    # n_pilot 8: acc = k/8; keep iff 0.125 <= acc <= 0.75; marked for eviction at acc >= 1.0,
    # independently of the verdict, and evicted only when the epoch ends (reference: exclude_batch,
    # apply_exclusions_to_dataset); tests/strategies/test_pilot_commit.py follows it over epochs.
    pool = TablePool({0: k})
    alloc = make_allocator(
        "pilot-commit", 1, seed=0, train_prompts=1, n_pilot=8, n_commit=8, gen_prompts=1
    )
    req = alloc.ask()
    alloc.tell(pool.generate(req))
    marked = {"evicted": 1} if k == 8 else {}
    assert alloc.step_decisions == {decision: 1, **marked}
    status = alloc.table.status[0]
    assert status == (DEFERRED if decision == "too_hard" else 0)
    assert len(alloc.buffer) == (decision == "kept")


def test_pilot_commit_binding_buffer_and_union():
    # Prompts 0..5 half right: all kept. train 2, gen 3 -> step 0: round 1 pilots 3 (buffer 3),
    # round 2 commits 2 of them *in the same request* as 3 new pilots.
    pool = TablePool({i: 4 for i in range(6)})
    alloc = make_allocator(
        "pilot-commit", 6, seed=0, train_prompts=2, n_pilot=8, n_commit=8, gen_prompts=3
    )
    b = one_step(alloc, pool)
    r1, r2 = pool.log
    assert r1.phases == ("pilot",) * 3
    assert r2.phases.count("commit") == 2 and r2.phases.count("pilot") == 3
    committed = [p for p, ph in zip(r2.prompt_ids.tolist(), r2.phases) if ph == "commit"]
    assert sorted(b.prompt_ids.tolist()) == sorted(committed)
    assert set(committed) <= set(r1.prompt_ids.tolist())
    assert (b.group_sizes == 16).all()  # pilot ∪ commit
    assert b.stats.rollouts_by_phase == {"pilot": 48, "commit": 16}
    assert list(b.phases[:16]) == ["pilot"] * 8 + ["commit"] * 8
    assert len(alloc.buffer) == 1 + 3 and alloc.live_handles == 4 * 8


def test_pilot_commit_staleness_drops_old_buffer_entries():
    # Pool of 40 half-right prompts, train 1, gen 8: the buffer grows by 8 per step and only one
    # entry is committed per step, so entries reach max_off_steps and are dropped as stale.
    pool = TablePool({i: 4 for i in range(40)})
    alloc = make_allocator(
        "pilot-commit",
        40,
        seed=0,
        train_prompts=1,
        n_pilot=8,
        n_commit=8,
        gen_prompts=8,
        max_off_steps=1,
    )
    batches = drive(alloc, pool, 3)
    for b in batches:
        for g in alloc.buffer:
            assert b.step - g.step <= 1
    stale = sum(b.stats.decisions.get("stale", 0) for b in batches)
    assert stale > 0
    assert all(alloc.step - 1 - g.step <= 1 for g in alloc.buffer)


def test_pilot_commit_max_variance_sampling_prefers_high_std():
    # The pilots of the first round get 1, 4 and 2 of 8 right: stds sqrt(7)/8 = .331, 1/2 and
    # sqrt(3)/4 = .433 (population std of k ones in 8, by hand). max_variance commits the 4/8 pilot
    # first, then the 2/8 one ahead of the 1/8 pilots (the first round's and the second's).
    # (A table that gave every drawn pilot the same std could not tell either order from another.)
    alloc = make_allocator(
        "pilot-commit",
        9,
        seed=0,
        train_prompts=1,
        n_pilot=8,
        n_commit=8,
        gen_prompts=3,
        buffer_sampling="max_variance",
    )
    req = alloc.ask()
    low, high, mid = req.prompt_ids.tolist()
    pool = TablePool({i: {low: 1, high: 4, mid: 2}.get(i, 1) for i in range(9)})
    alloc.tell(pool.generate(req))
    stats = {g.prompt_id: g.stat for g in alloc.buffer}
    assert stats == pytest.approx({low: 7**0.5 / 8, high: 0.5, mid: 3**0.5 / 4})
    assert one_step(alloc, pool).prompt_ids.tolist() == [high]
    assert one_step(alloc, pool).prompt_ids.tolist() == [mid]


def test_pilot_commit_keep_all_equals_uniform():
    """With a filter that keeps everything and no eviction, pilot-commit trains grpo's prompts.

    Up to the end of the first epoch: there the reference clears the buffer, losing one block."""
    p = BernoulliPool.mixed(60, seed=0).p
    grpo = make_allocator("grpo", 60, seed=3, train_prompts=6, n=4)
    pc = make_allocator(
        "pilot-commit",
        60,
        seed=3,
        train_prompts=6,
        n_pilot=2,
        n_commit=2,
        gen_prompts=6,
        p_lower=0.0,
        p_upper=0.0,
        exclude_threshold=None,
    )
    g_batches = drive(grpo, BernoulliPool(p, seed=1), 9)
    p_batches = drive(pc, BernoulliPool(p, seed=1), 9)
    for gb, pb in zip(g_batches, p_batches):
        assert sorted(gb.prompt_ids.tolist()) == sorted(pb.prompt_ids.tolist())
        assert (pb.group_sizes == 4).all()


def test_pilot_commit_options_validated():
    with pytest.raises(ValueError, match="p_lower"):
        make_allocator("pilot-commit", 10, train_prompts=2, p_lower=0.6, p_upper=0.5)
    with pytest.raises(ValueError, match="buffer_sampling"):
        make_allocator("pilot-commit", 10, train_prompts=2, buffer_sampling="fifo")
    with pytest.raises(ValueError, match="n_pilot"):
        make_allocator("pilot-commit", 10, train_prompts=2, n_pilot=-1)


def test_pilot_commit_refuses_pilots_that_can_never_land_in_the_band():
    # One pilot rollout scores 0 (< p_lower) or 1 (> 1 - p_upper): no prompt could ever be kept.
    with pytest.raises(ValueError, match=r"n_pilot=1: no pilot accuracy k/1 lies in the band"):
        make_allocator("pilot-commit", 10, train_prompts=2, n_pilot=1, n_commit=3)
    make_allocator("pilot-commit", 10, train_prompts=2, n_pilot=1, p_lower=0.0)  # 0 is in it
    from rollalloc.strategies.pilot_commit import PilotCommitConfig

    assert PilotCommitConfig.group_split(4) == {"n_pilot": 2, "n_commit": 2}
    assert PilotCommitConfig.group_split(64) == {"n_pilot": 16, "n_commit": 48}  # reference


def test_pilot_commit_trains_full_batches_on_a_pool_of_few_rounds():
    # 500 prompts, 128 groups a step: rounds of 3 x 128 pilots would each cross an epoch end,
    # whose buffer clear comes before the commit, and no step would ever train a group.
    p = np.random.default_rng(0).beta(1.0, 1.0, 500)
    pc = make_allocator("pilot-commit", 500, seed=0, train_prompts=128, n_pilot=4, n_commit=12)
    batches = drive(pc, BernoulliPool(p, seed=0), 6)
    assert all(len(b.prompt_ids) == 128 for b in batches)
    cleared = sum(b.stats.decisions.get("buffer_cleared", 0) for b in batches)
    kept = sum(b.stats.decisions.get("kept", 0) for b in batches)
    assert cleared < 0.35 * kept  # at most about a quarter of the kept pilots lost to epoch ends
    # set by hand to the reference's 3 x 128, the rounds cross epoch ends: the error names that
    from rollalloc.allocator import MaxRoundsError

    pc = make_allocator(
        "pilot-commit", 500, seed=0, train_prompts=128, n_pilot=4, n_commit=12, gen_prompts=384
    )
    with pytest.raises(
        MaxRoundsError, match="epoch ends cleared .* kept pilots.*lower gen_prompts"
    ):
        drive(pc, BernoulliPool(p, seed=0), 6)


def test_pilot_commit_evict_false_is_exclude_threshold_none():
    """`evict=False` (what verl's overlay can pass) draws and trains what exclude_threshold=None
    does, and on a pool with solved prompts differs from the default, which evicts them."""
    p = np.r_[np.ones(20), np.full(40, 0.4)]  # 20 prompts always solved: evicted by the default

    def run(**opts):
        pc = make_allocator("pilot-commit", 60, seed=3, train_prompts=6, n_pilot=2, n_commit=2,
                            on_max_rounds="train", **opts)  # fmt: skip
        batches = drive(pc, BernoulliPool(p, seed=1), 10)
        evicted = sum(b.stats.decisions.get("evicted", 0) for b in batches)
        return [b.prompt_ids.tolist() for b in batches], evicted, pc.table.status.copy()

    off, n_off, status_off = run(evict=False)
    none, n_none, status_none = run(exclude_threshold=None)
    default, n_default, status_default = run()
    assert off == none and n_off == n_none == 0
    assert (status_off == status_none).all() and not (status_off == EVICTED).any()
    assert n_default > 0 and (status_default[:20] == EVICTED).any() and default != off
    with pytest.raises(ValueError, match="evict"):
        make_allocator("pilot-commit", 10, train_prompts=2, evict="no")


def test_pilot_commit_counts_each_evicted_prompt_once():
    """The "evicted" decision counts distinct prompts: summed over a run that evicts most of a pool
    whose rounds cross epoch ends (leftover prompts piloted again before their mark applies), it
    equals the prompts the table holds as evicted plus those marked and not yet applied."""
    p = np.r_[np.ones(150), np.full(50, 0.3)]
    pc = make_allocator("pilot-commit", 200, seed=0, train_prompts=4, n_pilot=2, n_commit=2,
                        gen_prompts=37, on_max_rounds="train")  # fmt: skip
    batches = drive(pc, BernoulliPool(p, seed=2), 5)
    counted = sum(b.stats.decisions.get("evicted", 0) for b in batches)
    evicted = set(np.flatnonzero(pc.table.status == EVICTED).tolist())
    assert len(evicted) > 100  # most of the solved part is out
    assert counted == len(evicted | pc._to_evict)


def test_a_state_written_before_an_option_existed_ran_with_its_default():
    """A state whose config lacks `evict` (written before the option) ran with the default, which
    evicts: it loads into a default allocator and is refused by one with evict=False, as a state
    written with exclude_threshold=1.0 is refused by exclude_threshold=None."""

    def build(**opts):
        return make_allocator("pilot-commit", 40, seed=1, train_prompts=4, n_pilot=2,
                              n_commit=2, **opts)  # fmt: skip

    old = build()
    drive(old, BernoulliPool(np.full(40, 0.5), seed=0), 2)
    state = old.state_dict()
    del state["config"]["evict"]
    build().load_state_dict(state)
    with pytest.raises(ValueError, match=r"evict=True \(absent: the default\) \(here False\)"):
        build(evict=False).load_state_dict(state)
    with pytest.raises(ValueError, match=r"exclude_threshold=1.0 \(here None\)"):
        build(exclude_threshold=None).load_state_dict(state)
