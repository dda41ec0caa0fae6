"""Config validation, YAML loading and the compare command writing the shared report."""

from __future__ import annotations

import json

import pytest

from rollalloc.train.config import TrainConfig, config_from_dict, load_config


def test_config_errors_name_the_field(tmp_path):
    with pytest.raises(ValueError, match="learner.lrr: unknown field"):
        config_from_dict({"max_steps": 1, "learner": {"lrr": 1}})
    with pytest.raises(ValueError, match="learner.lr must be a number"):
        config_from_dict({"max_steps": 1, "learner": {"lr": "fast"}})
    with pytest.raises(ValueError, match="budget_rollouts or max_steps"):
        config_from_dict({})
    with pytest.raises(ValueError, match="group_size"):
        config_from_dict({"max_steps": 1, "group_size": 1})
    p = tmp_path / "c.yaml"
    p.write_text("max_steps: 3\nlearner:\n  lr: 2e-5\nstrategy: dapo\n")
    cfg = config_from_dict(load_config(p))
    assert cfg.learner.lr == 2e-5 and cfg.strategy == "dapo" and cfg.max_steps == 3


def test_dual_clip_option():
    assert config_from_dict({"max_steps": 1}).learner.clip_ratio_c == 3.0  # verl's default
    off = config_from_dict({"max_steps": 1, "learner": {"clip_ratio_c": None}})
    assert off.learner.clip_ratio_c is None
    assert (
        config_from_dict({"max_steps": 1, "learner": {"clip_ratio_c": "5"}}).learner.clip_ratio_c
        == 5
    )
    for bad in (1.0, 0.5, "1"):
        with pytest.raises(ValueError, match="clip_ratio_c must be > 1"):
            config_from_dict({"max_steps": 1, "learner": {"clip_ratio_c": bad}})


def test_equal_group_size_across_strategies():
    opts = {
        s: TrainConfig(strategy=s, group_size=8, max_steps=1).strategy_options()
        for s in ("grpo", "dapo", "pilot-commit", "cero")
    }
    assert opts["grpo"]["n"] == opts["dapo"]["n"] == opts["cero"]["n_max"] == 8
    assert opts["pilot-commit"]["n_pilot"] + opts["pilot-commit"]["n_commit"] == 8
    assert opts["pilot-commit"]["n_pilot"] == 2


def test_shipped_configs_load():
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "configs"
    files = sorted(root.glob("testbed*.yaml")) + sorted(root.glob("train*.yaml"))
    assert files, "no configs/testbed*.yaml shipped"
    for f in files:
        d = load_config(f)
        d.setdefault("max_steps", 1)
        config_from_dict(d)


def test_compare_runs_children_and_writes_the_report(small_config, tmp_path):
    from rollalloc.train.compare import compare, speedup_table

    base = {k: v for k, v in small_config(max_steps=3).to_dict().items() if k != "out"}
    out = tmp_path / "cmp"
    summary = compare(base, ["grpo", "dapo"], [0], out, workers=2, threads=1, log=lambda *_: None)
    assert (out / "summary.json").is_file() and (out / "report.html").is_file()
    on_disk = json.loads((out / "summary.json").read_text())
    assert on_disk["kind"] == "compare" and set(on_disk["strategies"]) == {"grpo", "dapo"}
    hist = on_disk["extra"]["warm_start"]["pass_rates"]["histogram"]
    assert sum(hist.values()) == 16 and summary["strategies"].keys() == {"grpo", "dapo"}
    assert "grpo" in speedup_table(on_disk)
    # a second compare reuses the finished runs (same configuration)
    mtime = (out / "runs/grpo/seed0/run.json").stat().st_mtime_ns
    compare(base, ["grpo", "dapo"], [0], out, workers=2, threads=1, log=lambda *_: None)
    assert (out / "runs/grpo/seed0/run.json").stat().st_mtime_ns == mtime
