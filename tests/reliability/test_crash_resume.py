"""SIGKILL `rollalloc train` at chosen moments (inside a checkpoint write, after a step was
logged), damage the newest checkpoint, resume until done: the result must equal an uninterrupted
run exactly. The long randomised version is benchmarks/fault_injection.py."""

from __future__ import annotations

import random
import signal
import time

import pytest


@pytest.fixture(scope="module")
def fi(load_benchmark):
    return load_benchmark("fault_injection")


def test_killed_and_damaged_runs_resume_to_the_uninterrupted_result(fi, tmp_path):
    config = fi.write_config(tmp_path, max_steps=4)
    ref = tmp_path / "reference"
    assert fi.run_to_end(config, ref, [], random.Random(0), 0.0) == []
    reference = fi.final_state(ref)
    assert reference["step"] == "step-0000004" and len(reference["steps"]) == 4
    assert len(reference["rollouts"]["handles"]) > 0, "Pilot-Commit buffer should be non-empty"

    out = tmp_path / "killed"
    # 1. killed inside a checkpoint write
    proc = fi.launch(config, out, resume=False)
    while proc.poll() is None and not fi._writing(out):
        time.sleep(0.002)
    time.sleep(2 * fi.PAUSE_S)  # between two files of the write (it pauses after each)
    assert proc.poll() is None, "run finished before the kill"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    state = fi.check_checkpoints(out)
    assert state["mid_write"] and not state["unreadable"]
    # 2. resumed, killed again once two checkpoints are complete
    from rollalloc.train.checkpoint import list_checkpoints

    proc = fi.launch(config, out, resume=True)
    while proc.poll() is None and len(list_checkpoints(out)) < 2:
        time.sleep(0.002)
    assert proc.poll() is None, "run finished before the kill"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    state = fi.check_checkpoints(out)
    assert not state["unreadable"] and state["resume_step"] is not None
    # 3. the newest checkpoint is damaged on disk: the resume falls back to the previous one
    from rollalloc.train.checkpoint import resumable_checkpoint

    damaged = resumable_checkpoint(out, log=None)  # what `latest` names
    assert any(p != damaged for _, p in list_checkpoints(out))
    f = damaged / "allocator.npz"
    data = bytearray(f.read_bytes())
    data[len(data) // 2] ^= 0xFF
    f.write_bytes(bytes(data))
    proc = fi.launch(config, out, resume=True)
    assert proc.wait(timeout=120) == 0
    log = (tmp_path / "killed.log").read_text()
    assert f"skipping checkpoint {damaged.name}" in log and "falling back to" in log

    diff = fi.differences(reference, fi.final_state(out))
    assert diff == [], diff
