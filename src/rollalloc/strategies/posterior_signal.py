"""posterior-signal: rollalloc's own strategy. Walk the epoch stream and train every prompt whose
forgetting, drift-corrected Beta posterior says a group of n would carry GRPO signal; probe the
unseen with a quarter group, extend the probes that show variance, skip the rest (no eviction).

    V(p, n) = 1 - p^n - (1 - p)^n                       P(a group of n has reward variance)
    G(k; n) = sqrt(n (n-1)) sqrt(k/n (1 - k/n))         |GRPO gradient| of a group, k of n correct
    S(p, n) = E_{k ~ Bin(n, p)} G(k; n)                 expected signal of n rollouts (select="top")

Per prompt i: Beta(a_i, b_i) from its own evidence, D_i the pool drift when it was last updated,
t_i its last step. At step t the posterior in use is (unseen: the pool prior, Beta(A_t, B_t)):

    m_i = sigmoid(logit(a_i / k_i) + D_t - D_i)        the skill gained since, k_i = a_i + b_i
    k'_i = max(k_min, k_i 2^(-(t - t_i)/half_life))    evidence forgets with time
    Beta(m_i k'_i, (1 - m_i) k'_i)

Each step (one request, exactly B = train_prompts groups, about B n rollouts):
  1. select="stream" (default): draw the stream in chunks of B until about B trainable prompts are
     in hand (at most window x B): a seen prompt is trainable if E_post V(p_i, n) >= tau (and
     E_post p_i <= p_max, 1: off), an unseen one counts with its chance to be extended (variance
     in a probe, and with p_max a probe mean <= p_max); the others are skipped this epoch.
     With strata, an unseen prompt whose group's prior is fitted (5 first visits) is judged
     as the seen are, under that prior, and counts with its own chance to vary in a probe
     (probe_judged = T: one of a group written off so, with no first visit in T steps, is probed).
     The trainable seen prompts, in stream order, fill the batch with groups of n.
     select="top": the B best of window x B candidates by E_post S + ucb sd_post S; with fill,
     of the candidates drawn until sum_i E_post V(p_i, n) >= B (at most window x B).
  2. Unseen prompts among them: probe ceil(U / V_prior(k)) with k = n_probe = n/4 rollouts,
     at most (n B) / (k + V_prior(k) (n - k)) so that those that vary can get n (probes_fit)
     (round 1; probe_size="cheapest": the k in [2, n_probe] with the fewest rollouts per group
     with variance, cost(k) = k / V_prior(k) + n - k); round 2 extends the
     probes with variance to n (pilot u commit, trained) and fills the batch with seen prompts;
     probes with variance beyond B are carried to the next step, never dropped, and come first
     there; flat probes are dropped unless needed to fill B. Probes are used only while cheaper
     than a full group (probe_if_cheaper: cost(k) < n / V_prior(n)).
  3. With resize (off by default), sizes n_i in [min_n, max_n], sum n_i = B n, go greedily to the
     largest marginal S(m_i, n_i + 1) - S(m_i, n_i) (Knapsack-RL's rule on the GRPO signal); so
     does a dry step (resize_short): the window ran out before B trainable prompts were found
     (small pools, late epochs), and full groups on skipped prompts would carry no signal.
     probes_on_top (set under a constant batch, TRL and verl, with resize_short off: every group
     n): the dropped probes' rollouts are spent on top of B n, and kept probes are extended to n.
  4. Posterior: a_i <- m_i k'_i + s_i, b_i <- (1 - m_i) k'_i + n_i - s_i, D_i <- D_t, t_i <- t.
     Drift: D <- D + lr_drift sum_seen (s_i - n_i m_i) / sum_seen n_i m_i (1 - m_i)  (one Newton
     step of the logit shift shared by the revisited prompts, |step| <= 0.5).
     Pool prior: EMAs (weight prior_ema per group) over first visits of s/n and s(s-1)/(n(n-1)),
     unbiased for E[p] and E[p^2] at any n: mu = E[p], rho = Var p / (mu (1 - mu)) = 1 / (A + B + 1).
     strata (a task column, e.g. level): each group g of prompts keeps its own EMAs of these and
     of D at its first visits, shrunk to the pool's (worth 4 first visits; its own from the 5th);
     an unseen prompt of g gets that prior, read at the logit shift D - E_g[D] since. group_ema:
     the EMA weight of a group's first visit (larger: its prior follows its recent first visits).

Nothing is evicted: a solved or hopeless prompt is skipped until drift and forgetting make it
uncertain again (the re-check). The batch is always B groups (fixed_batch is True).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from rollalloc.allocator import Allocator, AllocatorConfig, by_shares, register
from rollalloc.groups import ToldGroups, groups_from_state, groups_to_state
from rollalloc.metrics import ZERO_STD_TOL
from rollalloc.validate import boolean, in_range, one_of, positive_int

_GRID = np.linspace(0.0, 1.0, 513)  # p grid of the signal table
_STRATUM_SHRINK = 4.0  # strata: a group's prior counts the pool's as this many first visits
_ELIGIBLE = 2.0  # select="stream": scores of trainable prompts are _ELIGIBLE + rank, the others < 1
# standardised logit nodes of posterior expectations (97: E V(p, 32) to 0.01 even at a = 0.15)
_Z = np.linspace(-5.0, 5.0, 97)


def signal_table(max_n: int, p: np.ndarray = _GRID, asymmetry: float = 0.0) -> np.ndarray:
    """T[n, j] = S(p_j, n) = E_{k~Bin(n, p_j)} sqrt(n(n-1)) sqrt(k/n (1-k/n)): (max_n + 1, len(p)).
    With `asymmetry` beta > 0 each k is weighted (2 (1 - k/n))^beta: a group of rare successes
    counts more than its mirror of rare failures (what a group teaches the held-out set,
    measured: docs/testbed.md, "Which groups teach"; the simulator's transfer_asymmetry)."""
    T = np.zeros((max_n + 1, len(p)))
    with np.errstate(divide="ignore"):
        lp, lq = np.log(p), np.log1p(-p)
    for n in range(2, max_n + 1):
        k = np.arange(n + 1, dtype=np.float64)[:, None]  # (n+1, 1)
        lc = np.array(
            [math.lgamma(n + 1) - math.lgamma(j + 1) - math.lgamma(n - j + 1) for j in range(n + 1)]
        )[:, None]
        with np.errstate(invalid="ignore"):
            logpmf = lc + np.where(k > 0, k * lp, 0.0) + np.where(k < n, (n - k) * lq, 0.0)
        g = math.sqrt(n * (n - 1)) * np.sqrt(k / n * (1 - k / n))  # (n+1, 1)
        if asymmetry:
            g = g * (2.0 * (1.0 - k / n)) ** asymmetry
        T[n] = (np.exp(logpmf) * g).sum(axis=0)
    return T


def _ema(old, weight: float, *xs: np.ndarray) -> list[float]:
    """Moving averages [w, E x_1, E x_2, ...] after the observations xs (in order), each of
    weight `weight` (bias-corrected by w, the weight so far)."""
    keep = (1 - weight) ** np.arange(len(xs[0]) - 1, -1, -1)  # weight of each in the EMA
    decay = (1 - weight) ** len(xs[0])
    return [float(old[0] * decay + weight * keep.sum())] + [
        float(o * decay + weight * (keep * x).sum()) for o, x in zip(old[1:], xs)
    ]


def _interp(T_n: np.ndarray, p: np.ndarray) -> np.ndarray:
    return np.interp(p, _GRID, T_n)


def _logit(m):
    m = np.clip(m, 1e-6, 1 - 1e-6)
    return np.log(m) - np.log1p(-m)


@dataclass
class PosteriorSignalConfig(AllocatorConfig):
    n: int = 16
    """Mean rollouts per group: the step spends n x train_prompts (GRPO's n)."""
    n_probe: int | None = None
    """Rollouts of the first look at an unseen prompt; None: n // 4 (Pilot-Commit's 1:3 split),
    0 below n = 8. 0: unseen prompts get full groups at once. Probes with reward variance are
    extended and trained; the others train only to fill the batch and are otherwise dropped."""
    probe_if_cheaper: bool = True
    """Probe unseen prompts only while it is cheaper per group with reward variance under the
    pool prior: k / P(variance in k) + n - k < n / P(variance in n) for the probe size k
    (probe_size); else they get full groups at once (a pool where most groups of n vary, small n). Until the pool
    prior is fitted (about 70 first looks) the fallback Beta(1, 1) makes full groups cheaper for
    every n_probe < n, so the first looks are full groups, which also fit the prior."""
    probe_size: str = "fixed"
    """The size of a probe: "fixed", n_probe; "cheapest", the k in [2, n_probe] with the fewest
    rollouts per group with reward variance under the pool prior, k / P(variance in k) + n - k,
    among those with P(variance in k) >= 0.2 (a U-shaped pool: small probes find its varying
    prompts for fewer rollouts, but look at more prompts to find them and miss more: a prompt
    that looks flat is skipped for the epoch), n_probe until the pool prior is fitted."""
    window: float = 16
    """Candidates per step = window x train_prompts, rounded (each prompt a candidate once an
    epoch); at least 1. With select="top", 1.25 skips the fifth of each window with the least
    expected signal."""
    fill: bool = False
    """select="top": instead of a fixed window, draw candidates until they hold train_prompts
    groups with reward variance in expectation (sum of E_post[1 - p^n - (1-p)^n] over the drawn
    prompts, unseen ones under their prior; at most window x train_prompts), then take the best
    train_prompts: about B / (1 - degenerate share) candidates, wide on a mostly degenerate pool
    and narrow on an informative one."""
    select: str = "stream"
    """How the B prompts of a step are chosen: "top" (the B best scores of the window) or
    "stream" (walk the epoch stream in order and take every prompt whose posterior probability
    of a group with reward variance, E_post[1 - p^n - (1-p)^n], is at least tau, unseen ones
    via probes; a prompt is skipped, not ranked)."""
    tau: float = 0.5
    """select="stream": the P(reward variance) a seen prompt needs to be trained."""
    p_max: float = 1.0
    """select="stream": a seen prompt whose posterior mean success rate is above p_max is skipped
    (too easy) like one unlikely to vary; either mode: a probe whose mean reward is above p_max
    is not extended (Pilot-Commit's band ends at 1 - p_upper = 0.75); 1: no upper cut. 0.75 was faster
    on the real paper testbed, whose easy prompts are a level outside the held-out mix, and
    slower on the default testbed (docs/posterior-signal.md)."""
    recheck: bool = False
    """select="stream": a skipped seen prompt is probed again (the step's probe size k) with
    probability E_post[1 - p^k - (1-p)^k], its chance to show variance in a probe, so that "too
    hard" expires where the skill has moved (Pilot-Commit re-pilots its deferred prompts)."""
    probe_judged: int | None = None
    """select="stream" with strata: every this many steps, a group whose prior judges its unseen
    prompts untrainable has one of them probed anyway (one probe outside the step's probe round;
    a full group where the step has no probes), unless it had a first visit in that time: a first
    visit refits the group's prior, so that a level written off early is judged again once
    transfer has made it learnable (0: never; a written-off group then moves only with the pool
    drift D). None: 4 with strata and select="stream", else 0. Without it 3 of 7 seeds of the
    paper testbed's fifth warm start wrote off the 3-term chains and never learnt them; with 4,
    across eight warm starts it is a tie with 0, 4% slower where 0 does not fail
    (docs/posterior-signal.md, "A level written off")."""
    explore: str = "ucb"
    """Score of a candidate: E_post S + ucb sd_post S ("ucb"), E_post S ("mean"), or S at a
    Thompson draw of p ("thompson")."""
    ucb: float = 1.0
    """explore="ucb": score E_post S + ucb sd_post S."""
    sharpen: float = 1.0
    """Thompson draws from Beta(sharpen a, sharpen b): 1 is plain Thompson sampling, larger
    explores less."""
    resize: bool = False
    """Size the chosen groups by marginal signal in [min_n, max_n] every step (False: every
    group n, except in a short step, below)."""
    probes_on_top: bool = False
    """The rollouts of dropped probes are spent on top of the step's n x train_prompts, as
    Pilot-Commit's discarded pilots are, so the trained groups get all of it: n each, probes
    extended to n (those without variance too, where they fill the batch), or sized by marginal
    signal in a dry step (resize_short). Set under a constant batch (TRL and verl need
    train_prompts groups of n). False: a step spends about n x train_prompts, probes
    included, and the kept groups share what the dropped probes left."""
    probes_fit: bool = True
    """Probe at most as many unseen prompts as the step's budget can extend to n: P <= budget /
    (k + V_k (n - k)) with V_k the chance of a probe of k to vary, so the probes that vary get
    the group size n; slots left are filled as when probes run short. False (before session
    18): up to budget / k probes, so on a mostly degenerate pool the probes take the whole step
    and the groups with variance are trained at about their probe's size (shape-large: 1.31x
    GRPO against 1.43x). No effect with probes_on_top, where the probes are on top of n x B."""
    resize_short: bool = True
    """select="stream": in a step where fewer than train_prompts of the chosen prompts are
    trainable (the pool has run short of prompts with signal: small pools, late epochs), size
    the groups by marginal signal as `resize` does, so the rollouts go to the prompts with
    signal instead of full groups of n on skipped ones. Off under a constant batch (TRL, verl:
    every group n)."""
    min_n: int = 2
    """Smallest group with resize."""
    max_n: int = 0
    """Largest group with resize; 0 means 8 n, at most 256 (the oracle's 128 at n = 16)."""
    half_life: float = 200.0
    """Steps after which a prompt's evidence counts half (0: never forget)."""
    k_min: float = 2.0
    """Forgetting stops at this much evidence (a + b)."""
    lr_drift: float = 0.3
    """Share of the Newton step taken on the pool drift D per step (0: no drift)."""
    self_shift: bool = True
    """Learn kappa, the logit a prompt gains per unit of its own last group's signal (its own
    training: memorisation), besides the pool drift D (False: D alone)."""
    pool_prior: bool = True
    """Unseen prompts get the pool prior fitted on first visits (False: prior_alpha, prior_beta)."""
    prior_ema: float = 0.01
    """Weight of one first-visit group in the pool prior's moving averages."""
    strata: str = ""
    """A task column whose values group prompts of like difficulty (arith's `level`, MATH's
    level, a dataset's source): an unseen prompt gets its group's prior, fitted on the group's
    first visits and moved by the pool drift D since (the trainer passes the column through
    `set_pool_columns`); select="top" ranks unseen prompts by it, select="stream" skips them as
    it skips seen ones once their group has 5 first visits. "": one pool prior for every prompt.
    `rollalloc columns RUN` says which column predicts pass rates (docs/columns.md)."""
    quota: bool = False
    """select="top" with strata: each group (value of the strata column) gets the share of the
    step's prompts that it has of the window's candidates (largest remainders; among equal ones
    the group whose next candidate ranks best), filled by its own best: prompts are ranked within
    groups, never across, so no group is starved (rollalloc.allocator.by_shares). For pools whose
    every group can learn: on the default testbed the allocator that knows every p, choosing 64
    of 128, is 1.01x GRPO by one ranking and 1.10x with its levels' shares (docs/posterior-signal.md,
    "Shares per level")."""
    group_ema: float | None = None
    """strata: weight of one first visit in its group's prior (moving averages of the moments and
    of the drift they were read at), at most 0.5; 0: prior_ema. A larger weight makes the group's
    prior follow its recent first visits, so a level written off early is judged by its refresh
    probes (probe_judged) rather than by the first visits of an untrained policy. The pool's
    prior stays worth 4 first visits, so it holds 4 lambda / (1 + 4 lambda) of a group's prior
    once the group has many (29% at 0.1; 4% at 0.01). None: 0.1 where probe_judged is on (strata,
    select="stream"), else 0. With 0 (before session 26) the paper testbed's fifth warm start
    starved a level on 2 of 14 seeds, with 0.1 on none; across eight warm starts the two are a tie
    (docs/posterior-signal.md, "A group's prior that follows its recent first visits")."""
    asymmetry: float = 0.0
    """beta in [0, 8]: S(p, n) weights each k of n successes (2 (1 - k/n))^beta (signal_table),
    so a group of rare successes outranks its mirror of rare failures: select="top"'s ranking and
    resize=True's group sizes use it; refused with select="stream" without resize, which decides
    by P(variance) and would be unchanged. What a real group teaches is skewed that way
    (docs/testbed.md, "Which groups teach"; 1.55 on the paper testbed; docs/likelihood-rank.md,
    "Ranking by what a group teaches"). 0: GRPO's symmetric signal."""
    prior_alpha: float = 1.0
    """Beta prior of unseen prompts before any first visit (and with pool_prior=False)."""
    prior_beta: float = 1.0

    def __post_init__(self):
        if self.n_probe is None and isinstance(self.n, int):
            self.n_probe = self.n // 4 if self.n >= 8 else 0
        if self.probe_judged is None:
            self.probe_judged = 4 if self.strata and self.select == "stream" else 0
        if self.group_ema is None:
            self.group_ema = 0.1 if self.probe_judged else 0.0

    def pool_columns(self) -> tuple[str, ...]:
        return (self.strata,) if self.strata else ()

    @classmethod
    def group_split(cls, group_size: int) -> dict[str, int]:
        return {"n": group_size}

    @classmethod
    def options_for_group_size(cls, group_size, **kw):
        """n = group_size (probes of a quarter group follow from n: n_probe's default). Under a
        constant batch every group has n rollouts: probes_on_top on, resize_short off (a user's
        contrary setting is refused)."""
        out = super().options_for_group_size(group_size, **kw)
        if kw.get("constant_batch"):
            for name, want in (("resize", False), ("resize_short", False), ("probes_on_top", True)):
                if name in out and out[name] != want:
                    raise ValueError(
                        f"{name}={out[name]!r} sizes groups unequally, but the batch must be "
                        f"constant here (every group n rollouts): use {name}={want!r}"
                    )
                if name != "resize":  # False by default
                    out[name] = want
        return out

    def sizes(self) -> tuple[int, int]:
        lo = self.min_n or 2
        return lo, max(self.max_n or min(8 * self.n, 256), lo, self.n)

    def validate(self, num_prompts: int) -> None:
        super().validate(num_prompts)
        positive_int(self, "n", 2)
        in_range(self, "window", 1.0, 1e6)
        positive_int(self, "n_probe", 0)
        for name, value, mode in (
            ("fill", self.fill, "top"),
            ("explore", self.explore != "ucb", "top"),
            ("ucb", self.ucb != 1.0, "top"),
            ("sharpen", self.sharpen != 1.0, "top"),
            ("tau", self.tau != 0.5, "stream"),
            ("recheck", self.recheck, "stream"),
            ("probe_judged", self.probe_judged != 0, "stream"),
            ("quota", self.quota, "top"),
        ):
            if value and self.select != mode:
                raise ValueError(
                    f"{name}={getattr(self, name)!r} acts only with select={mode!r} "
                    f"(select={self.select!r} here): set select={mode!r} or leave {name} out"
                )
        if self.n_probe == 1:
            raise ValueError("n_probe must be 0 or >= 2 (one rollout cannot show variance)")
        if self.n_probe > self.n:
            raise ValueError(
                f"n_probe={self.n_probe} exceeds n={self.n} (a probe is part of a group)"
            )
        boolean(self, "probes_on_top")
        boolean(self, "probes_fit")
        boolean(self, "fill")
        boolean(self, "probe_if_cheaper")
        one_of(self, "probe_size", ("cheapest", "fixed"))
        one_of(self, "explore", ("thompson", "mean", "ucb"))
        one_of(self, "select", ("top", "stream"))
        in_range(self, "tau", 0.0, 1.0)
        in_range(self, "asymmetry", 0.0, 8.0)
        if self.asymmetry and self.select != "top" and not self.resize:
            raise ValueError(
                f"asymmetry={self.asymmetry!r} acts only on the ranking of select='top' or with "
                f"resize=True (select={self.select!r} here, which decides by P(variance)): set "
                "select='top' or resize=True, or leave asymmetry out"
            )
        in_range(self, "p_max", 0.0, 1.0)
        in_range(self, "ucb", 0.0, 1e3)
        boolean(self, "resize")
        boolean(self, "resize_short")
        boolean(self, "self_shift")
        boolean(self, "pool_prior")
        boolean(self, "recheck")
        positive_int(self, "probe_judged", 0)
        if self.probe_judged and not self.strata:
            raise ValueError(
                f"probe_judged={self.probe_judged} probes prompts judged by their group's prior: "
                "set strata too"
            )
        boolean(self, "quota")
        if self.quota and not self.strata:
            raise ValueError("quota=True shares the step among the strata groups: set strata too")
        positive_int(self, "min_n", 0)
        positive_int(self, "max_n", 0)
        if self.min_n and self.min_n < 2:
            raise ValueError(f"min_n must be 0 or >= 2, got {self.min_n}")
        if self.min_n > self.n:
            raise ValueError(f"min_n={self.min_n} exceeds n={self.n}")
        if self.max_n and self.max_n < self.n:
            raise ValueError(f"max_n={self.max_n} is below n={self.n}")
        if self.max_n > 1024 or self.n > 1024:
            raise ValueError("n and max_n must be at most 1024")
        in_range(self, "half_life", 0.0, 1e9)
        in_range(self, "sharpen", 1e-3, 1e6)
        in_range(self, "k_min", 1e-3, 1e6)
        in_range(self, "lr_drift", 0.0, 1.0)
        in_range(self, "prior_ema", 1e-6, 1.0)
        in_range(self, "group_ema", 0.0, 0.5)
        if self.group_ema and not self.strata:
            raise ValueError("group_ema acts on the strata groups' priors: set strata too")
        in_range(self, "prior_alpha", 1e-3, 1e6)
        in_range(self, "prior_beta", 1e-3, 1e6)
        if not isinstance(self.strata, str):
            raise ValueError(f"strata must be a task column name (a string), got {self.strata!r}")


@register
class PosteriorSignal(Allocator):
    name = "posterior-signal"
    Config = PosteriorSignalConfig

    @classmethod
    def example_config(cls):
        return {"n": 4, "window": 4, "half_life": 5.0}

    @property
    def equal_group_sizes(self) -> bool:
        """Every group n: no sizing, and probes extended to n (probes_on_top) or none at all."""
        c = self.config
        return not (c.resize or c.resize_short) and (c.probes_on_top or c.n_probe == 0)

    def _init_strategy(self):
        c, t = self.config, self.table
        self.lo, self.hi = c.sizes()
        self.n_probe = c.n_probe
        self.T = signal_table(self.hi, asymmetry=c.asymmetry)  # (hi + 1, |grid|)
        self.C = min(max(round(c.window * c.train_prompts), 1), self.num_prompts)
        t.add_column("a", np.float32, 0.0)  # a = b = 0: never seen
        t.add_column("b", np.float32, 0.0)
        t.add_column("d", np.float32, 0.0)  # D_i
        t.add_column("u", np.float32, 0.0)  # u_i: signal of its last group
        self.D, self.kappa = 0.0, 0.0
        self.ema = [0.0, 0.0, 0.0]  # weight, E[x], E[x^2] over first visits (bias-corrected)
        self.stratum = np.zeros(self.num_prompts, np.int64)  # (N,) group of each prompt (strata)
        self.sema = np.zeros((1, 4))  # (S, 4) per group: weight, E[x], E[x^2], E[D] (strata)
        self.gvisit = np.zeros(1, np.int64)  # (S,) step of each group's last first visit
        self.strata_names: list[str] | None = None  # the groups' names once the column is set
        self._saved_names: list[str] | None = None  # the groups' names of a loaded state
        self._asked = (np.zeros(0), np.zeros(0))
        self._probes: list = []  # probed groups between the step's two rounds
        self._carry: list = []  # probes with variance beyond a step's batch: trained next step
        self._cand, self._cand_score = np.zeros(0, np.int64), np.zeros(0)  # seen candidates
        self._dry = False  # this step's stream window ran out of trainable prompts
        self._refresh = np.zeros(0, np.int64)  # probe_judged: this step's refresh prompts

    # ---------------------------------------------------------------- the posterior in use
    def set_pool_columns(self, columns) -> None:
        """The `strata` column, one value per pool prompt: the group of each prompt."""
        labels = self.pool_column(columns, self.config.strata)
        if any(v is None for v in labels):
            raise ValueError(f"strata: column {self.config.strata!r} has missing values (None)")
        names, self.stratum = np.unique(np.asarray(labels, dtype=str), return_inverse=True)
        self.strata_names = names.tolist()
        self._check_groups()
        if self.sema.shape[0] != len(names):  # nothing learnt yet (else _check_groups raised)
            self.sema = np.zeros((len(names), 4))
            self.gvisit = np.zeros(len(names), np.int64)

    def _check_groups(self) -> None:
        """Resume (columns set before or after the state is loaded): a state that has learnt
        group priors must have the pool's groups, by name (by count for older states)."""
        pool, saved = self.strata_names, self._saved_names
        if pool is None or not self.sema[:, 0].any():
            return
        if (saved is not None and saved != pool) or self.sema.shape[0] != len(pool):
            raise ValueError(
                f"strata: the state's groups {(saved or [])[:8]} ({self.sema.shape[0]}) are not "
                f"the pool's {pool[:8]} ({len(pool)})"
            )

    def _moments_prior(self, w, ex, ex2):
        """(A, B) of the Beta whose moments are E[p] = ex / w, E[p^2] = ex2 / w (floats, or arrays:
        one prior per group of strata)."""
        m1 = ex / w
        mu = np.clip(m1, 1e-3, 1 - 1e-3)
        rho = np.maximum(ex2 / w - m1**2, 0.0) / (mu * (1 - mu))  # Var p / (mu (1 - mu))
        kappa = 1.0 / np.clip(rho, 0.02, 0.95) - 1.0  # A + B
        return mu * kappa, (1 - mu) * kappa

    def prior(self) -> tuple[float, float]:
        """(A, B): the pool prior of an unseen prompt now."""
        c = self.config
        w, ex, ex2 = self.ema
        if not c.pool_prior or w < 0.5:
            return c.prior_alpha, c.prior_beta
        A, B = self._moments_prior(w, ex, ex2)
        return float(A), float(B)

    def _unseen_prior(self, ids: np.ndarray):
        """(A, B, shift), each (P,): the prior of `ids` were they unseen, and the logit shift it
        is read at (strata: the drift D since its group's first visits; else 0)."""
        A0, B0 = self.prior()
        A, B, shift = np.full(len(ids), A0), np.full(len(ids), B0), np.zeros(len(ids))
        if not self.config.strata or not self.config.pool_prior:
            return A, B, shift
        pw, pex, pex2 = self.ema
        if pw < 0.5:  # the pool prior is not fitted yet: nor are the groups'
            return A, B, shift
        w0 = _STRATUM_SHRINK * self._group_weight()  # the pool's: worth 4 first visits
        w, ex, ex2, ed = self.sema.T  # (S,) each: the groups' moments, shrunk to the pool's
        As, Bs = self._moments_prior(w + w0, ex + w0 * pex / pw, ex2 + w0 * pex2 / pw)
        with np.errstate(divide="ignore", invalid="ignore"):
            sh = np.where(w > 0, (self.D - ed / w) * w / (w + w0), 0.0)
        g = self.stratum[ids]
        return As[g], Bs[g], sh[g]

    def posterior(self, ids: np.ndarray):
        """The posterior of `ids` now: (m, k, a', b', delta), each (P,). p = sigmoid(logit(q) +
        delta), q ~ Beta(a', b') (the stored evidence, forgotten to k' = a' + b'); m = E[p].
        Keeps the quadrature for _pvar_post and _scores; unseen ids share one row (the prior)."""
        c, t = self.config, self.table
        a, b = t.a[ids].astype(np.float64), t.b[ids].astype(np.float64)
        k = a + b
        seen = k > 0
        A, B, shift = self._unseen_prior(ids)
        delta = np.where(seen, self.D - t.d[ids] + self.kappa * t.u[ids], shift)  # logit since
        if c.half_life > 0:
            age = self.step - t.last_step[ids]
            f = np.minimum(
                1.0, np.maximum(c.k_min / np.maximum(k, 1e-9), 0.5 ** (age / c.half_life))
            )
            a, b = a * f, b * f
        a, b = np.where(seen, a, A), np.where(seen, b, B)
        rows = np.flatnonzero(seen)
        self._seen = seen
        self._judged = ~seen & self._group_fitted(ids)
        self._map = np.full(len(ids), len(rows), dtype=np.int64)
        self._map[rows] = np.arange(len(rows))  # id -> its row of nodes; the unseen: one a group
        if not seen.all():
            un = np.flatnonzero(~seen)
            # one row a group (stratum is all 0 without strata)
            _, first, inv = np.unique(self.stratum[ids[un]], return_index=True, return_inverse=True)
            self._map[un] = len(rows) + inv
            rows = np.append(rows, un[first])
        a_, b_ = a[rows], b[rows]
        # nodes in logit q around the posterior's bulk, x = mu + sd z, weighted by its density
        # (left / right scale: the sd, or the e^{a x} / e^{-b x} tails of a small a / b)
        mu = np.log((a_ + 0.5) / (b_ + 0.5))
        sd = np.sqrt(1 / (a_ + 0.1) + 1 / (b_ + 0.1))
        L = np.minimum(np.maximum(sd, 0.8 / np.maximum(a_, 1e-3)), 10.0)[:, None]
        R = np.minimum(np.maximum(sd, 0.8 / np.maximum(b_, 1e-3)), 10.0)[:, None]
        x = mu[:, None] + np.where(_Z < 0, L, R) * _Z  # (rows, Z)
        sp = np.log1p(np.exp(-np.abs(x)))
        logw = a_[:, None] * (np.minimum(x, 0) - sp) + b_[:, None] * (np.minimum(-x, 0) - sp)
        w = np.exp(logw - logw.max(axis=1, keepdims=True)) * np.where(_Z < 0, L, R)  # x spacing
        self._w = w / w.sum(axis=1, keepdims=True)  # (rows, Z)
        self._p = 1 / (1 + np.exp(-(x + delta[rows][:, None])))  # (rows, Z) p at the nodes
        m = (self._w * self._p).sum(axis=1)[self._map]
        return m, a + b, a, b, delta

    def _group_fitted(self, ids: np.ndarray) -> np.ndarray:
        """strata: whether the group of each of `ids` has a prior of its own, fitted on at least
        _STRATUM_SHRINK first visits (as much as the pool's share in it); (P,) bool."""
        c = self.config
        if not c.strata or not c.pool_prior:
            return np.zeros(len(ids), dtype=bool)
        return self.sema[self.stratum[ids], 0] >= self._fitted_weight()

    def _group_weight(self) -> float:
        """strata: the weight of one first visit in its group's moving averages."""
        return self.config.group_ema or self.config.prior_ema

    def _fitted_weight(self) -> float:
        """strata: the weight of a group's first visits at which its prior is its own: 5 first
        visits (4 lambda; the weight of 5, 1 - (1 - lambda)^5, where that is smaller)."""
        lam = self._group_weight()
        return min(_STRATUM_SHRINK * lam, 1 - (1 - lam) ** (_STRATUM_SHRINK + 1)) - 1e-9

    def _pvar_post(self, n: int | None = None) -> np.ndarray:
        """E_post P(a group of n (default: the group size) has reward variance) = E[1 - p^n -
        (1-p)^n], for the ids of the last posterior() call: (P,)."""
        n, p = n or self.config.n, self._p
        return (self._w * (1.0 - p**n - (1.0 - p) ** n)).sum(axis=1)[self._map]

    def _trainable(self, v: np.ndarray, m: np.ndarray) -> np.ndarray:
        """select="stream": which seen prompts are trained, from their posterior P(variance in n)
        `v` and mean `m`: likely to vary (tau) and not too easy (p_max)."""
        return (v >= self.config.tau) & (m <= self.config.p_max)

    def _scores(self, post, again: np.ndarray | None = None) -> np.ndarray:
        """Scores of the ids of the last posterior() call (`post` its result); `again`: the
        skipped ones to probe again (select="stream", recheck), eligible like the unseen."""
        c, Tn = self.config, self.T[self.config.n]
        m, k, a, b, delta = post
        if c.select == "stream":  # eligible (unseen or P(variance) >= tau) first, in stream order
            v = self._pvar_post()
            rank = 1.0 - np.arange(len(k)) / max(len(k), 1)
            ok = (~self._seen & ~self._judged) | self._trainable(v, m)  # strata: by group prior
            if again is not None:
                ok |= again
            return np.where(ok, _ELIGIBLE + rank, v)
        if c.explore == "thompson":
            r = c.sharpen  # a draw from Beta(r a, r b): r = 1 Thompson, larger is greedier
            q = np.clip(
                self.rng.beta(np.maximum(r * a, 1e-3), np.maximum(r * b, 1e-3)), 1e-9, 1 - 1e-9
            )
            return _interp(Tn, 1 / (1 + np.exp(-(np.log(q) - np.log1p(-q) + delta))))
        v = _interp(Tn, self._p)  # (rows, Z) S at the nodes
        mean = (self._w * v).sum(axis=1)
        sd = np.sqrt(np.maximum((self._w * v * v).sum(axis=1) - mean**2, 0.0))
        if c.explore == "mean":
            return mean[self._map]
        return (mean + c.ucb * sd)[self._map]

    def sizes_for(
        self, m: np.ndarray, budget: int | None = None, short: bool = False
    ) -> np.ndarray:
        """n_i in [lo, hi] summing to `budget` (n x len(m)): greedy on the marginal signal
        S(m, N+1) - S(m, N) with resize (or in a `short` step with resize_short); else n each.
        `short` is only ever set by select="stream" (a dry step of the stream window)."""
        c, lo, hi = self.config, self.lo, self.hi
        budget = c.n * len(m) if budget is None else budget
        dry = short and c.resize_short and not c.resize
        if dry:
            self.count("short_steps", 1)
        if not (c.resize or dry) or lo == hi:
            N = np.full(len(m), min(max(budget // max(len(m), 1), lo), hi), dtype=np.int64)
            N[: budget - int(N.sum())] += 1  # the remainder, one each
            return np.minimum(N, hi)
        x = np.clip(m, 0.0, 1.0) * (len(_GRID) - 1)
        j = np.minimum(x.astype(np.int64), len(_GRID) - 2)
        f = x - j
        T = self.T[lo : hi + 1]  # (K, G): S(p, N) for N = lo..hi, linear in p between grid points
        S = (T[:, j] * (1 - f) + T[:, j + 1] * f).T  # (P, K)
        gain = np.diff(S, axis=1)  # (P, K-1) from N to N + 1
        take = max(budget - lo * len(m), 0)
        best = np.argsort(-gain, axis=None, kind="stable")[:take]
        return lo + np.bincount(best // gain.shape[1], minlength=len(m)).astype(np.int64)

    def _update(self, ids, n, s, m, k, fit: bool) -> None:
        """Posterior of `ids` after s successes in n rollouts, from the (m, k) read before;
        `fit`: their residuals also move D and kappa (revisits only)."""
        c, t = self.config, self.table
        seen = (t.a[ids] + t.b[ids]) > 0
        d_read = self.D
        if fit and seen.any() and c.lr_drift > 0:  # one damped Newton step on (D, kappa)
            r, w, u = (s - n * m)[seen], (n * m * (1 - m))[seen], t.u[ids][seen].astype(np.float64)
            H = np.array([[w.sum(), (w * u).sum()], [(w * u).sum(), (w * u * u).sum()]]) + np.eye(2)
            step = np.clip(np.linalg.solve(H, [r.sum(), (r * u).sum()]), -0.5, 0.5)
            self.D += c.lr_drift * float(step[0])
            self.kappa += c.lr_drift * float(step[1]) if c.self_shift else 0.0
        # first visits, in order: the pool prior's moments (EMAs) of s/n and s(s-1)/(n(n-1)),
        # unbiased for E[p] and E[p^2] whatever each group's size (probes and full groups mix)
        n1, s1 = n[~seen], s[~seen]  # first visits have n >= 2 (min_n, n_probe >= 2)
        x, x2 = s1 / n1, s1 * (s1 - 1) / (n1 * (n1 - 1))
        if len(x):
            self.ema = _ema(self.ema, c.prior_ema, x, x2)
        if len(x) and c.strata:  # and each group's, with the drift D they were read at
            g = self.stratum[ids[~seen]]
            self.gvisit[g] = self.step
            for j in np.unique(g):
                xj = x[g == j]
                self.sema[j] = _ema(
                    self.sema[j], self._group_weight(), xj, x2[g == j], np.full(len(xj), d_read)
                )
        t.a[ids] = (m * k + s).astype(np.float32)
        t.b[ids] = ((1 - m) * k + n - s).astype(np.float32)
        t.d[ids] = np.float32(d_read)  # the D these posteriors were read at
        t.u[ids] = 0.0  # no training since (set by _train)

    def _train(self, groups: list) -> None:
        """Put groups into the batch; their signal u feeds the self-shift kappa at the next visit."""
        n = np.array([g.size for g in groups], dtype=np.float64)
        std = np.array([g.std for g in groups])
        ids = np.array([g.prompt_id for g in groups], dtype=np.int64)
        self.table.u[ids] = (np.sqrt(n * (n - 1)) * std / (self.config.n / 2)).astype(np.float32)
        self.count("zero_variance", int(sum(g.zero_variance for g in groups)))
        self.train(groups)

    def _pvar(self, n: int) -> float:
        """P(a group of n shows reward variance) for an unseen prompt, under the pool prior."""
        A, B = self.prior()
        j = np.arange(n)
        return float(1 - np.prod((A + j) / (A + B + j)) - np.prod((B + j) / (A + B + j)))

    def _pextend(self, n: int) -> float:
        """P(a probe of n is extended: reward variance and mean reward <= p_max) for an unseen
        prompt under the pool prior; _pvar(n) when p_max is off. Beta-binomial pmf by logs."""
        if self.config.p_max >= 1.0:
            return self._pvar(n)
        A, B = self.prior()
        lbeta = lambda x, y: math.lgamma(x) + math.lgamma(y) - math.lgamma(x + y)  # noqa: E731
        top = min(n - 1, math.floor(self.config.p_max * n + 1e-9))  # k / n <= p_max, k < n
        return sum(
            math.exp(
                math.lgamma(n + 1)
                - math.lgamma(k + 1)
                - math.lgamma(n - k + 1)
                + lbeta(k + A, n - k + B)
                - lbeta(A, B)
            )
            for k in range(1, top + 1)
        )

    def _probe_size(self) -> int:
        """This step's probe size: the k in [2, n_probe] with the fewest rollouts per group with
        variance, k / V(k) + n - k under the pool prior (probe_size="cheapest"; n_probe until
        the prior is fitted) or n_probe ("fixed"); 0 where a full group costs fewer, n / V(n)
        (probe_if_cheaper)."""
        c, n = self.config, self.config.n
        if not c.n_probe or c.n_probe >= n:
            return c.n_probe
        cost = lambda k: k / max(self._pvar(k), 1e-6) + n - k  # noqa: E731
        k = c.n_probe
        fitted = not c.pool_prior or self.ema[0] >= 0.5  # the prior is the user's or fitted
        if c.probe_size == "cheapest" and fitted:  # V(k) >= 0.2, as the probe count assumes
            V = {j: self._pvar(j) for j in range(2, k + 1)}
            k = min((j for j in V if V[j] >= 0.2), key=lambda j: j / V[j] + n - j, default=k)
        if not c.probe_if_cheaper:
            return k
        return k if cost(k) < n / max(self._pvar(n), 1e-6) else 0

    # ---------------------------------------------------------------- hooks
    def _next_request(self):
        c, t = self.config, self.table
        B = c.train_prompts
        if c.strata and self.strata_names is None:
            raise ValueError(
                f"strata={c.strata!r}: the pool's column was never given; call "
                "rollalloc.allocator.wire_pool_columns(allocator, dataset) (or set_pool_columns) "
                "before the first ask"
            )
        if self.ready:
            return None
        if self._probes:  # round 2: extend the probes that showed variance, fill with the rest
            return self._commit()
        self.n_probe = self._probe_size()  # this step's probes (0: full groups at once)
        slots = max(B - len(self._carry), 0)  # last step's surplus probes with variance first
        if c.select == "stream":  # (|C|,), and which of them to probe again (recheck)
            C, again = self._stream_window(slots)
        else:
            C = self._fill_window(slots) if c.fill else self.draw(self.C)
            again = np.zeros(len(C), dtype=bool)
        if self._carry:
            fresh = ~np.isin(C, [g.prompt_id for g in self._carry])
            C, again = C[fresh], again[fresh]
        post = self.posterior(C)
        m, k = post[0], post[1]
        score = self._scores(post, again)
        order = np.argsort(-score, kind="stable")
        if c.quota:  # each group its share of the slots, best first within it
            order = by_shares(self.stratum[C], order, slots)
        unseen = ((t.a[C] + t.b[C]) == 0) | again  # to probe
        ref = np.isin(C, self._refresh)  # (empty unless select="stream")
        R = order[ref[order]]  # probe_judged: one probe each, not counted in U or the probe round
        self.count("candidates", len(C))
        self.count("refresh_probes", len(R))
        U = int((unseen & ~ref)[order[:slots]].sum())
        if self._carry and not (self.n_probe and (U or len(R))):  # the carried probes and seen
            self._cand, self._cand_score = C[order], score[order]
            self._probes, self._carry = self._carry, []
            return self._commit()
        if self.n_probe and (U or len(R)):  # probe the unseen with n_probe each, more than U
            probe = order[(unseen & ~ref)[order]]
            budget = max(c.n * B - self.lo * (B - U), 0)  # for the unseen, the seen at lo each
            room = budget // self.n_probe  # probes the budget allows
            pv = max(self._pextend(self.n_probe), 0.2)  # the chance of a probe to vary
            want = int(np.ceil(U / pv))
            if self._judged.any():  # strata: each one's chance, by its group's prior
                pv_i = np.where(self._judged, self._pvar_post(self.n_probe), pv)[probe]
                want = int(np.searchsorted(np.cumsum(np.maximum(pv_i, 0.05)), U - 1e-9)) + 1
            if U and c.probes_fit and not c.probes_on_top:  # those expected to vary fit n each
                v_mean = float(np.mean(pv_i[:want])) if self._judged.any() else pv
                fit = budget / (self.n_probe + v_mean * (c.n - self.n_probe))
                room = min(room, max(int(fit), 1))
                U = min(U, room)
            P = np.concatenate([R, probe[: max(U, min(room, want))] if U else probe[:0]])
            rest = order[~unseen[order]]
            self._cand, self._cand_score = C[rest], score[rest]
            self._asked = (m[P], k[P])
            return self.make_request(C[P], self.n_probe, "pilot")
        pick = order[:B]
        self._asked = (m[pick], k[pick])
        self.count("unseen_chosen", U)
        short = self._dry and int((score[pick] >= _ELIGIBLE).sum()) < B  # fewer than B trainable
        return self.make_request(C[pick], self.sizes_for(m[pick], short=short), "rollout")

    def _fill_window(self, need: int) -> np.ndarray:
        """select="top", fill: draw the stream in eighths of `need` until the candidates hold `need`
        groups with reward variance in expectation, sum_i E_post V(p_i, n) >= need (at most
        window x B): the window widens where the pool is degenerate and narrows where it is not."""
        ids, got, drawn, repeats = [], 0.0, 0, 0
        chunk = max(1, -(-need // 8))  # an eighth of the batch: the window overshoots by less
        while got < need and drawn < self.C and repeats <= self.num_prompts:
            C = self.draw(min(chunk, self.C - drawn))
            if not len(C):
                break
            if ids:  # an epoch boundary brings back prompts drawn this step: skip them, go on
                fresh = ~np.isin(C, np.concatenate(ids))
                repeats += int((~fresh).sum())
                C = C[fresh]
                if not len(C):
                    continue
            drawn += len(C)
            self.posterior(C)
            got += float(self._pvar_post().sum())
            ids.append(C)
        return np.concatenate(ids) if ids else np.zeros(0, np.int64)

    def _stream_window(self, need: int) -> tuple[np.ndarray, np.ndarray]:
        """select="stream": draw the stream in chunks of `need` until about `need` trainable
        prompts (seen eligible ones, plus unseen ones times their chance to show variance in a
        probe; need = B less the probes carried from the last step) are in hand, at most
        window x B. Prompts drawn and not eligible are skipped for this epoch; none is drawn that
        the step will not look at. Returns the prompts and a mask of the skipped ones to probe
        again (recheck)."""
        c = self.config
        pv = max(self._pextend(self.n_probe), 0.2) if self.n_probe else 1.0
        ids, again = [], []  # again: per chunk, the mask of prompts to probe again
        refresh: list[np.ndarray] = []  # probe_judged: this step's (each probed alone)
        got, drawn = 0.0, 0
        while got < need and drawn < self.C:
            C = self.draw(min(need, self.C - drawn))  # chunks of `need`: B unless probes carried
            if ids:
                C = C[~np.isin(C, np.concatenate(ids))]
            if not len(C):
                break
            drawn += len(C)
            m = self.posterior(C)[0]  # the unseen: their (group's) prior
            seen, judged = self._seen, self._judged  # judged: unseen of a fitted group (strata)
            v = self._pvar_post()
            ok = self._trainable(v, m)
            vp = self._pvar_post(self.n_probe) if self.n_probe else np.ones(len(C))
            got += float(ok[seen].sum())
            r = np.zeros(len(C), dtype=bool)
            if c.recheck and self.n_probe and seen.any():  # re-probe a skipped one by its chance
                r[seen] = (v[seen] < c.tau) & (self.rng.random(int(seen.sum())) < vp[seen])
                got += float(vp[r].sum())
            if c.probe_judged:  # one unseen prompt of each written-off group not visited lately
                g = self.stratum[C]
                due = judged & ~ok & (self.step - self.gvisit[g] >= c.probe_judged)
                if refresh:  # a group once a step
                    due &= ~np.isin(g, self.stratum[np.concatenate(refresh)])
                i = np.flatnonzero(due)
                i = i[np.unique(g[i], return_index=True)[1]]  # the first of each group
                r[i] = True
                refresh.append(C[i])
                got += float((vp if self.n_probe else v)[i].sum())
            got += float((ok * vp)[judged].sum())  # judged as the seen are, by chance to vary
            got += pv * float((~seen & ~judged).sum())
            ids.append(C)
            again.append(r)
        self._dry = got < need  # the window ran out before enough trainable prompts: a dry step
        self._refresh = np.concatenate(refresh) if refresh else np.zeros(0, np.int64)
        if not ids:
            return np.zeros(0, np.int64), np.zeros(0, dtype=bool)
        return np.concatenate(ids), np.concatenate(again)

    def _commit(self):
        c, B, probes = self.config, self.config.train_prompts, self._probes
        if self._carry:  # last step's surplus probes first (stream order), then this step's
            probes, self._carry = list(self._carry) + list(probes), []
        if isinstance(probes, ToldGroups):  # this step's probes, as columns: no Group per probe
            pids, flat_mask = probes.prompt_ids, (probes.hi - probes.lo) <= ZERO_STD_TOL
            flat_mask = flat_mask | (probes.means > c.p_max)  # too easy: not extended
        else:  # last step's carried groups
            pids = np.array([g.prompt_id for g in probes], dtype=np.int64)
            flat_mask = np.array([g.zero_variance or g.mean > c.p_max for g in probes], dtype=bool)
        varied = np.flatnonzero(~flat_mask)
        post = self.posterior(pids[varied])
        ranked = varied[np.argsort(-self._scores(post), kind="stable")]
        seen = self._cand[: B - min(len(ranked), B)]
        flat_i = np.flatnonzero(flat_mask)[: B - min(len(ranked), B) - len(seen)]  # as they are
        kept = np.zeros(len(pids), dtype=bool)
        kept[ranked] = kept[flat_i] = True  # never drop a group with variance: carry it
        if isinstance(probes, ToldGroups):
            self.discard(probes, "probe_dropped", where=~kept)
        else:
            self.discard([probes[i] for i in np.flatnonzero(~kept).tolist()], "probe_dropped")
        keep = [probes[i] for i in ranked[:B].tolist()]
        self._carry = [probes[i] for i in ranked[B:].tolist()]
        flat = [probes[i] for i in flat_i.tolist()]
        self.count("unseen_chosen", len(keep) + len(flat))
        ok = len(keep) + int((self._cand_score[: len(seen)] >= _ELIGIBLE).sum())  # trainable
        if c.probes_on_top:  # the fillers are extended to n like the rest
            keep = keep + flat
        else:
            self._train(flat)  # as they are
        ids = np.array([g.prompt_id for g in keep] + seen.tolist(), dtype=np.int64)
        m, k = self.posterior(ids)[:2]
        have = np.array([g.size for g in keep] + [0] * len(seen), dtype=np.int64)
        if c.probes_on_top:  # the trained groups get n each; dropped probes were on top
            budget = c.n * len(ids)
        else:  # the step's n B, less what this step's probes spent, plus the kept probes' own
            budget = c.n * B - int(self.step_rollouts.get("pilot", 0)) + int(have.sum())
        N = self.sizes_for(m, budget, short=self._dry and ok < B)
        N = np.maximum(N, have)
        grow = N > have
        self._train([g for g, gr in zip(keep, grow[: len(keep)]) if not gr])
        self._probes = [g for g, gr in zip(keep, grow[: len(keep)]) if gr]
        self._cand, self._cand_score = np.zeros(0, np.int64), np.zeros(0)
        if not grow.any():
            return None
        self._asked = (m[grow], k[grow])
        phases = ["commit" if h else "rollout" for h in have[grow]]
        return self.make_request(ids[grow], (N - have)[grow], phases)

    def _on_results(self, request, groups):
        n = groups.counts.astype(np.float64)
        s = groups.means * n  # (P,) successes
        m, k = self._asked  # read at ask time, in request order
        ids = groups.prompt_ids
        if request.phases and request.phases[0] == "pilot":  # round 1: hold the probes
            self._update(ids, n, s, m, k, fit=False)
            self._probes = groups  # decided on as columns in _commit
            return
        ext = np.array([ph == "commit" for ph in request.phases], dtype=bool)
        self._update(ids[~ext], n[~ext], s[~ext], m[~ext], k[~ext], fit=True)
        if ext.any():  # the probe's posterior already has its rollouts: add the extension's
            self._update(ids[ext], n[ext], s[ext], m[ext], k[ext], fit=False)
        probe = {g.prompt_id: g for g in self._probes}
        self._probes = []
        self._train([probe[g.prompt_id].union(g) if g.prompt_id in probe else g for g in groups])

    def _held_groups(self):
        return list(self._probes) + list(self._carry)

    def _step_extra(self):
        A, B = self.prior()
        return {
            "drift": self.D,
            "kappa": self.kappa,
            "prior_mean": A / (A + B),
            "prior_strength": A + B,
        }

    def _extra_state(self):
        return {
            "D": self.D,
            "kappa": self.kappa,
            "ema": list(self.ema),
            "sema": self.sema.tolist(),
            "gvisit": self.gvisit.tolist(),
            "strata_names": self.strata_names or self._saved_names or [],
            "moments": "p2",  # ema[2], sema[:, 2]: E[p^2] (before: E[(s/n)^2], at last_n)
            "probes": groups_to_state(self._probes),
            "carry": groups_to_state(self._carry),
            "cand": self._cand,
            "cand_score": self._cand_score,
            "dry": self._dry,
        }

    def _load_extra_state(self, state):
        self.D, self.kappa = float(state["D"]), float(state["kappa"])
        self.ema = [float(v) for v in state["ema"]]
        if "sema" in state:  # absent in checkpoints before strata
            self.sema = np.asarray(state["sema"], dtype=np.float64).reshape(-1, 4).copy()
            self.gvisit = np.asarray(  # absent before probe_judged: every group visited at 0
                state.get("gvisit", np.zeros(len(self.sema))), dtype=np.int64
            ).copy()
            self._saved_names = [str(v) for v in state.get("strata_names", [])] or None
            self._check_groups()  # if the columns were set first
        if state.get("moments") != "p2":  # E[(s/n)^2] of groups of about last_n: to E[p^2]
            n = float(state["last_n"])
            self.ema[2] = (n * self.ema[2] - self.ema[1]) / max(n - 1, 1)
            self.sema[:, 2] = (n * self.sema[:, 2] - self.sema[:, 1]) / max(n - 1, 1)
        self._probes = groups_from_state(state["probes"])
        self._carry = groups_from_state(state["carry"])
        self._cand = np.asarray(state["cand"], dtype=np.int64).copy()
        self._cand_score = np.asarray(state["cand_score"], dtype=np.float64).copy()
        self._dry = bool(state.get("dry", False))  # absent in checkpoints before resize_short
