"""The messages of the ask/tell contract (DESIGN.md).

A *rollout* is one completion of one prompt with its reward. A *group* is always the rollouts of one
prompt that are trained together in one step. The caller (trainer, simulator, framework adapter) owns
the rollouts and names each with an integer *handle*; the allocator only ever holds handles.

    ask()  -> Request       prompt ids x rollouts per prompt, one generation pass
    tell(Outcome)           one row per generated rollout: prompt id, handle, reward (+ tokens)
    batch() -> TrainBatch   ragged groups of handles to train on, and the handles now free

A TrainBatch lays its groups out flat, as the trainer packs them into one tensor batch:

    prompt_ids    [ p7        | p2              | p9    ]      G groups
    group_sizes   [ 4         | 6               | 2     ]      (G,)
    handles       [ h h h h   | h h h h h h     | h h   ]      (R,) R = sum(group_sizes)
    rewards       [ r r r r   | r r r r r r     | r r   ]      (R,)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

PHASES = ("rollout", "pilot", "commit", "screen", "continue")
"""Generation phases. `rollout` is an undivided group (grpo, dapo, cero, ...); `pilot`/`commit` are
Pilot-Commit's; `screen`/`continue` are SPEED-RL's."""


def _frozen_array(values: Any, dtype: Any) -> np.ndarray:
    arr = np.array(values, dtype=dtype, copy=True).reshape(-1)
    arr.flags.writeable = False
    return arr


@dataclass(frozen=True)
class Request:
    """One generation pass: `num_rollouts[i]` rollouts of prompt `prompt_ids[i]`, tagged `phases[i]`.

    Prompt ids are unique within a request. Pilot-Commit's binding puts the commit of buffered
    prompts and the pilot of new prompts into one Request, so one Request is one inference call.
    """

    step: int
    round: int
    prompt_ids: np.ndarray  # (P,) int64
    num_rollouts: np.ndarray  # (P,) int64, >= 1
    phases: tuple[str, ...]  # (P,)

    def __post_init__(self) -> None:
        object.__setattr__(self, "prompt_ids", _frozen_array(self.prompt_ids, np.int64))
        object.__setattr__(self, "num_rollouts", _frozen_array(self.num_rollouts, np.int64))
        object.__setattr__(self, "phases", tuple(self.phases))
        p = len(self.prompt_ids)
        if len(self.num_rollouts) != p or len(self.phases) != p:
            raise ValueError("Request: prompt_ids, num_rollouts and phases must have equal length")
        if p and self.num_rollouts.min() < 1:
            raise ValueError("Request: every prompt must get at least one rollout")

    @property
    def total(self) -> int:
        """Rollouts this request asks for."""
        return int(self.num_rollouts.sum())

    def __len__(self) -> int:
        return len(self.prompt_ids)

    def expand(self) -> np.ndarray:
        """Prompt id of every rollout, in request order: shape (total,)."""
        return np.repeat(self.prompt_ids, self.num_rollouts)

    def phase_of_rollouts(self) -> np.ndarray:
        """Phase of every rollout, in request order: shape (total,), dtype str."""
        return np.repeat(np.array(self.phases, dtype=object), self.num_rollouts)


@dataclass(frozen=True)
class Outcome:
    """The answer to one Request: one row per generated rollout, in any order.

    `rewards` feed the advantages, whatever their range. `success` is the verdict the strategies
    decide on (verl's `acc`, a verifier's pass/fail, a TRL reward's correctness): one value in
    [0, 1] per rollout, usually 0 or 1. Without it, decisions read the reward as the success rate,
    which the allocator allows only when the declared reward range lies inside [0, 1], or it
    thresholds the reward at the config's `success_threshold`.

    `tokens` (generated tokens per rollout) and `policy_version` are optional; when given they are
    accounted and kept with the rollout.

    `logprob` and `completion_key` (optional, together) describe the completions themselves:
    `logprob` the log-probability of the whole completion under the distribution it was sampled
    from (the sum of its behaviour token log-probs, temperature applied: verl's rollout log-probs,
    vLLM's processed log-probs), `completion_key` an integer equal for equal completions (a hash of
    the token ids). From them the allocator knows the probability mass of the completions it has
    seen (rollalloc.likelihood); a strategy may read it (likelihood-rank), the others ignore it.
    """

    prompt_ids: np.ndarray  # (R,) int64
    handles: np.ndarray  # (R,) int64, unique, caller-owned
    rewards: np.ndarray  # (R,) float64
    tokens: np.ndarray | None = None  # (R,) int64
    policy_version: int | None = None
    success: np.ndarray | None = None  # (R,) float64 in [0, 1]
    logprob: np.ndarray | None = None  # (R,) float64 <= 0, log pi(completion | prompt)
    completion_key: np.ndarray | None = None  # (R,) int64, equal for equal completions

    def __post_init__(self) -> None:
        object.__setattr__(self, "prompt_ids", np.asarray(self.prompt_ids).reshape(-1))
        object.__setattr__(self, "handles", np.asarray(self.handles).reshape(-1))
        object.__setattr__(self, "rewards", np.asarray(self.rewards).reshape(-1))
        if self.tokens is not None:
            object.__setattr__(self, "tokens", np.asarray(self.tokens).reshape(-1))
        for name in ("success", "logprob", "completion_key"):
            if getattr(self, name) is not None:
                object.__setattr__(self, name, np.asarray(getattr(self, name)).reshape(-1))

    def __len__(self) -> int:
        return len(self.handles)


@dataclass(frozen=True)
class TrainBatch:
    """The groups to train on in one step (see the module docstring for the layout).

    `released` are handles the allocator no longer refers to and that were *not* trained (surplus,
    filtered pilots, stale buffer entries): the caller may free them now. The trained handles are
    released too once this batch is returned; the caller frees them after its update.
    """

    step: int
    prompt_ids: np.ndarray  # (G,) int64
    group_sizes: np.ndarray  # (G,) int64
    handles: np.ndarray  # (R,) int64
    rewards: np.ndarray  # (R,) float64
    phases: np.ndarray  # (R,) str: the phase that generated each rollout
    released: np.ndarray  # (D,) int64
    stats: StepStats
    successes: np.ndarray | None = None  # (R,) float64: the success signal decisions read

    @property
    def num_groups(self) -> int:
        return len(self.prompt_ids)

    @property
    def num_rollouts(self) -> int:
        return len(self.handles)

    def group_index(self) -> np.ndarray:
        """Group number of every rollout: shape (R,)."""
        return np.repeat(np.arange(self.num_groups), self.group_sizes)

    def groups(self):
        """Iterate (prompt_id, handles, rewards) per group."""
        bounds = np.concatenate([[0], np.cumsum(self.group_sizes)])
        for g, pid in enumerate(self.prompt_ids):
            s, e = bounds[g], bounds[g + 1]
            yield int(pid), self.handles[s:e], self.rewards[s:e]


@dataclass(frozen=True)
class StepStats:
    """What one step spent and decided. Counts are for this step; `cum_*` since the start."""

    step: int
    epoch: int
    rounds: int
    groups: int
    rollouts_by_phase: dict[str, int]
    tokens_by_phase: dict[str, int]
    discarded_rollouts: int  # generated this step and released without training
    trained_rollouts: int
    cum_rollouts: int
    cum_tokens: int
    effective_prompt_ratio: float  # share of trained groups whose rewards are not all equal
    mean_group_reward_var: float  # mean within-group reward variance of trained groups
    decisions: dict[str, int] = field(default_factory=dict)  # kept / too_easy / too_hard / ...
    extra: dict[str, float] = field(default_factory=dict)  # strategy values (buffer size, mu, ...)

    @property
    def rollouts(self) -> int:
        return int(sum(self.rollouts_by_phase.values()))

    def to_dict(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "epoch": self.epoch,
            "rounds": self.rounds,
            "groups": self.groups,
            "rollouts": self.rollouts,
            "rollouts_by_phase": dict(self.rollouts_by_phase),
            "tokens_by_phase": dict(self.tokens_by_phase),
            "discarded_rollouts": self.discarded_rollouts,
            "trained_rollouts": self.trained_rollouts,
            "cum_rollouts": self.cum_rollouts,
            "cum_tokens": self.cum_tokens,
            "effective_prompt_ratio": self.effective_prompt_ratio,
            "mean_group_reward_var": self.mean_group_reward_var,
            "decisions": dict(self.decisions),
            "extra": dict(self.extra),
        }
