"""Usage: python benchmarks/posterior_signal_mutants.py   (every line must say "failed").
Break posterior-signal on purpose (in-process patches, the checkout is untouched) and check that
the tests catch each break."""

import sys

import numpy as np

sys.path.insert(
    0, str(__import__("pathlib").Path(__file__).resolve().parents[1] / "tests" / "strategies")
)
import test_posterior_signal as T

import rollalloc.strategies.posterior_signal as ps


class MP:
    def __init__(self):
        self.undo = []

    def setattr(self, obj, name, val):
        self.undo.append((obj, name, getattr(obj, name)))
        setattr(obj, name, val)

    def reset(self):
        for o, n, v in reversed(self.undo):
            setattr(o, n, v)
        self.undo = []


def run(label, patch, tests):
    mp = MP()
    patch(mp)
    for t in tests:
        try:
            args = (
                (MP(),) if "monkeypatch" in t.__code__.co_varnames[: t.__code__.co_argcount] else ()
            )
            if t is T.test_signal_table_is_the_expected_grpo_signal_by_monte_carlo:
                t(5)
            else:
                t(*args)
            res = "PASSED (not caught)"
        except (AssertionError, Exception) as e:
            res = f"failed: {type(e).__name__}"
        print(f"{label:55s} {t.__name__:60s} {res}", flush=True)
    mp.reset()


orig_table = ps.signal_table


def bad_table(max_n, p=ps._GRID):  # forgot the sqrt(n(n-1)) / n scale: per-rollout std
    Tt = orig_table(max_n, p)
    for n in range(2, max_n + 1):
        Tt[n] = Tt[n] / np.sqrt(n * (n - 1)) * n
    return Tt


run(
    "signal without the unbiased-std factor",
    lambda mp: (
        mp.setattr(ps, "signal_table", bad_table) or mp.setattr(T, "signal_table", bad_table)
    ),
    [
        T.test_signal_table_by_enumeration_of_every_outcome,
        T.test_signal_table_is_the_expected_grpo_signal_by_monte_carlo,
    ],
)

orig_post = ps.PosteriorSignal.posterior


def post_sign(self, ids):  # shift with the wrong sign
    self.D, self.kappa = -self.D, -self.kappa
    try:
        return orig_post(self, ids)
    finally:
        self.D, self.kappa = -self.D, -self.kappa


run(
    "posterior shifted the wrong way",
    lambda mp: mp.setattr(ps.PosteriorSignal, "posterior", post_sign),
    [
        T.test_posterior_mean_is_the_shifted_beta_by_monte_carlo,
        T.test_drift_follows_a_pool_that_got_better,
    ],
)

run(
    "grid of the posterior too coarse/short (logit in [-3, 3])",
    lambda mp: (
        mp.setattr(ps, "_X", np.linspace(-3, 3, 97))
        or mp.setattr(ps, "_LP", -np.log1p(np.exp(-np.linspace(-3, 3, 97))))
        or mp.setattr(ps, "_LQ", -np.log1p(np.exp(np.linspace(-3, 3, 97))))
    ),
    [T.test_posterior_mean_is_the_shifted_beta_by_monte_carlo],
)

orig_prior = ps.PosteriorSignal.prior


def prior_binomial(self):  # forget the binomial noise: rho from the raw variance
    w, ex, ex2 = self.ema
    if w < 0.5:
        return orig_prior(self)
    mu = ex / w
    var = ex2 / w - mu * mu
    kappa = mu * (1 - mu) / var - 1
    return mu * kappa, (1 - mu) * kappa


run(
    "pool prior ignores the binomial noise",
    lambda mp: mp.setattr(ps.PosteriorSignal, "prior", prior_binomial),
    [T.test_pool_prior_recovers_a_beta_binomial_pool],
)


def no_forget(mp):
    orig = ps.PosteriorSignal.posterior

    def f(self, ids):
        hl = self.config.half_life
        self.config.half_life = 0.0
        try:
            return orig(self, ids)
        finally:
            self.config.half_life = hl

    mp.setattr(ps.PosteriorSignal, "posterior", f)


run(
    "forgetting switched off", no_forget, [T.test_posterior_mean_is_the_shifted_beta_by_monte_carlo]
)

orig_sizes = ps.PosteriorSignal.sizes_for


def sizes_reverse(self, m, budget=None):  # marginal gains taken smallest first
    c, lo, hi = self.config, self.lo, self.hi
    budget = c.n * len(m) if budget is None else budget
    S = np.stack([ps._interp(self.T[N], m) for N in range(lo, hi + 1)], axis=1)
    gain = np.diff(S, axis=1)
    best = np.argsort(gain, axis=None, kind="stable")[: max(budget - lo * len(m), 0)]
    return lo + np.bincount(best // gain.shape[1], minlength=len(m)).astype(np.int64)


run(
    "group sizes by the smallest marginal",
    lambda mp: mp.setattr(ps.PosteriorSignal, "sizes_for", sizes_reverse),
    [T.test_group_sizes_maximise_the_signal_like_brute_force],
)

orig_commit = ps.PosteriorSignal._commit


def commit_drop(self):  # drop surplus varied probes instead of carrying them
    r = orig_commit(self)
    if self._carry:
        self.discard(self._carry, "probe_dropped")
        self._carry = []
    return r


run(
    "surplus probes with variance dropped",
    lambda mp: mp.setattr(ps.PosteriorSignal, "_commit", commit_drop),
    [T.test_only_probes_without_variance_are_dropped],
)


def commit_short(self):  # train only the varied probes: a short batch
    r = orig_commit(self)
    if len(self.ready) > 1:  # a mutant may break the base class's state: it must be caught
        self.discard([self._ready.pop()], "x")
    return r


run(
    "a short batch (one group dropped)",
    lambda mp: mp.setattr(ps.PosteriorSignal, "_commit", commit_short),
    [T.test_constant_batch_every_step_with_probes_small_pools_and_epochs],
)


def no_probe(mp):
    orig = ps.PosteriorSignal._init_strategy

    def f(self):
        orig(self)
        self.n_probe = 0

    mp.setattr(ps.PosteriorSignal, "_init_strategy", f)


run(
    "probes never made",
    no_probe,
    [T.test_constant_batch_every_step_with_probes_small_pools_and_epochs],
)

run(
    "state of 4 float64 columns (too big)",
    lambda mp: mp.setattr(
        ps.PosteriorSignal,
        "_init_strategy",
        (
            lambda o: (
                lambda self: (
                    o(self),
                    [self.table.add_column(f"x{i}", np.float64, 0.0) for i in range(10)],
                )
            )
        )(ps.PosteriorSignal._init_strategy),
    ),
    [T.test_state_per_prompt_is_small],
)
