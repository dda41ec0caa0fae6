"""The one driver loop (DESIGN.md): Allocator <-> Sampler -> Learner, Evaluator at fixed points.

The real trainer and the simulator both run through `run`; they differ only in the Sampler /
Learner / Evaluator objects they pass. A strategy never sees which one drives it.

    while not (budget spent or max_steps done or stop(state)):
        while (request := allocator.ask()) is not None:     # one or more generation passes
            allocator.tell(sampler.generate(request))
        batch = allocator.batch()                            # ragged groups of handles
        learner.update(batch); sync_weights()                # one optimiser step, new policy out
        sampler.release(...)                                 # the store forgets the batch
        evaluate when cumulative rollouts cross the next evaluation point
        checkpoint(state) every checkpoint_every steps and at the end
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np

from rollalloc.allocator import MaxRoundsError, PoolExhaustedError
from rollalloc.types import Outcome, Request, TrainBatch


@runtime_checkable
class Sampler(Protocol):
    """Generates and scores rollouts; adds them to the store it shares with the Learner
    (rollalloc.store.RolloutStore), which names each with a handle, and releases them."""

    def generate(self, request: Request) -> Outcome: ...

    def release(self, handles: np.ndarray) -> None: ...


@runtime_checkable
class Learner(Protocol):
    """Trains on a TrainBatch, reading the rollouts behind its handles from the store it shares
    with the Sampler (rollalloc.store.RolloutStore)."""

    def update(self, batch: TrainBatch) -> dict[str, float]: ...


@runtime_checkable
class Evaluator(Protocol):
    """Held-out accuracy of the current policy; the same for every strategy of a comparison."""

    def evaluate(self) -> dict[str, float]: ...


@dataclass
class LoopState:
    """What the loop itself must remember across a checkpoint (the rest lives in its roles)."""

    step: int = 0
    next_eval_at: int = 0  # cumulative rollouts at which the next evaluation is due
    wall_s: float = 0.0  # wall seconds spent before this process (resume adds to it)
    evals: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> LoopState:
        return cls(**d)


@dataclass
class RunResult:
    steps: list[dict[str, Any]]
    evals: list[dict[str, Any]]
    state: LoopState
    stopped: str | None = None  # why the allocator gave up, if it did


def run(
    allocator,
    sampler: Sampler,
    learner: Learner,
    evaluator: Evaluator | None = None,
    *,
    budget_rollouts: int | None = None,
    max_steps: int | None = None,
    stop: Callable[[LoopState], bool] | None = None,
    eval_every_rollouts: int | None = None,
    state: LoopState | None = None,
    sync_weights: Callable[[], None] | None = None,
    on_step: Callable[[dict[str, Any], LoopState], None] | None = None,
    on_eval: Callable[[dict[str, Any], LoopState], None] | None = None,
    checkpoint: Callable[[LoopState], None] | None = None,
    checkpoint_every: int | None = None,
) -> RunResult:
    """Drive `allocator` until `budget_rollouts` are spent, `max_steps` steps are done or
    `stop(state)` says so (checked before every step; give budget_rollouts or max_steps).

    After every update `sync_weights()` hands the new policy to generation (the real trainer:
    `Sampler.sync_weights`; the simulator's roles share one policy and need none). Evaluations
    happen before the first step (cumulative rollouts 0), then each time cumulative rollouts cross a
    multiple of `eval_every_rollouts`, and once at the end. Each evaluation record holds the
    accuracy and the cumulative rollouts, tokens and wall seconds spent so far, every generated
    rollout counted (pilot, commit and discarded alike). `checkpoint(state)` is called after a
    step and its evaluation, every `checkpoint_every` steps and after the last step, before the
    final evaluation: a run resumed from it continues exactly where this one would have.

    An allocator that gives up (MaxRoundsError: no batch within its rounds; PoolExhaustedError:
    every prompt evicted) ends the run there, its defined behaviour: no checkpoint (it stopped
    inside a step), the final evaluation, and `RunResult.stopped` says where and why.
    """
    if budget_rollouts is None and max_steps is None:
        raise ValueError("run: give budget_rollouts or max_steps (or both)")
    if budget_rollouts is not None and budget_rollouts <= 0:
        raise ValueError(f"run: budget_rollouts must be positive, got {budget_rollouts}")
    if eval_every_rollouts is not None and eval_every_rollouts <= 0:
        raise ValueError(f"run: eval_every_rollouts must be positive, got {eval_every_rollouts}")
    state = state if state is not None else LoopState()
    steps: list[dict[str, Any]] = []
    t0 = time.perf_counter() - state.wall_s

    def wall() -> float:
        return time.perf_counter() - t0

    def evaluate() -> None:
        if evaluator is None:
            return
        metrics = evaluator.evaluate()
        rec = {
            "step": state.step,
            "cum_rollouts": allocator.cum_rollouts,
            "cum_tokens": allocator.cum_tokens,
            "wall_s": wall(),
            **{k: float(v) for k, v in metrics.items()},
        }
        state.evals.append(rec)
        if on_eval is not None:
            on_eval(rec, state)

    if not state.evals and evaluator is not None:
        evaluate()
        state.next_eval_at = eval_every_rollouts or 0

    def done() -> bool:
        if max_steps is not None and state.step >= max_steps:
            return True
        if budget_rollouts is not None and allocator.cum_rollouts >= budget_rollouts:
            return True
        return stop is not None and stop(state)

    gave_up = None
    stopped = done()
    while not stopped:
        t_gen = time.perf_counter()
        try:
            while (request := allocator.ask()) is not None:
                allocator.tell(sampler.generate(request))
            batch = allocator.batch()
        except (MaxRoundsError, PoolExhaustedError) as e:
            gave_up = (
                f"stopped at step {state.step} after {allocator.cum_rollouts:,} rollouts: "
                f"{type(e).__name__}: {e}"
            )
            break
        gen_s = time.perf_counter() - t_gen
        if len(batch.released):
            sampler.release(batch.released)
        t_upd = time.perf_counter()
        metrics = learner.update(batch)
        if sync_weights is not None:
            sync_weights()
        upd_s = time.perf_counter() - t_upd
        sampler.release(batch.handles)
        state.step += 1
        state.wall_s = wall()
        rec = {
            **batch.stats.to_dict(),
            "learner": {k: float(v) for k, v in (metrics or {}).items()},
            "gen_s": gen_s,
            "update_s": upd_s,
            "wall_s": state.wall_s,
        }
        steps.append(rec)
        if on_step is not None:
            on_step(rec, state)
        if eval_every_rollouts is not None and allocator.cum_rollouts >= state.next_eval_at:
            evaluate()
            while state.next_eval_at <= allocator.cum_rollouts:
                state.next_eval_at += eval_every_rollouts
        stopped = done()
        if checkpoint is not None and (
            stopped or (checkpoint_every and state.step % checkpoint_every == 0)
        ):
            checkpoint(state)
    if evaluator is not None and (not state.evals or state.evals[-1]["step"] != state.step):
        evaluate()
    state.wall_s = wall()
    return RunResult(steps=steps, evals=state.evals, state=state, stopped=gave_up)
