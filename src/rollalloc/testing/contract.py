"""The ask/tell contract every strategy passes (DESIGN.md), as a pytest suite you can import.

    # tests/test_my_strategy.py
    from my_package import MyStrategy   # an Allocator subclass (registered or not)
    from rollalloc.testing.contract import *  # noqa: F403  (the contract tests)

    contract_case = strategy_cases(MyStrategy)   # or a registered name: strategy_cases("my-name")
    # more than one mode: strategy_cases(MyStrategy, (MyStrategy, {"mode": "b"}))

pytest then runs every `test_*` below on each case. A case builds the strategy with its
`example_config()` (small groups, fast) plus the case's options, on a synthetic Bernoulli pool with
solved (p=1) and hopeless (p=0) prompts, so eviction and deferral are exercised. rollalloc's own
tests/contract/ runs this suite over the whole registry, the way optuna ships its sampler tests
(optuna.testing.pytest_samplers).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from rollalloc.allocator import Allocator, MaxRoundsError, get_strategy
from rollalloc.integrations import allocator_batch_shape
from rollalloc.state import EVICTED, load_state, save_state, state_to_bytes
from rollalloc.testing import BernoulliPool, drive
from rollalloc.types import Outcome

POOL, TRAIN = 400, 8

Strategy = str | type[Allocator]


def strategy_cases(
    *cases: Strategy | tuple[Strategy, dict[str, Any]], ids: list[str] | None = None
):
    """The `contract_case` fixture over `cases`: strategies (a registered name or an Allocator
    subclass), or (strategy, options) pairs that run the suite with those options added."""
    params = [c if isinstance(c, tuple) else (c, {}) for c in cases]
    if not params:
        raise ValueError("strategy_cases: give at least one strategy")
    if ids is None:
        ids = [
            _cls(s).name + "".join(f"-{k}={v}" for k, v in sorted(extra.items()))
            for s, extra in params
        ]

    @pytest.fixture(params=params, ids=ids, name="contract_case")
    def contract_case(request):
        return request.param

    return contract_case


def _cls(strategy: Strategy) -> type[Allocator]:
    return get_strategy(strategy) if isinstance(strategy, str) else strategy


def _group_size_options(cls: type[Allocator], extra: dict[str, Any], g: int, **kw: Any) -> dict:
    """A case's options for groups of g through the one mapping (options_for_group_size); the
    case's own options win, except the parts of the group split."""
    split = cls.Config.group_split(g)
    others = {k: v for k, v in {**cls.example_config(), **extra}.items() if k not in split}
    return cls.Config.options_for_group_size(g, **kw, **others)


def build(strategy: Strategy, extra: dict[str, Any], seed: int = 0, **kw: Any) -> Allocator:
    """The strategy of a case over a pool of POOL prompts, TRAIN groups per step."""
    cls = _cls(strategy)
    cfg = {**cls.example_config(), "train_prompts": TRAIN, **extra, **kw}
    return cls(POOL, seed=seed, **cfg)


def trace(batches):
    return [
        (b.step, b.prompt_ids.tolist(), b.group_sizes.tolist(), b.handles.tolist()) for b in batches
    ]


def requests(pool):
    return [(r.step, r.prompt_ids.tolist(), r.num_rollouts.tolist(), r.phases) for r in pool.log]


def test_deterministic_per_seed(contract_case):
    name, extra = contract_case
    runs = []
    for _ in range(2):
        pool = BernoulliPool.mixed(POOL, seed=3)
        alloc = build(name, extra, seed=7)
        runs.append((trace(drive(alloc, pool, 25)), requests(pool)))
    assert runs[0] == runs[1]
    pool = BernoulliPool.mixed(POOL, seed=3)
    other = trace(drive(build(name, extra, seed=8), pool, 25))
    assert other != runs[0][0], "a different seed should give a different run"


@pytest.mark.parametrize("split", [1, 9, 17])
def test_save_load_continues_identically(contract_case, split, tmp_path):
    name, extra = contract_case
    pool = BernoulliPool.mixed(POOL, seed=1)
    straight = build(name, extra, seed=5)
    full = trace(drive(straight, pool, 30))

    pool2 = BernoulliPool.mixed(POOL, seed=1)
    first = build(name, extra, seed=5)
    head = trace(drive(first, pool2, split))
    save_state(tmp_path / "alloc.npz", first.state_dict())
    resumed = build(name, extra, seed=999)  # the seed comes from the state
    resumed.load_state_dict(load_state(tmp_path / "alloc.npz"))
    tail = trace(drive(resumed, pool2, 30 - split))
    assert head + tail == full
    assert state_to_bytes(resumed.state_dict()) == state_to_bytes(straight.state_dict())


def test_one_group_per_prompt_per_step(contract_case):
    """A step never trains two groups of one prompt, epoch boundaries included (small pool)."""
    name, extra = contract_case
    cfg = {**_cls(name).example_config(), "train_prompts": 4, **extra}
    alloc = _cls(name)(64, seed=0, **cfg)
    for b in drive(alloc, BernoulliPool.mixed(64, seed=0, solved=0.05, hopeless=0.05), 60):
        ids = b.prompt_ids.tolist()
        assert len(ids) == len(set(ids)), f"step {b.step} trains {ids}"


def test_constant_training_batch(contract_case):
    name, extra = contract_case
    alloc = build(name, extra)
    batches = drive(alloc, BernoulliPool.mixed(POOL, seed=2), 40)
    sizes = [b.num_groups for b in batches]
    if alloc.fixed_batch:
        assert sizes == [TRAIN] * len(batches)
    else:
        assert min(sizes) >= 1 and len(set(sizes)) > 1, "faithful mode varies its batch"
    for b in batches:
        assert len(b.handles) == b.group_sizes.sum() == len(b.rewards) == len(b.phases)
        assert b.stats.groups == b.num_groups
    if alloc.equal_group_sizes:  # what it tells TRL (num_generations) must hold
        assert len({int(x) for b in batches for x in b.group_sizes}) == 1, "unequal group sizes"


def test_constant_batch_options_keep_their_promise(contract_case):
    """Under options_for_group_size(..., constant_batch=True) (TRL, verl), a strategy that says
    fixed_batch and equal_group_sizes trains train_prompts groups of one size on a small pool,
    across epoch boundaries."""
    name, extra = contract_case
    cls = _cls(name)
    try:
        opts = _group_size_options(cls, extra, 8, train_prompts=4, constant_batch=True)
    except ValueError:  # an extra option that contradicts the constant batch (tested elsewhere)
        return
    alloc = cls(48, seed=0, **opts)
    pool, batches = BernoulliPool.mixed(48, seed=1, solved=0.2, hopeless=0.2), []
    try:  # a constant-batch strategy may stop with a clear error rather than train a short batch
        for _ in range(40):
            batches.extend(drive(alloc, pool, 1))
    except MaxRoundsError:
        pass
    if alloc.fixed_batch:
        assert all(b.num_groups == 4 for b in batches)
    if alloc.equal_group_sizes:
        assert len({int(x) for b in batches for x in b.group_sizes}) == 1, "unequal group sizes"
    shape = allocator_batch_shape(alloc)
    if cls.Config.group_split(8) and alloc.fixed_batch:
        assert shape == (4, 8), f"allocator_batch_shape says {shape}, the mapping (4, 8)"
        if alloc.equal_group_sizes:
            assert {int(x) for b in batches for x in b.group_sizes} <= {8}, "groups not of 8"
    elif not alloc.fixed_batch:  # TRL and verl must not size a constant batch from it
        assert shape is None, f"allocator_batch_shape says {shape} for a variable batch"


def test_every_rollout_accounted(contract_case):
    name, extra = contract_case
    alloc = build(name, extra)
    pool = BernoulliPool.mixed(POOL, seed=4)
    told, trained, released, tokens = set(), [], [], 0
    by_phase: dict[str, int] = {}
    for _ in range(40):
        while (req := alloc.ask()) is not None:
            out = pool.generate(req)
            alloc.tell(out)
            told.update(out.handles.tolist())
            tokens += int(out.tokens.sum())
            for ph, n in zip(req.phases, req.num_rollouts):
                by_phase[ph] = by_phase.get(ph, 0) + int(n)
        b = alloc.batch()
        trained += b.handles.tolist()
        released += b.released.tolist()
        assert b.stats.trained_rollouts == len(b.handles)
    assert alloc.cum_rollouts == len(told) == sum(by_phase.values())
    assert dict(alloc.cum_by_phase) == by_phase
    assert alloc.cum_tokens == tokens
    # every told rollout is trained once, released once, or still held: never two of these
    assert len(trained) == len(set(trained)) and len(released) == len(set(released))
    assert not set(trained) & set(released)
    held = told - set(trained) - set(released)
    assert len(held) == alloc.live_handles
    assert alloc.cum_trained + alloc.cum_discarded + alloc.live_handles == alloc.cum_rollouts
    alloc.check_handles()


def test_evicted_never_asked_and_deferred_return(contract_case):
    name, extra = contract_case
    pool = BernoulliPool.mixed(120, seed=6)
    cfg = {**_cls(name).example_config(), "train_prompts": 4, **extra}
    alloc = _cls(name)(120, seed=0, **cfg)
    evicted_at: dict[int, int] = {}
    deferred_at: dict[int, int] = {}
    asked_at: dict[int, list[int]] = {}
    for step in range(80):
        while (req := alloc.ask()) is not None:
            for pid in req.prompt_ids.tolist():
                assert pid not in evicted_at, f"evicted prompt {pid} asked again at step {step}"
                asked_at.setdefault(pid, []).append(step)
            alloc.tell(pool.generate(req))
        alloc.batch()
        status = alloc.table.status
        for pid in np.flatnonzero(status == EVICTED).tolist():
            evicted_at.setdefault(pid, step)
        for pid in np.flatnonzero(status == 1).tolist():
            deferred_at.setdefault(pid, step)
    assert alloc.epoch >= 2
    for pid, step in deferred_at.items():
        if step > 40:  # too close to the end of the run to come back within it
            continue
        later = [s for s in asked_at.get(pid, []) if s > step]
        assert later, f"deferred prompt {pid} (step {step}) never came back"


def _move_first_row(pids):
    """Give the first rollout to another prompt of the request: totals right, counts wrong."""
    pids = pids.copy()
    others = pids[pids != pids[0]]
    if len(others):
        pids[0] = others[0]
    return pids


def snapshot(alloc, pending):
    """Serialized state around a pending request (state_dict() refuses while one is pending)."""
    alloc._pending = None
    data = state_to_bytes(alloc.state_dict())
    alloc._pending = pending
    return data


BAD = {
    "nan reward": lambda o: Outcome(
        o.prompt_ids, o.handles, np.where(np.arange(len(o)) == 0, np.nan, o.rewards)
    ),
    "reward above range": lambda o: Outcome(o.prompt_ids, o.handles, o.rewards + 2.0),
    "too few rows": lambda o: Outcome(o.prompt_ids[:-1], o.handles[:-1], o.rewards[:-1]),
    "lengths differ": lambda o: Outcome(o.prompt_ids, o.handles, o.rewards[:-1]),
    "unknown prompt": lambda o: Outcome(
        np.where(np.arange(len(o)) == 0, 10**6, o.prompt_ids), o.handles, o.rewards
    ),
    "duplicate handles": lambda o: Outcome(
        o.prompt_ids, np.zeros(len(o), np.int64) + o.handles[0], o.rewards
    ),
    "float handles": lambda o: Outcome(o.prompt_ids, o.handles + 0.5, o.rewards),
    "counts per prompt": lambda o: Outcome(_move_first_row(o.prompt_ids), o.handles, o.rewards),
    "negative tokens": lambda o: Outcome(
        o.prompt_ids, o.handles, o.rewards, tokens=-np.ones(len(o), np.int64)
    ),
    "text rewards": lambda o: Outcome(o.prompt_ids, o.handles, np.array(["x"] * len(o))),
}


@pytest.mark.parametrize("bad", sorted(BAD))
def test_bad_tell_raises_and_changes_nothing(contract_case, bad):
    name, extra = contract_case
    alloc = build(name, extra)
    pool = BernoulliPool.mixed(POOL, seed=8)
    drive(alloc, pool, 3)
    req = alloc.ask()
    out = pool.generate(req)
    corrupted = BAD[bad](out)
    if bad == "counts per prompt" and len(set(out.prompt_ids.tolist())) < 2:
        pytest.skip("request has a single prompt")
    before = snapshot(alloc, req)
    with pytest.raises(ValueError):
        alloc.tell(corrupted)
    assert snapshot(alloc, req) == before
    alloc.tell(out)  # the correct outcome is still accepted


def test_reused_live_handle_rejected(contract_case):
    name, extra = contract_case
    alloc = build(name, extra)
    pool = BernoulliPool.mixed(POOL, seed=9)
    req = alloc.ask()
    first = pool.generate(req)
    alloc.tell(first)
    req2 = alloc.ask()
    if req2 is None or alloc.live_handles == 0:
        drive(alloc, pool, 1)
        pytest.skip("no handle is held across requests at this point")
    second = pool.generate(req2)
    live = next(iter(alloc._live))
    handles = second.handles.copy()
    handles[0] = live
    with pytest.raises(ValueError, match="still held"):
        alloc.tell(Outcome(second.prompt_ids, handles, second.rewards))


def test_protocol_misuse(contract_case):
    name, extra = contract_case
    alloc = build(name, extra)
    with pytest.raises(ValueError, match="no request is pending"):
        alloc.tell(Outcome([0], [0], [1.0]))
    with pytest.raises(RuntimeError):
        alloc.batch()
    req = alloc.ask()
    assert alloc.ask() is req, "asking again before tell returns the pending request"
    with pytest.raises(RuntimeError):
        alloc.state_dict()


def test_continuous_rewards(contract_case):
    name, extra = contract_case
    pool = BernoulliPool.mixed(POOL, seed=10)
    pool.continuous = True
    alloc = build(name, extra)
    batches = drive(alloc, pool, 10)
    assert all(np.all((b.rewards >= 0) & (b.rewards <= 1)) for b in batches)
    assert alloc.cum_rollouts == alloc.cum_trained + alloc.cum_discarded + alloc.live_handles


@pytest.mark.parametrize("continuous", [False, True], ids=["binary", "continuous"])
def test_step_stats_match_a_plain_loop(contract_case, continuous):
    """StepStats' effective prompt ratio and mean group variance equal rollalloc.metrics' and a
    per-group loop written here, independently of both."""
    from rollalloc.metrics import ZERO_STD_TOL, effective_prompt_ratio, mean_group_reward_var

    name, extra = contract_case
    pool = BernoulliPool.mixed(POOL, seed=11)
    pool.continuous = continuous
    for b in drive(build(name, extra), pool, 12):
        groups = np.split(b.rewards, np.cumsum(b.group_sizes)[:-1]) if b.num_groups else []
        variances = [float(np.var(g)) for g in groups]  # (G,) population variance, one by one
        loop_ratio = float(np.mean([v > ZERO_STD_TOL**2 for v in variances])) if groups else 0.0
        assert b.stats.effective_prompt_ratio == loop_ratio
        assert b.stats.effective_prompt_ratio == effective_prompt_ratio(b.rewards, b.group_sizes)
        assert b.stats.mean_group_reward_var == pytest.approx(
            float(np.mean(variances)) if groups else 0.0, abs=1e-12
        )
        assert b.stats.mean_group_reward_var == mean_group_reward_var(b.rewards, b.group_sizes)


def test_bad_options_name_the_field(contract_case):
    name, extra = contract_case
    with pytest.raises(ValueError, match="no_such_option"):
        build(name, extra, no_such_option=1)
    with pytest.raises(ValueError, match="train_prompts"):
        build(name, extra, train_prompts=0)
    with pytest.raises(ValueError, match="train_prompts"):
        _cls(name)(3, train_prompts=8, **_cls(name).example_config())
    with pytest.raises(ValueError, match="num_prompts"):
        _cls(name)(0, **_cls(name).example_config())


def test_state_of_another_strategy_rejected(contract_case):
    name, extra = contract_case
    other = "grpo" if _cls(name).name != "grpo" else "dapo"
    foreign = build(other, {}).state_dict()
    with pytest.raises(ValueError, match="strategy"):
        build(name, extra).load_state_dict(foreign)


def test_group_split_sums_to_group_size(contract_case):
    """Groups of g rollouts through the mapping every trainer uses (options_for_group_size)."""
    name, extra = contract_case
    cls = _cls(name)
    for g in (4, 8, 16):
        split = cls.Config.group_split(g)
        assert all(isinstance(v, int) and v >= 0 for v in split.values()), split
        assert not split or sum(split.values()) == g, f"group_split({g}) = {split}"
        opts = _group_size_options(cls, extra, g, train_prompts=TRAIN, constant_batch=False)
        alloc = cls(POOL, seed=0, **opts)
        assert {k: getattr(alloc.config, k) for k in split} == split


__all__ = [
    "strategy_cases",
    "build",
    "POOL",
    "TRAIN",
    "test_deterministic_per_seed",
    "test_save_load_continues_identically",
    "test_one_group_per_prompt_per_step",
    "test_constant_training_batch",
    "test_constant_batch_options_keep_their_promise",
    "test_every_rollout_accounted",
    "test_evicted_never_asked_and_deferred_return",
    "test_bad_tell_raises_and_changes_nothing",
    "test_reused_live_handle_rejected",
    "test_protocol_misuse",
    "test_continuous_rewards",
    "test_step_stats_match_a_plain_loop",
    "test_bad_options_name_the_field",
    "test_state_of_another_strategy_rejected",
    "test_group_split_sums_to_group_size",
]
