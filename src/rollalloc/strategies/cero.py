"""CERO: Cross-Epoch adaptive Rollout Optimization (Zong, Wang, Jiang 2026, arXiv 2606.05606).

    maximise  sum_i U_i(n_i),   U_i(n) = 1 - exp(-a_i n),   a_i = eta q_i,   s.t. sum_{i,k} N_ik <= B
    q_i = E[p_i (1 - p_i) | H_i]  under the Beta(alpha_i, beta_i) posterior of p_i, i's success rate
        = alpha beta / ((alpha + beta) (alpha + beta + 1))

Fenchel duality (docs/cero.md) turns the time-coupled problem into per-epoch subproblems with one
dual value theta_i per prompt and one budget price mu. Each step takes a candidate batch C of new
prompts of the epoch (each prompt is a candidate once per epoch) and, for i in C, with u = theta/a_i:

    ln u <- proj_[ln U_MIN, 0]( ln u - lr_theta (a_i n_i + ln u) )     (0 < lr_theta <= 1)
    N_i   = N_max  if theta_i > mu  else 0                       (faithful: variable batch)
    N_i   = N_max  for the train_prompts largest theta_i          (fixed_batch=True)

The theta step is projected mirror descent on the dual: the gradient in theta_i is n_i - x*(theta_i)
with x*(t) = ln(a_i/t)/a_i, and a step of lr_theta a_i in ln theta_i moves ln u a share lr_theta of
the way to its fixed point -a_i n_i, i.e. theta_i -> U_i'(n_i) = a_i exp(-a_i n_i), the marginal
utility of the next rollout. It contracts by (1 - lr_theta) for every eta and n. If no candidate
clears the price, the best one is trained (a trainer cannot use an empty batch).

Once the groups are in, the posterior takes their successes (alpha += s, beta += n - s, after
decaying old evidence toward the prior), and after the step, once per step,

    b = B / K target rollouts per step,

    d  <- d + lr_drift (spent_k - b) / b,   mu <- mu exp(lr_mu (spent_k - b) / b + d)

(mirror ascent on the price; d, the price's learnt drift, lets ln mu follow the steady fall of theta
as utilities saturate without lagging behind it. docs/cero.md has the measurement that chose this
over an additive step, a 1/sqrt(k) step size and no drift term). Choices the sources leave open
(eta, step sizes, mu0, prior, decay, exploration) are documented in docs/cero.md.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rollalloc.allocator import Allocator, AllocatorConfig, register
from rollalloc.validate import in_range, positive_int

U_MIN = 1e-12  # theta / a is kept in [U_MIN, 1] so that x*(theta) = ln(a/theta)/a stays finite
LN_U_MIN = float(np.log(U_MIN))


@dataclass
class CeroConfig(AllocatorConfig):
    n_max: int = 64
    """Rollouts of a selected prompt (N_max); compare at n_max = GRPO's n."""
    gen_prompts: int = 0
    """Candidate prompts per step; 0 means 3 x train_prompts."""
    eta: float | None = None
    """Utility sharpness per rollout; None means 2 / n_max (a 50/50 prompt's marginal utility
    falls to 0.61 of its maximum after one visit, 0.22 after three)."""
    lr_theta: float = 1.0
    """Share of the way ln(theta_i / a_i) moves to its fixed point -a_i n_i per visit, in (0, 1]."""
    lr_mu: float = 0.3
    """Step size of the multiplicative dual ascent on mu per relative overspend."""
    lr_drift: float = 0.01
    """Step size of the price's drift d (per relative overspend); 0 is plain mirror ascent."""
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

    @classmethod
    def group_split(cls, group_size: int) -> dict[str, int]:
        return {"n_max": group_size}

    def validate(self, num_prompts: int) -> None:
        super().validate(num_prompts)
        positive_int(self, "n_max", 2)
        positive_int(self, "gen_prompts", 0)
        positive_int(self, "target_rollouts_per_step", 0)
        if self.eta is not None:
            in_range(self, "eta", 1e-12, 1e6)
        in_range(self, "lr_theta", 1e-6, 1.0)
        in_range(self, "lr_mu", 0.0, 10.0)
        in_range(self, "lr_drift", 0.0, 1.0)
        if self.mu0 is not None:
            in_range(self, "mu0", 1e-12, 1e6)
        in_range(self, "prior_alpha", 1e-6, 1e6)
        in_range(self, "prior_beta", 1e-6, 1e6)
        in_range(self, "decay", 0.0, 1.0)
        g = self.gen_prompts or 3 * self.train_prompts
        if self.fixed_batch and g < self.train_prompts and g < num_prompts:
            raise ValueError(f"gen_prompts={g} is below train_prompts={self.train_prompts}")


def informativeness(alpha: np.ndarray, beta: np.ndarray) -> np.ndarray:
    """q = E[p(1-p)] = E[p] - E[p^2] = alpha beta / (s (s+1)), p ~ Beta(alpha, beta), s = alpha+beta."""
    s = alpha + beta
    return alpha * beta / (s * (s + 1.0))


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
        self.drift = 0.0  # d: the learnt rate of change of ln mu per step
        self.mu = c.mu0 if c.mu0 is not None else a0 * max(U_MIN, 1.0 - c.train_prompts / self.G)
        self.table.add_column("alpha", np.float64, c.prior_alpha)
        self.table.add_column("beta", np.float64, c.prior_beta)
        self.table.add_column("theta", np.float64, np.nan)

    def _next_request(self):
        c, t = self.config, self.table
        if self.ready or self.round > 0:
            return None
        C = self.draw(self.G)  # (G,) candidates
        a = self.eta * informativeness(t.alpha[C], t.beta[C])  # a_i = eta q_i
        log_u = np.log(np.clip(t.theta[C] / a, U_MIN, 1.0))  # ln(theta_i / a_i), NaN where unseen
        unseen = np.isnan(log_u)
        # dual step: ln u moves lr_theta of the way to its fixed point -a_i n_i, then projection
        log_u = np.clip(log_u - c.lr_theta * (log_u + a * t.trials[C]), LN_U_MIN, 0.0)
        log_u[unseen] = np.log(self.rng.uniform(U_MIN, 1.0, unseen.sum()))  # first sight: random
        theta = a * np.exp(log_u)
        t.theta[C] = theta
        self.count("candidates", len(C))
        if c.fixed_batch:
            S = C[np.argsort(-theta, kind="stable")[: c.train_prompts]]
        else:
            S = C[theta > self.mu]
            if len(S) == 0:  # every candidate is below the price: train the best one; the
                S = C[[int(np.argmax(theta))]]  # price then falls in the one update of the step
                self.count("price_lowered")
        self.count("selected", len(S))
        return self.make_request(S, c.n_max, "rollout")

    def _on_results(self, request, groups):
        c, t = self.config, self.table
        for g in groups:
            i = g.prompt_id
            s = g.mean * g.size  # successes (the group mean is of the success signal)
            t.alpha[i] = c.prior_alpha + c.decay * (t.alpha[i] - c.prior_alpha) + s
            t.beta[i] = c.prior_beta + c.decay * (t.beta[i] - c.prior_beta) + (g.size - s)
            a_new = self.eta * informativeness(t.alpha[i], t.beta[i])
            t.theta[i] = min(float(t.theta[i]), a_new)  # keep theta in [0, a_i]
            self.count("zero_variance", int(g.zero_variance))
        self.train(groups)

    def _after_step(self):  # the one price update of the step
        c = self.config
        g = (sum(self.step_rollouts.values()) - self.b) / self.b  # relative overspend
        self.drift += c.lr_drift * g
        self.mu *= float(np.exp(c.lr_mu * g + self.drift))

    def _step_extra(self):
        return {"mu": self.mu, "mu_over_eta": self.mu / self.eta, "mu_drift": self.drift}

    def _extra_state(self):
        return {"mu": self.mu, "drift": self.drift}

    def _load_extra_state(self, state):
        self.mu = float(state["mu"])
        self.drift = float(state.get("drift", 0.0))
