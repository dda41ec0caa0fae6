"""CERO measurements behind docs/cero.md: price-step choice, pacing per pool, regret / sqrt(K).

    .venv/bin/python scripts/cero_measure.py pacing     # spend / b and batch spread per pool
    .venv/bin/python scripts/cero_measure.py price      # additive vs multiplicative, const vs 1/sqrt(k)
    .venv/bin/python scripts/cero_measure.py regret     # regret / sqrt(K), K = 16, 64, 256

Regret is in the theorem's setting (fixed success rates, docs/cero.md "Regret"): 300 prompts,
p_i ~ U(0, 1), K passes over the pool, the utility K (1 - exp(-eta q_i n)) with eta = ETA0 / (K n_max)
and the true q_i = p_i (1 - p_i); the optimum is greedy over N_max blocks (optimal for concave
separable utilities with equal blocks), at most one block per prompt and pass.
"""

from __future__ import annotations

import sys

import numpy as np

from rollalloc.strategies.cero import Cero
from rollalloc.testing import BernoulliPool, drive

P, T, N_MAX, ETA0 = 300, 10, 64, 4.0


def pools(num: int = P) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {
        "homogeneous": np.full(num, 0.5),
        "uniform": rng.uniform(0, 1, num),
        "mixed": BernoulliPool.mixed(num, seed=0).p,
        "bimodal": rng.beta(0.2, 0.2, num),
    }


def variant(kind: str, schedule: str):
    """Cero with another price step: additive (in units of the prior's a0) or multiplicative;
    step size constant or lr_mu / sqrt(k)."""

    class V(Cero):
        def _after_step(self):
            spent = sum(self.step_rollouts.values())
            lr = self.config.lr_mu / (np.sqrt(self.step + 1) if schedule == "sqrt" else 1.0)
            g = (spent - self.b) / self.b
            if kind == "mult":
                self.mu *= float(np.exp(lr * g))
            else:
                a0 = self.eta / 6.0
                self.mu = max(1e-300, self.mu + lr * a0 * g)

    return V


def pacing(cls=Cero, steps: int = 400, burn: int = 100, **cfg) -> dict[str, tuple]:
    out = {}
    for name, p in pools().items():
        alloc = cls(len(p), seed=0, train_prompts=T, n_max=N_MAX, **cfg)
        batches = drive(alloc, BernoulliPool(p, seed=1), steps)[burn:]
        spent = np.array([b.stats.rollouts for b in batches], dtype=float)
        groups = np.array([b.num_groups for b in batches])
        q = np.percentile(groups, [5, 95])
        out[name] = (spent.mean() / alloc.b, groups.std(), q[0], q[1])
    return out


def regret(K: int, cls=Cero, true_q: bool = False, seed: int = 0, **cfg) -> tuple[float, float]:
    p = np.random.default_rng(seed).uniform(0, 1, P)
    q = p * (1 - p)
    eta = ETA0 / (K * N_MAX)
    alloc = cls(P, seed=seed, train_prompts=T, n_max=N_MAX, eta=eta, **cfg)
    if true_q:  # the theorem's fixed utilities, known to the algorithm
        alloc.table.alpha[:] = 1e7 * p
        alloc.table.beta[:] = 1e7 * (1 - p)
    steps = K * P // alloc.G
    drive(alloc, BernoulliPool(p, seed=seed + 1), steps)
    n = alloc.table.trials.astype(float)
    value = K * np.sum(1 - np.exp(-eta * q * n))
    blocks = int(max(steps * alloc.b, n.sum()) // N_MAX)
    j = np.arange(K)  # block j of prompt i gains K (e^{-a j N} - e^{-a (j+1) N})
    gains = K * (np.exp(-np.outer(eta * q, j) * N_MAX) - np.exp(-np.outer(eta * q, j + 1) * N_MAX))
    opt = np.sort(gains.ravel())[::-1][:blocks].sum()
    return opt - value, opt


if __name__ == "__main__":
    what = sys.argv[1] if len(sys.argv) > 1 else "pacing"
    if what == "pacing":
        for name, (r, sd, lo, hi) in pacing().items():
            print(f"{name:12s} spend/b {r:.3f}  groups std {sd:.1f}  p5-p95 {lo:.0f}-{hi:.0f}")
    elif what == "price":
        rows = [(f"{k} {s}", variant(k, s), 0) for k in ("mult", "add") for s in ("const", "sqrt")]
        rows = [(n, cls, lr) for n, cls, _ in rows for lr in (0.1, 0.3, 1.0)]
        rows += [("mult const + drift 0.01", Cero, lr) for lr in (0.1, 0.3, 0.5)]
        for name, cls, lr in rows:
            res = pacing(cls, lr_mu=lr)
            reg = [regret(K, cls, lr_mu=lr)[0] / np.sqrt(K) for K in (16, 64, 256)]
            cells = " ".join(f"{r:.3f} ({lo:.0f}-{hi:.0f})" for r, sd, lo, hi in res.values())
            regs = "/".join(f"{x:.1f}" for x in reg)
            print(f"| {name} | {lr} | {cells.replace(') ', ') | ')} | {regs} |", flush=True)
    elif what == "regret":
        for K in (16, 64, 256):
            r, opt = regret(K)
            rt, optt = regret(K, true_q=True)
            print(
                f"K={K:4d}  regret/sqrt(K) {r / np.sqrt(K):6.2f} (regret/opt {r / opt:.4f})"
                f"  true q known {rt / np.sqrt(K):6.2f}",
                flush=True,
            )
