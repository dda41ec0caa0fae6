"""Decisions read the success signal, advantages the reward (issue 12, DESIGN.md).

The independent check is an invariance: for every strategy, a run whose rewards are 0/1 and a run
whose rewards are -1/+1 with the same verdicts passed as `Outcome.success` must make exactly the
same decisions (same requests, same batches), and the batches must carry the +-1 rewards.
"""

import dataclasses

import numpy as np
import pytest

from rollalloc import Outcome, available_strategies, make_allocator
from rollalloc.testing import BernoulliPool

STRATEGIES = [s for s in available_strategies() if s != "oracle"]  # the oracle needs the simulator


def _options(name):
    from rollalloc.allocator import get_strategy

    opts = dict(get_strategy(name).example_config())
    opts.update(train_prompts=8)
    return opts


def _run(name, scale, steps=12, **extra):
    """Drive `name` on a mixed pool; `scale(r01)` turns the 0/1 verdicts into the rewards told."""
    pool = BernoulliPool.mixed(200, seed=3)
    alloc = make_allocator(name, 200, seed=5, **_options(name), **extra)
    requests, batches = [], []
    for _ in range(steps):
        while (req := alloc.ask()) is not None:
            out = pool.generate(req)
            requests.append((req.prompt_ids.tolist(), req.num_rollouts.tolist(), req.phases))
            alloc.tell(scale(out))
        batches.append(alloc.batch())
    return requests, batches


def _pm1_with_success(out):
    return dataclasses.replace(out, rewards=2 * out.rewards - 1, success=out.rewards)


def _pm1_without_success(out):
    return dataclasses.replace(out, rewards=2 * out.rewards - 1)


@pytest.mark.parametrize("name", STRATEGIES)
def test_decisions_depend_on_the_success_not_on_the_reward_scale(name):
    req01, b01 = _run(name, lambda o: o)
    req_pm, b_pm = _run(name, _pm1_with_success, reward_min=-1.0)
    assert req01 == req_pm
    for a, b in zip(b01, b_pm):
        assert a.prompt_ids.tolist() == b.prompt_ids.tolist()
        assert a.handles.tolist() == b.handles.tolist()
        np.testing.assert_array_equal(b.rewards, 2 * a.rewards - 1)  # advantages see the reward
        np.testing.assert_array_equal(b.successes, a.rewards)  # decisions saw the verdict
        assert a.stats.decisions == b.stats.decisions


@pytest.mark.parametrize("name", STRATEGIES)
def test_a_success_threshold_reads_the_reward_as_a_verdict(name):
    req01, b01 = _run(name, lambda o: o)
    req_th, b_th = _run(name, _pm1_without_success, reward_min=-1.0, success_threshold=0.0)
    assert req01 == req_th
    assert [b.prompt_ids.tolist() for b in b01] == [b.prompt_ids.tolist() for b in b_th]


def test_rewards_outside_the_unit_interval_need_a_success():
    alloc = make_allocator("pilot-commit", 50, seed=0, train_prompts=4, reward_min=-1.0)
    req = alloc.ask()
    out = BernoulliPool(np.full(50, 0.5)).generate(req)
    with pytest.raises(ValueError, match=r"Outcome\(success=\.\.\.\).*success_threshold"):
        alloc.tell(_pm1_without_success(out))
    alloc.tell(_pm1_with_success(out))  # nothing was changed by the refused tell


def test_pilot_commit_on_half_solved_prompts_keeps_them_whatever_the_reward_scale():
    # The measurement: +-1 rewards read as success rates made p = 0.5 prompts "too hard"
    # (mean reward ~0 < p_lower). With the verdict as success, pilot acc ~ 0.5: in the keep band.
    pool = BernoulliPool(np.full(400, 0.5), seed=1)
    alloc = make_allocator(
        "pilot-commit", 400, seed=0, train_prompts=16, n_pilot=16, n_commit=16, reward_min=-1.0
    )
    while (req := alloc.ask()) is not None:
        alloc.tell(_pm1_with_success(pool.generate(req)))
    d = alloc.batch().stats.decisions
    # P(acc < 2/16 or acc > 12/16 | p = 1/2) = 0.011: essentially every pilot is kept
    assert d.get("kept", 0) >= 40 and d.get("too_hard", 0) <= 2


@pytest.mark.parametrize(
    "success, match",
    [
        ([0.0, 1.0, 1.5, 0.0], r"success 1.5 at row 2 is not in \[0, 1\]"),
        ([0.0, np.nan, 1.0, 0.0], r"success nan at row 1"),
        ([0.0, 1.0, 1.0], r"success has length 3, expected 4"),
        ([-0.1, 1.0, 1.0, 0.0], r"success -0.1 at row 0"),
    ],
)
def test_bad_success_is_refused_and_changes_nothing(success, match):
    alloc = make_allocator("grpo", 10, seed=0, train_prompts=2, n=2)
    req = alloc.ask()
    ids = req.expand()
    with pytest.raises(ValueError, match=match):
        alloc.tell(Outcome(ids, np.arange(len(ids)), np.zeros(len(ids)), success=success))
    alloc.tell(Outcome(ids, np.arange(len(ids)), np.zeros(len(ids))))


def test_success_threshold_must_lie_in_the_reward_range():
    with pytest.raises(ValueError, match="success_threshold"):
        make_allocator("grpo", 10, train_prompts=2, success_threshold=2.0)


def test_buffered_successes_survive_a_checkpoint():
    from rollalloc.state import state_from_bytes, state_to_bytes

    def run(resume_at):
        pool = BernoulliPool.mixed(200, seed=3)
        opts = dict(train_prompts=8, n_pilot=4, n_commit=4, reward_min=-1.0)
        alloc = make_allocator("pilot-commit", 200, seed=5, **opts)
        out = []
        for step in range(10):
            if step == resume_at:
                state = state_from_bytes(state_to_bytes(alloc.state_dict()))
                alloc = make_allocator("pilot-commit", 200, seed=5, **opts)
                alloc.load_state_dict(state)
            while (req := alloc.ask()) is not None:
                alloc.tell(_pm1_with_success(pool.generate(req)))
            b = alloc.batch()
            out.append((b.prompt_ids.tolist(), b.rewards.tolist(), b.successes.tolist()))
        return out

    assert run(resume_at=5) == run(resume_at=-1)
