"""The Allocator: ask/tell/batch/state for every strategy, and the options every strategy has.

A strategy subclasses `Allocator`, sets `name` and `Config` (a dataclass deriving `AllocatorConfig`)
and implements two hooks; the base class does everything that must be the same for all of them
(validation of `tell`, exact accounting by phase, handles, statistics, the epoch stream, state):

    _next_request() -> Request | None   the next generation pass of this step, None when the batch
                                        is complete: `self.make_request(ids, n, phase)` of prompts
                                        from the epoch stream, `self.draw(k)`.
    _on_results(request, groups)        the groups of a told request (ToldGroups), in request
                                        order: decide on each.
  optional:
    _take_batch() -> list[Group]        the groups trained this step (default: all of `ready`)
    _after_step()                       after a batch (Pilot-Commit: buffer staleness)
    _on_epoch_end()                     when the stream wraps (Pilot-Commit: clear the buffer)
    _extra_state() / _load_extra_state(state)    strategy state beyond the table's columns
    _held_groups() -> list[Group]       groups kept across requests (checked by check_handles())
    _step_extra() -> dict               strategy values for StepStats.extra (mu, buffer size, ...)

A hook decides, the base class applies. Every told group gets one verdict, given to the base class:

    self.train(groups, reason=None)     into this step's batch (`self.ready`, in order)
    self.hold(groups, reason=None)      kept by the strategy for later (its buffer, its queue)
    self.discard(groups, reason)        dropped: handles released, rollouts counted as discarded
    self.count(reason, n)               any other decision counted in StepStats.decisions

and the base class keeps the batch, the live handles and the accounting; strategies read `ready`,
`round` and `step_rollouts` and never touch the base class's private (`_`) attributes.

The stream: each epoch is a seeded permutation of the non-evicted prompts; `draw(k)` hands out the
next k, starting the next epoch when one runs out. Prompts DEFERRED in an epoch become ACTIVE again at
its end. Every step is O(batch); only an epoch boundary touches the whole pool.

`AllocatorConfig` / `RoundsConfig` live in rollalloc.allocator_config, `Group` and `ToldGroups` in
rollalloc.groups, the registry in rollalloc.registry, the checks of config fields in
rollalloc.validate; this module re-exports what was imported from it before.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from rollalloc.allocator_config import AllocatorConfig, RoundsConfig, config_to_dict
from rollalloc.groups import Group, ToldGroups, groups_from_state, groups_to_state
from rollalloc.likelihood import MASS_TOL, sampled_mass
from rollalloc.metrics import effective_prompt_ratio, mean_group_reward_var
from rollalloc.registry import (
    REGISTRY,
    available_strategies,
    get_strategy,
    make_allocator,
    register,
)
from rollalloc.state import ACTIVE, DEFERRED, EVICTED, PromptTable
from rollalloc.types import PHASES, Outcome, Request, StepStats, TrainBatch

__all__ = [  # with the names of rollalloc.groups and rollalloc.registry imported from here before
    "REGISTRY",
    "Allocator",
    "AllocatorConfig",
    "Group",
    "MaxRoundsError",
    "PoolExhaustedError",
    "RoundsConfig",
    "STRATEGY_HOOKS",
    "ToldGroups",
    "available_strategies",
    "config_to_dict",
    "get_strategy",
    "groups_from_state",
    "groups_to_state",
    "make_allocator",
    "register",
    "wire_pool_columns",
]

STATE_VERSION = 1
PHASE_CODE = {p: i for i, p in enumerate(PHASES)}


def wire_pool_columns(allocator: Allocator, table: Any) -> None:
    """Give `allocator` the task columns it reads (`pool_columns()`, e.g. posterior-signal's
    strata) from `table`, one value per pool prompt: a mapping of columns (the trainer's
    task.train), a Hugging Face Dataset (TRL) or verl's RLHFDataset (its `dataframe`). A dotted
    name reads a field of a dict column: verl keeps metadata in `extra_info` (`extra_info.level`)."""
    names = allocator.pool_columns()
    if not names:
        return
    table = getattr(table, "dataframe", table)  # verl's RLHFDataset wraps a Dataset
    have = list(table.keys()) if hasattr(table, "keys") else list(table.column_names)
    columns = {}
    for name in names:
        head, _, field = name.partition(".")
        if head not in have:
            raise ValueError(
                f"{allocator.name}: the pool has no column {head!r} (its columns: {sorted(have)})"
            )
        col = table[head]
        if field:
            rows = [row.get(field) if isinstance(row, dict) else None for row in col]
            if any(v is None for v in rows):
                raise ValueError(f"{allocator.name}: column {head!r} has rows without {field!r}")
            col = rows
        columns[name] = list(col)
    allocator.set_pool_columns(columns)


def by_shares(
    group: np.ndarray, order: np.ndarray, k: int, weight: np.ndarray | None = None
) -> np.ndarray:
    """`order` (candidate indices, best first) with its first min(k, C) re-chosen so that each
    value of `group` (one per candidate) gets its share of them, k x its share of the C
    candidates: the floor of it, and one more for the values of largest remainder; among equal
    remainders the value whose next candidate comes first in `order` (a column of many values,
    each with one or two candidates, is ranked, not served in the order of its values). Within a
    value, best first. The rest follow in `order`'s order. `order` is a permutation of
    range(len(group)); remainders are compared exactly (integers), so equal shares tie.
    `weight` (one >= 0 per candidate): a value's share is its candidates' share of the total
    weight instead of their count, capped at its count; what the capped values leave is shared
    among the others by weight again (water-filling), and their remainders are compared to 1e-9."""
    if not len(group):
        return np.asarray(order, dtype=np.int64)
    values, inverse, count = np.unique(group, return_inverse=True, return_counts=True)
    k = max(min(k, len(group)), 0)
    W = None if weight is None else np.bincount(inverse, weights=weight, minlength=len(values))
    if W is None or not W.sum() > 0:
        take, rem = np.divmod(k * count, len(group))  # k count / C = take + rem / C
    else:
        full = np.zeros(len(values), dtype=bool)
        while True:  # cap each value whose share exceeds its count; share the rest again
            left = k - int(count[full].sum())
            w = np.where(full, 0.0, W)
            share = left * w / w.sum() if w.sum() > 0 else np.zeros(len(values))
            over = ~full & (share >= count)
            if not over.any():
                break
            full |= over
        take = np.where(full, count, np.floor(share)).astype(np.int64)
        rem = np.where(full, -1.0, np.round(share - np.floor(share), 9))  # a full value: no more
    rank_in = np.empty(len(order), dtype=np.int64)  # each candidate's rank within its value
    seen = np.zeros(len(values), dtype=np.int64)
    pos_next = np.full(len(values), len(order))  # where the value's candidate after its floor is
    for pos, i in enumerate(order):
        v = inverse[i]
        rank_in[i] = seen[v]
        if seen[v] == take[v]:
            pos_next[v] = pos
        seen[v] += 1
    extra = np.lexsort((pos_next, -rem))[: k - int(take.sum())]
    take[extra] += 1
    first = order[rank_in[order] < take[inverse[order]]]
    return np.concatenate([first, order[~np.isin(order, first)]])


class PoolExhaustedError(RuntimeError):
    """Every prompt of the pool is evicted: there is nothing left to train on."""


class MaxRoundsError(RuntimeError):
    """A step needed more generation rounds than `max_rounds` allows."""


# ------------------------------------------------------------------ what a state holds


@dataclass(frozen=True)
class Saved:
    """One entry of an allocator state: the attribute `attr` under `key`; `save(value)` makes the
    state's JSON/numpy value, `load(current, saved)` the attribute's new value (in place where the
    attribute is an object others may hold, such as a random generator)."""

    key: str
    attr: str
    save: Callable[[Any], Any] = lambda v: v
    load: Callable[[Any, Any], Any] = lambda current, saved: saved


def _generator_loaded(gen: np.random.Generator, saved: dict[str, Any]) -> np.random.Generator:
    gen.bit_generator.state = saved
    return gen


def _table_loaded(table: PromptTable, saved: dict[str, Any]) -> PromptTable:
    table.load_state_dict(saved)
    return table


def _int_counter(saved: dict[str, Any]) -> Counter[str]:
    return Counter({k: int(v) for k, v in saved.items()})


def _cat_handles(parts: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(parts).astype(np.int64) if parts else np.zeros(0, np.int64)


def _checked(current: Any, saved: Any) -> Any:
    return current  # compared by load_state_dict before anything is loaded


ALLOCATOR_STATE: tuple[Saved, ...] = (
    Saved("seed", "seed", load=lambda _, v: int(v)),
    Saved("config", "config", config_to_dict, _checked),
    Saved("rng", "rng", lambda g: g.bit_generator.state, _generator_loaded),
    Saved("order_rng", "_order_rng", lambda g: g.bit_generator.state, _generator_loaded),
    Saved("step", "step", load=lambda _, v: int(v)),
    Saved("epoch", "epoch", load=lambda _, v: int(v)),
    Saved("round", "_round", load=lambda _, v: int(v)),
    Saved("complete", "_complete", load=lambda _, v: bool(v)),
    Saved("order", "_order", load=lambda _, v: np.asarray(v, dtype=np.int32).copy()),
    Saved("cursor", "_cursor", load=lambda _, v: int(v)),
    Saved("table", "table", lambda t: t.state_dict(), _table_loaded),
    Saved("ready", "_ready", groups_to_state, lambda _, v: groups_from_state(v)),
    Saved(
        "released",
        "_released",
        _cat_handles,
        lambda _, v: [a] if len(a := np.asarray(v, dtype=np.int64)) else [],
    ),
    Saved(
        "live",
        "_live",
        lambda live: np.array(sorted(live), dtype=np.int64),
        lambda _, v: set(np.asarray(v, dtype=np.int64).tolist()),
    ),
    Saved("cum_by_phase", "cum_by_phase", dict, lambda _, v: _int_counter(v)),
    Saved("cum_tokens_by_phase", "cum_tokens_by_phase", dict, lambda _, v: _int_counter(v)),
    Saved("cum_discarded", "cum_discarded", load=lambda _, v: int(v)),
    Saved("cum_trained", "cum_trained", load=lambda _, v: int(v)),
    Saved(
        "acc",
        "_acc",
        lambda acc: {k: dict(v) if isinstance(v, Counter) else v for k, v in acc.items()},
        lambda _, v: {k: int(x) if k == "discarded" else Counter(x) for k, x in v.items()},
    ),
)
"""Every attribute of the base class an allocator state holds, in the state's key order; a
strategy's own state goes under "strategy_state" (`_extra_state`). The attributes it leaves out are
`NOT_IN_STATE`'s: tests/test_allocator_state.py fails on an attribute in neither."""

NOT_IN_STATE = {
    "num_prompts": "in the state's header, checked on load",
    "_pending": "state_dict() refuses while a request is pending",
    "_dropped": "emptied into _live by _sync_live() before saving",
}
STATE_KEYS = (*(s.key for s in ALLOCATOR_STATE), "strategy_state")


STRATEGY_HOOKS = (
    "_init_strategy",
    "_next_request",
    "_on_results",
    "_take_batch",
    "_after_step",
    "_on_epoch_end",
    "_held_groups",
    "_step_extra",
    "_extra_state",
    "_load_extra_state",
)
"""The methods a strategy overrides (the module docstring). Every other `_` name of the base class
is its own state: no strategy reads or writes it (tests/test_strategy_api.py)."""


def _field_default(cfg: Any, name: str, otherwise: Any) -> Any:
    """The default of config field `name` (`otherwise` where it has none)."""
    for f in dataclasses.fields(cfg):
        if f.name == name:
            if f.default is not dataclasses.MISSING:
                return f.default
            if f.default_factory is not dataclasses.MISSING:
                return f.default_factory()
    return otherwise


class Allocator:
    """Base class of every strategy: see the module docstring for the hooks."""

    name: ClassVar[str] = ""
    Config: ClassVar[type[AllocatorConfig]] = AllocatorConfig
    reads_mass: ClassVar[bool] = False
    """True for a strategy that reads `ToldGroups.mass`: only then does `tell` check and use
    Outcome.logprob / completion_key (rollalloc.likelihood); the others ignore them."""

    def __init__(
        self,
        num_prompts: int,
        seed: int = 0,
        config: AllocatorConfig | dict[str, Any] | None = None,
        **overrides: Any,
    ):
        if isinstance(num_prompts, bool) or not isinstance(num_prompts, (int, np.integer)):
            raise ValueError(f"num_prompts must be an integer, got {num_prompts!r}")
        if num_prompts < 1:
            raise ValueError(f"num_prompts must be >= 1 (the pool is empty), got {num_prompts}")
        self.config = self.make_config(config, **overrides)
        self.config.validate(int(num_prompts))
        self.num_prompts = int(num_prompts)
        self.seed = int(seed)
        # Two streams: the epoch order is the same for every strategy with this seed; the
        # strategy's own random choices (commit sampling, Thompson draws, ...) use `rng`.
        order_seq, own_seq = np.random.SeedSequence(self.seed).spawn(2)
        self._order_rng = np.random.default_rng(order_seq)
        self.rng = np.random.default_rng(own_seq)
        self.table = PromptTable(self.num_prompts)
        self.step = 0
        self.epoch = 0
        self._order = self._new_order()  # (≤ pool,) int32: this epoch's prompt order
        self._cursor = 0
        self._pending: Request | None = None
        self._complete = False  # ask() returned None: the batch is ready
        self._round = 0
        self._ready: list[Group] = []  # groups to train on this step
        self._released: list[np.ndarray] = []  # handles dropped this step, not trained
        self._live: set[int] = set()  # handles the allocator still refers to
        self._dropped: list[np.ndarray] = []  # discarded handles not yet removed from _live
        self.cum_by_phase: Counter[str] = Counter()
        self.cum_tokens_by_phase: Counter[str] = Counter()
        self.cum_discarded = 0
        self.cum_trained = 0
        self._acc = self._new_step_acc()
        self._init_strategy()

    # -------------------------------------------------------------- construction and config

    @classmethod
    def make_config(cls, config: Any = None, **overrides: Any) -> AllocatorConfig:
        """Build the strategy's config from a dataclass, a dict and/or keyword overrides."""
        if isinstance(config, AllocatorConfig):
            values = dataclasses.asdict(config) if type(config) is cls.Config else None
            if values is None:
                raise ValueError(
                    f"{cls.name}: expected a {cls.Config.__name__}, got {type(config).__name__}"
                )
        elif config is None:
            values = {}
        elif isinstance(config, dict):
            values = dict(config)
        else:
            raise ValueError(f"{cls.name}: config must be a dict or {cls.Config.__name__}")
        values.update(overrides)
        known = {f.name for f in dataclasses.fields(cls.Config)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(
                f"{cls.name}: unknown option(s) {unknown}; valid options: {sorted(known)}"
            )
        return cls.Config(**values)

    @classmethod
    def example_config(cls) -> dict[str, Any]:
        """Options the contract tests add when building this strategy (callables, sources)."""
        return {}

    @property
    def fixed_batch(self) -> bool:
        """True when every step trains exactly `train_prompts` groups (DESIGN.md: constant batch)."""
        return getattr(self.config, "on_max_rounds", "error") == "error"

    @property
    def equal_group_sizes(self) -> bool:
        """True when every trained group has the same number of rollouts (TRL's num_generations);
        a strategy that sizes groups by value says False."""
        return True

    def _init_strategy(self) -> None:
        """Hook: add table columns and strategy state (called once from __init__)."""

    def pool_columns(self) -> tuple[str, ...]:
        """The task columns this strategy reads (`AllocatorConfig.pool_columns`): whoever runs it
        passes them to `set_pool_columns` before the first ask."""
        return self.config.pool_columns()

    def set_pool_columns(self, columns: dict[str, Any]) -> None:
        """Hook: the columns named by `pool_columns()`, one value per pool prompt."""

    def pool_column(self, columns: dict[str, Any], name: str) -> Any:
        """`columns[name]`, checked: present and one value per pool prompt."""
        if name not in columns:
            raise ValueError(
                f"{self.name}: the pool has no column {name!r} (its columns: {sorted(columns)})"
            )
        if len(columns[name]) != self.num_prompts:
            raise ValueError(
                f"{self.name}: column {name!r} has {len(columns[name])} values for "
                f"{self.num_prompts} pool prompts"
            )
        return columns[name]

    # -------------------------------------------------------------- the ask/tell contract

    def ask(self) -> Request | None:
        """The next generation request of this step, or None when its training batch is ready.

        Asking again before `tell` returns the same pending request (a Sampler may retry)."""
        if self._pending is not None:
            return self._pending
        if self._complete:
            return None
        request = self._next_request()
        self._sync_live()  # an epoch boundary inside _next_request may have dropped a buffer
        if request is None:
            self._complete = True
            return None
        self._pending = request
        self._round += 1
        return request

    def tell(self, outcome: Outcome) -> None:
        """Report the rollouts of the pending request. Bad input raises ValueError, changes nothing."""
        request = self._pending
        if request is None:
            raise ValueError("tell(): no request is pending; call ask() first")
        if not isinstance(outcome, Outcome):
            raise ValueError(f"tell(): expected an Outcome, got {type(outcome).__name__}")
        order, rewards, handles, tokens, success = self._validate(request, outcome)
        # Rows sorted into request order: group i is rows [bounds[i], bounds[i+1]).
        # the success signal every decision reads (R,); most often the reward itself
        x = None if success is rewards else success[order]
        rewards, handles, tokens = rewards[order], handles[order], tokens[order]
        x = rewards if x is None else x
        counts = request.num_rollouts  # (P,)
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]])  # (P,)
        sums = np.add.reduceat(x, starts)  # (P,) per-group successes
        means = sums / counts  # (P,) success rate
        los = np.minimum.reduceat(x, starts)  # (P,)
        his = np.maximum.reduceat(x, starts)  # (P,)
        sq = np.add.reduceat(x * x, starts) / counts  # (P,) E[x^2]
        stds = np.sqrt(np.maximum(sq - means * means, 0.0))  # (P,) population std
        group_tokens = np.add.reduceat(tokens, starts)  # (P,)
        mass = self._mass_of(outcome, order, counts, x, request)  # (m_c, m_w) or None
        codes = np.array([PHASE_CODE[ph] for ph in request.phases], dtype=np.int8)  # (P,)
        phases = np.repeat(codes, counts)  # (R,)
        pids = request.prompt_ids
        t = self.table
        t.trials[pids] += counts.astype(np.int32)  # prompt ids are unique within a request
        t.success_sum[pids] += sums.astype(np.float32)
        t.last_step[pids] = self.step
        t.last_success_rate[pids] = means.astype(np.float32)
        for code in np.unique(codes):
            phase, sel = PHASES[code], codes == code
            n, tok = int(counts[sel].sum()), int(group_tokens[sel].sum())
            self._acc["rollouts"][phase] += n
            self._acc["tokens"][phase] += tok
            self.cum_by_phase[phase] += n
            self.cum_tokens_by_phase[phase] += tok
        groups = ToldGroups(
            self.step,
            pids,
            starts,
            counts,
            (handles, rewards, phases, tokens, x),
            (means, los, his, stds),
            request.phases,
        )
        groups.mass = mass
        self._live.update(handles.tolist())
        self._pending = None
        self._on_results(request, groups)
        self._sync_live()

    def batch(self) -> TrainBatch:
        """The training batch of this step; advances to the next step."""
        if self._pending is not None:
            raise RuntimeError("batch(): a request is still pending; tell() its outcome first")
        if not self._complete:
            raise RuntimeError("batch(): the batch is not ready; call ask() until it returns None")
        groups = self._take_batch()
        self._ready = []
        leaves = [leaf for g in groups for leaf in g.leaves()]  # told groups, in batch order
        self._dropped += [leaf.handles for leaf in leaves]
        self._after_step()
        self._sync_live()
        released = (
            np.concatenate(self._released).astype(np.int64)
            if self._released
            else np.zeros(0, dtype=np.int64)
        )
        sizes = np.array([g.size for g in groups], dtype=np.int64)
        rewards = np.concatenate([g.rewards for g in leaves]) if groups else np.zeros(0)
        phases = np.concatenate([g.phases for g in leaves]) if groups else np.zeros(0, np.int8)
        trained = int(sizes.sum())
        self.cum_trained += trained
        stats = self._stats(groups, rewards, sizes, trained)
        batch = TrainBatch(
            step=self.step,
            prompt_ids=np.array([g.prompt_id for g in groups], dtype=np.int64),
            group_sizes=sizes,
            handles=(
                np.concatenate([g.handles for g in leaves]) if groups else np.zeros(0, np.int64)
            ),
            rewards=rewards,
            phases=np.array(PHASES, dtype=object)[phases.astype(np.int64)],
            released=released,
            stats=stats,
            successes=np.concatenate([g.successes for g in leaves]) if groups else np.zeros(0),
        )
        self.step += 1
        self._round = 0
        self._complete = False
        self._released = []
        self._acc = self._new_step_acc()
        return batch

    # -------------------------------------------------------------- accounting

    @property
    def cum_rollouts(self) -> int:
        """Every rollout generated so far, all phases (pilot, commit, discarded) counted."""
        return int(sum(self.cum_by_phase.values()))

    @property
    def cum_tokens(self) -> int:
        return int(sum(self.cum_tokens_by_phase.values()))

    @property
    def live_handles(self) -> int:
        """Handles the allocator still refers to (buffered pilots, groups of the open step)."""
        self._sync_live()
        return len(self._live)

    def _new_step_acc(self) -> dict[str, Any]:
        return {"rollouts": Counter(), "tokens": Counter(), "discarded": 0, "decisions": Counter()}

    def _stats(self, groups, rewards, sizes, trained) -> StepStats:
        # rewards (R,) flat, sizes (G,): the measures of rollalloc.metrics, tested there
        return StepStats(
            step=self.step,
            epoch=self.epoch,
            rounds=self._round,
            groups=len(groups),
            rollouts_by_phase={k: int(v) for k, v in self._acc["rollouts"].items()},
            tokens_by_phase={k: int(v) for k, v in self._acc["tokens"].items()},
            discarded_rollouts=int(self._acc["discarded"]),
            trained_rollouts=trained,
            cum_rollouts=self.cum_rollouts,
            cum_tokens=self.cum_tokens,
            effective_prompt_ratio=effective_prompt_ratio(rewards, sizes),
            mean_group_reward_var=mean_group_reward_var(rewards, sizes),
            decisions={k: int(v) for k, v in self._acc["decisions"].items()},
            extra={k: float(v) for k, v in self._step_extra().items()},
        )

    def _discard_handles(self, handles: list[np.ndarray], reason: str) -> None:
        if not handles:
            return
        self._released += handles
        self._dropped += handles  # removed from _live in one call by _sync_live()
        n = sum(len(h) for h in handles)
        self._acc["discarded"] += n
        self.cum_discarded += n
        self._acc["decisions"][reason] += len(handles)

    def _sync_live(self) -> None:
        if self._dropped:
            self._live.difference_update(np.concatenate(self._dropped).tolist())
            self._dropped = []

    # -------------------------------------------------------------- validation

    def _validate(self, request: Request, outcome: Outcome):
        n = len(outcome.handles)
        if len(outcome.prompt_ids) != n or len(outcome.rewards) != n:
            raise ValueError(
                f"tell(): prompt_ids ({len(outcome.prompt_ids)}), handles ({n}) and rewards "
                f"({len(outcome.rewards)}) must have the same length"
            )
        if n != request.total:
            raise ValueError(f"tell(): the request asked for {request.total} rollouts, got {n}")
        if outcome.tokens is not None and len(outcome.tokens) != n:
            raise ValueError(f"tell(): tokens has length {len(outcome.tokens)}, expected {n}")
        for field in ("prompt_ids", "handles"):
            arr = getattr(outcome, field)
            if n and not np.issubdtype(arr.dtype, np.integer):
                raise ValueError(f"tell(): {field} must be integers, got dtype {arr.dtype}")
        try:
            rewards = np.asarray(outcome.rewards, dtype=np.float64)
        except (TypeError, ValueError) as e:
            raise ValueError(f"tell(): rewards must be numbers ({e})") from e
        if not np.all(np.isfinite(rewards)):
            bad = int(np.flatnonzero(~np.isfinite(rewards))[0])
            raise ValueError(f"tell(): reward {rewards[bad]} at row {bad} is not finite")
        lo, hi = self.config.reward_min, self.config.reward_max
        if n and (rewards.min() < lo or rewards.max() > hi):
            bad = int(np.flatnonzero((rewards < lo) | (rewards > hi))[0])
            raise ValueError(
                f"tell(): reward {rewards[bad]} at row {bad} is outside [{lo}, {hi}] "
                "(set reward_min / reward_max for other ranges)"
            )
        handles = outcome.handles.astype(np.int64)
        sorted_h = np.sort(handles)
        if n > 1 and not np.all(sorted_h[1:] != sorted_h[:-1]):
            raise ValueError("tell(): handles must be unique")
        if not self._live.isdisjoint(handles.tolist()):
            reused = next(h for h in handles.tolist() if h in self._live)
            raise ValueError(f"tell(): handle {reused} is still held by the allocator")
        pids = outcome.prompt_ids.astype(np.int64)
        sorter = np.argsort(request.prompt_ids, kind="stable")
        sorted_ids = request.prompt_ids[sorter]
        pos = np.searchsorted(sorted_ids, pids)
        pos = np.minimum(pos, len(sorted_ids) - 1)
        unknown = sorted_ids[pos] != pids
        if unknown.any():
            raise ValueError(
                f"tell(): prompt id {int(pids[np.flatnonzero(unknown)[0]])} was not in the request"
            )
        req_pos = sorter[pos]  # (R,) position of each row's prompt in the request
        counts = np.bincount(req_pos, minlength=len(request))
        if not np.array_equal(counts, request.num_rollouts):
            i = int(np.flatnonzero(counts != request.num_rollouts)[0])
            raise ValueError(
                f"tell(): prompt {int(request.prompt_ids[i])} was asked for "
                f"{int(request.num_rollouts[i])} rollouts, got {int(counts[i])}"
            )
        if outcome.tokens is None:
            tokens = np.zeros(n, dtype=np.int64)
        else:
            tokens = np.asarray(outcome.tokens)
            if n and (not np.issubdtype(tokens.dtype, np.integer) or tokens.min() < 0):
                raise ValueError("tell(): tokens must be non-negative integers")
            tokens = tokens.astype(np.int64)
        order = np.argsort(req_pos, kind="stable")
        return order, rewards, handles, tokens, self._success_of(outcome, rewards)

    def _mass_of(self, outcome: Outcome, order, counts, x, request):
        """(m_c, m_w) per group (rollalloc.likelihood) when the outcome carries `logprob` and
        `completion_key` and the strategy reads them (`reads_mass`), else None; checked before
        tell changes anything."""
        lp, key = outcome.logprob, outcome.completion_key
        if (lp is None and key is None) or not self.reads_mass:
            return None  # a strategy that does not read them is not stopped by them
        n = len(outcome.handles)
        if lp is None or key is None:
            raise ValueError("tell(): logprob and completion_key come together (or neither)")
        if len(lp) != n or len(key) != n:
            raise ValueError(
                f"tell(): logprob ({len(lp)}) and completion_key ({len(key)}) must have one value "
                f"per rollout ({n})"
            )
        if n and not np.issubdtype(key.dtype, np.integer):
            raise ValueError(f"tell(): completion_key must be integers, got dtype {key.dtype}")
        try:
            lp = np.asarray(lp, dtype=np.float64)
        except (TypeError, ValueError) as e:
            raise ValueError(f"tell(): logprob must be numbers ({e})") from e
        bad = np.flatnonzero(~(lp <= 1e-6))  # NaN too
        if len(bad):
            raise ValueError(
                f"tell(): logprob {lp[bad[0]]} at row {int(bad[0])} is not a log-probability (<= 0)"
            )
        m_c, m_w = sampled_mass(counts, key[order], lp[order], x)
        over = np.flatnonzero(m_c + m_w > 1.0 + MASS_TOL)
        if len(over):
            i = int(over[0])
            raise ValueError(
                f"tell(): the distinct completions of prompt {int(request.prompt_ids[i])} hold "
                f"probability {m_c[i] + m_w[i]:.3f} > 1: logprob must be the log-probability "
                "under the distribution sampled from (temperature applied; vLLM: "
                "logprobs_mode='processed_logprobs'), and equal completion_keys equal completions"
            )
        return m_c, m_w

    def _success_of(self, outcome: Outcome, rewards: np.ndarray) -> np.ndarray:
        """The per-rollout success (R,) in [0, 1] that decisions read (Outcome.success docs)."""
        c, n = self.config, len(rewards)
        if outcome.success is not None:
            try:
                x = np.asarray(outcome.success, dtype=np.float64)
            except (TypeError, ValueError) as e:
                raise ValueError(f"tell(): success must be numbers ({e})") from e
            if len(x) != n:
                raise ValueError(f"tell(): success has length {len(x)}, expected {n}")
            bad = np.flatnonzero(~(np.isfinite(x) & (x >= 0.0) & (x <= 1.0)))
            if len(bad):
                raise ValueError(
                    f"tell(): success {x[bad[0]]} at row {int(bad[0])} is not in [0, 1] "
                    "(a success is a verdict: 1 solved, 0 not, or a rate in between)"
                )
            return x
        if c.success_threshold is not None:
            return (rewards >= c.success_threshold).astype(np.float64)
        if not c.reward_is_success:
            raise ValueError(
                f"tell(): rewards in [{c.reward_min}, {c.reward_max}] are not success rates, and "
                "strategies decide on successes: pass Outcome(success=...) (the verifier's "
                "verdict, verl's acc), or set success_threshold (success = reward >= threshold)"
            )
        return rewards

    # -------------------------------------------------------------- the epoch stream

    def _new_order(self) -> np.ndarray:
        perm = self._order_rng.permutation(self.num_prompts).astype(np.int32)
        return perm[self.table.status[perm] != EVICTED]

    def _end_epoch(self) -> None:
        self._on_epoch_end()
        status = self.table.status
        status[status == DEFERRED] = ACTIVE
        self.epoch += 1
        self._order = self._new_order()
        self._cursor = 0

    # -------------------------------------------------------------- what a strategy calls
    # A strategy reads `ready`, `round` and `step_rollouts`, draws prompts and makes requests, and
    # decides on every told group through `train`, `hold` or `discard`; the base class applies the
    # decision at once (batch, handles, accounting, StepStats.decisions). It never writes the base
    # class's private state (tests/test_strategy_api.py reads every strategy's source).

    @property
    def ready(self) -> tuple[Group, ...]:
        """The groups this step trains so far, in batch order."""
        return tuple(self._ready)

    @property
    def round(self) -> int:
        """Requests asked in this step so far (0 before its first)."""
        return self._round

    @property
    def step_rollouts(self) -> dict[str, int]:
        """Rollouts generated in this step so far, by phase."""
        return dict(self._acc["rollouts"])

    @property
    def step_decisions(self) -> dict[str, int]:
        """Decisions counted in this step so far, by reason (StepStats.decisions at its end)."""
        return dict(self._acc["decisions"])

    def train(self, groups: Group | Iterable[Group], reason: str | None = None) -> None:
        """Decide: train `groups` this step, after the groups already in the batch (counted under
        `reason` in StepStats.decisions when one is given)."""
        groups = [groups] if isinstance(groups, Group) else list(groups)
        if reason is not None:
            self.count(reason, len(groups))
        self._ready += groups

    def hold(self, groups: Group | Iterable[Group], reason: str | None = None) -> list[Group]:
        """Decide: keep `groups` for a later request or step (a buffer, a queue); returns them.
        The strategy lists what it holds in `_held_groups()` until it trains or discards it."""
        groups = [groups] if isinstance(groups, Group) else list(groups)
        if reason is not None:
            self.count(reason, len(groups))
        return groups

    def discard(
        self, groups: Group | Iterable[Group], reason: str, where: np.ndarray | None = None
    ) -> None:
        """Decide: drop `groups` untrained, for `reason` (counted per group in
        StepStats.decisions): their handles are released, their rollouts counted as discarded.
        `where` (P,) bool with told groups: only those where it is true (no Group objects made)."""
        if where is not None:
            handles = groups.handles_where(where)
        elif isinstance(groups, Group):
            handles = [groups.handles]
        else:
            handles = [g.handles for g in groups]
        self._discard_handles(handles, reason)

    def count(self, reason: str, n: int = 1) -> None:
        """Count `n` decisions of this step under `reason` (StepStats.decisions): candidates seen,
        prompts skipped or evicted, groups without variance... Nothing is counted when n is 0."""
        if n:
            self._acc["decisions"][reason] += n

    def rounds_exhausted(self, hint: str, fix: str | None = None) -> bool:
        """True when this step has used its max_rounds and trains on the groups it has
        (on_max_rounds="train"); raises MaxRoundsError (on_max_rounds="error") with the cause
        `hint` and the remedy `fix` (default: raise gen_prompts or max_rounds)."""
        c = self.config
        if self._round < c.max_rounds:
            return False
        if c.on_max_rounds == "train":
            return True
        raise MaxRoundsError(
            f"{self.name}: {len(self._ready)} of {c.train_prompts} groups after "
            f"max_rounds={c.max_rounds} rounds; {hint}; "
            f"{fix or 'raise gen_prompts or max_rounds'}, or set on_max_rounds='train'"
        )

    def draw(self, k: int, also: np.ndarray | None = None) -> np.ndarray:
        """The next k prompts of the stream (fewer only if fewer non-evicted prompts are left).

        Ids are unique within one draw and never those of a group already in this step's batch, so
        a step trains at most one group per prompt. A draw that runs over the end of an epoch starts
        the next one with the other prompts, and those it has just handed out at its end. `also`:
        prompts the caller drew earlier in this step (a window drawn in chunks), treated alike."""
        out: list[np.ndarray] = []
        busy = np.array([g.prompt_id for g in self._ready], dtype=np.int64)  # in this step already
        if also is not None and len(also):
            busy = np.concatenate([busy, np.asarray(also, dtype=np.int64)])
        need, wrapped = k, False
        while need > 0:
            if self._cursor >= len(self._order):
                if wrapped:
                    break
                self._end_epoch()
                wrapped = True
                if len(self._order) == 0:
                    raise PoolExhaustedError(
                        f"{self.name}: every prompt of the pool of {self.num_prompts} is "
                        "evicted; nothing is left to train on"
                    )
                taken = np.concatenate([busy, *out])
                if len(taken):
                    again = np.isin(self._order, taken)
                    self._order = np.concatenate([self._order[~again], self._order[again]])
            chunk = self._order[self._cursor : self._cursor + need]
            self._cursor += len(chunk)
            chunk = chunk[self.table.status[chunk] != EVICTED]
            if len(busy):
                chunk = chunk[~np.isin(chunk, busy)]
            if wrapped and out:
                chunk = chunk[~np.isin(chunk, np.concatenate(out))]
            out.append(chunk)
            need -= len(chunk)
        ids = np.concatenate(out).astype(np.int64)
        if len(ids) == 0:
            raise PoolExhaustedError(
                f"{self.name}: no prompt of the pool of {self.num_prompts} is left to draw"
            )
        return ids

    def make_request(self, prompt_ids, num_rollouts, phases) -> Request:
        """The Request of this step's next round: `num_rollouts` (one number, or one per prompt)
        rollouts of each of `prompt_ids`, tagged `phases` (one, or one per prompt)."""
        prompt_ids = np.asarray(prompt_ids, dtype=np.int64)
        if np.isscalar(num_rollouts) or np.ndim(num_rollouts) == 0:
            num_rollouts = np.full(len(prompt_ids), int(num_rollouts), dtype=np.int64)
        if isinstance(phases, str):
            phases = (phases,) * len(prompt_ids)
        if len(np.unique(prompt_ids)) != len(prompt_ids):
            raise AssertionError(f"{self.name}: a request must not name a prompt twice")
        return Request(self.step, self._round, prompt_ids, num_rollouts, tuple(phases))

    # -------------------------------------------------------------- hooks

    def _held_groups(self) -> list[Group]:
        """Groups the strategy keeps across requests or steps (a buffer, a queue)."""
        return []

    def check_handles(self) -> None:
        """Assert that the handles held are exactly those of the open step and of held groups."""
        self._sync_live()
        groups = self._ready + self._held_groups()
        held = set(np.concatenate([g.handles for g in groups]).tolist()) if groups else set()
        assert held == self._live, (
            f"{self.name}: {len(self._live - held)} handles are neither trained, released nor "
            f"held; {len(held - self._live)} held handles are not accounted as live"
        )

    def _next_request(self) -> Request | None:
        """The next request of this step (`make_request`), or None when the batch is complete."""
        raise NotImplementedError

    def _on_results(self, request: Request, groups: ToldGroups) -> None:
        """Decide on every told group, in request order: `train`, `hold` or `discard` it."""
        raise NotImplementedError

    def _take_batch(self) -> list[Group]:
        """The groups trained this step (default: all of `ready`); any other group of `ready`
        the strategy discards or holds here."""
        return list(self._ready)

    def _after_step(self) -> None:
        pass

    def _on_epoch_end(self) -> None:
        pass

    def _extra_state(self) -> dict[str, Any]:
        return {}

    def _load_extra_state(self, state: dict[str, Any]) -> None:
        pass

    def _step_extra(self) -> dict[str, float]:
        return {}

    # -------------------------------------------------------------- state

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to continue identically: JSON values and numpy arrays, no pickle.

        Allowed whenever no request is pending (between steps, or between tell and ask)."""
        if self._pending is not None:
            raise RuntimeError("state_dict(): a request is pending; tell() its outcome first")
        self._sync_live()
        return {
            "format": "rollalloc.allocator",
            "version": STATE_VERSION,
            "strategy": self.name,
            "num_prompts": self.num_prompts,
            **{f.key: f.save(getattr(self, f.attr)) for f in ALLOCATOR_STATE},
            "strategy_state": self._extra_state(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore a state written by `state_dict` of the same strategy, pool and config."""
        if not isinstance(state, dict) or state.get("format") != "rollalloc.allocator":
            raise ValueError("load_state_dict(): not a rollalloc allocator state")
        if state.get("version") != STATE_VERSION:
            raise ValueError(
                f"load_state_dict(): state version {state.get('version')} is not supported "
                f"(this rollalloc writes version {STATE_VERSION})"
            )
        if state.get("strategy") != self.name:
            raise ValueError(
                f"load_state_dict(): the state is of strategy {state.get('strategy')!r}, "
                f"this allocator is {self.name!r}"
            )
        if state.get("num_prompts") != self.num_prompts:
            raise ValueError(
                f"load_state_dict(): the state is for a pool of {state.get('num_prompts')} "
                f"prompts, this allocator has {self.num_prompts}"
            )
        missing = [k for k in STATE_KEYS if k not in state]
        if missing:
            raise ValueError(
                f"load_state_dict(): the state lacks {', '.join(missing)}: it is damaged or was "
                "not written by Allocator.state_dict()"
            )
        mine = config_to_dict(self.config)
        # an option the state does not name did not exist when it was written: it ran with the
        # option's default (a state from before Pilot-Commit's `evict` evicted)
        saved = {k: state["config"].get(k, _field_default(self.config, k, mine[k])) for k in mine}
        diff = sorted(k for k in mine if saved[k] != mine[k])
        if diff:
            raise ValueError(
                "load_state_dict(): the state was made with other options: "
                + ", ".join(
                    f"{k}={saved[k]!r}{'' if k in state['config'] else ' (absent: the default)'}"
                    f" (here {mine[k]!r})"
                    for k in diff
                )
            )
        for f in ALLOCATOR_STATE:
            setattr(self, f.attr, f.load(getattr(self, f.attr), state[f.key]))
        self._dropped = []
        self._pending = None
        self._load_extra_state(state["strategy_state"])
