"""RolloutStore: rows by handle, and a checkpoint round trip without pickle."""

import numpy as np
import pytest
import torch
from verl import DataProto

from rollalloc.integrations.verl import RolloutStore


def _rows(n, start):
    obj = np.empty(n, dtype=object)
    obj[:] = [
        {"ground_truth": str(i), "scores": np.arange(i % 3, dtype=np.float32), "tags": [i, "x"]}
        for i in range(start, start + n)
    ]
    msgs = np.empty(n, dtype=object)
    msgs[:] = [[{"role": "user", "content": f"q{i}"}] for i in range(start, start + n)]
    return DataProto.from_single_dict(
        {
            "responses": torch.arange(start, start + n).unsqueeze(1).repeat(1, 3),
            "rm_scores": torch.rand(n, 3),
            "acc": np.arange(start, start + n) % 2 * 1.0,
            "reward_model": obj,
            "raw_prompt": msgs,
        }
    )


def test_get_release_and_save_load(tmp_path):
    store = RolloutStore()
    h1 = store.add(_rows(5, 0))
    h2 = store.add(_rows(4, 100))
    assert h1.tolist() == [0, 1, 2, 3, 4] and h2.tolist() == [5, 6, 7, 8]
    want = np.array([7, 0, 3, 5])
    got = store.get(want)
    assert got.batch["responses"][:, 0].tolist() == [102, 0, 3, 100]
    store.release(np.array([0, 1, 2, 4, 6]))
    with pytest.raises(KeyError, match="handle 1 is not stored"):
        store.get(np.array([1]))
    assert len(store) == 4 and store.live_handles().tolist() == [3, 5, 7, 8]

    store.save(tmp_path / "rollouts")
    back = RolloutStore.load(tmp_path / "rollouts")
    assert back.live_handles().tolist() == [3, 5, 7, 8]
    a, b = store.get(np.array([8, 3, 5])), back.get(np.array([8, 3, 5]))
    assert torch.equal(a.batch["responses"], b.batch["responses"])
    assert torch.equal(a.batch["rm_scores"], b.batch["rm_scores"])
    np.testing.assert_array_equal(a.non_tensor_batch["acc"], b.non_tensor_batch["acc"])
    assert list(b.non_tensor_batch["raw_prompt"]) == list(a.non_tensor_batch["raw_prompt"])
    for x, y in zip(a.non_tensor_batch["reward_model"], b.non_tensor_batch["reward_model"]):
        assert x["ground_truth"] == y["ground_truth"] and x["tags"] == y["tags"]
        np.testing.assert_array_equal(x["scores"], y["scores"])
        assert y["scores"].dtype == np.float32
    assert back.add(_rows(1, 0)).tolist() == [9]  # handles are never reused after a reload


def test_save_refuses_what_needs_pickle(tmp_path):
    rows = _rows(2, 0)
    odd = np.empty(2, dtype=object)
    odd[:] = [object(), object()]
    rows.non_tensor_batch["odd"] = odd
    store = RolloutStore()
    store.add(rows)
    with pytest.raises(ValueError, match="non-tensor column 'odd' holds a object"):
        store.save(tmp_path / "r")


def test_the_store_satisfies_the_one_rollout_store_protocol():
    from rollalloc.store import RolloutStore as Protocol

    store = RolloutStore()
    assert isinstance(store, Protocol)
    assert store.add(_rows(3, 0)).tolist() == [0, 1, 2] and len(store) == 3
    store.release(np.array([1]))
    assert store.live_handles().tolist() == [0, 2]
