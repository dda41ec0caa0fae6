"""Knapsack-RL (Li et al. 2025, "Knapsack RL: Unlocking Exploration of LLMs via Optimizing Budget
Allocation", arXiv 2509.25849).

Each step takes the next B = train_prompts prompts of the epoch and splits the step budget
n x B rollouts among them as a knapsack: prompt i with estimated success rate p_i is worth

    V(N, p) = (1 - p^N - (1 - p)^N) * p (1 - p)^2        (P[group has reward variance] x gain)

with N rollouts. Prompts seen fewer than min_history times get n; p = 0 gets n_negative, p = 1
n_positive, 0 < p < 1 at least min_n; the rest maximises sum_i V(N_i, p_i) over 0 < p_i < 1 with
N_i <= max_n. Because V(N+1) - V(N) = p(1-p)^2 (p^N (1-p) + (1-p)^N p) falls strictly with N, the
greedy rule "next rollout to the largest marginal value" is exact (each V is concave in N); it is
what we solve (equal, proven by test, to the reference's dynamic programme up to ties).
Fallback: if the rollouts the uncertain prompts need, sum_i min(max_n, ln(1 - alpha) / ln(max(p_i,
1 - p_i))) (enough to see both outcomes with probability alpha), are below the remaining budget, the
excess goes to the p = 0 prompts (exploration of hard prompts; to the others when none is at 0).
Groups are ragged; every group is trained (GRPO, no filter), so the batch has B groups.

p_i: the mean reward of the prompt's last group, or of its last history_window rewards when that
group is smaller. Reference: github.com/liziniu/KnapsackRL (`exploration_utils.py`, `rl_dataset.py`,
`run_knapsack_grpo_7b.sh`): n 8, min_n = n_negative = n_positive = 2, max_n 128, alpha 0.9,
min_history 8, window 16. Differences: greedy instead of DP (same optimum; the reference's DP also
scores "no extra rollout" as 0 instead of V(min_n)); no prompt ever exceeds max_n (the reference may,
when it spreads leftovers); the window mean is approximated by blending the new group with the old
estimate (no per-prompt reward history is stored).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from rollalloc.allocator import Allocator, AllocatorConfig, _in_range, _positive_int, register


def knapsack_value(N: np.ndarray, p: np.ndarray) -> np.ndarray:
    """V(N, p) = (1 - p^N - (1-p)^N) p (1-p)^2."""
    return (1.0 - p**N - (1.0 - p) ** N) * p * (1.0 - p) ** 2


def marginal_value(N: np.ndarray, p: np.ndarray) -> np.ndarray:
    """V(N + 1, p) - V(N, p) = p (1-p)^2 (p^N (1-p) + (1-p)^N p): falls strictly with N."""
    return p * (1.0 - p) ** 2 * (p**N * (1.0 - p) + (1.0 - p) ** N * p)


def greedy_allocation(p: np.ndarray, budget: int, min_n: int, max_n: int) -> np.ndarray:
    """N_i in [min_n, max_n] maximising sum V(N_i, p_i) with sum N_i <= min_n |p| + budget."""
    p = np.asarray(p, dtype=np.float64)[:, None]  # (P, 1)
    N = np.arange(min_n, max_n, dtype=np.float64)[None, :]  # (1, K) from N to N + 1
    gain = marginal_value(N, p)  # (P, K), falls along K
    take = min(max(budget, 0), gain.size)
    best = np.argsort(-gain, axis=None, kind="stable")[:take]  # ties: lower prompt, lower N
    return min_n + np.bincount(best // gain.shape[1], minlength=len(p)).astype(np.int64)


def _spread(N: np.ndarray, idx: np.ndarray, amount: int, cap: int) -> int:
    """Add `amount` to N[idx] as evenly as possible (earlier first), none above cap; return rest."""
    while amount > 0:
        room = idx[N[idx] < cap]
        if not len(room):
            break
        add = np.minimum(cap - N[room], max(amount // len(room), 1))
        add = np.clip(amount - (np.cumsum(add) - add), 0, add)  # stop once `amount` is given
        N[room] += add
        amount -= int(add.sum())
    return amount


@dataclass
class KnapsackConfig(AllocatorConfig):
    n: int = 8
    """Average rollouts per prompt: the step budget is n x train_prompts (reference: 8)."""
    min_n: int = 2
    """Fewest rollouts of a prompt with 0 < p < 1 (reference `min_n`: 2)."""
    max_n: int = 128
    """Most rollouts of any prompt (reference `max_n`: 128)."""
    n_negative: int | None = None
    """Rollouts of a prompt estimated at p = 0 before the fallback; None means min_n."""
    n_positive: int | None = None
    """Rollouts of a prompt estimated at p = 1; None means min_n."""
    alpha: float = 0.9
    """Confidence of the fallback's cost estimate (reference: 0.9)."""
    fallback: bool = True
    """Give the budget the uncertain prompts cannot use to the p = 0 prompts (reference: on)."""
    min_history: int = 8
    """Rollouts seen before a prompt's estimate is used; before, it gets n (reference: 8)."""
    history_window: int = 16
    """Rewards the estimate averages when the last group is smaller (reference: 16)."""

    def validate(self, num_prompts: int) -> None:
        super().validate(num_prompts)
        _positive_int(self, "min_n", 1)
        _positive_int(self, "n", self.min_n)
        _positive_int(self, "max_n", max(self.n, self.min_n))
        for f in ("n_negative", "n_positive"):
            if getattr(self, f) is not None:
                _positive_int(self, f, 1)
                if getattr(self, f) > self.max_n:
                    raise ValueError(f"{f}={getattr(self, f)} exceeds max_n={self.max_n}")
        _in_range(self, "alpha", 1e-6, 1 - 1e-6)
        _positive_int(self, "min_history", 0)
        _positive_int(self, "history_window")


@register
class Knapsack(Allocator):
    name = "knapsack"
    Config = KnapsackConfig

    @classmethod
    def example_config(cls):
        return {"n": 4, "min_n": 2, "max_n": 16, "min_history": 4, "history_window": 8}

    def _init_strategy(self):
        self.table.add_column("p_hat", np.float64, np.nan)  # estimated success rate
        self._fallback = 0

    def allocate(self, ids: np.ndarray) -> np.ndarray:
        """Rollouts per prompt of `ids` (the step's batch), summing to at most n x len(ids)."""
        c, t = self.config, self.table
        p = t.p_hat[ids]
        valid = (t.trials[ids] >= c.min_history) & ~np.isnan(p)
        zero, one = valid & (p <= 0.0), valid & (p >= 1.0)
        eff = np.flatnonzero(valid & ~zero & ~one)
        N = np.where(valid, c.min_n, c.n).astype(np.int64)
        N[zero] = c.n_negative or c.min_n
        N[one] = c.n_positive or c.min_n
        rest = c.n * len(ids) - int(N.sum())
        others = np.flatnonzero(zero) if zero.any() else np.flatnonzero(~valid | one)
        self._fallback = 0
        if rest > 0 and c.fallback and len(others):
            q = np.maximum(p[eff], 1 - p[eff])
            need = int(np.minimum(c.max_n, np.log(1 - c.alpha) / np.log(q)).astype(int).sum())
            if need < rest:
                self._fallback = rest - need
                rest = need + _spread(N, others, rest - need, c.max_n)
        if len(eff):
            N[eff] = greedy_allocation(p[eff], rest, c.min_n, c.max_n)
            rest -= int(N[eff].sum()) - c.min_n * len(eff)
        _spread(N, np.arange(len(ids)), rest, c.max_n)  # what is left (caps hit, nothing uncertain)
        self._decide("unseen", int((~valid).sum()))
        self._decide("p0", int(zero.sum()))
        self._decide("p1", int(one.sum()))
        return N

    def _next_request(self):
        if self._ready:
            return None
        ids = self._draw(self.config.train_prompts)
        return self._request(ids, self.allocate(ids), "rollout")

    def _on_results(self, request, groups):
        c, t = self.config, self.table
        lo, span = c.reward_min, c.reward_max - c.reward_min
        for g in groups:
            i, r = g.prompt_id, (g.rewards - lo) / span
            before = int(t.trials[i]) - g.size  # trials already counts this group
            old = 0.0 if math.isnan(t.p_hat[i]) else float(t.p_hat[i])
            m = 0 if math.isnan(t.p_hat[i]) else min(max(c.history_window - g.size, 0), before)
            t.p_hat[i] = (r.sum() + m * old) / (g.size + m)
            self._decide("zero_variance", int(g.zero_variance))
        self._ready.extend(groups)

    def _step_extra(self):
        return {"fallback_rollouts": self._fallback}

    def _extra_state(self):
        return {"fallback": self._fallback}

    def _load_extra_state(self, state):
        self._fallback = int(state["fallback"])
