"""Property-based tests over every registered strategy (hypothesis).

Random pool sizes, thresholds, reward sequences (all zeros, all ones, alternating, continuous) and
save/load points. Whatever happens: accounting is exact, evicted prompts are never asked, the
batch is constant in fixed-batch mode, a state round trip is exact, and the only exceptions are the
documented ones (ValueError for options, MaxRoundsError / PoolExhaustedError for a pool that cannot
fill a batch).
"""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rollalloc.sim  # noqa: F401  (registers the simulator's oracle)
from rollalloc.allocator import (
    MaxRoundsError,
    PoolExhaustedError,
    available_strategies,
    get_strategy,
)
from rollalloc.state import EVICTED, state_from_bytes, state_to_bytes
from rollalloc.types import Outcome

REWARD_KINDS = ("zeros", "ones", "alternating", "bernoulli", "continuous", "per_prompt")


def rewards_for(kind, prompt_ids, handles, p):
    if kind == "zeros":
        return np.zeros(len(handles))
    if kind == "ones":
        return np.ones(len(handles))
    if kind == "alternating":
        return (handles % 2).astype(float)
    u = np.random.default_rng(handles[:1].tolist() + [len(handles)]).random(len(handles))
    if kind == "continuous":
        return u
    if kind == "per_prompt":  # each prompt always right or always wrong
        return (p[prompt_ids] > 0.5).astype(float)
    return (u < p[prompt_ids]).astype(float)


def options(draw, name, pool):
    """Random but valid-looking options; some invalid ones too (they must raise ValueError)."""
    cfg = dict(get_strategy(name).example_config())
    cfg["train_prompts"] = draw(st.integers(1, max(1, min(pool, 12))))
    if name == "pilot-commit":
        lo = draw(st.sampled_from([0.0, 0.125, 0.25, 0.5]))
        hi = draw(st.sampled_from([0.0, 0.25, 0.5]))
        cfg.update(p_lower=lo, p_upper=hi, on_max_rounds=draw(st.sampled_from(["error", "train"])))
        cfg["exclude_threshold"] = draw(st.sampled_from([1.0, 0.75, None]))
        cfg["max_off_steps"] = draw(st.integers(0, 4))
        cfg["buffer_sampling"] = draw(st.sampled_from(["random", "max_variance"]))
    if name == "dapo":
        cfg["on_max_rounds"] = draw(st.sampled_from(["error", "train"]))
    if name == "cero":
        cfg["fixed_batch"] = draw(st.booleans())
        cfg["decay"] = draw(st.sampled_from([1.0, 0.5]))
    if name == "likelihood-rank":
        cfg["probe"] = draw(st.integers(0, 3))  # n = 4: probe 0-3 (4 would be refused)
        cfg["window"] = draw(st.sampled_from([1.0, 1.25, 3.0]))
        cfg["unseen"] = draw(st.sampled_from(["rate", "wrong"]))
        cfg["fill"] = draw(st.booleans())  # (quota needs a column: tests/strategies)
    if name == "posterior-signal":  # a level column (wired below), probes from n = 8 on
        cfg["n"] = draw(st.sampled_from([4, 8]))
        if draw(st.booleans()):  # prior_ema = 0.1: the pool prior is fitted after ~7 first visits
            cfg.update(strata="level", prior_ema=0.1)  # so that the groups' priors judge prompts
            cfg["group_ema"] = draw(st.sampled_from([0.0, 0.3]))
    return cfg


def wire(alloc, pool: int, seed: int):
    """A strategy with a strata column gets one: two to four levels, drawn with the seed."""
    if getattr(alloc.config, "strata", ""):
        levels = np.random.default_rng(seed).integers(0, 2 + seed % 3, pool)
        alloc.set_pool_columns({alloc.config.strata: [f"L{v}" for v in levels]})
    return alloc


@st.composite
def scenario(draw):
    name = draw(st.sampled_from(available_strategies()))
    pool = draw(st.integers(1, 80))
    return {
        "name": name,
        "pool": pool,
        "seed": draw(st.integers(0, 3)),
        "cfg": options(draw, name, pool),
        "kind": draw(st.sampled_from(REWARD_KINDS)),
        "steps": draw(st.integers(1, 16)),
        "save_at": draw(st.integers(0, 12)),
    }


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario())
def test_fuzzed_allocators_keep_the_contract(sc):
    cls = get_strategy(sc["name"])
    try:
        alloc = wire(cls(sc["pool"], seed=sc["seed"], **sc["cfg"]), sc["pool"], sc["seed"])
    except ValueError:
        return  # an invalid combination, named by the error
    rng = np.random.default_rng(sc["seed"])
    p = rng.random(sc["pool"])
    next_handle, told, trained, released = 0, 0, set(), set()
    evicted: set[int] = set()
    for step in range(sc["steps"]):
        if step == sc["save_at"]:
            state = state_from_bytes(state_to_bytes(alloc.state_dict()))
            fresh = wire(
                cls(sc["pool"], seed=sc["seed"] + 100, **sc["cfg"]), sc["pool"], sc["seed"]
            )
            fresh.load_state_dict(state)
            assert state_to_bytes(fresh.state_dict()) == state_to_bytes(alloc.state_dict())
            alloc = fresh
        try:
            while (req := alloc.ask()) is not None:
                assert not evicted & set(req.prompt_ids.tolist()), "an evicted prompt was asked"
                ids = req.expand()
                handles = np.arange(next_handle, next_handle + len(ids))
                next_handle += len(ids)
                alloc.tell(Outcome(ids, handles, rewards_for(sc["kind"], ids, handles, p)))
                told += len(ids)
            batch = alloc.batch()
        except (MaxRoundsError, PoolExhaustedError):
            return  # documented: this pool and these rewards cannot fill a batch
        evicted |= set(np.flatnonzero(alloc.table.status == EVICTED).tolist())
        if alloc.fixed_batch:
            assert batch.num_groups == alloc.config.train_prompts
        assert not trained & set(batch.handles.tolist())
        trained |= set(batch.handles.tolist())
        released |= set(batch.released.tolist())
        assert alloc.cum_rollouts == told
        assert len(trained) + len(released) + alloc.live_handles == told
        assert alloc.cum_trained + alloc.cum_discarded + alloc.live_handles == told
        alloc.check_handles()
