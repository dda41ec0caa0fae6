"""The oracle: an allocator that sees the true success probabilities (simulator only).

It is the reference ceiling of every simulated comparison: it pays nothing to find out which prompts
carry signal. Each step it takes the next C candidates of its seeded epoch stream, looks up their
true success probabilities p_i under the current policy, and gives n rollouts to the train_prompts
candidates whose expected GRPO signal is largest:

    E[G_i] = sum_k Binom(k; n, p_i) * n v_k / (std_k + eps),   v_k = k/n (1 - k/n)

(`rollalloc.sim.roles.expected_group_signal`, the expected movement the simulated learner gets from
a fresh group; largest at p = 1/2, 0 at p in {0, 1}). The batch stays constant (train_prompts groups
of n) and so does the spend per step (train_prompts * n rollouts, as GRPO): every gain over GRPO is
from choosing prompts, none from spending more. Candidates come from the epoch stream, so each prompt
is considered once per epoch (as every other strategy sees it), the choice is O(C) per step, and a
different seed gives a different run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from rollalloc.allocator import Allocator, AllocatorConfig, _positive_int, register
from rollalloc.sim.roles import expected_group_signal


def example_success_prob(prompt_ids: np.ndarray) -> np.ndarray:
    """A fixed, spread-out probability per prompt id (for tests without a simulator): (P,)."""
    ids = np.asarray(prompt_ids, dtype=np.float64)
    return np.mod(ids * 0.6180339887498949 + 0.1, 1.0)  # golden-ratio sequence, in [0, 1)


@dataclass
class OracleConfig(AllocatorConfig):
    n: int = 64
    """Rollouts per selected prompt (compare at GRPO's n)."""
    candidates: int = 0
    """Prompts of the epoch stream considered per step; 0 means 8 x train_prompts (capped by pool)."""
    success_prob: Callable[[np.ndarray], np.ndarray] | None = None
    """True success probability of prompt ids (P,) -> (P,) under the current policy. The simulator
    wires SimPolicy.success_prob; there is no default because no real trainer knows it."""

    @classmethod
    def group_split(cls, group_size: int) -> dict[str, int]:
        return {"n": group_size}

    def validate(self, num_prompts: int) -> None:
        super().validate(num_prompts)
        _positive_int(self, "n", 2)
        _positive_int(self, "candidates", 0)
        if not callable(self.success_prob):
            raise ValueError(
                "success_prob must be a callable ids -> probabilities (the oracle needs the true "
                "success probabilities; `rollalloc simulate` wires the simulated policy's)"
            )


@register
class Oracle(Allocator):
    name = "oracle"
    Config = OracleConfig

    @classmethod
    def example_config(cls):
        return {"n": 4, "success_prob": example_success_prob}

    @classmethod
    def simulator_options(cls, policy) -> dict:
        """Options `simulate_run` wires from the simulated policy (which only it knows)."""
        return {"success_prob": policy.success_prob}

    def _next_request(self):
        if self._ready:
            return None
        cfg = self.config
        c = min(cfg.candidates or 8 * cfg.train_prompts, self.num_prompts)
        cand = self._draw(c)  # (C,) next candidates of the stream, unique
        p = np.clip(np.asarray(cfg.success_prob(cand), dtype=np.float64), 0.0, 1.0)  # (C,)
        if p.shape != cand.shape or not np.all(np.isfinite(p)):
            raise ValueError(
                "oracle: success_prob must return one finite probability per prompt id"
            )
        signal = expected_group_signal(p, cfg.n)  # (C,)
        k = min(cfg.train_prompts, len(cand))
        # Largest expected signal first; ties keep stream order (seeded), so seeds differ.
        chosen = cand[np.argsort(-signal, kind="stable")[:k]]
        self._decide("not_chosen", len(cand) - k)
        return self._request(chosen, cfg.n, "rollout")

    def _on_results(self, request, groups):
        self._decide("zero_variance", sum(g.zero_variance for g in groups))
        self._ready.extend(groups)
