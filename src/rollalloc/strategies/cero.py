"""CERO: Cross-Epoch adaptive Rollout Optimization (Zong, Wang, Jiang 2026, arXiv 2606.05606).

    maximise  sum_i U_i(n_i),   U_i(n) = 1 - exp(-a_i n),   a_i = eta q_i,   s.t. sum_{i,k} N_ik <= B
    q_i = E[p_i (1 - p_i)]  under the Beta(alpha_i, beta_i) posterior of prompt i's success rate
        = alpha beta / ((alpha + beta)^2 (alpha + beta + 1))

Fenchel duality (docs/cero.md) turns the time-coupled problem into per-epoch subproblems with one
dual value theta_i per prompt and one budget price mu. Each step takes a candidate batch C of new
prompts of the epoch (each prompt is a candidate once per epoch) and, for i in C:

    theta_i <- proj_[0, a_i]( theta_i - lr_theta a_i^2 (n_i - x*(theta_i)) ),  x*(t) = ln(a_i/t)/a_i
    N_i      = N_max  if theta_i > mu  else 0                       (faithful: variable batch)
    N_i      = N_max  for the train_prompts largest theta_i          (fixed_batch=True)

then, once the rewards are in, the posterior takes the group (alpha += sum r, beta += sum (1-r),
after decaying old evidence toward the prior), and after the step

    mu <- mu exp(lr_mu (spent_k - b) / b),    b = B / K target rollouts per step

(mirror ascent on the price: theta's scale falls by orders of magnitude as utilities saturate, and a
multiplicative step follows it where an additive one overshoots to mu = 0).

theta_i descends toward the marginal utility a_i exp(-a_i n_i) of prompt i's next rollout, so a prompt
keeps getting rollouts while it is informative (q large: p near 1/2, uncertain) and not yet
saturated (n small). When every candidate falls below the price, mu takes a
zero-spend step, at most down to the best candidate's theta, so that every step trains. Choices the sources leave
open (eta, step sizes, mu0, prior, decay, exploration) are documented in docs/cero.md.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rollalloc.allocator import (
    Allocator,
    AllocatorConfig,
    _in_range,
    _positive_int,
    register,
)

U_MIN = 1e-6  # theta / a is kept in [U_MIN, 1] so that x*(theta) = ln(a/theta)/a stays finite


@dataclass
class CeroConfig(AllocatorConfig):
    n_max: int = 64
    """Rollouts of a selected prompt (N_max); compare at n_max = GRPO's n."""
    gen_prompts: int = 0
    """Candidate prompts per step; 0 means 3 x train_prompts."""
    eta: float | None = None
    """Utility sharpness per rollout; None means 2 / n_max (U saturates after a few visits)."""
    lr_theta: float = 0.5
    """Step size of the projected descent on theta, in units of u = theta / a_i."""
    lr_mu: float = 0.1
    """Step size of the (multiplicative) dual ascent on mu per relative overspend."""
    mu0: float | None = None
    """Initial price (> 0); None sets it so that train_prompts of gen_prompts unseen prompts pass."""
    target_rollouts_per_step: int = 0
    """b = B / K, the budget rate; 0 means train_prompts x n_max (the GRPO step)."""
    prior_alpha: float = 1.0
    """Beta prior of every prompt's success rate."""
    prior_beta: float = 1.0
    decay: float = 1.0
    """Evidence kept per visit: alpha <- alpha0 + decay (alpha - alpha0) before an update."""
    fixed_batch: bool = False
    """Train exactly train_prompts groups per step (top theta) instead of all theta > mu."""

    def validate(self, num_prompts: int) -> None:
        super().validate(num_prompts)
        _positive_int(self, "n_max", 2)
        _positive_int(self, "gen_prompts", 0)
        _positive_int(self, "target_rollouts_per_step", 0)
        if self.eta is not None:
            _in_range(self, "eta", 1e-12, 1e6)
        _in_range(self, "lr_theta", 0.0, 1.0)
        _in_range(self, "lr_mu", 0.0, 10.0)
        if self.mu0 is not None:
            _in_range(self, "mu0", 1e-12, 1e6)
        _in_range(self, "prior_alpha", 1e-6, 1e6)
        _in_range(self, "prior_beta", 1e-6, 1e6)
        _in_range(self, "decay", 0.0, 1.0)
        g = self.gen_prompts or 3 * self.train_prompts
        if self.fixed_batch and g < self.train_prompts and g < num_prompts:
            raise ValueError(f"gen_prompts={g} is below train_prompts={self.train_prompts}")


def informativeness(alpha: np.ndarray, beta: np.ndarray) -> np.ndarray:
    """q = E[p(1-p)] for p ~ Beta(alpha, beta)."""
    s = alpha + beta
    return alpha * beta / (s * s * (s + 1.0))


@register
class Cero(Allocator):
    name = "cero"
    Config = CeroConfig

    @classmethod
    def example_config(cls):
        return {"n_max": 4, "fixed_batch": True}

    @property
    def fixed_batch(self) -> bool:
        return self.config.fixed_batch

    def _init_strategy(self):
        c = self.config
        self.eta = c.eta if c.eta is not None else 2.0 / c.n_max
        self.G = min(c.gen_prompts or 3 * c.train_prompts, self.num_prompts)
        self.b = c.target_rollouts_per_step or c.train_prompts * c.n_max
        a0 = self.eta * float(informativeness(np.float64(c.prior_alpha), np.float64(c.prior_beta)))
        # Unseen prompts start at theta = a0 u, u ~ U(0, 1]: a price mu then passes 1 - mu/a0 of them.
        self.mu = c.mu0 if c.mu0 is not None else a0 * max(U_MIN, 1.0 - c.train_prompts / self.G)
        self.table.add_column("alpha", np.float32, c.prior_alpha)
        self.table.add_column("beta", np.float32, c.prior_beta)
        self.table.add_column("theta", np.float32, np.nan)

    def _next_request(self):
        c, t = self.config, self.table
        if self._ready or self._round > 0:
            return None
        C = self._draw(self.G)  # (G,) candidates
        a = self.eta * informativeness(t.alpha[C].astype(np.float64), t.beta[C].astype(np.float64))
        theta = t.theta[C].astype(np.float64)
        unseen = np.isnan(theta)
        u = np.clip(theta / a, U_MIN, 1.0)  # normalised dual value (NaN where unseen)
        m = a * t.trials[C]  # normalised cumulative rollouts a_i n_i
        # projected descent in theta on [0, a_i]: d/dtheta = n_i - x*(theta) = (m + ln u) / a_i
        u = np.clip(u - c.lr_theta * (m + np.log(u)), U_MIN, 1.0)
        u[unseen] = self.rng.uniform(U_MIN, 1.0, unseen.sum())  # first sight: random init
        theta = a * u
        t.theta[C] = theta
        self._decide("candidates", len(C))
        if c.fixed_batch:
            S = C[np.argsort(-theta, kind="stable")[: c.train_prompts]]
        else:
            S = C[theta > self.mu]
            if len(S) == 0:  # the price is above every candidate: a zero-spend dual step, at
                # most down to the best candidate's value, so the step still trains something
                self.mu = min(self.mu * float(np.exp(-c.lr_mu)), float(theta.max()))
                S = C[theta >= self.mu]
                self._decide("price_lowered")
        self._decide("selected", len(S))
        return self._request(S, c.n_max, "rollout")

    def _on_results(self, request, groups):
        c, t = self.config, self.table
        for g in groups:
            i = g.prompt_id
            t.alpha[i] = c.prior_alpha + c.decay * (t.alpha[i] - c.prior_alpha) + g.rewards.sum()
            t.beta[i] = c.prior_beta + c.decay * (t.beta[i] - c.prior_beta) + (1 - g.rewards).sum()
            a_new = self.eta * informativeness(np.float64(t.alpha[i]), np.float64(t.beta[i]))
            t.theta[i] = min(float(t.theta[i]), a_new)  # keep theta in [0, a_i]
            self._decide("zero_variance", int(g.zero_variance))
        self._ready.extend(groups)

    def _after_step(self):
        spent = sum(self._acc["rollouts"].values())
        self.mu *= float(np.exp(self.config.lr_mu * (spent - self.b) / self.b))

    def _step_extra(self):
        return {"mu": self.mu, "mu_over_eta": self.mu / self.eta}

    def _extra_state(self):
        return {"mu": self.mu}

    def _load_extra_state(self, state):
        self.mu = float(state["mu"])
