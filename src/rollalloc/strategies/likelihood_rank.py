"""likelihood-rank: rank each step's window of prompts by the GRPO signal a group would carry at the
pass rate that the probabilities of the prompt's sampled completions give; train the best B.

    p_hat = m_c + u r           from a group (rollalloc.likelihood): m_c, m_w the probability of its
                                distinct correct and wrong completions, u = 1 - m_c - m_w, r the
                                success rate of the mass never sampled: (s + 1) / (n + 2) with
                                unseen="rate"; 0 with unseen="wrong" (one correct answer: p_hat = m_c
                                once it is sampled; no success: E[p | p ~ U(0, u), all n missed])
    p_i = sigmoid(logit p_hat_i + D - D_i)      its last estimate, shifted by the pool's drift since
    S(p, n) = E_{k ~ Bin(n, p)} G(k; n)         expected GRPO signal of a group of n (asymmetry
                                beta > 0: G(k; n) (2 (1 - k/n))^beta, rare successes count more)

Each step (B = train_prompts groups of n, every group trained):
  1. C = window x B candidates, the next of the epoch stream (each prompt a candidate once an epoch).
  2. probe = 0: a seen candidate scores S(p_i, n); one never seen, the mean score of the seen
     candidates (no candidate seen: all alike; strata=COLUMN: the mean S(p_hat, n) of the seen
     prompts of its value, pool-wide). The B best get n rollouts, equal scores in stream order.
     quota (with strata): value g gets its share of the B, sum over its candidates of f_g, f_g an
     EMA of the share of its trained groups with reward variance (>= 0.05: a re-check), and its
     best by S: one ranking across values would starve those whose p is far from 1/2.
     fill: C is not fixed: the stream is drawn in eighths of B until sum_i f_g(i) >= B (the
     candidates hold B groups with variance in expectation; without strata f is the pool's EMA),
     at most window x B: wide where the pool is degenerate, narrow where it is not.
     probe = k: round 1 looks at every candidate with k rollouts; a candidate's p is the look's
     p_hat where it found a success (unseen="wrong") or never saw the prompt, else min(p_i, u)
     ("rate": c p_hat + (1 - c) p_i, c = m_c + m_w, within [m_c, 1 - m_w]); round 2 gives the
     B best by S(p, n) n - k more rollouts, trained on look + commit; the other looks are dropped.
  3. Told: p_hat_i, c_i = m_c + m_w where p_hat is exact (unseen="wrong", a success), else 0, and
     D_i <- D of every trained group (look + commit: each mass the larger of the two parts'); the
     revisited move the drift, r_i = logit p_hat_i(new) - (logit p_hat_i(old) + D - D_i),
     D <- D + sum_i w_i r_i / sum_i w_i,  w_i = c_i(old) c_i(new)      (short answers: c ~ 1).

Without log-probs, or with long chains of thought (c ~ 0, unseen="rate"), p_hat is the last group's
smoothed rate and the drift stays 0. Nothing is evicted; a prompt left out is a candidate again
next epoch, at its old estimate shifted by the drift. docs/likelihood-rank.md.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rollalloc.allocator import Allocator, AllocatorConfig, by_shares, register
from rollalloc.groups import groups_from_state, groups_to_state
from rollalloc.likelihood import UNSEEN, pass_rate_estimate
from rollalloc.strategies.posterior_signal import signal_table
from rollalloc.validate import boolean, in_range, one_of, positive_int

_GRID = np.linspace(0.0, 1.0, 1025)  # p grid of the signal table
_P_CLIP = 1e-3  # logits of p_hat in [logit 0.001, logit 0.999]: a 0/n group is not "never"
_VARY_EMA = 0.05  # quota: weight of one trained group in its value's f_g
_VARY_MIN = 0.05  # quota: f_g's floor, so that a value with no variance yet is still re-checked


def _ema_by(f: np.ndarray, g: np.ndarray, x: np.ndarray) -> np.ndarray:
    """f_v <- f_v + _VARY_EMA (x_j - f_v) for each told group j in order, v = g_j: (V,) f after
    them, vectorised (each x_j decays by the groups of its value told after it)."""
    m = np.bincount(g, minlength=len(f))
    by = np.argsort(g, kind="stable")
    later = np.empty(len(g), dtype=np.int64)  # groups of its value told after it
    later[by] = m[g[by]] - 1 - (np.arange(len(g)) - (np.cumsum(m) - m)[g[by]])
    w = _VARY_EMA * (1.0 - _VARY_EMA) ** later * x
    return (1.0 - _VARY_EMA) ** m * f + np.bincount(g, w, len(m))


def _logit(p: np.ndarray) -> np.ndarray:
    p = np.clip(p, _P_CLIP, 1.0 - _P_CLIP)
    return np.log(p) - np.log1p(-p)


@dataclass
class LikelihoodRankConfig(AllocatorConfig):
    n: int = 16
    """Rollouts per group (GRPO's n): a step spends n x train_prompts."""
    window: float = 1.25
    """Candidates per step = window x train_prompts, rounded; the 1 - 1/window of them with the
    least expected signal are left for the next epoch (1: GRPO's prompts, in score order)."""
    unseen: str = "rate"
    """The success rate of the probability mass no rollout sampled: "rate", the group's smoothed
    rate (any task); "wrong", none of it is correct: for tasks with one correct completion (an
    exact short answer, a label), where p_hat is then near exact (rollalloc.likelihood)."""
    drift: bool = True
    """Shift old estimates by the pool's logit drift since they were made (step 3)."""
    probe: int = 0
    """Rollouts of a first look at every candidate (round 1), before choosing; the chosen get
    n - probe more (round 2) and train on all n, the others' looks are dropped. 0: no look, rank by
    the stored estimates. With short answers a look of 1 gives the current p of every candidate
    whose look is correct (its probability), for (window - 1) x train_prompts x probe dropped
    rollouts a step."""
    strata: str = ""
    """A task column (e.g. `level`): a candidate never seen scores the mean S(p_hat, n) of the
    seen prompts of its value (pool-wide; the window's seen mean while its value has none), as
    posterior-signal's strata give an unseen prompt its group's prior. Empty: the window's mean."""
    quota: bool = False
    """With strata: each value of the column gets its share of the step's groups, its candidates
    weighted by f_g, the share of the value's trained groups that had reward variance (an EMA,
    at least 0.05), and the best by S within it. One ranking across values starves the values
    whose p sits far from 1/2 however learnable they are (docs/likelihood-rank.md)."""
    fill: bool = False
    """Draw candidates until they hold train_prompts groups with reward variance in expectation,
    sum of f (the EMA of quota, per strata value, or the pool's), at most window x train_prompts:
    the window widens on a degenerate pool and narrows on an informative one. Set window to the
    cap you allow (4 measured): at the default 1.25 fill barely widens it."""
    asymmetry: float = 0.0
    """beta in [0, 8]: rank by S_beta(p, n), each k of n successes weighted (2 (1 - k/n))^beta, so
    a group of rare successes outranks its mirror of rare failures. What a real group teaches the
    held-out set is skewed that way (docs/testbed.md, "Which groups teach": beta ~ 1 on the default
    testbed after 32 GRPO steps, ~0 at its warm start, 1.55 on the paper testbed). 0: GRPO's
    symmetric signal. Measured, not adopted (docs/likelihood-rank.md, "Ranking by what a group
    teaches")."""
    likelihoods: bool = True
    """Read the completions' log-probs when the outcome has them; False: rank by the last group's
    smoothed rate only, as on tasks with long chains of thought (an ablation)."""

    @classmethod
    def group_split(cls, group_size: int) -> dict[str, int]:
        return {"n": group_size}

    def pool_columns(self) -> tuple[str, ...]:
        return (self.strata,) if self.strata else ()

    def validate(self, num_prompts: int) -> None:
        super().validate(num_prompts)
        positive_int(self, "n", 2)
        ok = isinstance(self.window, (int, float)) and not isinstance(self.window, bool)
        if not (ok and 1.0 <= self.window <= 1e4):
            raise ValueError(f"window must be a number in [1, 10000], got {self.window!r}")
        boolean(self, "drift")
        boolean(self, "likelihoods")
        boolean(self, "quota")
        boolean(self, "fill")
        in_range(self, "asymmetry", 0.0, 8.0)
        if self.quota and not self.strata:
            raise ValueError("quota=True shares the step among the strata values: set strata too")
        positive_int(self, "probe", 0)
        if not isinstance(self.strata, str):
            raise ValueError(f"strata must be a column name (a string), got {self.strata!r}")
        if self.probe >= self.n:
            raise ValueError(f"probe must be below n ({self.n}), got {self.probe}")
        one_of(self, "unseen", UNSEEN)


@register
class LikelihoodRank(Allocator):
    name = "likelihood-rank"
    Config = LikelihoodRankConfig
    reads_mass = True

    @classmethod
    def example_config(cls):
        return {"n": 4}

    def _init_strategy(self) -> None:
        c, t = self.config, self.table
        self.C = min(max(round(c.window * c.train_prompts), 1), self.num_prompts)
        self.S = signal_table(c.n, _GRID, c.asymmetry)[c.n]  # S_beta(p, n) on the grid of p
        t.add_column("p_hat", np.float32, -1.0)  # -1: never seen
        t.add_column("cover", np.float32, 0.0)  # c_i: m_c + m_w of its last group where exact
        t.add_column("d", np.float32, 0.0)  # D_i
        self.D = 0.0
        self.coverage = 0.0  # mean c_i of the step's groups: ~1 short answers, ~0 without log-probs
        self._probes: list = []  # probe > 0: the step's looks between its two rounds
        self._probe_mass = np.zeros((2, 0))  # (2, P) their m_c, m_w
        self._unseen = c.unseen  # the probes' rule ("rate" where they had no log-probs)
        self.group: np.ndarray | None = None  # (N,) strata: each prompt's value of the column
        self._gsum: np.ndarray | None = None  # (G, 2) strata: sum of S(p_hat, n), seen count
        self._vary: np.ndarray | None = None  # (G,) quota: f_g, 1 until a value has groups
        self._fpool = 1.0  # fill without strata: the pool's f

    def set_pool_columns(self, columns) -> None:
        labels = self.pool_column(columns, self.config.strata)
        self.group = np.unique(np.asarray(labels, dtype=str), return_inverse=True)[1]
        G = int(self.group.max()) + 1 if len(self.group) else 1
        if self._gsum is not None and len(self._gsum) != G:  # (a resumed one is kept)
            self._gsum = None  # rebuilt from the table at the next ask
        if self._vary is None or len(self._vary) != G:
            self._vary = np.ones(G)

    def _group_means(self, ids: np.ndarray) -> np.ndarray:
        """(P,) strata: the mean S(p_hat, n) of the seen prompts of each one's value; NaN where
        that value has none seen."""
        t = self.table
        if self._gsum is None:  # after set_pool_columns or a resume: once, O(pool)
            seen = t.p_hat >= 0
            G = int(self.group.max()) + 1 if len(self.group) else 1
            S = np.interp(t.p_hat[seen].astype(np.float64), _GRID, self.S)
            self._gsum = np.stack(
                [
                    np.bincount(self.group[seen], weights=S, minlength=G),
                    np.bincount(self.group[seen], minlength=G).astype(np.float64),
                ],
                axis=1,
            )
        total, count = self._gsum[self.group[ids]].T
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(count > 0, total / count, np.nan)

    def _mass(self, groups) -> tuple[np.ndarray, np.ndarray, str]:
        """(m_c, m_w, unseen) of told groups; zeros and "rate" without log-probs."""
        mass = groups.mass if self.config.likelihoods else None
        if mass is None:
            z = np.zeros(len(groups))
            return z, z, "rate"
        return mass[0], mass[1], self.config.unseen

    def _stale(self, ids: np.ndarray) -> np.ndarray:
        """(P,) the stored estimates, shifted by the drift since (step 3); NaN where never seen."""
        t = self.table
        shift = (self.D - t.d[ids]) if self.config.drift else 0.0
        p = 1.0 / (1.0 + np.exp(-(_logit(t.p_hat[ids].astype(np.float64)) + shift)))
        return np.where(t.p_hat[ids] >= 0, p, np.nan)

    def _best(self, p: np.ndarray, ids: np.ndarray) -> np.ndarray:
        """Positions of the train_prompts largest S(p_i, n); NaN (never seen) at the seen mean
        (strata: of its value's seen prompts)."""
        seen = ~np.isnan(p)
        score = np.interp(np.nan_to_num(p), _GRID, self.S)  # (C,) S(p_i, n)
        mean = np.full(len(p), score[seen].mean() if seen.any() else 0.0)
        if self.config.strata:
            g = self._group_means(ids)
            mean = np.where(np.isnan(g), mean, g)
        score = np.where(seen, score, mean)
        k = min(self.config.train_prompts, len(p))
        order = np.argsort(-score, kind="stable")  # equal scores: stream order
        if self.config.quota:
            f = np.maximum(self._vary[self.group[ids]], _VARY_MIN)
            order = by_shares(self.group[ids], order, k, weight=f)
        return order[:k]

    def _next_request(self):
        if self.ready:
            return None
        c = self.config
        if c.strata and self.group is None:  # before any rollout is asked for
            raise ValueError(
                f"strata={c.strata!r}: the pool's column was never given; call "
                "rollalloc.allocator.wire_pool_columns(allocator, dataset) before the first ask"
            )
        if self._probes:  # round 2: the best probed candidates get the rest of their group
            return self._commit()
        cand = self._fill() if c.fill else self.draw(self.C)  # (C,)
        if c.probe:  # round 1: a look at every candidate
            return self.make_request(cand, c.probe, "pilot")
        chosen = cand[self._best(self._stale(cand), cand)]
        self.count("not_chosen", len(cand) - len(chosen))
        return self.make_request(chosen, c.n, "rollout")

    def _f(self, ids: np.ndarray) -> np.ndarray:
        """(P,) each prompt's chance that its group varies: its value's f_g, or the pool's f."""
        if self._vary is not None and self.group is not None:
            return np.maximum(self._vary[self.group[ids]], _VARY_MIN)
        return np.full(len(ids), max(self._fpool, _VARY_MIN))

    def _fill(self) -> np.ndarray:
        """fill: the stream in eighths of B until sum_i f_i >= B (so at least B), at most C."""
        B = min(self.config.train_prompts, self.C)
        ids, got, drawn = [], 0.0, 0
        while got < B and drawn < self.C:  # (f <= 1: at least B)
            also = np.concatenate(ids) if ids else None  # kept out of a new epoch's start
            C = self.draw(min(max(1, -(-B // 8)), self.C - drawn), also=also)
            if not len(C):
                break
            drawn += len(C)
            got += float(self._f(C).sum())
            ids.append(C)
        return np.concatenate(ids) if ids else np.zeros(0, np.int64)

    def _commit(self):
        c, probes = self.config, self._probes
        ids = np.array([g.prompt_id for g in probes], dtype=np.int64)
        k = np.array([g.size for g in probes], dtype=np.float64)
        s = np.array([g.mean for g in probes]) * k
        m_c, m_w = self._probe_mass
        stale = self._stale(ids)  # NaN: never seen
        fresh = pass_rate_estimate(m_c, m_w, s, k, self._unseen)
        if self._unseen == "wrong":  # one correct answer: exact once seen, else p <= u
            u = np.maximum(1.0 - m_c - m_w, 0.0)
            p = np.where((s > 0) | np.isnan(stale), fresh, np.minimum(np.nan_to_num(stale), u))
        else:  # the look where it covers the mass, the stale estimate elsewhere
            cov = np.minimum(m_c + m_w, 1.0)
            p = np.where(np.isnan(stale), fresh, cov * fresh + (1 - cov) * np.nan_to_num(stale))
            p = np.clip(p, m_c, np.maximum(1.0 - m_w, m_c))
        order = self._best(p, ids)
        keep = np.zeros(len(probes), dtype=bool)
        keep[order] = True
        self.discard([g for g, kp in zip(probes, keep) if not kp], "probe_dropped")
        self._probes = [probes[i] for i in order.tolist()]
        self._probe_mass = self._probe_mass[:, order]
        return self.make_request(ids[order], c.n - c.probe, "commit")

    def _on_results(self, request, groups):
        m_c, m_w, unseen = self._mass(groups)
        n = groups.counts.astype(np.float64)
        s = groups.means * n
        if request.phases[0] == "pilot":  # round 1: hold the looks
            self._probes = [groups[i] for i in range(len(groups))]
            self._probe_mass = np.stack([m_c, m_w])
            self._unseen = unseen
            return
        if request.phases[0] == "commit":  # look u commit; the union's mass is at least either's
            pm_c, pm_w = self._probe_mass
            k = np.array([g.size for g in self._probes], dtype=np.float64)
            ks = np.array([g.mean for g in self._probes]) * k
            m_c, m_w, n, s = np.maximum(m_c, pm_c), np.maximum(m_w, pm_w), n + k, s + ks
            groups = [g.union(h) for g, h in zip(self._probes, groups)]
            self._probes, self._probe_mass = [], np.zeros((2, 0))
        self._update(
            np.array([g.prompt_id for g in groups], dtype=np.int64), m_c, m_w, s, n, unseen
        )
        flat = np.array([g.zero_variance for g in groups], dtype=bool)
        if len(flat):  # f: the pool's (fill without strata), each value's (quota, fill)
            varied = (~flat).astype(np.float64)
            pool = np.zeros(len(flat), dtype=np.int64)
            self._fpool = float(_ema_by(np.array([self._fpool]), pool, varied)[0])
            if self._vary is not None:
                g = self.group[np.array([x.prompt_id for x in groups], dtype=np.int64)]
                self._vary = _ema_by(self._vary, g, varied)
        self.count("zero_variance", int(flat.sum()))
        self.train(groups)

    def _update(self, pid, m_c, m_w, s, n, unseen) -> None:
        """Step 3: the stored estimates of the trained groups, and the drift."""
        c, t = self.config, self.table
        p_new = pass_rate_estimate(m_c, m_w, s, n, unseen)  # (P,)
        # drift weight: the mass seen where p_hat is exact (unseen="wrong" with a success); 0
        # elsewhere: a noisy estimate, chosen for being high, would bias D (regression to the mean)
        exact = (s > 0) if unseen == "wrong" else np.zeros(len(pid), dtype=bool)
        cover = np.where(exact, np.minimum(m_c + m_w, 1.0), 0.0)  # (P,)
        old = t.p_hat[pid] >= 0
        w = t.cover[pid][old] * cover[old]
        if c.drift and w.sum() > 1e-9:
            pred = _logit(t.p_hat[pid][old].astype(np.float64)) + self.D - t.d[pid][old]
            r = _logit(p_new[old]) - pred
            self.D += float((w * r).sum() / w.sum())
        if self._gsum is not None:  # strata: the values' sums follow the table
            G = len(self._gsum)
            was = t.p_hat[pid] >= 0
            S_old = np.interp(t.p_hat[pid][was].astype(np.float64), _GRID, self.S)
            g = self.group[pid]
            S_new = np.interp(p_new.astype(np.float32).astype(np.float64), _GRID, self.S)
            self._gsum[:, 0] += np.bincount(g, weights=S_new, minlength=G)
            self._gsum[:, 0] -= np.bincount(g[was], weights=S_old, minlength=G)
            self._gsum[:, 1] += np.bincount(g[~was], minlength=G)
        t.p_hat[pid] = p_new
        t.cover[pid] = cover
        t.d[pid] = self.D
        self.coverage = float(np.mean(np.minimum(m_c + m_w, 1.0))) if len(pid) else 0.0

    def _held_groups(self):
        return list(self._probes)

    def _step_extra(self) -> dict[str, float]:
        return {"drift": self.D, "coverage": self.coverage}

    def _extra_state(self) -> dict:
        return {  # asked before a checkpoint, logged after
            "D": self.D,
            "coverage": self.coverage,
            "probes": groups_to_state(self._probes),
            "probe_mass": self._probe_mass,
            "unseen": self._unseen,
            "vary": self._vary,
            "fpool": self._fpool,
            "gsum": self._gsum,  # kept, not recounted: a recount differs in the last bits, and a
        }  # seen prompt can tie its value's mean exactly (all of a value's p_hat alike)

    def _load_extra_state(self, state: dict) -> None:
        self.D, self.coverage = float(state["D"]), float(state["coverage"])
        gsum = state.get("gsum")  # (absent from states saved before: recounted at the next ask)
        self._gsum = None if gsum is None else np.asarray(gsum, dtype=np.float64).copy()
        self._probes = groups_from_state(state["probes"])
        self._probe_mass = np.asarray(state["probe_mass"], dtype=np.float64).reshape(2, -1).copy()
        self._unseen = str(state["unseen"])
        self._fpool = float(state.get("fpool", 1.0))  # (absent from states saved before fill)
        vary = state.get("vary")  # absent from states saved before quota: keep set_pool_columns'
        if vary is not None:
            self._vary = np.asarray(vary, dtype=np.float64).copy()
