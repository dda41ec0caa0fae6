"""A strategy in one screen: GRPO that stops asking about the prompts it has solved.

Each step draws train_prompts prompts from the seeded epoch stream and gives each n rollouts, as
GRPO does, and trains every group. A prompt whose group is all correct (success rate 1, no
advantage to learn from) is evicted: the stream never hands it out again. docs/strategies.md walks
through it; tests/test_example_strategy.py runs it through the contract suite.
"""

from __future__ import annotations

from dataclasses import dataclass

from rollalloc import Allocator, AllocatorConfig
from rollalloc.state import EVICTED
from rollalloc.validate import positive_int


@dataclass
class EvictSolvedConfig(AllocatorConfig):
    n: int = 8
    """Rollouts per prompt."""

    @classmethod
    def group_split(cls, group_size: int) -> dict[str, int]:
        return {"n": group_size}  # `rollalloc train --group-size G` means n = G

    def validate(self, num_prompts: int) -> None:
        super().validate(num_prompts)
        positive_int(self, "n", 2)  # else ValueError: "n must be an integer >= 2, got ..."


class EvictSolved(Allocator):  # @rollalloc.register makes it `--strategy evict-solved`
    name = "evict-solved"
    Config = EvictSolvedConfig

    @classmethod
    def example_config(cls):
        return {"n": 4}  # small groups: the contract suite runs fast

    def _next_request(self):
        if self.ready:  # the step's groups are in: the batch is complete
            return None
        return self.make_request(self.draw(self.config.train_prompts), self.config.n, "rollout")

    def _on_results(self, request, groups):
        solved = groups.prompt_ids[groups.means >= 1.0]  # (S,) all rollouts correct
        self.table.status[solved] = EVICTED
        self.count("evicted", len(solved))
        self.train(groups)  # every group: the decision goes to the base class, which applies it
