"""Checkpoints: atomic write, sha256 manifest, clear errors naming the damaged file, fall back to
the previous good checkpoint, keep the newest K (rollalloc.train.checkpoint)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from rollalloc.allocator import make_allocator
from rollalloc.train.checkpoint import (
    FILES,
    FORMAT_VERSION,
    MANIFEST,
    CheckpointError,
    list_checkpoints,
    load_checkpoint,
    resumable_checkpoint,
    save_checkpoint,
    verify_checkpoint,
)
from rollalloc.train.sampler import Rollout, RolloutStore


class FakeLearner:
    def __init__(self, value: float = 0.0) -> None:
        self.moment = torch.full((3,), value)

    def state_dict(self):
        return {"moment": self.moment.clone(), "step": 7}

    def load_state_dict(self, s):
        self.moment = s["moment"].clone()


def parts(seed: int = 0, strategy: str = "grpo"):
    torch.manual_seed(seed)
    model = torch.nn.Linear(4, 3)
    store = RolloutStore()
    store.add([Rollout(1, np.arange(3), np.arange(2), np.zeros(2, np.float32), 1.0, 0)])
    opts = {"grpo": {"n": 2}, "dapo": {"n": 2}}[strategy]
    allocator = make_allocator(strategy, num_prompts=10, seed=seed, train_prompts=2, **opts)
    return {"model": model, "learner": FakeLearner(seed), "store": store, "allocator": allocator}


def save(run, step, keep=2, p=None):
    p = p or parts(step)
    return save_checkpoint(run, step, **p, meta={"loop": {"step": step}}, keep=keep)


def test_round_trip_and_manifest(tmp_path):
    src = parts(1)
    path = save_checkpoint(tmp_path, 3, **src, meta={"loop": {"step": 3}})
    manifest = json.loads((path / MANIFEST).read_text())
    assert manifest["version"] == FORMAT_VERSION and manifest["step"] == 3
    assert manifest["strategy"] == "grpo" and set(manifest["files"]) == set(FILES)
    assert all(len(f["sha256"]) == 64 for f in manifest["files"].values())
    dst = parts(2)
    meta = load_checkpoint(path, **dst)
    assert meta == {"loop": {"step": 3}}
    assert torch.equal(dst["model"].weight, src["model"].weight)
    assert torch.equal(dst["learner"].moment, src["learner"].moment)
    assert set(dst["store"].rollouts) == {0}
    assert (tmp_path / "checkpoints/latest").read_text() == "step-0000003"


@pytest.mark.parametrize("keep", [1, 2, 3])
def test_keeps_the_newest_k(tmp_path, keep):
    for step in range(1, 6):
        save(tmp_path, step, keep=keep)
    assert [s for s, _ in list_checkpoints(tmp_path)] == list(range(6 - keep, 6))


def _truncate(f):
    f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])


def _flip(f):
    data = bytearray(f.read_bytes())
    data[len(data) // 2] ^= 0x01
    f.write_bytes(bytes(data))


@pytest.mark.parametrize("damage,words", [(_truncate, "bytes"), (_flip, "sha256")])
@pytest.mark.parametrize("name", FILES)
def test_damaged_file_is_named(tmp_path, name, damage, words):
    path = save(tmp_path, 1)
    damage(path / name)
    with pytest.raises(CheckpointError, match=words) as e:
        verify_checkpoint(path)
    assert str(path / name) in str(e.value)
    # loading refuses before touching anything
    dst = parts(5)
    before = dst["model"].weight.detach().clone()
    with pytest.raises(CheckpointError, match=name):
        load_checkpoint(path, **dst)
    assert torch.equal(dst["model"].weight, before)


def test_missing_file_and_missing_manifest(tmp_path):
    path = save(tmp_path, 1)
    (path / "allocator.npz").unlink()
    with pytest.raises(CheckpointError, match="allocator.npz: missing"):
        verify_checkpoint(path)
    path = save(tmp_path, 2)
    (path / MANIFEST).unlink()
    with pytest.raises(CheckpointError, match="manifest missing"):
        verify_checkpoint(path)


def test_other_format_version_is_refused(tmp_path):
    path = save(tmp_path, 1)
    m = json.loads((path / MANIFEST).read_text())
    m["version"] = FORMAT_VERSION + 1
    (path / MANIFEST).write_text(json.dumps(m))
    with pytest.raises(CheckpointError, match=f"format version {FORMAT_VERSION + 1}"):
        verify_checkpoint(path)


def test_checkpoint_of_another_strategy_is_refused(tmp_path):
    path = save(tmp_path, 1, p=parts(1, "dapo"))
    dst = parts(2, "grpo")
    before = dst["allocator"].state_dict()
    with pytest.raises(CheckpointError, match="strategy 'dapo'"):
        load_checkpoint(path, **dst)
    assert dst["allocator"].state_dict()["rng"] == before["rng"]


def test_resume_falls_back_to_previous_good_checkpoint(tmp_path):
    save(tmp_path, 1)
    newest = save(tmp_path, 2)
    _flip(newest / "model.safetensors")
    logs = []
    got = resumable_checkpoint(tmp_path, log=logs.append)
    assert got.name == "step-0000001"
    assert any("skipping checkpoint step-0000002" in m and "model.safetensors" in m for m in logs)
    assert any("falling back to step-0000001" in m for m in logs)


@pytest.mark.parametrize("pointer", [b"\xff\xfe garbage", b"step-0000099", b"../../etc", b""])
def test_garbage_latest_pointer(tmp_path, pointer):
    save(tmp_path, 1)
    save(tmp_path, 2)
    (tmp_path / "checkpoints/latest").write_bytes(pointer)
    logs = []
    assert resumable_checkpoint(tmp_path, log=logs.append).name == "step-0000002"
    assert any("does not name a checkpoint" in m for m in logs)


def test_all_damaged_is_an_error_and_none_is_fresh(tmp_path):
    assert resumable_checkpoint(tmp_path, log=None) is None
    for step in (1, 2):
        _truncate(save(tmp_path, step) / "trainer.pt")
    with pytest.raises(CheckpointError, match="no readable checkpoint.*step-0000001"):
        resumable_checkpoint(tmp_path, log=None)


def test_half_written_checkpoint_is_ignored_and_cleaned(tmp_path):
    save(tmp_path, 1)
    tmp = tmp_path / "checkpoints/.step-0000002.tmp-99999"  # a writer killed mid-way
    tmp.mkdir()
    (tmp / "model.safetensors").write_bytes(b"half")
    assert resumable_checkpoint(tmp_path, log=None).name == "step-0000001"
    save(tmp_path, 2)
    assert not tmp.exists()


def test_resume_from_older_checkpoint_drops_the_newer_history(tmp_path):
    for step in (1, 2, 3):
        save(tmp_path, step, keep=3)
    save(tmp_path, 2, keep=3)  # a run resumed from step 1 reaches step 2 again
    assert [s for s, _ in list_checkpoints(tmp_path)] == [1, 2]
    assert (tmp_path / "checkpoints/latest").read_text() == "step-0000002"
