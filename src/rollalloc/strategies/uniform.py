"""Uniform allocation: plain GRPO.

Every step draws the next `train_prompts` prompts of a seeded per-epoch shuffle and gives each the
same `n` rollouts. Groups whose rewards are all equal are trained anyway (their advantage is zero):
that waste is what every other strategy in this package tries to avoid.

    N_i = n  for the B = train_prompts prompts of the step,   0 otherwise

`small_every=k` (a measurement, not a recommendation; off by default) follows every k full steps
with one step of `small_prompts` prompts, the next of the same shuffle. It is GRPO with the step
pattern CERO's primal-dual pacing produces (steps of ~B groups between steps of 1-7,
docs/cero.md), so that what an update of a few groups costs can be measured, and fitted
(docs/simulator.md), on GRPO alone.
"""

from __future__ import annotations

from dataclasses import dataclass

from rollalloc.allocator import Allocator, AllocatorConfig, register
from rollalloc.validate import positive_int


@dataclass
class UniformConfig(AllocatorConfig):
    n: int = 64
    """Rollouts per prompt (TRL's `num_generations`, verl's `rollout.n`). Default: the reference
    GRPO baseline of the Qwen3-4B / Polaris scripts."""
    small_every: int = 0
    """After every `small_every` full steps, one step of `small_prompts` prompts; 0: every step is
    full (plain GRPO)."""
    small_prompts: int = 1
    """Prompts in each small step (with `small_every` > 0)."""

    @classmethod
    def group_split(cls, group_size: int) -> dict[str, int]:
        return {"n": group_size}

    def validate(self, num_prompts: int) -> None:
        super().validate(num_prompts)
        positive_int(self, "n", 2)  # a group of one rollout has zero advantage: nothing to train
        positive_int(self, "small_every", 0)
        positive_int(self, "small_prompts", 1)
        if self.small_every and self.small_prompts >= self.train_prompts:
            raise ValueError(
                f"small_prompts must be below train_prompts ({self.train_prompts}) for a small "
                f"step, got {self.small_prompts}"
            )


@register
class Uniform(Allocator):
    name = "grpo"
    Config = UniformConfig

    @classmethod
    def example_config(cls):
        return {"n": 4}

    @property
    def fixed_batch(self) -> bool:
        return self.config.small_every == 0

    def _next_request(self):
        if self.ready:
            return None
        c = self.config
        small = c.small_every and self.step % (c.small_every + 1) == c.small_every
        return self.make_request(
            self.draw(c.small_prompts if small else c.train_prompts), c.n, "rollout"
        )

    def _on_results(self, request, groups):
        self.count("zero_variance", sum(g.zero_variance for g in groups))
        self.train(groups)
