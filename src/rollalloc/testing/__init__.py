"""Tools to test a strategy without a model: a synthetic Bernoulli pool and a driver.

Used by rollalloc's own tests and meant for anyone who writes a new strategy. The contract every
strategy passes is a pytest suite in `rollalloc.testing.contract` (it needs pytest): one import
runs it on your strategy (docs/strategies.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from rollalloc.likelihood import short_answer_likelihoods
from rollalloc.types import Outcome, Request, StepStats, TrainBatch


@dataclass
class BernoulliPool:
    """Prompts with fixed success probabilities; reward of rollout h is 1[U_h < p_prompt].

    `U_h` depends only on the handle, so rewards are reproducible whatever the order of calls, and
    a run resumed from a checkpoint sees the same rewards as an uninterrupted one.
    """

    p: np.ndarray  # (P,) success probability of each prompt
    seed: int = 0
    continuous: bool = False  # rewards in [0, 1] instead of {0, 1}
    next_handle: int = 0
    log: list[Request] = field(default_factory=list)

    @classmethod
    def mixed(cls, num_prompts: int, seed: int = 0, solved: float = 0.2, hopeless: float = 0.2):
        """A pool with `solved` share at p=1, `hopeless` at p=0, the rest Beta(0.7, 0.7)."""
        rng = np.random.default_rng(seed)
        p = rng.beta(0.7, 0.7, num_prompts)
        kind = rng.random(num_prompts)
        p[kind < solved] = 1.0
        p[(kind >= solved) & (kind < solved + hopeless)] = 0.0
        return cls(p=p, seed=seed)

    def _uniform(self, handles: np.ndarray) -> np.ndarray:
        # SplitMix64 of (seed, handle): a counter-based generator, no state to carry.
        with np.errstate(over="ignore"):
            z = handles.astype(np.uint64) + np.uint64(self.seed * 0x9E3779B97F4A7C15 % 2**64)
            z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
            z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
            z = z ^ (z >> np.uint64(31))
        return (z >> np.uint64(11)).astype(np.float64) / float(2**53)

    def _draw(self, request: Request) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Log the request; (prompt id, new handle, uniform) of each of its rollouts: (R,) each."""
        self.log.append(request)
        ids = request.expand()  # (R,)
        handles = np.arange(self.next_handle, self.next_handle + len(ids), dtype=np.int64)
        self.next_handle += len(ids)
        return ids, handles, self._uniform(handles)

    def generate(self, request: Request) -> Outcome:
        ids, handles, u = self._draw(request)
        if self.continuous:
            rewards = np.clip(self.p[ids] + (u - 0.5) * 0.5, 0.0, 1.0)
        else:
            rewards = (u < self.p[ids]).astype(np.float64)
        tokens = 1 + (handles % 7)
        return Outcome(ids, handles, rewards, tokens=tokens)

    def release(self, handles: np.ndarray) -> None:
        pass


@dataclass
class ShortAnswerPool(BernoulliPool):
    """A BernoulliPool whose completions are short answers with known probabilities: completion 0
    (correct) with probability p, wrong completion j = 1..`wrong` with (1 - p) 2^-j / (1 - 2^-wrong)
    (the simulator's `short_answers`). The outcome carries each rollout's `logprob` and
    `completion_key` (its j), as a sampler's would (rollalloc.likelihood)."""

    wrong: int = 12

    def generate(self, request: Request) -> Outcome:
        ids, handles, u = self._draw(request)
        reward = (u < self.p[ids]).astype(np.float64)
        likelihoods = short_answer_likelihoods(u, self.p[ids], self.wrong)
        return Outcome(ids, handles, reward, tokens=np.ones(len(ids), np.int64), **likelihoods)


class TablePool:
    """Hand-made rewards: prompt i's first `successes[i]` rollouts of a request score 1, the rest 0.

    For tests with exactly known decisions; override `successes_for` for phase-dependent tables."""

    def __init__(self, successes: dict[int, int]):
        self.successes = dict(successes)
        self.next_handle = 0
        self.log: list[Request] = []

    def successes_for(self, prompt_id: int, n: int, phase: str) -> int:
        return min(self.successes.get(prompt_id, 0), n)

    def generate(self, request: Request) -> Outcome:
        self.log.append(request)
        ids, rewards = [], []
        for pid, n, phase in zip(
            request.prompt_ids.tolist(), request.num_rollouts.tolist(), request.phases
        ):
            s = self.successes_for(pid, n, phase)
            ids += [pid] * n
            rewards += [1.0] * s + [0.0] * (n - s)
        handles = np.arange(self.next_handle, self.next_handle + len(ids))
        self.next_handle += len(ids)
        return Outcome(np.array(ids, dtype=np.int64), handles, np.array(rewards))

    def release(self, handles: np.ndarray) -> None:
        pass


def drive(allocator, pool: BernoulliPool, steps: int) -> list[TrainBatch]:
    """Run `steps` steps of ask/tell/batch; return the batches."""
    batches = []
    for _ in range(steps):
        while (request := allocator.ask()) is not None:
            allocator.tell(pool.generate(request))
        batches.append(allocator.batch())
    return batches


def make_batch(prompt_ids, group_sizes, handles, rewards, step: int = 0) -> TrainBatch:
    """A TrainBatch of "rollout" groups built by hand, for Learner tests without an allocator."""
    n = int(sum(group_sizes))
    stats = StepStats(step, 0, 1, len(prompt_ids), {}, {}, 0, n, 0, 0, 0.0, 0.0)
    return TrainBatch(
        step=step,
        prompt_ids=np.asarray(prompt_ids, dtype=np.int64),
        group_sizes=np.asarray(group_sizes, dtype=np.int64),
        handles=np.asarray(handles, dtype=np.int64),
        rewards=np.asarray(rewards, dtype=np.float64),
        phases=np.array(["rollout"] * n, dtype=object),
        released=np.zeros(0, np.int64),
        stats=stats,
    )
