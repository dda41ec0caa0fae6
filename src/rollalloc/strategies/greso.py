"""GRESO: GRPO with Efficient Selective Rollout (Zheng, Zhou, Bartoldson, Kailkhura, Lai, Zhao, Chen
2025, "Act Only When It Pays", arXiv 2506.02177).

A prompt whose last k groups were all easy (mean success >= easy_cutoff = 0.98) or all hard (mean
success <= hard_cutoff = 0.11) is skipped *before* rollout with probability

    P_skip = 1 - max(p^k, floor),   p = p_easy or p_hard,   floor = 0.01

so it is retried now and then. The prompts that pass are rolled out with n rollouts each and, as in
DAPO's dynamic sampling, groups with zero variance are dropped; rounds repeat until train_prompts
groups are kept (surplus discarded). A round after the first samples only what the last round's
zero-variance share z says it needs: ceil(1.25 (B - kept) / (1 - z)) prompts, within
[min_gen_prompts, gen_prompts]. After each step (from the second epoch on) the base probabilities
move toward a target share of zero-variance groups, 1/3 of it easy and 2/3 hard:

    p_easy <- p_easy - delta  if  easy share >= target / 3    else p_easy + delta,   in [p_min, p_max]
    p_hard <- p_hard - delta  if  hard share >= 2 target / 3  else p_hard + delta

k counts groups, not epochs (a skipped prompt keeps its streak); a group that is neither easy nor
hard breaks the streak, one of the other kind starts a new one. The cutoffs are the reference's
(`DataProfiler.easy_probabilistic_skip`: a record < 0.98 ends the easy streak;
`hard_probabilistic_skip`: a record > 0.11 ends the hard one), applied to every group's mean, not
only to zero-variance groups. With binary successes and n rollouts they read: easy iff all correct
for n < 50 (49 of 50 is 0.98: easy), hard iff none correct for n <= 9 (1 of 10 is 0.1: hard). So for
n >= 10 a group with a few successes continues a hard streak, although it has variance and is
trained. The streaks decide the skipping only; what is dropped after rollout is the zero-variance
groups (the reference's `filter_zero_advantage`), and the p adaptation counts the zero-variance
groups of each kind (the reference: all rewards 1, or all 0.1, its wrong-answer reward).

Reference: github.com/Infini-AI-Lab/GRESO (`verl/trainer/ttis/presampling_selector.py`,
`verl/trainer/ppo/ray_trainer.py`, `train-scripts/*greso.sh`): p_easy = p_hard = 0.5, target 0.25,
delta 0.01 in [0.05, 0.95], n 8, 384 sampled for 256 trained. Its records are group means of the raw
reward (1 correct, 0.1 wrong answer, 0 no answer: `latex_math.compute_score`); ours are group means
of the success in [0, 1] (`Group.mean`). Differences: the reference trains a short batch after its
"last" adaptive round; we keep sampling until the batch is full (constant batch), up to max_rounds;
the next round's size rounds up (ceil) where the reference's `int(...)` rounds down (7.5 prompts:
8 here, 7 there), and is capped by gen_prompts where the reference allows up to 64 past its default.
Its adaptation metrics reshape the rewards as groups of 8 (`compute_reward_metrics`): right only
for n = 8; we count per group.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from rollalloc.allocator import Allocator, RoundsConfig, register
from rollalloc.validate import in_range, positive_int

EASY, HARD = 1, 2  # streak_kind values (0: no streak)


@dataclass
class GresoConfig(RoundsConfig):
    n: int = 8
    """Rollouts per prompt (reference scripts: 8)."""
    gen_factor: ClassVar[float] = 1.5  # first round: reference `sampling_batch_size` 384 for 256
    min_gen_prompts: int = 64
    """Smallest adaptive round after the first (reference: 64), at most gen_prompts."""
    p_easy: float = 0.5
    """Initial base keep probability of prompts on an all-correct streak."""
    p_hard: float = 0.5
    """Initial base keep probability of prompts on an all-wrong streak."""
    target_zero_variance: float = 0.25
    """Target share of zero-variance groups among those rolled out (1/3 easy, 2/3 hard)."""
    p_step: float = 0.01
    """Change of p_easy / p_hard per step."""
    p_min: float = 0.05
    p_max: float = 0.95
    """Range of p_easy / p_hard."""
    skip_floor: float = 0.01
    """Keep probability never falls below this: every prompt is retried eventually."""
    easy_cutoff: float = 0.98
    """A group with mean success at or above this is easy (reference: a record >= 0.98)."""
    hard_cutoff: float = 0.11
    """A group with mean success at or below this is hard (reference: a record <= 0.11)."""

    @classmethod
    def group_split(cls, group_size: int) -> dict[str, int]:
        return {"n": group_size}

    def validate(self, num_prompts: int) -> None:
        super().validate(num_prompts)
        positive_int(self, "n", 2)
        positive_int(self, "min_gen_prompts")
        in_range(self, "p_min", 0.0, 1.0)
        in_range(self, "p_max", self.p_min, 1.0)
        in_range(self, "p_easy", self.p_min, self.p_max)
        in_range(self, "p_hard", self.p_min, self.p_max)
        in_range(self, "target_zero_variance", 0.0, 1.0)
        in_range(self, "p_step", 0.0, 1.0)
        in_range(self, "skip_floor", 1e-6, 1.0)  # > 0: every round ends
        in_range(self, "easy_cutoff", 0.0, 1.0)
        in_range(self, "hard_cutoff", 0.0, 1.0)
        if self.hard_cutoff >= self.easy_cutoff:
            raise ValueError(
                f"hard_cutoff={self.hard_cutoff} must be below easy_cutoff={self.easy_cutoff}"
            )


@register
class Greso(Allocator):
    name = "greso"
    Config = GresoConfig

    @classmethod
    def example_config(cls):
        return {"n": 4}

    def _init_strategy(self):
        c = self.config
        self.G = c.round_prompts(self.num_prompts)
        self.p_easy, self.p_hard = float(c.p_easy), float(c.p_hard)
        self.table.add_column("streak", np.int32, 0)  # k: trailing zero-variance groups
        self.table.add_column("streak_kind", np.int8, 0)  # EASY / HARD / 0
        self._next_size = self.G
        self._rolled = {"groups": 0, "easy": 0, "hard": 0}  # this step, for the p adaptation

    def skip_probability(self, ids: np.ndarray) -> np.ndarray:
        """1 - max(p^k, floor) per prompt (0 without a streak)."""
        k = self.table.streak[ids].astype(np.float64)
        p = np.where(self.table.streak_kind[ids] == EASY, self.p_easy, self.p_hard)
        return np.where(k > 0, 1.0 - np.maximum(p**k, self.config.skip_floor), 0.0)

    def _next_request(self):
        c = self.config
        if len(self.ready) >= c.train_prompts:
            return None
        if self.rounds_exhausted("too few groups show reward variance"):
            return None
        size = self.G if self.round == 0 else self._next_size
        kept: list[int] = []
        drawn = 0
        while len(kept) < size and not (kept and drawn >= 2 * self.num_prompts):
            ids = self.draw(size - len(kept))
            drawn += len(ids)
            ids = ids[~np.isin(ids, kept)]  # a draw across an epoch boundary may repeat one
            skip = self.rng.random(len(ids)) < self.skip_probability(ids)
            kind = self.table.streak_kind[ids[skip]]
            self.count("skipped_easy", int((kind == EASY).sum()))
            self.count("skipped_hard", int((kind == HARD).sum()))
            kept += ids[~skip].tolist()
        return self.make_request(kept, c.n, "rollout")

    def kind_of(self, mean_success: float) -> int:
        """EASY, HARD or 0 for a group of this mean success (the reference's cutoffs)."""
        c = self.config
        return (
            EASY if mean_success >= c.easy_cutoff else HARD if mean_success <= c.hard_cutoff else 0
        )

    def _on_results(self, request, groups):
        c, t = self.config, self.table
        for g in groups:
            i = g.prompt_id
            kind = self.kind_of(g.mean)  # every group, zero-variance or not
            t.streak[i] = 0 if kind == 0 else (t.streak[i] + 1 if t.streak_kind[i] == kind else 1)
            t.streak_kind[i] = kind
            self._rolled["groups"] += 1
            if g.zero_variance:
                self._rolled["easy"] += kind == EASY
                self._rolled["hard"] += kind == HARD
                self.discard(g, {EASY: "too_easy", HARD: "too_hard"}.get(kind, "zero_variance"))
            else:
                self.train(g, "kept")
        z = sum(g.zero_variance for g in groups) / max(len(groups), 1)
        need = max(c.train_prompts - len(self.ready), 0)
        size = math.ceil(1.25 * need / max(1.0 - z, 1e-9))
        self._next_size = int(min(max(size, c.min_gen_prompts), self.G))

    def _take_batch(self):
        B = self.config.train_prompts
        self.discard(self.ready[B:], "surplus")
        return list(self.ready[:B])

    def _after_step(self):
        c, r = self.config, self._rolled
        if self.epoch > 0 and r["groups"]:
            easy, hard = r["easy"] / r["groups"], r["hard"] / r["groups"]
            d_easy = -c.p_step if easy >= c.target_zero_variance / 3 else c.p_step
            d_hard = -c.p_step if hard >= c.target_zero_variance * 2 / 3 else c.p_step
            self.p_easy = float(min(max(self.p_easy + d_easy, c.p_min), c.p_max))
            self.p_hard = float(min(max(self.p_hard + d_hard, c.p_min), c.p_max))
        self._rolled = {"groups": 0, "easy": 0, "hard": 0}

    def _step_extra(self):
        return {"p_easy": self.p_easy, "p_hard": self.p_hard}

    def _extra_state(self):
        r = {"p_easy": self.p_easy, "p_hard": self.p_hard, "next_size": self._next_size}
        return {**r, "rolled": dict(self._rolled)}

    def _load_extra_state(self, state):
        self.p_easy, self.p_hard = float(state["p_easy"]), float(state["p_hard"])
        self._next_size = int(state["next_size"])
        self._rolled = {k: int(v) for k, v in state["rolled"].items()}
