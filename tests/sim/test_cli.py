"""`rollalloc simulate` and `rollalloc report` end to end (tiny runs)."""

from __future__ import annotations

import json

import pytest

from rollalloc.cli import main
from rollalloc.settings import parse_set

TINY = [
    "simulate",
    "--preset",
    "uniform",
    "--seeds",
    "0,1",
    "--budget-rollouts",
    "6000",
    "--train-prompts",
    "16",
    "--group-size",
    "8",
    "--eval-points",
    "10",
    "--no-progress",
]


def test_simulate_writes_a_report_and_report_rebuilds_it(tmp_path, capsys):
    out = tmp_path / "sim"
    rc = main(
        TINY
        + [
            "--strategies",
            "grpo,pilot-commit,oracle",
            "--out",
            str(out),
            "--set",
            "pilot-commit.n_pilot=4",
            "--set",
            "sim.staleness_decay=0.5",
        ]
    )
    assert rc == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["kind"] == "simulate" and summary["task"] == "uniform"
    assert set(summary["strategies"]) == {"grpo", "pilot-commit", "oracle"}
    cfg = summary["strategy_configs"]
    # --group-size 8 gives 2 + 6; --set n_pilot=4 keeps the group at 8: n_commit takes the rest
    assert (cfg["pilot-commit"]["n_pilot"], cfg["pilot-commit"]["n_commit"]) == (4, 4)
    assert cfg["grpo"]["n"] == 8 and cfg["grpo"]["train_prompts"] == 16
    assert summary["extra"]["preset"]["sim"]["staleness_decay"] == 0.5
    assert summary["extra"]["preset"]["sim"]["ref_group_size"] == 8
    for s in summary["strategies"].values():
        assert s["total_rollouts"] >= 6000
    phases = summary["strategies"]["pilot-commit"]["rollouts_by_phase"]
    assert phases["pilot"] > 0 and phases["commit"] > 0
    (out / "report.html").unlink()
    assert main(["report", str(out)]) == 0
    assert (out / "report.html").is_file()
    assert json.loads((out / "summary.json").read_text()) == summary


def test_yaml_config_and_flag_precedence(tmp_path):
    cfg = tmp_path / "sim.yaml"
    cfg.write_text(
        "preset: uniform\nseeds: [0, 1]\nbudget_rollouts: 4000\ntrain_prompts: 16\ngroup_size: 8\n"
        "eval_points: 8\nstrategies:\n  grpo: {}\n  dapo: {gen_prompts: 32}\n"
        "sim: {staleness_decay: 0.7}\n"
    )
    out = tmp_path / "o"
    assert (
        main(
            [
                "simulate",
                "--config",
                str(cfg),
                "--out",
                str(out),
                "--no-progress",
                "--group-size",
                "4",
            ]
        )
        == 0
    )
    summary = json.loads((out / "summary.json").read_text())
    assert summary["strategy_configs"]["dapo"]["gen_prompts"] == 32
    assert summary["strategy_configs"]["dapo"]["n"] == 4  # the flag beats the file
    assert summary["extra"]["preset"]["sim"]["staleness_decay"] == 0.7


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--strategies", "grpo", "--set", "grpo.no_such_option=1"], "no_such_option"),
        (["--strategies", "grpo,nope"], "unknown strategy 'nope'"),
        (["--strategies", "dapo"], "baseline 'grpo'"),
        (["--strategies", "grpo", "--set", "dapo.n=4"], "not in the run"),
        (["--strategies", "grpo", "--set", "sim.nonsense=1"], "nonsense"),
        (["--strategies", "grpo", "--preset", "missing.json"], "missing.json"),
        (
            ["--strategies", "grpo,posterior-signal", "--set", "posterior-signal.strata=level"],
            "column 'level' (pool_columns) is not a column of preset",
        ),
    ],
)
def test_errors_name_the_problem(tmp_path, capsys, extra, message):
    assert main(TINY + extra + ["--out", str(tmp_path / "x")]) == 2
    assert message in capsys.readouterr().err


def test_parse_set():
    # the one grammar of train, compare and simulate (rollalloc.settings; tests/test_settings.py)
    assert parse_set("options.pilot-commit.p_lower=0.2") == (
        ("options", "pilot-commit", "p_lower"),
        0.2,
    )
    assert parse_set("options.cero.eta=null") == (("options", "cero", "eta"), None)
    assert parse_set("dapo.on_max_rounds=train") == (("dapo", "on_max_rounds"), "train")
    with pytest.raises(ValueError, match="expected KEY=VALUE"):
        parse_set("n_pilot")


def test_unknown_settings_field_is_named(tmp_path, capsys):
    assert main(TINY + ["--set", "budget=4", "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert "--set 'budget=4': budget: unknown field (known: strategies, preset" in err


def test_a_failing_run_is_reported_and_the_others_are_written(tmp_path, capsys, monkeypatch):
    # Issue 15: one run that fails (here: a bug injected into cero at step 3 of seed 1) must not
    # take the comparison with it; summary.json and report.html name the run, the step and why.
    from rollalloc.strategies.cero import Cero

    real = Cero._next_request

    def broken(self):
        if self.seed == 1 and self.step == 3:
            raise RuntimeError("injected failure")
        return real(self)

    monkeypatch.setattr(Cero, "_next_request", broken)
    out = tmp_path / "sim"
    rc = main(TINY + ["--strategies", "grpo,cero", "--out", str(out)])
    assert rc == 0
    summary = json.loads((out / "summary.json").read_text())
    stopped = summary["extra"]["stopped_runs"]
    assert list(stopped) == ["cero/1"]
    assert stopped["cero/1"].startswith("failed at step 3 after ")
    assert "RuntimeError: injected failure" in stopped["cero/1"]
    assert summary["strategies"]["grpo"]["total_rollouts"] >= 6000  # the other runs are whole
    assert "injected failure" in (out / "report.html").read_text()
    assert "run cero/1 stopped early: failed at step 3" in capsys.readouterr().err
