"""DAPO dynamic sampling, as in verl's DAPO recipe (Yu et al., 2025).

Rounds of `gen_prompts` new prompts x `n` rollouts; a group is kept only if its rewards are not all
equal (std > 0); rounds repeat until `train_prompts` groups are kept. Kept groups beyond that are
surplus and discarded (their rollouts are counted as spent). It fixes the gradient signal of the
batch and pays for it with more sampling:

    keep_i = 1[std(r_i) > 0];   rounds until sum_i keep_i >= B;   train on the first B kept groups

After `max_rounds` rounds without a full batch verl raises an error; `on_max_rounds="train"` trains
on the groups there are instead (the batch is then smaller than `train_prompts`).
"""

from __future__ import annotations

from dataclasses import dataclass

from rollalloc.allocator import Allocator, RoundsConfig, register
from rollalloc.metrics import ZERO_STD_TOL
from rollalloc.validate import positive_int


@dataclass
class DynamicSamplingConfig(RoundsConfig):
    n: int = 64
    """Rollouts per prompt."""

    @classmethod
    def group_split(cls, group_size: int) -> dict[str, int]:
        return {"n": group_size}

    def validate(self, num_prompts: int) -> None:
        super().validate(num_prompts)
        positive_int(self, "n", 2)


@register
class DynamicSampling(Allocator):
    name = "dapo"
    Config = DynamicSamplingConfig

    @classmethod
    def example_config(cls):
        return {"n": 4}

    def _next_request(self):
        c = self.config
        if len(self.ready) >= c.train_prompts:
            return None
        if self.rounds_exhausted("too few groups show reward variance"):
            return None
        return self.make_request(self.draw(c.round_prompts(self.num_prompts)), c.n, "rollout")

    def _on_results(self, request, groups):
        zero_var = groups.hi - groups.lo <= ZERO_STD_TOL  # (P,) all rewards equal: no gradient
        self.discard(groups, "zero_variance", where=zero_var)
        self.train(groups.where(~zero_var), "kept")

    def _take_batch(self):
        B = self.config.train_prompts
        self.discard(self.ready[B:], "surplus")
        return list(self.ready[:B])
