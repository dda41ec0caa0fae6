"""summary.json's `levels`: held-out gain per level with intervals over seeds, the difference from
the baseline with a verdict, a warning for a level taught less, and the table in report.html.

Expected values come from enumerating the bootstrap by hand: with two seeds a resample draws
{a, a} (1/4), {a, b} (1/2) or {b, b} (1/4), so a 90% percentile interval of their mean is exactly
[min, max] of the two seeds (each end has 1/4 > 5% of the mass); a strategy whose seeds are equal
has no spread; a difference of independent resamples then spans the other side's [min, max].
"""

from __future__ import annotations

import json

import pytest

from rollalloc.report import load_summary, rebuild_report, write_report
from rollalloc.report.levels import level_names, level_table
from rollalloc.report.text import level_text

X = [0, 1000, 2000, 3000, 4000]


def run(gains, a0=0.3, extra=None):
    """A run whose accuracy on each level rises linearly by gains[level] from a0; `accuracy` is
    their mean (as the evaluator's overall accuracy on equal-sized levels)."""
    evals = []
    for k, x in enumerate(X):
        lv = {f"accuracy_{L}": a0 + g * k / (len(X) - 1) for L, g in gains.items()}
        acc = sum(lv.values()) / len(lv) if lv else a0 + 0.01 * k
        evals.append(
            {"step": k, "cum_rollouts": x, "cum_tokens": 3 * x, "wall_s": k, "accuracy": acc}
            | lv
            | (extra or {})
        )
    return {
        "evals": evals,
        "steps": [{"effective_prompt_ratio": 1.0, "mean_group_reward_var": 0.1}],
    }


def runs_ab():
    """grpo: 2 seeds, 'A' +0.10 / +0.14, 'B' +0.00 / +0.02; x: 3 equal seeds, 'A' +0.02, 'B' +0.01;
    y: 3 equal seeds, 'A' +0.20 (learns A more), 'B' +0.01."""
    return {
        "grpo": {0: run({"A": 0.10, "B": 0.00}), 1: run({"A": 0.14, "B": 0.02})},
        "x": {s: run({"A": 0.02, "B": 0.01}) for s in range(3)},
        "y": {s: run({"A": 0.20, "B": 0.01}) for s in range(3)},
    }


def test_gains_intervals_and_verdicts_match_the_enumerated_bootstrap():
    table, warnings = level_table(runs_ab(), "grpo")
    assert list(table) == ["A", "B"]
    g = table["A"]["grpo"]
    assert g["gain"] == pytest.approx(0.12) and g["gain_ci"] == pytest.approx([0.10, 0.14])
    assert g["per_seed_gain"] == pytest.approx([0.10, 0.14]) and "diff" not in g
    # x - grpo on A: 0.02 - {0.10, 0.12, 0.14} -> -0.10 [-0.12, -0.08], taught less beyond noise
    x = table["A"]["x"]
    assert x["gain"] == pytest.approx(0.02) and x["gain_ci"] == pytest.approx([0.02, 0.02])
    assert x["diff"] == pytest.approx(-0.10) and x["diff_ci"] == pytest.approx([-0.12, -0.08])
    assert x["diff_verdict"] == "lower"
    # on B: 0.01 - {0.00, 0.01, 0.02} -> 0.00 [-0.01, +0.01]: within noise
    b = table["B"]["x"]
    assert b["diff"] == pytest.approx(0.0, abs=1e-9) and b["diff_ci"] == pytest.approx(
        [-0.01, 0.01]
    )
    assert b["diff_verdict"] == "within noise"
    assert table["A"]["y"]["diff_verdict"] == "higher"
    # one warning, for x, naming A and not B; y (higher on A, equal on B) gets none. Its interval
    # is the Bonferroni one over the 2 levels (95%), with two seeds again [min, max]
    assert len(warnings) == 1 and warnings[0].startswith("'x': its held-out accuracy on 1 of 2")
    assert "A -0.1000 [-0.1200, -0.0800]" in warnings[0] and " B " not in warnings[0]


def test_one_seed_gives_no_verdict():
    runs = runs_ab()
    runs["x"] = {0: run({"A": 0.02, "B": 0.01})}
    table, warnings = level_table(runs, "grpo")
    assert table["A"]["x"]["diff_verdict"] == "undefined" and warnings == []
    runs = runs_ab()
    runs["grpo"] = {0: run({"A": 0.12, "B": 0.01})}  # the baseline with one seed
    table, warnings = level_table(runs, "grpo")
    assert table["A"]["x"]["diff_verdict"] == "undefined" and warnings == []


def test_the_warning_needs_the_bonferroni_interval_below_zero():
    """x's three seeds (-0.09, -0.06, +0.01) against a baseline that gains 0 on every seed. The 27
    equally likely draws of three seeds put 1/27 = 3.7% of the mass on the mean +0.01 and 3/27 on
    (2 (+0.01) + (-0.06)) / 3 = -0.0133, the next lower one. At 90% the upper end (95th
    percentile) is -0.0133: "lower". With 6 levels the warning's interval is 98.33% (upper end the
    99.17th percentile), whose upper end is +0.01: no warning. With one level it is the 90% one."""
    bad = [-0.09, -0.06, 0.01]
    six = {L: 0.0 for L in "BCDEF"}
    runs = {
        "grpo": {k: run({"A": 0.0} | six) for k in range(3)},
        "x": {k: run({"A": g} | six) for k, g in enumerate(bad)},
    }
    table, warnings = level_table(runs, "grpo")
    assert table["A"]["x"]["diff_ci"][1] == pytest.approx(-0.04 / 3, abs=1e-6)
    assert table["A"]["x"]["diff_verdict"] == "lower" and warnings == []
    one = {
        s: {k: run({"A": r["evals"][-1]["accuracy_A"] - 0.3}) for k, r in by.items()}
        for s, by in runs.items()
    }
    table, warnings = level_table(one, "grpo")
    assert table["A"]["x"]["diff_verdict"] == "lower" and len(warnings) == 1


def test_an_interval_around_zero_is_within_noise_whatever_the_point_difference():
    """x's two seeds gain -0.10 and +0.02 on A against a constant baseline gain of 0: the point
    difference is -0.04, the enumerated 90% interval [-0.10, +0.02] contains 0."""
    runs = {
        "grpo": {k: run({"A": 0.0}) for k in range(2)},
        "x": {0: run({"A": -0.10}), 1: run({"A": 0.02})},
    }
    table, warnings = level_table(runs, "grpo")
    cell = table["A"]["x"]
    assert cell["diff"] == pytest.approx(-0.04) and cell["diff_ci"] == pytest.approx([-0.10, 0.02])
    assert cell["diff_verdict"] == "within noise" and warnings == []


def test_a_level_missing_or_not_a_number_in_some_run_is_left_out_with_a_warning():
    runs = runs_ab()
    runs["x"][1]["evals"][-1]["accuracy_B"] = float("nan")
    runs["y"][0]["evals"][0]["accuracy_C"] = 0.3  # only at y seed 0's first evaluation
    table, warnings = level_table(runs, "grpo")
    assert list(table) == ["A"]
    assert warnings[0].startswith("level(s) B, C left out of the per-level table")
    runs["x"][1]["evals"][-1]["accuracy_B"] = None
    assert list(level_table(runs, "grpo")[0]) == ["A"]


def test_levels_in_natural_order():
    names = ["10x1d", "2x1d", "3x3d", "1x4d"]
    assert level_names({"g": {0: run({L: 0.1 for L in names})}}) == [
        "1x4d",
        "2x1d",
        "3x3d",
        "10x1d",
    ]


def test_other_accuracy_metrics_are_not_levels():
    """The evaluator's accuracy_exact / _sampled / _greedy are metrics; a level missing from one
    run's evaluations is left out (a table needs it for every run)."""
    metrics = {"accuracy_exact": 0.3, "accuracy_sampled": 0.3, "accuracy_greedy": 0.2}
    runs = {
        "grpo": {0: run({"A": 0.1, "B": 0.1}, extra=metrics), 1: run({"A": 0.1}, extra=metrics)}
    }
    assert level_names(runs) == ["A"]
    assert level_table({"grpo": {0: run({}, extra=metrics)}}, "grpo") == ({}, [])


def test_levels_use_the_summarys_own_seed_resamples(tmp_path):
    """One level and every run starting at a0: accuracy = accuracy_A, so the final accuracy's
    interval (summary.py's bootstrap) is a0 + the level gain's interval, draw for draw (with 25
    resamples the interval's ends are single draws, so other draws would move them)."""
    runs = {
        "grpo": {s: run({"A": g}) for s, g in enumerate([0.05, 0.091, 0.123, 0.067, 0.104])},
        "x": {s: run({"A": g}) for s, g in enumerate([0.021, 0.063, 0.042, 0.087])},
    }
    summary = write_report(
        tmp_path,
        kind="compare",
        task="t",
        seeds=[0, 1, 2, 3, 4],
        budget_rollouts=4000,
        runs=runs,
        strategy_configs={},
        bootstrap_resamples=25,
        level=0.8,
    )
    for s in runs:
        lo, hi = summary["strategies"][s]["final_accuracy_ci"]
        assert summary["levels"]["A"][s]["gain_ci"] == pytest.approx([lo - 0.3, hi - 0.3])
    x = summary["levels"]["A"]["x"]
    assert x["diff_ci"] == pytest.approx(summary["vs_baseline"]["x"]["final_accuracy_diff_ci"])
    assert x["diff_verdict"] == summary["vs_baseline"]["x"]["final_accuracy_verdict"]


def test_report_shows_the_table_and_the_warning_and_rebuilds(tmp_path):
    runs = runs_ab()
    write_report(
        tmp_path,
        kind="compare",
        task="t",
        seeds=[0, 1, 2],
        budget_rollouts=4000,
        runs=runs,
        strategy_configs={},
    )
    summary = load_summary(tmp_path)
    assert summary["levels"]["A"]["x"]["diff_verdict"] == "lower"
    assert any(w.startswith("'x': its held-out accuracy") for w in summary["warnings"])
    assert level_text(summary, "A", "x") == (
        "+0.0200 [+0.0200, +0.0200]",
        "-0.1000 [-0.1200, -0.0800] lower",
    )
    assert level_text(summary, "A", "grpo")[1] == "" and level_text(summary, "Z", "x") == (
        "n/a",
        "",
    )
    html = (tmp_path / "report.html").read_text()
    assert "Held-out gain per level" in html
    assert '-0.1000 [-0.1200, -0.0800] <span class="lower">lower</span>' in html
    before = json.loads((tmp_path / "summary.json").read_text())["levels"]
    assert rebuild_report(tmp_path)["levels"] == before


def test_no_levels_no_table(tmp_path):
    runs = {s: {k: run({}) for k in range(2)} for s in ("grpo", "x")}
    summary = write_report(
        tmp_path,
        kind="compare",
        task="t",
        seeds=[0, 1],
        budget_rollouts=4000,
        runs=runs,
        strategy_configs={},
    )
    assert summary["levels"] == {}
    assert "Held-out gain per level" not in (tmp_path / "report.html").read_text()


def test_simulate_reports_the_presets_held_out_levels(tmp_path):
    """The simulator's evaluations carry accuracy_<level> for the levels of a preset that are in
    its held-out set (eval_share > 0), and `rollalloc simulate` reports exactly those."""
    from importlib.resources import files

    from rollalloc.cli import main

    preset = json.loads((files("rollalloc.sim") / "presets" / "testbed-paper.json").read_text())
    held_out = sorted(lv["name"] for lv in preset["levels"] if lv["eval_share"] > 0)
    assert 0 < len(held_out) < len(preset["levels"])  # the check needs a level left out
    out = tmp_path / "sim"
    argv = ["simulate", "--preset", "testbed-paper", "--seeds", "0,1", "--budget-rollouts", "4096"]
    argv += ["--group-size", "32", "--train-prompts", "16", "--eval-points", "4", "--no-progress"]
    assert main(argv + ["--strategies", "grpo,dapo", "--out", str(out)]) == 0
    levels = load_summary(out)["levels"]
    assert sorted(levels) == held_out
    assert all(set(levels[L]) == {"grpo", "dapo"} for L in held_out)
