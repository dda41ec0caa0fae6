"""The testbed configs in configs/ are what the code says they are (one source of truth)."""

from __future__ import annotations

from pathlib import Path

from rollalloc.train.config import PAPER_TESTBED, config_from_dict, load_config

ROOT = Path(__file__).resolve().parents[2]


def test_paper_testbed_yaml_is_the_built_in_one():
    assert load_config(ROOT / "configs" / "testbed-paper.yaml") == PAPER_TESTBED


def test_every_testbed_config_loads_and_validates():
    for path in sorted((ROOT / "configs").glob("testbed*.yaml")):
        d = load_config(path)
        d.setdefault("budget_rollouts", 98304)
        cfg = config_from_dict(d)
        assert cfg.task == "arith", path


def test_demo_runs_a_reduced_paper_testbed(monkeypatch):
    import argparse

    from rollalloc.train import cli

    seen = {}
    monkeypatch.setattr(cli, "_run_compare", lambda base, *a, **k: seen.update(base=base, args=a))
    cli.cmd_demo(argparse.Namespace(budget_rollouts=None, out="x", workers=2, resume=False))
    base = seen["base"]
    assert base["budget_rollouts"] == cli.DEMO_BUDGET < PAPER_TESTBED["budget_rollouts"]
    assert {k: v for k, v in base.items() if k != "budget_rollouts"} == {
        k: v for k, v in PAPER_TESTBED.items() if k != "budget_rollouts"
    }
    assert seen["args"][1] == "0"  # one seed
