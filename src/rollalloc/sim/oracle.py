"""The oracles: allocators that see the true success probabilities (in the simulator the model's
p_i; in a real run, `rollalloc train --strategy oracle`, the live policy's exact pass rates).

`oracle` (Ceiling) is the reference ceiling of every simulated comparison (BENCHMARKS.md point 8;
docs/simulator.md, "The ceiling"). It knows every prompt's true p_i under the current policy and
the learning model (rollalloc.sim.policy), and each step chooses prompts AND group sizes for the
largest expected held-out gain at GRPO's rollout budget per step, B = train_prompts x n:

    maximise  sum_i w_i E[G(p_i, n_i)]   over n_i in {0} u grid,   subject to  sum_i n_i <= B

    E[G(p, n)]  expected GRPO signal of a fresh on-policy group of n rollouts
                (`rollalloc.sim.roles.expected_group_signal`, the learner's own G_g in expectation;
                with SimConfig.transfer_asymmetry beta, each k of n weighted (2 (1 - k/n))^beta,
                the skills' share, as the learner weighs it)
    w_i         d(held-out accuracy) / d(G of a group of prompt i): one group moves s_0 by
                global_gain u and s_c(i) by cluster_gain u (u = G / (ref_group_size / 2), 0 for an
                unlearnable prompt), so to first order (steps move logits by ~1e-3)
                w_i = lambda_i (global_gain a_0 + cluster_gain a_c(i)) / (ref_group_size / 2),
                a_0 = mean_j lambda_j p_j (1 - p_j),  a_c = (1/M) sum_{j in c} lambda_j p_j (1 - p_j)
                over the held-out set (what held-out accuracy measures). Memorisation (m_i) never
                reaches the held-out set, so it has no weight.

The candidates are the whole pool (or, with `candidates` > 0, the next C prompts of the seeded
epoch stream). E[G(p, n)] is not concave in n (for p << 1/n it grows like n^1.5: bigger groups pay
on hard prompts), so greedy marginal gains would not be exact; instead each prompt's points
(n, w E[G]) are replaced by their upper concave hull, the hull segments of all prompts are taken in
order of gain per rollout while they fit (the exact optimum of the LP relaxation up to the one
segment that does not fit: `gain_bound`, an upper bound on every allocation of B), and the leftover
budget goes to the single upgrades of largest gain that fit. The step's expected gain and the bound
are in StepStats.extra (`expected_gain`, `gain_bound`); the gap is below one group's gain.

The batch varies (fewer, larger groups where they pay; like CERO's faithful mode, fixed_batch is
False); the spend per step is at most B, so every gain over GRPO is from choosing prompts and group
sizes, none from spending more. It is optimal for ONE step (greedy in time): it does not plan for how
a group moves p_i (memorisation) or the pool for later steps. See docs/simulator.md for the claim.

`oracle-greedy` (OracleGreedy) is the former oracle: each step the next C = 8 x train_prompts
candidates of its stream, n rollouts to the train_prompts of them with the largest E[G(p_i, n)]
(constant batch). Kept for comparison: it is not a ceiling (Knapsack-RL beats it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from rollalloc.allocator import Allocator, AllocatorConfig, by_shares, register
from rollalloc.sim.roles import expected_group_signal
from rollalloc.validate import positive_int


def example_success_prob(prompt_ids: np.ndarray) -> np.ndarray:
    """A fixed, spread-out probability per prompt id (for tests without a simulator): (P,)."""
    ids = np.asarray(prompt_ids, dtype=np.float64)
    return np.mod(ids * 0.6180339887498949 + 0.1, 1.0)  # golden-ratio sequence, in [0, 1)


def _true_p(success_prob: Callable, ids: np.ndarray, who: str) -> np.ndarray:
    p = np.clip(np.asarray(success_prob(ids), dtype=np.float64), 0.0, 1.0)  # (C,)
    if p.shape != ids.shape or not np.all(np.isfinite(p)):
        raise ValueError(f"{who}: success_prob must return one finite probability per prompt id")
    return p


# ------------------------------------------------------------------ the learning model's gain


def heldout_gain_weight(policy) -> Callable[[np.ndarray], np.ndarray]:
    """ids (P,) -> w_i (P,): held-out accuracy gained per unit of G of a group of training prompt i
    under `policy` (a SimPolicy) now, to first order (see the module docstring). Reads the policy's
    current skills at every call."""
    cfg = policy.config
    if float(np.min(policy.ceiling, initial=1.0)) < 1.0:
        raise ValueError(
            "the ceiling oracle assumes p = sigmoid(logit): no level may set a ceiling"
        )
    if cfg.contrast_decay > 0.0:
        raise ValueError(
            "the ceiling oracle assumes fixed difficulties: sim.contrast_decay must be 0 "
            f"(got {cfg.contrast_decay})"
        )
    if cfg.answer_shift > 0.0:
        raise ValueError(
            "the ceiling oracle does not move the answer prior: sim.answer_shift must be 0 "
            f"(got {cfg.answer_shift})"
        )
    if cfg.repeat_decay > 0.0:
        raise ValueError(
            "the ceiling oracle does not count a prompt's visits: sim.repeat_decay must be 0 "
            f"(got {cfg.repeat_decay})"
        )
    if cfg.fast_max > 0.0:
        raise ValueError(
            "the ceiling oracle does not model how a batch moves the fast shared component: "
            f"sim.fast_max must be 0 (got {cfg.fast_max})"
        )
    if cfg.wear_rate > 0.0:
        raise ValueError(
            "the ceiling oracle does not model how a batch's noise wears every level: "
            f"sim.wear_rate must be 0 (got {cfg.wear_rate})"
        )
    if policy.has_sub:
        raise ValueError(
            "the ceiling oracle does not model a level's hard kind learning on its own groups: "
            "every level's subskill_share must be 0"
        )

    def weight(prompt_ids: np.ndarray) -> np.ndarray:
        ids = np.asarray(prompt_ids, dtype=np.int64)
        pe = policy.eval_success_prob()  # (M,)
        slope = policy.eval_learnable * pe * (1.0 - pe)  # (M,) d p_j / d skill
        m, k = len(pe), len(policy.s)
        a0 = slope.sum() / m
        ac = np.bincount(policy.eval_cluster, weights=slope, minlength=k) / m  # (K,)
        if policy.transfer is not None:  # through the levels' transfer matrix W only
            per_u = cfg.cluster_gain * (policy.transfer @ ac)[policy.cluster[ids]]  # (P,)
        else:
            per_u = cfg.global_gain * a0 + cfg.cluster_gain * ac[policy.cluster[ids]]  # (P,)
        return policy.learnable[ids] * per_u / (cfg.ref_group_size / 2.0)

    return weight


def group_size_grid(n: int, max_group: int) -> np.ndarray:
    """Candidate group sizes: 2, 3, 4, 6, 8, 12, ... (powers of 2 and 1.5 x powers of 2) up to
    max_group, with n and max_group themselves: (K,) sorted int64."""
    pw = 2 ** np.arange(1, 31, dtype=np.int64)
    grid = np.concatenate([pw, 3 * pw // 2, [n, max_group]])
    return np.unique(grid[(grid >= 2) & (grid <= max_group)])


_GRID = np.linspace(0.0, 1.0, 2049)  # the p grid of expected_group_signal's tables


@lru_cache(maxsize=16)
def _signal_tables(sizes: tuple[int, ...], beta: float = 0.0) -> np.ndarray:
    """E[G(p, n)] on _GRID for each n of `sizes`: (K, 2049) (expected_group_signal's own values;
    beta: the skills' share, SimConfig.transfer_asymmetry)."""
    return np.stack([expected_group_signal(_GRID, n, transfer_asymmetry=beta) for n in sizes])


def expected_gain_table(
    p: np.ndarray, weight: np.ndarray, sizes: np.ndarray, transfer_asymmetry: float = 0.0
) -> np.ndarray:
    """V[i, k] = w_i E[G(p_i, sizes_k) c]: (P, K), linear in p between grid points (as
    expected_group_signal; c the transfer asymmetry's weight, 1 by default)."""
    T = _signal_tables(tuple(int(n) for n in sizes), float(transfer_asymmetry))  # (K, G)
    x = np.clip(np.asarray(p, dtype=np.float64), 0.0, 1.0) * (len(_GRID) - 1)  # (P,)
    i = np.minimum(x.astype(np.int64), len(_GRID) - 2)
    f = x - i  # (P,) in [0, 1]
    sig = T[:, i] * (1.0 - f) + T[:, i + 1] * f  # (K, P)
    return sig.T * np.asarray(weight, dtype=np.float64)[:, None]


def knapsack(
    values: np.ndarray, sizes: np.ndarray, budget: int, tiebreak: np.ndarray | None = None
) -> tuple[np.ndarray, float, float]:
    """Group sizes n_i in {0} u sizes with sum n_i <= budget maximising sum_i values[i, n_i].

    values (P, K) gains of prompt i at sizes (K,) (0 at n = 0). Returns (n (P,) int64, value,
    bound): `bound` is the optimum of the LP relaxation over each prompt's upper concave hull, an
    upper bound on every feasible allocation; value >= bound - (gain of one hull segment).
    `tiebreak` (P,) orders prompts of equal gain per rollout (smaller first)."""
    V = np.asarray(values, dtype=np.float64)
    P, K = V.shape
    x = np.concatenate([[0], np.asarray(sizes, dtype=np.int64)])  # (K+1,)
    keep = 2 * (budget // max(int(x[1]), 1)) + 2
    if P > keep:
        # A prompt's first hull segment has its largest gain per rollout, r_i = max_k V_ik / n_k,
        # and costs >= min(sizes). The `keep` prompts of largest r_i have first segments worth
        # more than the budget, so the LP never reaches a segment of another prompt: the bound is
        # unchanged; only the leftover fill sees fewer prompts.
        r = (V / x[None, 1:]).max(axis=1)  # (P,)
        top = np.argpartition(-r, keep - 1)[:keep]
        top.sort()
        n_top, value, bound = knapsack(
            V[top], sizes, budget, None if tiebreak is None else np.asarray(tiebreak)[top]
        )
        n = np.zeros(P, dtype=np.int64)
        n[top] = n_top
        return n, value, bound
    y = np.concatenate([np.zeros((P, 1)), V], axis=1)  # (P, K+1)
    tb = np.zeros(P) if tiebreak is None else np.asarray(tiebreak, dtype=np.float64)
    # Upper concave hull from (0, 0) by gift wrapping, all prompts at once (K + 1 points each):
    # from the current point, the next is the one of largest slope (the farthest on a tie).
    cur = np.zeros(P, dtype=np.int64)
    rows = np.arange(P)
    seg_p, seg_a, seg_b, seg_s = [], [], [], []
    active = rows
    xr = x[::-1]
    for _ in range(K):
        if not len(active):
            break
        c = cur[active]
        dx = xr[None, :] - x[c][:, None]  # (A, K+1) reversed columns: argmax ties -> farthest
        dy = y[active][:, ::-1] - y[active, c][:, None]
        with np.errstate(divide="ignore", invalid="ignore"):
            slope = np.where(dx > 0, dy / np.where(dx > 0, dx, 1), -np.inf)
        j = np.argmax(slope, axis=1)
        best = slope[np.arange(len(active)), j]
        go = best > 0  # only segments that gain
        nxt = K - j[go]  # back to forward index
        seg_p.append(active[go])
        seg_a.append(c[go])
        seg_b.append(nxt)
        seg_s.append(best[go])
        cur[active[go]] = nxt
        active = active[go]
    n = np.zeros(P, dtype=np.int64)
    if not seg_p or budget <= 0:
        return n, 0.0, 0.0
    sp, sa, sb, ss = (np.concatenate(v) for v in (seg_p, seg_a, seg_b, seg_s))
    dn = x[sb] - x[sa]  # (S,) rollouts of each segment
    dv = y[sp, sb] - y[sp, sa]  # (S,)
    # Largest gain per rollout first; equal slopes: tiebreak, then a prompt's own order.
    order = np.lexsort((sa, tb[sp], -ss))
    cum = np.cumsum(dn[order])
    f = int(np.searchsorted(cum, budget, side="right"))  # segments [0, f) fit
    take = order[:f]
    bound = float(dv[take].sum())
    if f < len(order):  # the LP takes the fraction of the next segment that fits
        left = budget - (int(cum[f - 1]) if f else 0)
        bound += float(dv[order[f]]) * left / float(dn[order[f]])
    # Prompts reach their hull point in order of their segments (concave: a prefix per prompt).
    cur_idx = np.zeros(P, dtype=np.int64)  # (P,) index into x of each prompt's group size
    np.maximum.at(cur_idx, sp[take], sb[take])
    left = budget - int(dn[take].sum())
    # Leftover: the single upgrade (any grid size, hull or not) of largest gain that fits, again.
    while left >= x[1]:
        base = y[rows, cur_idx]  # (P,)
        room = (x[None, 1:] > x[cur_idx][:, None]) & (x[None, 1:] - x[cur_idx][:, None] <= left)
        gain = np.where(room, V - base[:, None], -np.inf)  # (P, K)
        flat = int(np.argmax(gain))
        i, k = divmod(flat, K)
        if not gain[i, k] > 0:
            break
        left -= int(x[k + 1] - x[cur_idx[i]])
        cur_idx[i] = k + 1
    n = x[cur_idx]
    value = float(y[rows, cur_idx].sum())
    return n, value, max(bound, value)


# ------------------------------------------------------------------ what both oracles share


@dataclass
class OracleConfig(AllocatorConfig):
    n: int = 64
    """GRPO's group size (compare at GRPO's n): a step spends at most train_prompts x n rollouts;
    oracle-greedy gives each prompt it selects n."""
    success_prob: Callable[[np.ndarray], np.ndarray] | None = None
    """True success probability of prompt ids (P,) -> (P,) under the current policy. The simulator
    wires SimPolicy.success_prob, the trainer the exact pool pass rates (PoolPassRates, tasks whose
    answer is the completion); no default, because an allocator cannot know it."""

    @classmethod
    def group_split(cls, group_size: int) -> dict[str, int]:
        return {"n": group_size}

    def validate(self, num_prompts: int) -> None:
        super().validate(num_prompts)
        positive_int(self, "n", 2)
        if not callable(self.success_prob):
            raise ValueError(
                "success_prob must be a callable ids -> probabilities (the oracle needs the true "
                "success probabilities; `rollalloc simulate` wires the simulated policy's, `rollalloc "
                "train` the live policy's exact pool pass rates)"
            )


class _Oracle(Allocator):
    """Both oracles: the options the simulator wires, and every told group trained."""

    @classmethod
    def simulator_options(cls, policy) -> dict:
        """Options `simulate_run` wires from the simulated policy (which only it knows)."""
        return {"success_prob": policy.success_prob}

    @classmethod
    def trainer_options(cls, pass_rates) -> dict:
        """Options the real trainer wires: `pass_rates` (rollalloc.train.evaluator.PoolPassRates)
        gives the live policy's exact pass rate of pool prompts. No learning model is known, so
        the ceiling weighs every prompt 1 (largest expected signal; `transfer_asymmetry` stays the
        user's option): on a real run this is "an allocator that knows every p_i", not a ceiling."""
        return {"success_prob": pass_rates}

    def _on_results(self, request, groups):
        self.count("zero_variance", sum(g.zero_variance for g in groups))
        self.train(groups)


# ------------------------------------------------------------------ oracle: the ceiling


@dataclass
class CeilingConfig(OracleConfig):
    max_group: int = 128
    """Largest group the ceiling may give one prompt (Knapsack-RL's max_n); n is always allowed."""
    candidates: int = 0
    """0: the whole pool is considered every step; C > 0: the next C prompts of the epoch stream."""
    gain_weight: Callable[[np.ndarray], np.ndarray] | None = None
    """Held-out gain per unit of group signal of prompt ids (P,) -> (P,) (`heldout_gain_weight`,
    wired by the simulator); None weighs every prompt 1 (the largest expected signal)."""
    transfer_asymmetry: float = 0.0
    """The learning model's SimConfig.transfer_asymmetry (wired by the simulator): the held-out
    gain of a group is weighted by its success rate as the learner weights it."""

    def validate(self, num_prompts: int) -> None:
        super().validate(num_prompts)
        positive_int(self, "candidates", 0)
        positive_int(self, "max_group", 2)
        if not (np.isfinite(self.transfer_asymmetry) and self.transfer_asymmetry >= 0):
            raise ValueError(f"transfer_asymmetry must be >= 0, got {self.transfer_asymmetry!r}")
        if self.gain_weight is not None and not callable(self.gain_weight):
            raise ValueError("gain_weight must be None or a callable ids -> weights")


def _example_ceiling_prob(prompt_ids: np.ndarray) -> np.ndarray:
    """For tests without a simulator: example_success_prob on 9 levels (ties, so the seeded
    tie-break shows), and 0 for 60% of the ids (few useful candidates: the batch varies)."""
    ids = np.asarray(prompt_ids, dtype=np.float64)
    hopeless = np.mod(ids * 0.7548776662466927 + 0.3, 1.0) < 0.6
    return np.where(hopeless, 0.0, np.round(example_success_prob(ids) * 8.0) / 8.0)


@register
class Ceiling(_Oracle):
    name = "oracle"
    Config = CeilingConfig

    @classmethod
    def example_config(cls):
        return {"n": 4, "max_group": 8, "candidates": 8, "success_prob": _example_ceiling_prob}

    @classmethod
    def simulator_options(cls, policy) -> dict:
        return {
            **super().simulator_options(policy),
            "gain_weight": heldout_gain_weight(policy),
            "transfer_asymmetry": policy.config.transfer_asymmetry,
        }

    @property
    def fixed_batch(self) -> bool:
        return False  # fewer, larger groups where they pay; the rollouts per step stay <= B

    def _init_strategy(self) -> None:
        c = self.config
        self.sizes = group_size_grid(c.n, max(c.max_group, c.n))  # (K,)
        self._last = {"expected_gain": 0.0, "gain_bound": 0.0}

    def _next_request(self):
        if self.ready:
            return None
        c = self.config
        if c.candidates:
            cand = self.draw(min(c.candidates, self.num_prompts))  # (C,)
        else:
            cand = np.arange(self.num_prompts, dtype=np.int64)  # (N,) the whole pool
        p = _true_p(c.success_prob, cand, self.name)
        w = np.ones(len(cand)) if c.gain_weight is None else c.gain_weight(cand)
        w = np.asarray(w, dtype=np.float64)
        if w.shape != cand.shape or not np.all(np.isfinite(w)):
            raise ValueError(f"{self.name}: gain_weight must return one finite weight per prompt")
        values = expected_gain_table(
            p, np.maximum(w, 0.0), self.sizes, c.transfer_asymmetry
        )  # (C, K)
        tiebreak = self.rng.random(len(cand))  # (C,) seeded: equal prompts in a seeded order
        n, value, bound = knapsack(values, self.sizes, c.train_prompts * c.n, tiebreak)
        chosen = np.flatnonzero(n)
        if not len(chosen):  # no prompt carries expected signal: GRPO's spend on the first ones
            chosen = np.argsort(tiebreak, kind="stable")[: c.train_prompts]
            n[chosen] = c.n
        if not c.candidates:  # advance the stream by the groups trained: `epoch` = pool passes
            self.draw(min(len(chosen), self.num_prompts))
        self._last = {"expected_gain": value, "gain_bound": bound}
        self.count("not_chosen", len(cand) - len(chosen))
        return self.make_request(cand[chosen], n[chosen], "rollout")

    def _step_extra(self) -> dict[str, float]:
        return dict(self._last)

    def _extra_state(self) -> dict:
        return {"last": dict(self._last)}  # asked before a checkpoint, logged after it

    def _load_extra_state(self, state: dict) -> None:
        self._last = {k: float(v) for k, v in state.get("last", self._last).items()}


# ------------------------------------------------------------------ oracle-greedy: the former oracle


@dataclass
class OracleGreedyConfig(OracleConfig):
    candidates: int = 0
    """Prompts of the epoch stream considered per step; 0 means 8 x train_prompts (capped by pool)."""
    quota: str = ""
    """The name of a task column (e.g. `level`): each of its values gets the share of the
    train_prompts that it has of the candidates (largest remainders; among equal ones the value
    whose next candidate ranks best), filled by its own candidates of largest expected signal, so
    that no value is starved (rollalloc.allocator.by_shares). Empty: one ranking of all candidates."""
    look: int = 0
    """Rank by a free fresh look instead of the exact p: k ~ Binomial(look, p_i) per candidate (the
    allocator's rng), p_i replaced by (k + 1) / (look + 2) in the ranking; the look costs no
    rollouts. An instrument, not a strategy: what ranking by an estimate of that quality is worth
    (benchmarks/estimate_capture.py's fresh8 is look=8 offline; docs/posterior-signal.md, "Shares
    per level"). 0: the exact p."""
    know: str = "all"
    """Whose p the ranking may read. 'all': every candidate's. 'seen': only the p of prompts it has
    trained before; a candidate never trained ranks at the mean expected signal of all the step's
    candidates, trained ones included (an average candidate: it knows the window's mean, not which
    prompt is which), so every prompt's first look is blind, as it is for any strategy that learns
    p from its own rollouts. With `look`, trained candidates rank by their look and the mean is of
    the looked signals.
    An instrument: what knowing p is worth after the first look (docs/posterior-signal.md, "The
    first-look tax and ranking by a column")."""

    KNOW = ("all", "seen")

    def validate(self, num_prompts: int) -> None:
        super().validate(num_prompts)
        positive_int(self, "candidates", 0)
        if not isinstance(self.quota, str):
            raise ValueError(f"quota must be a column name (a string), got {self.quota!r}")
        positive_int(self, "look", 0)
        if self.know not in self.KNOW:
            raise ValueError(f"know must be one of {self.KNOW}, got {self.know!r}")

    def pool_columns(self) -> tuple[str, ...]:
        return (self.quota,) if self.quota else ()


@register
class OracleGreedy(_Oracle):
    name = "oracle-greedy"
    Config = OracleGreedyConfig

    @classmethod
    def example_config(cls):
        return {"n": 4, "success_prob": example_success_prob}

    group = None  # (N,) ints, the quota column's value of each pool prompt

    def set_pool_columns(self, columns) -> None:
        labels = self.pool_column(columns, self.config.quota)
        self.group = np.unique(np.asarray(labels, dtype=str), return_inverse=True)[1]

    def _next_request(self):
        if self.ready:
            return None
        cfg = self.config
        if cfg.quota and self.group is None:
            raise ValueError(
                f"quota={cfg.quota!r}: the pool's column was never given; call "
                "rollalloc.allocator.wire_pool_columns(allocator, dataset) before the first ask"
            )
        c = min(cfg.candidates or 8 * cfg.train_prompts, self.num_prompts)
        cand = self.draw(c)  # (C,) next candidates of the stream, unique
        p = _true_p(cfg.success_prob, cand, self.name)  # (C,)
        if cfg.look:  # a fresh binomial look at p instead of p
            p = (self.rng.binomial(cfg.look, p) + 1.0) / (cfg.look + 2.0)
        signal = expected_group_signal(p, cfg.n)  # (C,)
        if cfg.know == "seen":  # a prompt never trained: only the window's mean is known
            signal = np.where(self.table.trials[cand] > 0, signal, signal.mean())
        k = min(cfg.train_prompts, len(cand))
        # Largest expected signal first; ties keep stream order (seeded), so seeds differ.
        order = np.argsort(-signal, kind="stable")
        if cfg.quota:  # each value its share of k, best first within it
            order = by_shares(self.group[cand], order, k)
        chosen = cand[order[:k]]
        self.count("not_chosen", len(cand) - len(chosen))
        return self.make_request(chosen, cfg.n, "rollout")
