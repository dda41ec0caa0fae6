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

p_i, the success estimate (reference `update_sample_state` in rl_dataset.py, with its scripts'
epoch_estimation = robust_epoch_estimation = true): the mean success of the prompt's last group when
that group has at least history_window rollouts, else the mean of its last history_window successes
(fewer if it has not had that many), oldest forgotten: 7/8, 8/8, 8/8 correct gives 1.0. "Last"
follows arrival order, and within a group the order in which `tell` listed its rollouts: the last
listed is the newest (the reference flattens its reward lists in reverse and takes the first
`reward_buffer_length`). The order matters only when the window cuts into an older group.

Storage of the window, per prompt: binary successes (the reference accepts only -1/0/1 rewards) as a
bitmask, newest in bit 0 (uint16 for windows up to 16, uint32 / uint64 up to 32 / 64), and a count
(uint8; uint16 for windows above 255): 3 bytes a prompt at the default 16. The first success strictly
between 0 and 1 (or a window above 64) switches to a (pool, window) float16 array, 2 bytes a
success (32 a prompt at 16). float16 is exact at 0 and 1, so p = 0 and p = 1 are decided exactly, and
within 2^-11 relative elsewhere, far below the spread of a 16-sample mean. The successes are
`Group.successes` (the Outcome's success signal, or the reward where it is one).

Reference: github.com/liziniu/KnapsackRL (`exploration_utils.py`, `rl_dataset.py`,
`run_knapsack_grpo_7b.sh`): n 8, min_n = n_negative = n_positive = 2, max_n 128, alpha 0.9,
min_history 8 (`min_buffer_length`), window 16 (`reward_buffer_length`). Differences: greedy instead
of DP (same optimum; the reference's DP also scores "no extra rollout" as 0 instead of V(min_n)); no
prompt ever exceeds max_n (the reference may, when it spreads leftovers).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rollalloc.allocator import Allocator, AllocatorConfig, register
from rollalloc.validate import in_range, positive_int

_BITS = ((16, np.uint16), (32, np.uint32), (64, np.uint64))  # bitmask dtype by window


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
    """Last successes the estimate averages when the last group is smaller (reference
    `reward_buffer_length`: 16)."""

    @classmethod
    def group_split(cls, group_size: int) -> dict[str, int]:
        return {"n": group_size}  # the step's budget: group_size rollouts per prompt on average

    def validate(self, num_prompts: int) -> None:
        super().validate(num_prompts)
        positive_int(self, "min_n", 1)
        positive_int(self, "n", self.min_n)
        positive_int(self, "max_n", max(self.n, self.min_n))
        for f in ("n_negative", "n_positive"):
            if getattr(self, f) is not None:
                positive_int(self, f, 1)
                if getattr(self, f) > self.max_n:
                    raise ValueError(f"{f}={getattr(self, f)} exceeds max_n={self.max_n}")
        in_range(self, "alpha", 1e-6, 1 - 1e-6)
        positive_int(self, "min_history", 0)
        positive_int(self, "history_window")


@register
class Knapsack(Allocator):
    name = "knapsack"
    Config = KnapsackConfig

    @property
    def equal_group_sizes(self) -> bool:
        return False  # groups are sized by value after the first epoch

    @classmethod
    def example_config(cls):
        return {"n": 4, "min_n": 2, "max_n": 16, "min_history": 4, "history_window": 8}

    def _init_strategy(self):
        self.table.add_column("p_hat", np.float64, np.nan)  # estimated success rate
        self._fallback = 0
        self._init_window()

    def _bits_dtype(self):
        return next((d for bits, d in _BITS if self.config.history_window <= bits), None)

    def _init_window(self) -> None:
        """Empty windows: per prompt its length, and its successes as bits (or float16)."""
        w, P = self.config.history_window, self.num_prompts
        self._hist_len = np.zeros(P, dtype=np.uint8 if w <= 255 else np.uint16)
        dtype = self._bits_dtype()
        self._bits = np.zeros(P, dtype=dtype) if dtype is not None else None
        self._ring = None if dtype is not None else np.zeros((P, w), dtype=np.float16)

    def _to_ring(self) -> None:
        """Switch the window from bits to float16 (the first non-binary success)."""
        w = self.config.history_window
        shifts = np.arange(w - 1, -1, -1, dtype=np.uint64)  # column j: bit w-1-j, newest last
        bits = self._bits.astype(np.uint64)[:, None]
        self._ring = ((bits >> shifts[None, :]) & np.uint64(1)).astype(np.float16)
        self._bits = None

    def _remember(self, i: int, x: np.ndarray) -> float:
        """Push the successes x of prompt i (oldest first) into its window; return its mean."""
        w, k = self.config.history_window, len(x)
        if self._ring is None and not np.all((x == 0.0) | (x == 1.0)):
            self._to_ring()
        n = min(int(self._hist_len[i]) + k, w)
        self._hist_len[i] = n
        if self._ring is not None:
            row = np.concatenate([self._ring[i], x.astype(np.float16)])[-w:]
            self._ring[i] = row
            return float(row[w - n :].astype(np.float64).mean())
        new = 0
        for v in x[-w:].tolist():  # oldest first: the last one ends in bit 0
            new = (new << 1) | int(v)
        bits = ((int(self._bits[i]) << k) | new) & ((1 << w) - 1)  # the oldest fall off
        self._bits[i] = bits
        return bits.bit_count() / n

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
        self.count("unseen", int((~valid).sum()))
        self.count("p0", int(zero.sum()))
        self.count("p1", int(one.sum()))
        return N

    def _next_request(self):
        if self.ready:
            return None
        ids = self.draw(self.config.train_prompts)
        return self.make_request(ids, self.allocate(ids), "rollout")

    def _on_results(self, request, groups):
        c, t = self.config, self.table
        for g in groups:
            x = np.asarray(g.successes, dtype=np.float64)  # (k,) in [0, 1], told order
            window_mean = self._remember(g.prompt_id, x)
            # reference: a group of at least the window is the estimate alone, all of it
            t.p_hat[g.prompt_id] = float(x.mean()) if len(x) >= c.history_window else window_mean
            self.count("zero_variance", int(g.zero_variance))
        self.train(groups)

    def _step_extra(self):
        return {"fallback_rollouts": self._fallback}

    def _extra_state(self):
        window = {"hist_len": self._hist_len}
        if self._ring is not None:
            window["ring"] = self._ring
        else:
            window["bits"] = self._bits
        return {"fallback": self._fallback, "window": window}

    def _load_extra_state(self, state):
        self._fallback = int(state["fallback"])
        window = state.get("window")
        if window is None:  # a state from before the window: it starts empty
            self._init_window()
            return
        self._hist_len = np.asarray(window["hist_len"]).astype(self._hist_len.dtype)
        if "ring" in window:
            self._ring, self._bits = np.asarray(window["ring"], dtype=np.float16).copy(), None
        else:
            self._bits = np.asarray(window["bits"]).astype(self._bits_dtype())
            self._ring = None
