"""The allocator state is derived from one list (allocator.ALLOCATOR_STATE): every attribute of the
base class is either in it or named in NOT_IN_STATE, and a save/load round trip restores every
attribute of every registered strategy, compared here independently of the list."""

from __future__ import annotations

import dataclasses
from collections import Counter

import numpy as np
import pytest

import rollalloc.sim  # noqa: F401  (registers the simulator's oracles)
from rollalloc.allocator import (
    ALLOCATOR_STATE,
    NOT_IN_STATE,
    STATE_KEYS,
    Allocator,
    Group,
    available_strategies,
    config_to_dict,
    get_strategy,
)
from rollalloc.state import PromptTable, state_from_bytes, state_to_bytes
from rollalloc.testing import BernoulliPool, drive


class Bare(Allocator):
    name = "bare-state-test"  # not registered: only the base class's attributes


def test_every_base_attribute_is_saved_or_named():
    attrs = set(vars(Bare(10, train_prompts=2)))
    listed = {f.attr for f in ALLOCATOR_STATE}
    assert not listed & set(NOT_IN_STATE), "an attribute is both saved and not"
    assert attrs - listed - set(NOT_IN_STATE) == set(), (
        "attributes neither in ALLOCATOR_STATE nor in NOT_IN_STATE"
    )
    assert listed | set(NOT_IN_STATE) <= attrs, "listed attributes the allocator does not have"
    assert len(set(STATE_KEYS)) == len(STATE_KEYS)


def same(a, b) -> bool:
    """Deep equality of allocator attributes, written without the state code."""
    if isinstance(a, np.random.Generator):
        return a.bit_generator.state == b.bit_generator.state
    if isinstance(a, PromptTable):
        return a.columns.keys() == b.columns.keys() and all(
            np.array_equal(a.columns[k], b.columns[k], equal_nan=True) for k in a.columns
        )
    if isinstance(a, Group):
        return (
            type(b) is Group
            and (a.prompt_id, a.step, a.stat) == (b.prompt_id, b.step, b.stat)
            and all(
                np.array_equal(getattr(a, k), getattr(b, k))
                for k in ("handles", "rewards", "phases", "tokens", "successes")
            )
        )
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.dtype == b.dtype and np.array_equal(a, b, True)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):  # Counter included; a Counter must stay one
        return (
            isinstance(a, Counter) == isinstance(b, Counter)
            and a.keys() == b.keys()
            and all(same(a[k], b[k]) for k in a)
        )
    if dataclasses.is_dataclass(a):
        return config_to_dict(a) == config_to_dict(b)
    return type(a) is type(b) and a == b


def norm(attr: str, alloc: Allocator):
    """The attribute as a value: the handles released this step, however many arrays hold them."""
    v = getattr(alloc, attr)
    if attr == "_released":
        return np.concatenate(v).astype(np.int64) if v else np.zeros(0, np.int64)
    return v


def driven(name: str, seed: int, steps: int):
    cls = get_strategy(name)
    alloc = cls(300, seed=seed, **{**cls.example_config(), "train_prompts": 8})
    pool = BernoulliPool.mixed(300, seed=2)
    drive(alloc, pool, steps)
    if steps and (req := alloc.ask()) is not None:  # stop mid-step, between tell and ask
        alloc.tell(pool.generate(req))
    return alloc


@pytest.mark.parametrize("name", available_strategies())
def test_round_trip_restores_every_attribute(name):
    src = driven(name, seed=1, steps=9)
    dst = driven(name, seed=5, steps=0)
    base = [f.attr for f in ALLOCATOR_STATE] + list(NOT_IN_STATE)  # a strategy's own attributes
    # are its _extra_state's business (some are scratch between two hooks)

    def differing() -> list[str]:
        return [k for k in base if not same(norm(k, src), norm(k, dst))]

    assert {"step", "rng", "_order", "table", "_live", "cum_by_phase"} <= set(differing())
    state = state_from_bytes(state_to_bytes(src.state_dict()))
    assert list(state) == ["format", "version", "strategy", "num_prompts", *STATE_KEYS]
    dst.load_state_dict(state)
    assert differing() == [], f"{name}: attributes not restored by load_state_dict"
    # and both continue identically
    a, b = (
        drive(src, BernoulliPool.mixed(300, seed=3), 3),
        drive(dst, BernoulliPool.mixed(300, seed=3), 3),
    )
    assert [x.handles.tolist() for x in a] == [y.handles.tolist() for y in b]
