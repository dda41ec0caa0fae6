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


def test_a_memorised_warm_start_is_a_warning_in_the_report(tmp_path):
    """The warm start's memorisation check (warm_start.memorisation_check) reaches summary.json's
    warnings and the top of report.html, beside the runs' own figures."""
    import numpy as np

    from rollalloc.report import write_report
    from rollalloc.train.warmstart import memorisation_check

    rng = np.random.default_rng(0)
    held = rng.uniform(0.0, 0.2, 300)
    mem = memorisation_check(np.clip(held + 0.8, 0, 1), None, held, None)
    xs = np.arange(0, 11) * 1000.0

    def run(rate):
        return {
            "evals": [
                {"cum_rollouts": x, "cum_tokens": x, "wall_s": x, "accuracy": 0.3 + rate * x}
                for x in xs
            ],
            "steps": [{"effective_prompt_ratio": 1.0, "mean_group_reward_var": 0.1}],
        }

    runs = {"grpo": {s: run(1e-5 * (1 + 0.1 * s)) for s in range(3)}}
    summary = write_report(
        tmp_path,
        kind="compare",
        task="arith",
        seeds=[0, 1, 2],
        budget_rollouts=10000,
        runs=runs,
        strategy_configs={},
        extra={"warm_start": {"memorisation": mem}},
    )
    assert any(w.startswith("memorisation:") for w in summary["warnings"])
    page = (tmp_path / "report.html").read_text()
    assert "memorisation:" in page[: page.index("<h2>")]
