"""Uniform allocation: plain GRPO.

Every step draws the next `train_prompts` prompts of a seeded per-epoch shuffle and gives each the
same `n` rollouts. Groups whose rewards are all equal are trained anyway (their advantage is zero):
that waste is what every other strategy in this package tries to avoid.

    N_i = n  for the B = train_prompts prompts of the step,   0 otherwise
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

    @classmethod
    def group_split(cls, group_size: int) -> dict[str, int]:
        return {"n": group_size}

    def validate(self, num_prompts: int) -> None:
        super().validate(num_prompts)
        positive_int(self, "n", 2)  # a group of one rollout has zero advantage: nothing to train


@register
class Uniform(Allocator):
    name = "grpo"
    Config = UniformConfig

    @classmethod
    def example_config(cls):
        return {"n": 4}

    def _next_request(self):
        if self.ready:
            return None
        return self.make_request(self.draw(self.config.train_prompts), self.config.n, "rollout")

    def _on_results(self, request, groups):
        self.count("zero_variance", sum(g.zero_variance for g in groups))
        self.train(groups)
