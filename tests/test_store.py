"""One rollout-store protocol (rollalloc.store.RolloutStore) for every backend: our trainer's, the
simulator's, TRL's and verl's store satisfy it and behave the same through it."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from rollalloc.store import RolloutStore


def _train():
    from rollalloc.train.sampler import Rollout, RolloutStore

    def batch(prompts):
        return [
            Rollout(p, np.arange(3), np.arange(p % 4 + 1), np.zeros(p % 4 + 1, np.float32), 1.0, 0)
            for p in prompts
        ]

    return RolloutStore(), batch, lambda rows: [r.prompt_id for r in rows]


def _sim():
    from rollalloc.sim.roles import RolloutStore, SimRollouts

    def batch(prompts):
        p = np.asarray(prompts, dtype=np.int64)
        return SimRollouts(p, np.ones(len(p)), np.ones(len(p), np.int64), 0)

    # capacity 4: the ring buffer grows while the test runs
    return RolloutStore(capacity=4), batch, lambda rows: rows.prompt.tolist()


def _trl():
    from rollalloc.integrations.trl.store import RolloutStore, StoredRollout

    def batch(prompts):
        return [StoredRollout(p, [1, 2], [3], "c", np.array([1.0], np.float32), 0) for p in prompts]

    return RolloutStore(1), batch, lambda rows: [r.prompt_id for r in rows]


def _verl():
    import torch
    from verl import DataProto

    from rollalloc.integrations.verl.store import RolloutStore

    def batch(prompts):
        p = np.asarray(prompts, dtype=np.int64)
        return DataProto.from_single_dict(
            {"responses": torch.zeros(len(p), 2, dtype=torch.long), "rollalloc_prompt_id": p}
        )

    return RolloutStore(), batch, lambda rows: rows.non_tensor_batch["rollalloc_prompt_id"].tolist()


def _needs(module: str, make):
    return pytest.param(
        make,
        marks=pytest.mark.skipif(
            importlib.util.find_spec(module) is None,
            reason=f"{module} is not installed here (verl's tests run in .venv-verl, without trl)",
        ),
    )


BACKENDS = {"train": _train, "sim": _sim, "trl": _needs("trl", _trl), "verl": _needs("verl", _verl)}


@pytest.mark.parametrize("make", BACKENDS.values(), ids=BACKENDS.keys())
def test_every_store_satisfies_the_protocol(make):
    store, _, _ = make()
    assert isinstance(store, RolloutStore)
    for name in ("add", "get", "release", "live_handles", "__len__"):
        assert callable(getattr(store, name)), name


@pytest.mark.parametrize("make", BACKENDS.values(), ids=BACKENDS.keys())
def test_add_get_release_len_behave_alike(make):
    store, batch, prompt_ids = make()
    assert len(store) == 0 and store.live_handles().tolist() == []
    first = store.add(batch([10, 11, 12]))
    second = store.add(batch([20, 21, 22, 23]))
    assert first.dtype == second.dtype == np.int64
    assert first.tolist() == [0, 1, 2] and second.tolist() == [3, 4, 5, 6]  # in order, increasing
    assert len(store) == 7
    assert prompt_ids(store.get(np.array([5, 0, 3]))) == [22, 10, 20]  # in the order asked
    store.release(np.array([0, 1, 5, 6]))
    assert len(store) == 3 and store.live_handles().tolist() == [2, 3, 4]
    assert prompt_ids(store.get(np.array([4, 2]))) == [21, 12]
    with pytest.raises((KeyError, ValueError)):
        store.get(np.array([1]))  # released
    assert store.add(batch([30])).tolist() == [7]  # handles are never reused
    store.release(store.live_handles())
    assert len(store) == 0
