"""The options every strategy has: `AllocatorConfig` (and `RoundsConfig` for strategies that generate
in rounds until the batch is full), the one mapping from a group size to a strategy's options
(`options_for_group_size` with each strategy's `group_split`), and `config_to_dict`.

A strategy's `Config` derives one of them; `rollalloc.allocator` re-exports all three.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from rollalloc.validate import in_range, one_of, positive_int


@dataclass
class AllocatorConfig:
    """Options every strategy has."""

    train_prompts: int = 128
    """Prompt groups trained per step (verl's `train_batch_size`)."""
    reward_min: float = 0.0
    """Smallest reward `tell` accepts."""
    reward_max: float = 1.0
    """Largest reward `tell` accepts. Binary rewards are {0, 1}; continuous ones lie in between."""
    success_threshold: float | None = None
    """Decisions read a per-rollout success, not the reward (Outcome.success: verl's `acc`, a
    verifier's verdict). When a tell gives none, success = reward >= success_threshold; None reads
    the reward itself as the success, which needs reward_min >= 0 and reward_max <= 1."""

    def validate(self, num_prompts: int) -> None:
        """Raise ValueError naming the field whose value is not allowed."""
        positive_int(self, "train_prompts")
        if self.train_prompts > num_prompts:
            raise ValueError(
                f"train_prompts={self.train_prompts} exceeds the pool of {num_prompts} prompts"
            )
        if not (np.isfinite(self.reward_min) and np.isfinite(self.reward_max)):
            raise ValueError("reward_min and reward_max must be finite")
        if self.reward_min >= self.reward_max:
            raise ValueError(
                f"reward_min={self.reward_min} must be below reward_max={self.reward_max}"
            )
        if self.success_threshold is not None:
            in_range(self, "success_threshold", self.reward_min, self.reward_max)

    def pool_columns(self) -> tuple[str, ...]:
        """The task columns the strategy reads, one value per pool prompt (posterior-signal's
        `strata`); whoever runs it passes them (rollalloc.allocator.wire_pool_columns). None by
        default. On the config so that preflight can check them before anything is built."""
        return ()

    @classmethod
    def group_split(cls, group_size: int) -> dict[str, int]:
        """Override: the fields that size one trained group, summing to `group_size` (GRPO's n,
        Pilot-Commit's n_pilot + n_commit); empty where the strategy has no fixed group size."""
        return {}

    @classmethod
    def options_for_group_size(
        cls,
        group_size: int | None,
        *,
        train_prompts: int | None,
        constant_batch: bool,
        **options: Any,
    ) -> dict[str, Any]:
        """The options of a run that trains `train_prompts` groups of `group_size` rollouts per
        step: the one mapping train, compare, simulate, verl and TRL use (None: the strategy's
        own default). The user's `options` win, but one that contradicts the group size raises
        ValueError naming both; of a two-part split the user may set one part. A short step: with
        `constant_batch` (TRL, verl) never (on_max_rounds="error", fixed_batch=True); in
        rollalloc's trainer and simulator a step out of rounds trains the groups it has
        (on_max_rounds="train": a short step costs less than a lost run)."""
        out: dict[str, Any] = {} if train_prompts is None else {"train_prompts": train_prompts}
        if group_size is not None:
            if isinstance(group_size, bool) or not isinstance(group_size, int) or group_size < 2:
                raise ValueError(f"group_size must be an integer >= 2, got {group_size!r}")
            split = cls.group_split(group_size)
            given = {k: options[k] for k in split if isinstance(options.get(k), int)}
            if len(given) == len(split) and sum(given.values()) != group_size:
                parts = " + ".join(f"{k}={v}" for k, v in given.items())
                total = f" = {sum(given.values())}" if len(given) > 1 else ""
                raise ValueError(f"{parts}{total} contradicts group_size={group_size}")
            if given and len(given) == len(split) - 1:  # derive the part the user left out
                (rest,) = set(split) - set(given)
                (k, v), left = next(iter(given.items())), group_size - sum(given.values())
                if left < 0:
                    raise ValueError(
                        f"{k}={v} contradicts group_size={group_size}: it leaves {rest}={left}"
                    )
                split = {**given, rest: left}
            out.update(split)
        fields = {f.name for f in dataclasses.fields(cls)}
        if "on_max_rounds" in fields:
            out["on_max_rounds"] = "error" if constant_batch else "train"
        if "fixed_batch" in fields and constant_batch:
            out["fixed_batch"] = True
        for name in ("on_max_rounds", "fixed_batch"):
            if constant_batch and name in options and options[name] != out[name]:
                raise ValueError(
                    f"{name}={options[name]!r} may train fewer than train_prompts groups, but "
                    f"the batch must be constant here: use {name}={out[name]!r}"
                )
        return {**out, **options}

    @property
    def reward_is_success(self) -> bool:
        """True when a reward may stand for the success itself (the declared range is in [0, 1])."""
        return self.success_threshold is None and 0.0 <= self.reward_min and self.reward_max <= 1.0


@dataclass
class RoundsConfig(AllocatorConfig):
    """Options of strategies that generate in rounds until the step's batch is full."""

    gen_prompts: int = 0
    """New prompts per generation round (verl's `gen_batch_size`); 0 means gen_factor x
    train_prompts."""
    max_rounds: int = 10
    """Generation rounds allowed per step (verl's `max_num_gen_batches`)."""
    on_max_rounds: str = "error"
    """When a step runs out of rounds: "error" (verl and the references) or "train" on the groups
    there are (the batch is then smaller than train_prompts)."""
    gen_factor: ClassVar[float] = 3.0

    def validate(self, num_prompts: int) -> None:
        super().validate(num_prompts)
        positive_int(self, "gen_prompts", 0)
        positive_int(self, "max_rounds")
        one_of(self, "on_max_rounds", ("error", "train"))
        if self.gen_prompts > num_prompts:
            raise ValueError(f"gen_prompts={self.gen_prompts} exceeds the pool of {num_prompts}")

    def round_prompts(self, num_prompts: int) -> int:
        """Prompts drawn per round."""
        return self.gen_prompts or min(math.ceil(self.gen_factor * self.train_prompts), num_prompts)


def _jsonable(v: Any) -> bool:
    try:
        json.dumps(v)
        return True
    except (TypeError, ValueError):
        return False


def config_to_dict(cfg: Any) -> dict[str, Any]:
    """The JSON-representable fields of a config dataclass (callables are left out)."""
    return {
        f.name: getattr(cfg, f.name)
        for f in dataclasses.fields(cfg)
        if _jsonable(getattr(cfg, f.name))
    }
