"""CERO (src/rollalloc/strategies/cero.py, docs/cero.md) against independent references.

Every expected value is computed another way than the implementation computes it: q by Monte Carlo
and by the Beta-function identity E[p(1-p)] = B(a+1, b+1) / B(a, b); the marginal utility by a finite
difference of U; the offline optimum by greedy over N_max blocks (checked by brute force)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from rollalloc.allocator import make_allocator
from rollalloc.strategies.cero import U_MIN, Cero, informativeness
from rollalloc.testing import BernoulliPool, drive
from rollalloc.types import Outcome


def q_beta_function(a: float, b: float) -> float:
    """E[p (1-p)] = int p(1-p) p^(a-1) (1-p)^(b-1) dp / B(a, b) = B(a+1, b+1) / B(a, b)."""

    def lbeta(x, y):
        return math.lgamma(x) + math.lgamma(y) - math.lgamma(x + y)

    return math.exp(lbeta(a + 1, b + 1) - lbeta(a, b))


def marginal_utility(a: float, n: float) -> float:
    """U'(n) of U(n) = 1 - exp(-a n), by a central difference."""
    h = 1e-4 / a
    return (math.exp(-a * (n - h)) - math.exp(-a * (n + h))) / (2 * h)


# ------------------------------------------------------------------ q


@pytest.mark.parametrize("a,b", [(1, 1), (33, 33), (4, 2), (0.5, 3), (50, 2), (2, 200)])
def test_q_is_expected_bernoulli_variance_by_monte_carlo(a, b):
    p = np.random.default_rng(0).beta(a, b, 400_000)
    x = p * (1 - p)
    se = x.std() / math.sqrt(len(x))
    q = float(informativeness(np.float64(a), np.float64(b)))
    assert abs(q - x.mean()) < 5 * se + 1e-12, (q, x.mean())
    assert q == pytest.approx(q_beta_function(a, b), rel=1e-12)


def test_q_known_values():
    assert float(informativeness(np.float64(1), np.float64(1))) == pytest.approx(1 / 2 - 1 / 3)
    assert float(informativeness(np.float64(33), np.float64(33))) == pytest.approx(0.2463, abs=1e-4)


# ------------------------------------------------------------------ theta


@pytest.mark.parametrize("eta", [1e-12, 2 / 64, 16, 1e6])  # the config's bounds, default, large
@pytest.mark.parametrize("n", [0, 1, 8, 64, 640, 5000])
@pytest.mark.parametrize("lr_theta", [1.0, 0.5, 0.05])
def test_theta_contracts_to_marginal_utility(eta, n, lr_theta):
    """One prompt, a candidate every step, its history held at n rollouts and Beta(A, B)."""
    A = B = 1e6  # a posterior that 64 more rollouts barely move
    alloc = make_allocator("cero", 1, seed=0, train_prompts=1, n_max=64, eta=eta, lr_theta=lr_theta)
    a = eta * q_beta_function(A, B)
    # the projection of U'(n) onto [a U_MIN, a]
    target = a * U_MIN if a * n > -math.log(U_MIN) else min(a, marginal_utility(a, n))
    thetas = []
    for _ in range(400 if lr_theta < 0.5 else 60):
        t = alloc.table
        t.trials[0], t.alpha[0], t.beta[0] = n, A, B
        drive(alloc, BernoulliPool(np.array([0.5])), 1)
        thetas.append(float(alloc.table.theta[0]))
        alloc.table.theta[0] = thetas[-1]  # undo the cap at the (barely) moved posterior
    th = np.array(thetas)
    assert np.all(th > 0) and np.all(th <= a * (1 + 1e-12))
    assert th[-1] == pytest.approx(target, rel=1e-3)
    dist = np.abs(np.log(th[1:]) - math.log(target))  # the first value is the random start
    assert np.all(np.diff(dist) <= 1e-9 + 1e-3 * dist[:-1]), dist[:10]  # contracts: no 2-cycle
    at_bounds = (th <= a * U_MIN * 1.001) | (th >= a * 0.999)
    alternating = at_bounds[1:] & at_bounds[:-1] & (np.sign(np.diff(th)) != 0)
    assert not np.any(alternating[-10:] & (np.abs(np.diff(th))[-10:] > 0.5 * a))


# ------------------------------------------------------------------ regret

P, T, N_MAX, ETA0 = 300, 10, 64, 4.0


def greedy_optimum(q: np.ndarray, eta: float, scale: float, cap: int, blocks: int) -> float:
    """max sum_i scale U_i(N_max j_i), sum_i j_i <= blocks, j_i <= cap: concave separable utilities
    with equal blocks, so taking the largest marginal block gains is optimal."""
    j = np.arange(cap)
    lo, hi = np.outer(eta * q, j) * N_MAX, np.outer(eta * q, j + 1) * N_MAX
    gains = scale * (np.exp(-lo) - np.exp(-hi))
    return float(np.sort(gains.ravel())[::-1][:blocks].sum())


def test_greedy_optimum_matches_brute_force():
    q, eta, cap, blocks = np.array([0.25, 0.09, 0.01]), 0.05, 3, 4
    best = 0.0
    for js in itertools.product(range(cap + 1), repeat=3):
        if sum(js) <= blocks:
            best = max(best, sum(1 - math.exp(-eta * qi * N_MAX * ji) for qi, ji in zip(q, js)))
    assert greedy_optimum(q, eta, 1.0, cap, blocks) == pytest.approx(best, rel=1e-12)


def regret(K: int, seed: int = 0) -> tuple[float, float]:
    """The theorem's setting: fixed success rates, K epochs (passes over the pool), the utility
    K (1 - exp(-eta q_i n)) with eta = ETA0 / (K N_max) (so the optimum grows like K), valued at the
    true q_i = p_i (1 - p_i); at most one N_max block per prompt and epoch."""
    p = np.random.default_rng(seed).uniform(0, 1, P)
    q = p * (1 - p)
    eta = ETA0 / (K * N_MAX)
    alloc = make_allocator("cero", P, seed=seed, train_prompts=T, n_max=N_MAX, eta=eta)
    steps = K * P // alloc.G
    drive(alloc, BernoulliPool(p, seed=seed + 1), steps)
    n = alloc.table.trials.astype(float)
    value = K * np.sum(1 - np.exp(-eta * q * n))
    budget = max(steps * T * N_MAX, n.sum())  # an overspend is charged against a larger optimum
    opt = greedy_optimum(q, eta, K, K, int(budget // N_MAX))
    return opt - value, opt


def test_regret_over_sqrt_k_does_not_grow():
    res = {K: regret(K) for K in (16, 64, 256)}
    r = {K: reg / math.sqrt(K) for K, (reg, _) in res.items()}
    assert r[256] <= r[64] * 1.1 and r[64] <= r[16] * 1.1, r
    assert res[16][0] / res[16][1] < 0.05 and res[256][0] / res[256][1] < 0.01, res


# ------------------------------------------------------------------ pacing and the price


def pools(num: int = P) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {
        "homogeneous": np.full(num, 0.5),
        "uniform": rng.uniform(0, 1, num),
        "mixed": BernoulliPool.mixed(num, seed=0).p,
        "bimodal": rng.beta(0.2, 0.2, num),
    }


@pytest.mark.parametrize("pool", ["homogeneous", "uniform", "mixed", "bimodal"])
def test_spending_tracks_budget_rate(pool):
    p = pools()[pool]
    alloc = make_allocator("cero", len(p), seed=0, train_prompts=T, n_max=N_MAX)
    batches = drive(alloc, BernoulliPool(p, seed=1), 400)[100:]
    spent = np.array([b.stats.rollouts for b in batches])
    groups = np.array([b.num_groups for b in batches])
    print(pool, spent.mean() / (T * N_MAX), groups.mean(), groups.std())
    assert abs(spent.mean() / (T * N_MAX) - 1) < 0.05, spent.mean()
    assert abs(groups.mean() - T) < 0.5


class CountingCero(Cero):
    name = ""  # not registered
    writes = 0

    @property
    def mu(self):
        return self._mu

    @mu.setter
    def mu(self, value):
        self.writes += 1
        self._mu = value


def test_mu_moves_once_per_step_even_when_empty():
    alloc = CountingCero(30, seed=0, train_prompts=4, n_max=8, gen_prompts=12)
    pool = BernoulliPool(np.full(30, 0.5))
    drive(alloc, pool, 5)
    alloc.writes = 0
    alloc.mu = before = 1e9  # above every candidate: an empty step
    alloc.writes = 0
    (b,) = drive(alloc, pool, 1)
    assert b.num_groups == 1 and alloc.writes == 1
    assert b.stats.decisions["price_lowered"] == 1
    assert (
        b.prompt_ids[0]
        == alloc._order[alloc._cursor - 12 : alloc._cursor][
            np.argmax(alloc.table.theta[alloc._order[alloc._cursor - 12 : alloc._cursor]])
        ]
    )
    assert alloc.mu < before  # the spend was below b: the one update lowered the price
    for _ in range(5):
        alloc.writes = 0
        drive(alloc, pool, 1)
        assert alloc.writes == 1


def test_initial_price_passes_train_prompts_of_the_unseen_candidates():
    # docs/cero.md: mu0 is chosen so that the first step (every candidate unseen) trains
    # train_prompts of gen_prompts in expectation. Counted over seeds: 10 of 30, the mean of 300
    # first steps within 0.6 (5 standard errors of a Binomial(30, 1/3) mean).
    counts = []
    for seed in range(300):
        alloc = make_allocator("cero", 60, seed=seed, train_prompts=10, n_max=8, gen_prompts=30)
        counts.append(len(alloc.ask().prompt_ids))
    assert abs(np.mean(counts) - 10) < 0.6, np.mean(counts)
    assert np.std(counts) > 1  # a share, not all or nothing


# ------------------------------------------------------------------ a step by hand


def test_posterior_theta_mu_by_hand():
    n_max, G = 4, 2
    alloc = make_allocator(
        "cero", 2, seed=0, train_prompts=1, n_max=n_max, gen_prompts=G, fixed_batch=True,
        decay=0.5, target_rollouts_per_step=2,
    )  # fmt: skip
    eta = 2.0 / n_max
    a0 = eta / 6  # q of the uniform prior: int_0^1 p (1 - p) dp = 1/6
    assert alloc.mu == pytest.approx(a0 * (1 - 1 / G))
    rng = np.random.default_rng(np.random.SeedSequence(0).spawn(2)[1])  # the strategy's stream
    u0 = rng.uniform(U_MIN, 1.0, 2)  # unseen prompts' theta = a0 u
    req = alloc.ask()
    C = alloc._order[:2]
    np.testing.assert_allclose(alloc.table.theta[C], a0 * u0, rtol=1e-9)
    (i,) = req.prompt_ids  # the larger theta is selected
    assert alloc.table.theta[i] == alloc.table.theta[C].max()
    # 3 of 4 right: decay keeps 0.5 of the (empty) evidence, then alpha = 1 + 3, beta = 1 + 1
    alloc.tell(Outcome([i] * 4, np.arange(4), [1.0, 1.0, 1.0, 0.0]))
    assert (alloc.table.alpha[i], alloc.table.beta[i]) == (4.0, 2.0)
    a_i = eta * q_beta_function(4, 2)
    assert alloc.table.theta[i] == pytest.approx(min(a0 * u0[list(C).index(i)], a_i), rel=1e-9)
    mu_before = alloc.mu
    alloc.ask()
    alloc.batch()
    assert alloc.mu > mu_before  # spent 4 against b = 2: the price rises
    # the next visit (lr_theta = 1): theta is the marginal utility of the next rollout, U_i'(4)
    alloc._order = np.array([i, 1 - i], dtype=np.int32)
    alloc._cursor = 0
    alloc.ask()
    assert alloc.table.theta[i] == pytest.approx(marginal_utility(a_i, 4), rel=1e-6)


# ------------------------------------------------------------------ behaviour


def test_prefers_prompts_near_one_half():
    # The offline optimum with the true q gives these middle prompts 32 rollouts, the extreme ones 4.9;
    # CERO gives about 33 and 23: after n all-fail rollouts the posterior's q is still ~1/n, so an
    # extreme prompt keeps a share until its posterior is sharp (docs/cero.md, "What is measured").
    rng = np.random.default_rng(1)
    p = rng.uniform(0, 1, 2000)
    alloc = make_allocator("cero", 2000, seed=0, train_prompts=16, n_max=8)
    drive(alloc, BernoulliPool(p, seed=2), 500)
    trials = alloc.table.trials
    middle = trials[(p > 0.35) & (p < 0.65)].mean()
    extreme = trials[(p < 0.05) | (p > 0.95)].mean()
    assert middle > 1.3 * extreme, (middle, extreme)


def test_fixed_and_faithful_modes():
    pool = BernoulliPool.mixed(500, seed=0)
    fixed = drive(
        make_allocator("cero", 500, seed=0, train_prompts=8, n_max=4, fixed_batch=True), pool, 30
    )
    assert {b.num_groups for b in fixed} == {8}
    pool = BernoulliPool.mixed(500, seed=0)
    faithful = drive(make_allocator("cero", 500, seed=0, train_prompts=8, n_max=4), pool, 30)
    assert len({b.num_groups for b in faithful}) > 1
