"""benchmarks/evicted_levels.py: each level's share of prompts that a run's last checkpoint holds as
evicted / deferred. The statuses are set by hand per level on a real allocator's state, saved the
way the trainer saves it, and the pool is rebuilt from run.json."""

from __future__ import annotations

import json

import numpy as np
import pytest

from rollalloc import make_allocator
from rollalloc.state import DEFERRED, EVICTED, save_state
from rollalloc.tasks import run_pool

CONFIG = {"task": "arith", "data_seed": 3,
          "task_config": {"terms": [2, 5], "weights": [1, 1], "num_train": 40, "num_eval": 8}}  # fmt: skip


def write_run(root, seed, status_of):
    """A seedS/ run whose allocator holds status_of(levels) at its last checkpoint."""
    run = root / f"seed{seed}"
    (run / "checkpoints" / "step-0000003").mkdir(parents=True)
    (run / "checkpoints" / "step-0000001").mkdir()  # an older one, not read
    (run / "run.json").write_text(json.dumps({"config": CONFIG}))
    levels = np.asarray(run_pool(CONFIG).train["level"])
    alloc = make_allocator(
        "pilot-commit", num_prompts=len(levels), seed=0, train_prompts=4, n_pilot=2, n_commit=6
    )
    alloc.table.status[:] = status_of(levels)
    save_state(run / "checkpoints" / "step-0000003" / "allocator.npz", alloc.state_dict())
    save_state(run / "checkpoints" / "step-0000001" / "allocator.npz",
               make_allocator("pilot-commit", num_prompts=len(levels), seed=0, train_prompts=4, n_pilot=2,
                              n_commit=6).state_dict())  # fmt: skip
    return run, levels


def test_shares_per_level_averaged_over_runs(tmp_path, load_benchmark):
    ev = load_benchmark("evicted_levels")

    def first(levels):  # every 2-term prompt evicted, the 5-term ones active
        return np.where(levels == "2x1d", EVICTED, 0)

    def second(levels):  # the first 5-term prompt deferred, the rest active
        out = np.zeros(len(levels), dtype=np.int8)
        out[np.flatnonzero(levels == "5x1d")[0]] = DEFERRED
        return out

    a, levels = write_run(tmp_path, 0, first)
    b, _ = write_run(tmp_path, 1, second)
    n5 = int((levels == "5x1d").sum())
    assert 0 < n5 < len(levels)
    got = ev.level_shares([a, b])
    assert got["2x1d"] == pytest.approx((0.5, 0.0))  # 1.0 and 0.0 evicted
    assert got["5x1d"] == pytest.approx((0.0, 0.5 / n5))


def test_a_run_without_a_checkpoint_or_of_another_pool_is_refused(tmp_path, load_benchmark):
    ev = load_benchmark("evicted_levels")
    run, _ = write_run(tmp_path, 0, lambda lv: np.zeros(len(lv), dtype=np.int8))
    other = json.loads((run / "run.json").read_text())
    other["config"]["task_config"]["num_train"] = 30
    (run / "run.json").write_text(json.dumps(other))
    with pytest.raises(SystemExit, match="40 prompts in the allocator, 30 in the pool"):
        ev.level_shares([run])
    bare = tmp_path / "seed9"
    bare.mkdir()
    with pytest.raises(SystemExit, match="no checkpoints"):
        ev.last_state(bare)
