"""column-rank: rank each step's candidates by the recent success rate of their column value.

rollalloc's strategy for pools where most groups carry signal (groups of 8, few solved or hopeless
prompts), where a prompt's own history is too thin to rank by (three visits of 8 rollouts in a
run) but a task column (a level, a source, the answer's size) tells pass rates apart. Every group
any prompt of value g trained adds to g's decayed counts, so the estimate is fresh, covers prompts
never seen (no blind first look), and a value left out of training decays back to the pool's mean
and is tried again (docs/column-rank.md).

    g(i)        prompt i's value of the task column `column` (one value for all without a column)
    K_g, N_g    successes and rollouts of value g's trained groups, each step's weighted
                2^(-age / half_life), age in steps
    p_bar       sum_g K_g / sum_g N_g (0.5 before anything was trained)
    p^_g        (K_g + m p_bar) / (N_g + m)                   m = prior_weight rollouts
    S(p, n)     E_{k~Bin(n,p)} sqrt(n(n-1)) sqrt(k/n (1-k/n))  expected GRPO signal of a group

step: the next C = round(window * B) prompts of the epoch stream are the candidates; the B of
      largest S(p^_g(i), n) get n rollouts each (ties: stream order); every group is trained.
      Candidates not chosen go back to the stream's next epoch, as oracle-greedy's do.

Without a column (or with one value) every candidate ranks equal: GRPO on a stream that moves
window times as fast. Constant batch: B groups of n, so TRL and verl take it unchanged.
State: 2 floats per column value; nothing per prompt beyond the table's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from rollalloc.allocator import Allocator, AllocatorConfig, register
from rollalloc.validate import in_range, positive_int


def expected_signal(p: np.ndarray, n: int) -> np.ndarray:
    """S(p, n) = E_{k~Bin(n,p)} sqrt(n(n-1)) sqrt(k/n (1-k/n)) for each p: (P,)."""
    k = np.arange(n + 1, dtype=np.float64)  # (n+1,)
    comb = np.array([math.comb(n, int(j)) for j in k], dtype=np.float64)
    p = np.clip(np.asarray(p, dtype=np.float64), 0.0, 1.0)[:, None]  # (P, 1)
    pmf = comb * p**k * (1.0 - p) ** (n - k)  # (P, n+1)
    return pmf @ (math.sqrt(n * (n - 1)) * np.sqrt(k / n * (1.0 - k / n)))


@dataclass
class ColumnRankConfig(AllocatorConfig):
    n: int = 8
    """Rollouts per chosen prompt (the group size G)."""
    column: str = ""
    """The task column whose values share an estimate (e.g. `level`; arith's `answer`; verl:
    `extra_info.<key>`). Empty: one value for the whole pool (GRPO's choice)."""
    window: float = 1.25
    """Candidates per step = round(window x train_prompts): the step leaves out the
    (window - 1) / window of them with the least expected signal."""
    half_life: float = 32.0
    """Steps after which a trained group counts half in its value's estimate."""
    prior_weight: float = 8.0
    """m: rollouts of the pool's mean success rate added to each value's counts."""

    @classmethod
    def group_split(cls, group_size: int) -> dict[str, int]:
        return {"n": group_size}

    def validate(self, num_prompts: int) -> None:
        super().validate(num_prompts)
        positive_int(self, "n", 2)
        if not isinstance(self.column, str):
            raise ValueError(f"column must be a column name (a string), got {self.column!r}")
        in_range(self, "window", 1.0, 1e6)
        in_range(self, "half_life", 1e-6, 1e12)
        in_range(self, "prior_weight", 0.0, 1e12)

    def pool_columns(self) -> tuple[str, ...]:
        return (self.column,) if self.column else ()


@register
class ColumnRank(Allocator):
    name = "column-rank"
    Config = ColumnRankConfig

    @classmethod
    def example_config(cls):
        return {"n": 4, "window": 2.0, "half_life": 8.0}

    def _init_strategy(self) -> None:
        self.value = np.zeros(self.num_prompts, dtype=np.int64)  # (N,) g(i)
        self.K = np.zeros(1)  # (V,) decayed successes per value
        self.N = np.zeros(1)  # (V,) decayed rollouts per value
        self.at = 0  # the step K and N are decayed to

    def set_pool_columns(self, columns: dict[str, Any]) -> None:
        labels = self.pool_column(columns, self.config.column)
        self.value = np.unique(np.asarray(labels, dtype=str), return_inverse=True)[1]
        self.K = np.zeros(int(self.value.max()) + 1)
        self.N = np.zeros_like(self.K)

    def _decay_to_now(self) -> None:
        if self.step > self.at:
            f = 2.0 ** (-(self.step - self.at) / self.config.half_life)
            self.K *= f
            self.N *= f
            self.at = self.step

    def estimate(self) -> np.ndarray:
        """p^_g of every value: (V,)."""
        self._decay_to_now()
        total = self.N.sum()
        p_bar = self.K.sum() / total if total > 0 else 0.5
        m = self.config.prior_weight
        return (self.K + m * p_bar) / np.maximum(self.N + m, 1e-12)

    def _next_request(self):
        if self.ready:
            return None
        c = self.config
        cand = self.draw(min(max(round(c.window * c.train_prompts), 1), self.num_prompts))
        score = expected_signal(self.estimate()[self.value[cand]], c.n)  # (C,)
        k = min(c.train_prompts, len(cand))
        chosen = cand[np.argsort(-score, kind="stable")[:k]]
        self.count("not_chosen", len(cand) - len(chosen))
        return self.make_request(chosen, c.n, "rollout")

    def _on_results(self, request, groups):
        self._decay_to_now()
        for g in groups:
            v = self.value[g.prompt_id]
            self.K[v] += g.mean * g.size  # successes (Outcome.success, in [0, 1])
            self.N[v] += g.size
            self.count("zero_variance", int(g.zero_variance))
        self.train(groups)

    def _extra_state(self) -> dict:
        return {"K": self.K.tolist(), "N": self.N.tolist(), "at": self.at}

    def _load_extra_state(self, state: dict) -> None:
        self.K = np.array(state["K"], dtype=np.float64)
        self.N = np.array(state["N"], dtype=np.float64)
        self.at = int(state["at"])
