"""MoPPS: Model Predictive Prompt Selection (Qu, Wang, Mao, Hu, Ommer, Ji 2025, "Can Prompt Difficulty
be Online Predicted for Accelerating RL Finetuning of Reasoning Models?", arXiv 2507.04632).

Each prompt's success rate p_i has a Beta(alpha_i, beta_i) posterior, Beta(alpha0, beta0) = Beta(1, 1)
before any evidence. Each step draws a candidate batch C of candidate_ratio x B prompts of the epoch
(each prompt is a candidate once per epoch), Thompson-samples

    p~_i ~ Beta(alpha_i, beta_i),   i in C

and selects the B = train_prompts candidates whose p~_i is closest to the target success rate
(`topk`: smallest (p~_i - target)^2), or B of those inside [lower, upper] (`threshold`, falling back
to the closest when too few are inside). Every selected prompt gets n rollouts; all groups are
trained (no filter). With s_i = the group's successes (Outcome.success, in [0, 1]) and n_i its size, the
posterior of a trained prompt decays toward the prior, then takes the evidence:

    alpha_i <- lambda alpha_i + (1 - lambda) alpha0 + s_i
    beta_i  <- lambda beta_i  + (1 - lambda) beta0  + n_i - s_i

Prompts not selected keep their posterior (the reference decays only on update). Reference:
github.com/thu-rllab/MoPPS (`recipe/ours/mopps.py`, `scripts/math/math_verl_1.5b_topk_noinit.sh`):
topk, target 0.5, 16 x candidates, n 8, lambda 1.0 (the config default; the math scripts leave it,
countdown / geometry use 8 x candidates and lambda 0.5). Differences: the Thompson draw uses the
allocator's seeded generator (the reference the global numpy one); no offline prior initialisation.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rollalloc.allocator import Allocator, AllocatorConfig, register
from rollalloc.validate import in_range, one_of, positive_int


@dataclass
class MoppsConfig(AllocatorConfig):
    n: int = 8
    """Rollouts per selected prompt (reference scripts: 8)."""
    candidate_ratio: int = 16
    """Candidates per step = candidate_ratio x train_prompts (reference `ts_ratio`: 16 on math)."""
    selection: str = "topk"
    """"topk": the B sampled rates closest to target; "threshold": B inside [lower, upper]."""
    target: float = 0.5
    """Target success rate (reference `bandit_target_mean`)."""
    lower: float = 0.3
    upper: float = 0.7
    """Band of the "threshold" selection (reference `bandit_lower_bound` / `bandit_upper_bound`)."""
    decay: float = 1.0
    """lambda: share of old evidence kept at each update (1.0 = none forgotten)."""
    prior_alpha: float = 1.0
    """Beta prior of every prompt's success rate."""
    prior_beta: float = 1.0

    @classmethod
    def group_split(cls, group_size: int) -> dict[str, int]:
        return {"n": group_size}

    def validate(self, num_prompts: int) -> None:
        super().validate(num_prompts)
        positive_int(self, "n")
        positive_int(self, "candidate_ratio")
        one_of(self, "selection", ("topk", "threshold"))
        in_range(self, "target", 0.0, 1.0)
        in_range(self, "lower", 0.0, 1.0)
        in_range(self, "upper", self.lower, 1.0)
        in_range(self, "decay", 0.0, 1.0)
        in_range(self, "prior_alpha", 1e-6, 1e6)
        in_range(self, "prior_beta", 1e-6, 1e6)


@register
class Mopps(Allocator):
    name = "mopps"
    Config = MoppsConfig

    @classmethod
    def example_config(cls):
        return {"n": 4, "candidate_ratio": 4, "decay": 0.5}

    def _init_strategy(self):
        c = self.config
        self.C = min(c.candidate_ratio * c.train_prompts, self.num_prompts)
        self.table.add_column("alpha", np.float64, c.prior_alpha)
        self.table.add_column("beta", np.float64, c.prior_beta)

    def select(self, candidates: np.ndarray, p_sampled: np.ndarray) -> np.ndarray:
        """The train_prompts candidates to roll out, given their Thompson samples."""
        c = self.config
        if c.selection == "topk":
            score = (p_sampled - c.target) ** 2
        else:  # in the band: 0 (random order among them); outside: distance to the band
            inside = (p_sampled >= c.lower) & (p_sampled <= c.upper)
            score = np.where(inside, 0.0, np.maximum(c.lower - p_sampled, p_sampled - c.upper))
            score[inside] = -self.rng.random(int(inside.sum()))
        return candidates[np.argsort(score, kind="stable")[: c.train_prompts]]

    def _next_request(self):
        if self.ready:
            return None
        C = self.draw(self.C)  # (|C|,) candidates
        t = self.table
        p_sampled = self.rng.beta(t.alpha[C], t.beta[C])  # (|C|,) Thompson samples
        S = self.select(C, p_sampled)
        self.count("candidates", len(C))
        return self.make_request(S, self.config.n, "rollout")

    def _on_results(self, request, groups):
        c, t = self.config, self.table
        for g in groups:
            i, s = g.prompt_id, g.mean * g.size  # successes of the group (Outcome.success)
            t.alpha[i] = c.decay * t.alpha[i] + (1 - c.decay) * c.prior_alpha + s
            t.beta[i] = c.decay * t.beta[i] + (1 - c.decay) * c.prior_beta + g.size - s
            self.count("zero_variance", int(g.zero_variance))
        self.train(groups)
