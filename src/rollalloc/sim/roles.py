"""The simulator's Sampler, Learner and Evaluator: the roles `rollalloc.loop.run` drives.

    SimSampler.generate(request)  Bernoulli(p_i) rewards and token lengths for every asked rollout,
                                  stored under fresh handles with the policy version that made them
    SimLearner.update(batch)      group signals G_g (rollalloc.sim.policy) -> one SimPolicy step
    SimEvaluator.evaluate()       held-out accuracy = mean p_j over the held-out set

Each strategy runs through exactly the same objects; nothing here knows which strategy drives it.
"""

from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple

import numpy as np

from rollalloc.advantages import group_advantages
from rollalloc.likelihood import short_answer_likelihoods
from rollalloc.metrics import group_reward_stats
from rollalloc.sim.policy import SimPolicy
from rollalloc.types import Outcome, Request, TrainBatch


class SimRollouts(NamedTuple):
    """A batch of R simulated rollouts, as columns: what the simulator's store holds of each."""

    prompt: np.ndarray  # (R,) int64 prompt id
    reward: np.ndarray  # (R,) float64
    tokens: np.ndarray  # (R,) int64 completion length
    version: np.ndarray | int  # (R,) int64 policy version that generated it, or one for all


class RolloutStore:
    """Rollouts by handle (rollalloc.store.RolloutStore) in a ring buffer that grows when live
    rollouts would be overwritten.

    Handles are issued in increasing order; handle h lives in slot h % capacity. Memory is the
    number of live rollouts (a step's batch plus buffered pilots), not the run's total.
    """

    def __init__(self, capacity: int = 1 << 14):
        self.capacity = 1 << max(int(capacity) - 1, 1).bit_length()
        self.next_handle = 0
        self._alloc(self.capacity)

    def _alloc(self, cap: int) -> None:
        self.handle = np.full(cap, -1, dtype=np.int64)  # (C,) handle held by each slot, -1 free
        self.prompt = np.zeros(cap, dtype=np.int64)  # (C,)
        self.reward = np.zeros(cap, dtype=np.float64)  # (C,)
        self.tokens = np.zeros(cap, dtype=np.int64)  # (C,)
        self.version = np.zeros(cap, dtype=np.int64)  # (C,) policy version that generated it

    def add(self, rollouts: SimRollouts) -> np.ndarray:
        """Store R rollouts; returns their handles (R,)."""
        prompt, reward, tokens, version = rollouts
        r = len(prompt)
        handles = np.arange(self.next_handle, self.next_handle + r, dtype=np.int64)  # (R,)
        while r > self.capacity or (self.handle[handles % self.capacity] >= 0).any():
            self._double()  # a live rollout sits where a new one would go
        slots = handles % self.capacity
        self.handle[slots], self.prompt[slots], self.reward[slots] = handles, prompt, reward
        self.tokens[slots], self.version[slots] = tokens, version
        self.next_handle += r
        return handles

    def _double(self) -> None:
        # Live handles have distinct residues mod C, hence distinct residues mod 2C.
        live = self.handle >= 0
        cols = (
            self.handle[live],
            self.prompt[live],
            self.reward[live],
            self.tokens[live],
            self.version[live],
        )
        self.capacity *= 2
        self._alloc(self.capacity)
        s = cols[0] % self.capacity
        self.handle[s], self.prompt[s], self.reward[s], self.tokens[s], self.version[s] = cols

    def slots(self, handles: np.ndarray) -> np.ndarray:
        """Slots (R,) of live `handles` (R,); an unknown or released handle raises ValueError."""
        h = np.asarray(handles, dtype=np.int64)
        s = h % self.capacity
        bad = self.handle[s] != h
        if bad.any():
            raise ValueError(
                f"RolloutStore: handle {int(h[bad][0])} is unknown or already released"
            )
        return s

    def get(self, handles: np.ndarray) -> SimRollouts:
        """The rollouts behind live `handles` (R,), as columns; an unknown or released handle
        raises ValueError."""
        s = self.slots(handles)  # (R,)
        return SimRollouts(self.prompt[s], self.reward[s], self.tokens[s], self.version[s])

    def release(self, handles: np.ndarray) -> None:
        h = np.asarray(handles, dtype=np.int64)
        if len(h):
            s = h % self.capacity
            self.handle[s[self.handle[s] == h]] = -1

    def live_handles(self) -> np.ndarray:
        return np.sort(self.handle[self.handle >= 0])

    def __len__(self) -> int:
        return int((self.handle >= 0).sum())


class SimSampler:
    """Generates Bernoulli(p_i) rewards under the current simulated policy (see SimPolicy) and adds
    them to `store` (the run's, shared with the SimLearner; a fresh one when none is given). The
    policy is shared with the learner too, so there are no weights to sync: a rollout is stamped
    with the policy's version when it is generated."""

    def __init__(self, policy: SimPolicy, seed: int, store: RolloutStore | None = None):
        self.policy = policy
        self.seed = int(seed)
        self.rng = np.random.default_rng([int(seed), 1])
        self.store = store if store is not None else RolloutStore()

    def generate(self, request: Request) -> Outcome:
        pol, cfg = self.policy, self.policy.config
        ids = request.expand()  # (R,) prompt of every rollout
        p = pol.success_prob(ids)  # (R,)
        u = self.rng.random(len(ids))  # (R,)
        reward = (u < p).astype(np.float64)  # (R,) Bernoulli(p_i)
        # Length ~ prompt mean * lognormal(0, sigma) (mean-preserving), failures longer.
        z = self.rng.standard_normal(len(ids))  # (R,)
        length = pol.mean_tokens[ids] * np.exp(cfg.tokens_sigma * z - 0.5 * cfg.tokens_sigma**2)
        length = length * np.where(reward > 0, 1.0, cfg.fail_token_factor)
        tokens = np.clip(np.rint(length), 1, cfg.max_tokens).astype(np.int64)  # (R,)
        handles = self.store.add(SimRollouts(ids, reward, tokens, pol.version))
        return Outcome(
            prompt_ids=ids,
            handles=handles,
            rewards=reward,
            tokens=tokens,
            policy_version=pol.version,
            **short_answer_likelihoods(u, p, cfg.short_answers),  # {} unless short_answers
        )

    def release(self, handles: np.ndarray) -> None:
        self.store.release(handles)


def group_signal(
    rewards: np.ndarray,
    group_sizes: np.ndarray,
    weights: np.ndarray | None = None,
    eps: float = 1e-6,
) -> np.ndarray:
    """G_g = sum_j w_j A_j (r_j - mean_g r) per group: (G,) from flat rewards (R,), sizes (G,).

    With w = 1 this is the exact GRPO gradient on a Bernoulli policy's logit, n sigma_pop^2/(std+eps)
    with std the unbiased sample std used by `group_advantages`; 0 for an all-equal group.
    """
    r = np.asarray(rewards, dtype=np.float64)  # (R,)
    sizes = np.asarray(group_sizes, dtype=np.int64)  # (G,)
    adv = group_advantages(r, sizes, normalize_std=True, eps=eps)  # (R,)
    gidx = np.repeat(np.arange(len(sizes)), sizes)  # (R,)
    mean, _ = group_reward_stats(r, sizes)  # (G,)
    x = adv * (r - mean[gidx])  # (R,)
    if weights is not None:
        x = x * weights
    return np.bincount(gidx, weights=x, minlength=len(sizes))


def group_noise_energy(
    rewards: np.ndarray,
    group_sizes: np.ndarray,
    weights: np.ndarray | None = None,
    eps: float = 1e-6,
    ref_group_size: int = 16,
) -> np.ndarray:
    """e_g = sum_j w_j^2 A_j^2 / (ref_group_size - 1) per group: (G,) from flat rewards (R,).

    The variance of a group's gradient noise (each rollout's score carries noise of size |A_j|): 1
    for an informative on-policy group of ref_group_size (sum_j A_j^2 = n - 1 with the unbiased
    std), 0 for a zero-variance group.
    """
    r = np.asarray(rewards, dtype=np.float64)  # (R,)
    sizes = np.asarray(group_sizes, dtype=np.int64)  # (G,)
    adv = group_advantages(r, sizes, normalize_std=True, eps=eps)  # (R,)
    x = adv**2 if weights is None else (weights * adv) ** 2  # (R,)
    gidx = np.repeat(np.arange(len(sizes)), sizes)  # (R,)
    return np.bincount(gidx, weights=x, minlength=len(sizes)) / max(ref_group_size - 1, 1)


def random_parts(n: int, m: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Indices 0..n-1 split at random into min(m, n) parts (one update each); one part, in order
    and without a draw from `rng`, when that is at most 1."""
    m = min(m, n)
    return [np.arange(n)] if m <= 1 else np.array_split(rng.permutation(n), m)


def shared_updates(
    pol: SimPolicy,
    prompt_ids: np.ndarray,
    u: np.ndarray,
    energy: np.ndarray | None,
    rng: np.random.Generator,
) -> dict[str, float]:
    """A step's moves of what every prompt shares, update by update: the fast component
    (fast_max; the step's groups split at random into fast_updates parts, one move each) and the
    wear (wear_rate; fast_updates updates whatever the step's size, each on 1/fast_updates of every
    group's rollouts, as the trainer's mini-batches). u (G,): the groups' signals in reference
    groups; energy (G,): their noise energies (group_noise_energy; needed by the fast component and
    by wear_unit='rollouts'). Returns {'fast': f, 'wear': w} for the effects that are on. The
    learner calls it every step; benchmarks/trained_groups.py --replay feeds it a real run's
    groups."""
    cfg, out = pol.config, {}
    if cfg.fast_max > 0.0:  # the trainer's updates, as the fast component sees them
        for part in random_parts(len(u), cfg.fast_updates, rng):
            pol.fast_step(prompt_ids[part], u[part], energy[part])
        out["fast"] = pol.fast
    if (
        cfg.wear_rate > 0.0
    ):  # the trainer's updates split the step's rollouts, however few: each has 1/m
        m = cfg.fast_updates
        part = u / m  # (G,) each update's share of every group's signal
        noise = energy / m if cfg.wear_unit == "rollouts" else part**2  # (G,)
        for _ in range(m):
            pol.wear_step(part, noise)
        out["wear"] = pol.wear
    return out


class SimLearner:
    """One SimPolicy step per TrainBatch, from the rollouts behind its handles in `store` (the
    run's, shared with the SimSampler): SimConfig.num_minibatches updates, each on a random part
    of the batch's groups."""

    def __init__(self, policy: SimPolicy, store: RolloutStore, seed: int):
        self.policy, self.store = policy, store
        # gradient noise and skill drift (SimConfig.noise_scale, skill_drift); drawn only if on
        self.rng = np.random.default_rng([int(seed), 3])
        self.split_rng = np.random.default_rng([int(seed), 4])  # num_minibatches > 1 only
        self.fast_rng = np.random.default_rng([int(seed), 5])  # fast_max > 0 only

    def update(self, batch: TrainBatch) -> dict[str, float]:
        pol, cfg = self.policy, self.policy.config
        rows = self.store.get(batch.handles)  # (R,) columns
        if not np.array_equal(rows.prompt, np.repeat(batch.prompt_ids, batch.group_sizes)):
            raise ValueError(
                "SimLearner: a TrainBatch handle belongs to a different prompt than its group"
            )
        lag = pol.version - rows.version  # (R,) policy versions since generation
        w = cfg.staleness_decay**lag  # (R,)
        G = group_signal(rows.reward, batch.group_sizes, w, cfg.adv_eps)  # (G,)
        u = G / (cfg.ref_group_size / 2.0)  # (G,) units of one max-signal reference group
        energy, extra = None, {}
        wear_energy = cfg.wear_rate > 0.0 and cfg.wear_unit == "rollouts"  # 'prompts': signals only
        needs_energy = cfg.noise_scale > 0.0 or cfg.progress_noise > 0.0 or cfg.fast_max > 0.0
        if needs_energy or wear_energy or cfg.step_noise > 0.0:
            energy = group_noise_energy(
                rows.reward, batch.group_sizes, w, cfg.adv_eps, cfg.ref_group_size
            )  # (G,)
            extra["noise_energy"] = float(energy.sum())
        skill_weight = None
        if cfg.transfer_asymmetry > 0.0:  # skills learn more from rare successes than rare failures
            rbar = np.clip(group_reward_stats(rows.reward, batch.group_sizes)[0], 0.0, 1.0)  # (G,)
            skill_weight = (2.0 * (1.0 - rbar)) ** cfg.transfer_asymmetry
        if cfg.repeat_decay > 0.0:  # a prompt's repeated rollouts teach the skills less
            rep = pol.repeat_weight(batch.prompt_ids, batch.group_sizes)  # (G,) before this step
            skill_weight = rep if skill_weight is None else skill_weight * rep
            pol.count_exposures(batch.prompt_ids, batch.group_sizes)
        parts = random_parts(len(u), cfg.num_minibatches, self.split_rng)
        token_mean = cfg.loss_norm == "token_mean"
        if token_mean:  # the trainer's loss divides by every completion token of the (mini-)batch
            tokens = np.bincount(
                np.repeat(np.arange(len(u)), batch.group_sizes),
                weights=rows.tokens,
                minlength=len(u),
            )  # (G,) completion tokens of each group
            ref_tokens = cfg.norm_ref_prompts * cfg.ref_group_size * pol.ref_tokens_per_rollout
        s0_before, norms = pol.s0, []
        for i, part in enumerate(parts):
            norm = 1.0
            if token_mean:
                norm = ref_tokens / max(float(tokens[part].sum()), 1.0)
                norms.append(norm)
            pol.apply(
                batch.prompt_ids[part],
                u[part],
                energy=None if energy is None else energy[part],
                norm=norm,
                rng=self.rng,
                skill_weight=None if skill_weight is None else skill_weight[part],
                advance=i == len(parts) - 1,
            )
        if norms:
            extra["norm_factor"] = float(np.mean(norms))
        extra.update(shared_updates(pol, batch.prompt_ids, u, energy, self.fast_rng))
        return {
            "signal": float(u.sum()),
            "mean_lag": float(lag.mean()) if len(lag) else 0.0,
            "max_lag": float(lag.max()) if len(lag) else 0.0,
            "global_skill_step": pol.s0 - s0_before,
            **extra,
        }


class SimEvaluator:
    """Held-out accuracy (mean p_j, or a sampled estimate if eval_samples > 0) and train accuracy."""

    def __init__(self, policy: SimPolicy, seed: int):
        self.policy = policy
        self.rng = np.random.default_rng([int(seed), 2])

    def evaluate(self) -> dict[str, float]:
        pol, k = self.policy, self.policy.config.eval_samples
        p_eval = pol.eval_success_prob()  # (M,)
        acc = float(p_eval.mean()) if k == 0 else float(self.rng.binomial(k, p_eval).mean() / k)
        train = pol.success_prob(np.arange(pol.num_prompts))  # (N,) O(pool): evaluation points only
        out = {
            "accuracy": acc,
            "expected_accuracy": float(p_eval.mean()),
            "train_accuracy": float(train.mean()),
            "global_skill": float(pol.s0),
        }
        if pol.level_names:  # P(a group of n varies): what GRPO's train stream sees of a level
            n = pol.config.ref_group_size
            varying = 1.0 - train**n - (1.0 - train) ** n
        for j, name in enumerate(pol.level_names):  # a preset with levels: exact, per level
            at = pol.eval_cluster == j
            if at.any():
                out[f"accuracy_{name}"] = float(p_eval[at].mean())
            at = pol.cluster == j
            if at.any():  # the pool's side: GRPO's groups of this level (mean reward, varying)
                out[f"train_accuracy_{name}"] = float(train[at].mean())
                out[f"train_varying_{name}"] = float(varying[at].mean())
        return out


def signal_of_successes(k: np.ndarray, n: np.ndarray | int, eps: float = 1e-6) -> np.ndarray:
    """G of an on-policy group of n rollouts with k successes (`group_signal` with 0/1 rewards and
    w = 1): n v / (std + eps), v = k/n (1 - k/n), std the unbiased one; broadcasts over k and n."""
    k, n = np.asarray(k, dtype=np.float64), np.asarray(n, dtype=np.float64)
    var_pop = (k / n) * (1.0 - k / n)
    std = np.sqrt(var_pop * n / np.maximum(n - 1.0, 1.0))
    return n * var_pop / (std + eps)


@lru_cache(maxsize=64)
def _signal_table(
    n: int, eps: float, beta: float = 0.0, grid: int = 2049
) -> tuple[np.ndarray, np.ndarray]:
    """E[G c(k)] for a fresh group of n rollouts on a grid of p, c(k) = (2 (1 - k/n))^beta (1 at
    beta = 0): shapes (grid,), (grid,)."""
    from math import lgamma

    p = np.linspace(0.0, 1.0, grid)  # (P,)
    k = np.arange(n + 1)  # (n+1,) successes
    log_binom = np.array([lgamma(n + 1) - lgamma(j + 1) - lgamma(n - j + 1) for j in k])
    with np.errstate(divide="ignore", invalid="ignore"):  # 0 * log(0) is taken as 0
        logp, log1p = np.log(p)[:, None], np.log1p(-p)[:, None]
        log_pmf = (
            log_binom[None, :]
            + np.where(k > 0, k * logp, 0.0)
            + np.where(k < n, (n - k) * log1p, 0.0)
        )
    pmf = np.exp(log_pmf)  # (P, n+1)
    phat = k / n
    g = signal_of_successes(k, n, eps)  # (n+1,) G of a group with k successes
    if beta:
        g = g * (2.0 * (1.0 - phat)) ** beta  # the skills' share (SimConfig.transfer_asymmetry)
    return p, pmf @ g


def expected_group_signal(
    p: np.ndarray, n: int, eps: float = 1e-6, transfer_asymmetry: float = 0.0
) -> np.ndarray:
    """E[G_g] of an on-policy group of n rollouts of a prompt with success probability p: (P,).

    G_g as in `group_signal` (w = 1): sum_k Binom(k; n, p) n v_k / (std_k + eps), v_k = k/n (1-k/n).
    With `transfer_asymmetry` beta > 0, the skills' share: each k weighted (2 (1 - k/n))^beta.
    Interpolated from a table over 2,049 values of p (exact at the grid points).
    """
    if n < 1:
        raise ValueError(f"expected_group_signal: n must be >= 1, got {n}")
    grid, table = _signal_table(int(n), float(eps), float(transfer_asymmetry))
    return np.interp(np.asarray(p, dtype=np.float64), grid, table)
