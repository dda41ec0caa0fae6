"""rollalloc.loop.run owns stopping, the weight-sync hook and the checkpoint hook."""

from __future__ import annotations

import pytest

from rollalloc.allocator import make_allocator
from rollalloc.loop import LoopState, run
from rollalloc.sim.policy import SimPolicy, load_preset
from rollalloc.sim.roles import RolloutStore, SimEvaluator, SimLearner, SimSampler


def _roles(seed: int = 0):
    preset = load_preset("shape-small")
    policy = SimPolicy(preset)
    store = RolloutStore()
    alloc = make_allocator("grpo", preset.num_prompts, seed=seed, train_prompts=8, n=4)
    roles = (alloc, SimSampler(policy, seed, store), SimLearner(policy, store, seed))
    return roles, SimEvaluator(policy, seed), store


def test_checkpoints_every_n_steps_and_after_the_last_before_the_final_evaluation():
    roles, evaluator, store = _roles()
    saved: list[tuple[int, int]] = []  # (step, evaluations so far) at each checkpoint
    synced: list[int] = []
    state = LoopState()
    result = run(
        *roles,
        evaluator,
        max_steps=7,
        eval_every_rollouts=10**9,  # no evaluation between the first and the final one
        state=state,
        sync_weights=lambda: synced.append(state.step),
        checkpoint=lambda st: saved.append((st.step, len(st.evals))),
        checkpoint_every=3,
    )
    assert [s for s, _ in saved] == [3, 6, 7]
    assert all(n == 1 for _, n in saved)  # the final evaluation comes after the last checkpoint
    assert [e["step"] for e in result.evals] == [0, 7]
    assert synced == list(range(7))  # once per update, before the step is counted
    assert len(store) == 0  # every handle released (grpo holds nothing)


def test_the_stop_predicate_and_the_budget_stop_the_run_and_take_a_checkpoint():
    roles, evaluator, _ = _roles()
    saved: list[int] = []
    result = run(
        *roles,
        evaluator,
        max_steps=100,
        stop=lambda st: st.step >= 2,
        checkpoint=lambda st: saved.append(st.step),
    )
    assert result.state.step == 2 and saved == [2]

    roles, evaluator, _ = _roles()
    result = run(*roles, evaluator, budget_rollouts=3 * 8 * 4, checkpoint=lambda st: None)
    assert result.state.step == 3 and roles[0].cum_rollouts == 3 * 8 * 4


def test_a_run_that_is_already_done_takes_no_step_and_no_checkpoint():
    roles, evaluator, _ = _roles()
    saved: list[int] = []
    result = run(*roles, evaluator, max_steps=0, checkpoint=lambda st: saved.append(st.step))
    assert result.state.step == 0 and saved == [] and len(result.evals) == 1
    with pytest.raises(ValueError, match="budget_rollouts or max_steps"):
        run(*roles, evaluator, stop=lambda st: True)


def test_an_allocator_that_gives_up_ends_the_run_with_a_final_evaluation():
    from rollalloc.allocator import PoolExhaustedError

    roles, evaluator, _ = _roles()
    alloc, ask = roles[0], roles[0].ask

    def give_up_at_step_2():
        if state.step >= 2:
            raise PoolExhaustedError("all evicted")
        return ask()

    alloc.ask = give_up_at_step_2
    state, saved = LoopState(), []
    result = run(
        *roles,
        evaluator,
        max_steps=10,
        eval_every_rollouts=10**9,
        state=state,
        checkpoint=lambda st: saved.append(st.step),
        checkpoint_every=1,
    )
    assert result.state.step == 2 and [e["step"] for e in result.evals] == [0, 2]
    assert result.evals[-1]["cum_rollouts"] == alloc.cum_rollouts == 2 * 8 * 4
    assert saved == [1, 2]  # the steps it finished; none for the step it gave up in
    assert result.stopped == "stopped at step 2 after 64 rollouts: PoolExhaustedError: all evicted"

    roles, evaluator, _ = _roles()
    assert run(*roles, evaluator, max_steps=2).stopped is None
