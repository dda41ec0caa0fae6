"""The gradient-noise estimator of benchmarks/measure_grad_noise.py on synthetic per-example
gradients whose mean and covariance are known by construction."""

from __future__ import annotations

import numpy as np
import pytest

from rollalloc.sim.roles import group_noise_energy, group_signal


@pytest.fixture(scope="module")
def gn(load_benchmark):
    return load_benchmark("measure_grad_noise")


D = 40


def _draws(K: int, rng: np.random.Generator) -> np.ndarray:
    """K vectors g = mu + z, z ~ N(0, Sigma): mu = 2 e_0 (|mu|^2 = 4), Sigma = diag(8, 32/39 x 39)
    (tr Sigma = 40). So B_simple = 40 / 4 = 10 and B_G = mu^T Sigma mu / |mu|^4 = 8 * 4 / 16 = 2."""
    mu = np.zeros(D)
    mu[0] = 2.0
    sd = np.sqrt(np.concatenate([[8.0], np.full(D - 1, 32.0 / (D - 1))]))  # (D,)
    return mu + rng.standard_normal((K, D)) * sd  # (K, D)


def test_large_sample_recovers_the_constructed_noise_scales(gn):
    g = _draws(4000, np.random.default_rng(0))
    est = gn.noise_scales(g @ g.T)
    assert est["G_sq"] == pytest.approx(4.0, rel=0.05)
    assert est["tr_sigma"] == pytest.approx(40.0, rel=0.03)
    assert est["B_simple"] == pytest.approx(10.0, rel=0.08)
    assert est["B_G"] == pytest.approx(2.0, rel=0.15)


def test_small_samples_are_unbiased_where_the_plug_in_is_not(gn):
    rng = np.random.default_rng(1)
    K, trials = 8, 3000
    g_sq, tr, plug_in = [], [], []
    for _ in range(trials):
        g = _draws(K, rng)
        est = gn.noise_scales(g @ g.T)
        g_sq.append(est["G_sq"])
        tr.append(est["tr_sigma"])
        plug_in.append(float(np.sum(g.mean(axis=0) ** 2)))
    # the squared sample mean is |mu|^2 + tr Sigma / K = 4 + 5 = 9 on average; the estimate is 4
    assert np.mean(plug_in) == pytest.approx(9.0, rel=0.05)
    assert np.mean(g_sq) == pytest.approx(4.0, abs=0.25)
    assert np.mean(tr) == pytest.approx(40.0, rel=0.03)


def test_weights_are_counts_of_distinct_examples(gn):
    g = _draws(30, np.random.default_rng(2))
    M = g @ g.T
    plain = gn.noise_scales(M)
    ones = gn.noise_scales(M, np.ones(30))
    for k in plain:
        assert ones[k] == pytest.approx(plain[k], rel=1e-12)
    w = np.ones(30)
    w[:5] = 0.0  # zero weight: as if the example were not there
    dropped = gn.noise_scales(M[5:, 5:])
    zeroed = gn.noise_scales(M, w)
    for k in dropped:
        assert zeroed[k] == pytest.approx(dropped[k], rel=1e-12)


def test_bootstrap_interval_covers_the_truth(gn):
    g = _draws(400, np.random.default_rng(3))
    ci = gn.bootstrap(g @ g.T, resamples=300, seed=0)
    lo, hi = ci["B_simple"]
    assert lo < 10.0 < hi and hi / lo < 2.0
    lo, hi = ci["B_G"]
    assert lo < 2.0 < hi


def test_mapping_onto_the_simulator_inverts_its_noise_model(gn):
    """Per-group values as the simulator makes them (signal u_g + N(0, B_noise e_g), from the
    simulator's own group_signal / group_noise_energy): the measured B_simple maps back to
    B_noise."""
    rng = np.random.default_rng(4)
    n, groups, b_noise = 32, 5000, 2.0
    p = rng.uniform(0.05, 0.95, size=groups)  # (G,)
    r = (rng.random((groups, n)) < p[:, None]).astype(np.float64)  # (G, n)
    r = r[r.max(axis=1) > r.min(axis=1)]  # informative groups only
    sizes = np.full(len(r), n)
    u = group_signal(r.reshape(-1), sizes) / (n / 2.0)  # (K,)
    e = group_noise_energy(r.reshape(-1), sizes, ref_group_size=n)  # (K,)
    x = u + np.sqrt(b_noise * e) * rng.standard_normal(len(u))  # (K,) a skill's per-group step
    est = gn.noise_scales(np.outer(x, x))
    units = gn.sim_units(r, n)
    assert gn.sim_noise_scale(est["B_simple"], units) == pytest.approx(b_noise, rel=0.1)
