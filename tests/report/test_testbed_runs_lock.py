"""benchmarks/testbed_runs.sh: a run in progress is locked (its lane's PID), so a second lane given
the same run skips it instead of writing into it (two lanes once wrote into one run directory and
lost a run); a lock whose process is gone is taken, and released when the run ends."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "testbed_runs.sh"


def lane(root: Path, *train_args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(SCRIPT), "configs/testbed.yaml", "x", "grpo", "0", str(root), *train_args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_run_locked_by_a_live_lane_is_skipped(tmp_path):
    lock = tmp_path / "runs" / "x" / "seed0.lock"
    lock.mkdir(parents=True)
    (lock / "pid").write_text(f"{os.getpid()}\n")  # this process: alive
    r = lane(tmp_path)
    assert r.returncode == 1
    assert "x seed 0 skipped: another lane runs it" in r.stderr and str(os.getpid()) in r.stderr
    assert lock.is_dir() and not (tmp_path / "log-x-0.txt").exists()  # nothing started
    assert not (tmp_path / "runs" / "x" / "seed0").exists()


def test_a_stale_lock_is_taken_and_released(tmp_path):
    dead = subprocess.Popen(["true"])
    dead.wait()  # its PID is free now
    lock = tmp_path / "runs" / "x" / "seed0.lock"
    lock.mkdir(parents=True)
    (lock / "pid").write_text(f"{dead.pid}\n")
    # the run starts (and fails at once, on a field that does not exist: no training here)
    r = lane(tmp_path, "--budget-rollouts", "1024", "--set", "no_such_field=1")
    assert r.returncode == 1 and "x seed 0 failed" in r.stderr, r.stderr
    assert "no_such_field" in (tmp_path / "log-x-0.txt").read_text()
    assert not lock.exists()  # released when the run ended
