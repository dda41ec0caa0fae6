"""A group: the rollouts of one prompt in one step, and the ways the allocator holds groups.

The base class makes them in `tell`; strategies decide on them (rollalloc.allocator).

    Group          one prompt's rollouts (handles, rewards, phases, tokens, successes) and the
                   summary of its successes (mean, lo, hi, std); pilot ∪ commit is `Group.union`
    ToldGroups     the groups of one told request, as columns (what `_on_results` receives)
    groups_to_state / groups_from_state   a list of groups as state arrays and back
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from rollalloc.metrics import ZERO_STD_TOL


class Group:
    """Rollouts of one prompt, possibly from several requests (pilot + commit).

    Summary statistics (mean, lo, hi, std of the *successes*: the signal strategies decide on) are
    computed once, vectorised, when the rollouts are told, so strategies decide on them without
    touching the arrays again. `rewards` are what advantages are computed from."""

    __slots__ = ("prompt_id", "step", "stat", "mean", "lo", "hi", "std", "_n", "_parts", "_arrays")

    def __init__(
        self,
        prompt_id,
        handles,
        rewards,
        phases,
        tokens,
        step,
        stat=0.0,
        summary=None,
        successes=None,
    ):
        self.prompt_id = prompt_id
        self.step = step  # step whose request generated the (first) rollouts
        self.stat = stat  # strategy's sort key (Pilot-Commit: pilot success std)
        self._parts: tuple[Group, ...] = ()  # a union keeps its parts: concatenated on demand
        # (handles (n,) int64, rewards (n,) float64, phases (n,) int8 into types.PHASES,
        #  tokens (n,) int64, 0 where unknown, successes (n,) float64 in [0, 1])
        successes = rewards if successes is None else successes
        self._arrays = (handles, rewards, phases, tokens, successes)
        self._n = len(handles)
        if summary is None:
            x = successes
            summary = (float(x.mean()), float(x.min()), float(x.max()), float(x.std()))
        self.mean, self.lo, self.hi, self.std = summary

    def _array(self, k: int) -> np.ndarray:
        if self._arrays is None:
            leaves = self.leaves()
            self._arrays = tuple(np.concatenate([g._arrays[i] for g in leaves]) for i in range(5))
        return self._arrays[k]

    def leaves(self) -> list[Group]:
        """The told groups this one is made of (itself, or the parts of a union, in order)."""
        if not self._parts:
            return [self]
        return [leaf for part in self._parts for leaf in part.leaves()]

    handles = property(lambda self: self._array(0))
    rewards = property(lambda self: self._array(1))
    phases = property(lambda self: self._array(2))
    tokens = property(lambda self: self._array(3))
    successes = property(lambda self: self._array(4))

    @property
    def size(self) -> int:
        return self._n

    @property
    def zero_variance(self) -> bool:
        return self.hi - self.lo <= ZERO_STD_TOL

    def union(self, other: Group) -> Group:
        """This group followed by `other`'s rollouts of the same prompt (pilot ∪ commit)."""
        n1, n2 = self.size, other.size
        mean = (n1 * self.mean + n2 * other.mean) / (n1 + n2)
        ex2 = (n1 * (self.std**2 + self.mean**2) + n2 * (other.std**2 + other.mean**2)) / (n1 + n2)
        g = Group.__new__(Group)
        g.prompt_id, g.step, g.stat = self.prompt_id, self.step, self.stat
        g.mean, g.lo, g.hi = mean, min(self.lo, other.lo), max(self.hi, other.hi)
        g.std = max(ex2 - mean**2, 0.0) ** 0.5
        g._n, g._parts, g._arrays = n1 + n2, (self, other), None
        return g


class ToldGroups(Sequence):
    """The groups of one told request, in request order, held as columns.

    Strategies may decide on the per-group arrays (`prompt_ids`, `means`, `lo`, `hi`, `std`,
    `phases`) without making a Group object per prompt; indexing or iterating makes them.
    `mass` is (m_c, m_w), (P,) each, the probability of the distinct correct and wrong completions
    of each group (rollalloc.likelihood), when the outcome carried log-probs; else None."""

    mass: tuple[np.ndarray, np.ndarray] | None = None

    def __init__(self, step, prompt_ids, starts, counts, arrays, summary, phases):
        self.step = step
        self.prompt_ids = prompt_ids  # (P,) int64
        self.starts, self.counts = starts, counts  # (P,), (P,)
        self._arrays = arrays  # handles, rewards, phases, tokens, successes: (R,) each, grouped
        self.means, self.lo, self.hi, self.std = summary  # (P,) each, of the successes
        self.phases = phases  # (P,) phase name of each group
        self._cache: dict[int, Group] = {}
        # python scalars for Group objects made one at a time
        self._py = [x.tolist() for x in (prompt_ids, starts, counts, *summary)]

    def __len__(self) -> int:
        return len(self.prompt_ids)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        g = self._cache.get(i)
        if g is None:
            pid, starts, counts, means, lo, hi, std = self._py
            a = starts[i]
            b = a + counts[i]
            h, r, ph, t, x = self._arrays
            summary = (means[i], lo[i], hi[i], std[i])
            g = Group(pid[i], h[a:b], r[a:b], ph[a:b], t[a:b], self.step, 0.0, summary, x[a:b])
            self._cache[i] = g
        return g

    def where(self, mask) -> list[Group]:
        """The groups where `mask` (P,) is true."""
        return [self[i] for i in np.flatnonzero(mask).tolist()]

    def handles_where(self, mask) -> list[np.ndarray]:
        """The handle arrays of the groups where `mask` is true, without making Group objects."""
        h = self._arrays[0]
        return [
            h[a : a + n] for a, n in zip(self.starts[mask].tolist(), self.counts[mask].tolist())
        ]


def groups_to_state(groups: list[Group]) -> dict[str, Any]:
    """Groups as flat state arrays (JSON + numpy: a strategy's buffer in `_extra_state`)."""
    sizes = np.array([g.size for g in groups], dtype=np.int64)

    def cat(attr: str, dtype: Any) -> np.ndarray:
        if not groups:
            return np.zeros(0, dtype=dtype)
        return np.concatenate([getattr(g, attr) for g in groups]).astype(dtype)

    return {
        "prompt_ids": np.array([g.prompt_id for g in groups], dtype=np.int64),
        "sizes": sizes,
        "handles": cat("handles", np.int64),
        "rewards": cat("rewards", np.float64),
        "phases": cat("phases", np.int8),
        "tokens": cat("tokens", np.int64),
        "successes": cat("successes", np.float64),
        "steps": np.array([g.step for g in groups], dtype=np.int64),
        "stats": np.array([g.stat for g in groups], dtype=np.float64),
    }


def groups_from_state(s: dict[str, Any]) -> list[Group]:
    """The groups `groups_to_state` saved."""
    bounds = np.concatenate([[0], np.cumsum(s["sizes"])]).astype(np.int64)
    successes = s.get("successes", s["rewards"])  # states before the success signal: the reward
    out = []
    for i, pid in enumerate(np.asarray(s["prompt_ids"])):
        a, b = bounds[i], bounds[i + 1]
        out.append(
            Group(
                int(pid),
                np.array(s["handles"][a:b], dtype=np.int64),
                np.array(s["rewards"][a:b], dtype=np.float64),
                np.array(s["phases"][a:b], dtype=np.int8),
                np.array(s["tokens"][a:b], dtype=np.int64),
                int(s["steps"][i]),
                float(s["stats"][i]),
                successes=np.array(successes[a:b], dtype=np.float64),
            )
        )
    return out


class TwoPhase:
    """Groups made in two phases (Pilot-Commit: pilot, commit; SPEED-RL: screen, continue).

    A first look at new prompts with a few rollouts; the strategy holds the groups it keeps; a
    later request gives each of them more rollouts, in the same request as the next first looks
    (binding: one inference call serves both phases); the trained group is first ∪ second:

        request   [second phase of the held groups chosen] + [first phase of new prompts]
        told      second-phase groups -> joined(): first ∪ second, to train
                  first-phase groups  -> the strategy's verdict: discard, or hold for a second
    """

    def __init__(self, first: str, second: str):
        self.first, self.second = first, second  # the phase tags
        self.waiting: dict[int, Group] = {}  # prompt id -> its first-phase group, second asked

    def request_parts(
        self, continued: list[Group], n_second: int, new_ids, n_first: int
    ) -> tuple[list[int], list[int], list[str]]:
        """(prompt ids, rollouts, phases) of one request: n_second more rollouts of each group in
        `continued` (they wait here until told), then n_first of each prompt in `new_ids`."""
        self.waiting.update((g.prompt_id, g) for g in continued)
        ids = [g.prompt_id for g in continued] + list(new_ids)
        counts = [n_second] * len(continued) + [n_first] * len(new_ids)
        phases = [self.second] * len(continued) + [self.first] * len(new_ids)
        return ids, counts, phases

    def joined(self, groups: ToldGroups) -> tuple[list[Group], np.ndarray]:
        """The told second-phase groups joined to their first phase (first ∪ second, in request
        order), and the mask (P,) of the told first-phase groups, which await a verdict."""
        is_second = np.array(groups.phases) == self.second  # (P,) groups come in request order
        done = [self.waiting.pop(g.prompt_id).union(g) for g in groups.where(is_second)]
        return done, ~is_second
