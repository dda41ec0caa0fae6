"""benchmarks/fit_level_grid.py: the grid picks the parameters that made its "real" curves."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PRESET = ROOT / "benchmarks/presets/testbed-default-disjoint-s37-measured.json"
SIM = ["--group-size", "8", "--budget-rollouts", "4096", "--eval-every-rollouts", "1024"]


def _real_grpo(truth: dict, tmp_path: Path, shift_2x1d: float = 0.0, options=()) -> Path:
    """ "Real" GRPO runs: the preset `truth` simulated on the seeds the grids simulate, named
    realGrpo, every 2x1d accuracy moved by `shift_2x1d`, GRPO's `options` (KEY=VALUE) set; the
    CSV's path."""
    (tmp_path / "truth.json").write_text(json.dumps(truth))
    out = tmp_path / "sim"
    cmd = [sys.executable, "-m", "rollalloc.cli", "simulate", "--no-progress", "--out", str(out),
           "--preset", str(tmp_path / "truth.json"), "--strategies", "grpo", "--seeds", "0,1",
           "--train-prompts", "64", *SIM]  # fmt: skip
    for kv in options:
        cmd += ["--set", f"options.grpo.{kv}"]
    subprocess.run(cmd, check=True, capture_output=True)
    with open(out / "curves.csv", newline="") as f, open(tmp_path / "real.csv", "w") as g:
        rows = list(csv.DictReader(f))
        w = csv.DictWriter(g, fieldnames=list(rows[0]))
        w.writeheader()
        for r in rows:
            r["accuracy_2x1d"] = str(float(r["accuracy_2x1d"]) + shift_2x1d)
            w.writerow({**r, "strategy": "realGrpo"})
    return tmp_path / "real.csv"


def test_the_grid_finds_the_contrast_decay_and_ceiling_it_simulated(tmp_path, load_benchmark):
    # "real" GRPO runs: the preset with contrast_decay 4 and 2x1d's ceiling 0.5, simulated on the
    # seeds the grid simulates; the grid {0, 4} x {0.5, 0.65} must find them at loss 0
    grid = load_benchmark("fit_level_grid")
    truth = json.loads(PRESET.read_text())
    truth["sim"]["contrast_decay"] = 4.0
    next(lv for lv in truth["levels"] if lv["name"] == "2x1d")["ceiling"] = 0.5
    _real_grpo(truth, tmp_path)
    best = tmp_path / "best.json"
    grid.main([
        "--preset", str(PRESET), "--real", f"{tmp_path / 'real.csv'}:realGrpo:64",
        "--grid", "sim.contrast_decay=0,4", "--grid", "2x1d.ceiling=0.5,0.65", "--seeds", "0,1",
        "--table", str(tmp_path / "table.json"), "--out", str(best), "--", *SIM,
    ])  # fmt: skip
    table = json.loads((tmp_path / "table.json").read_text())
    assert table[0]["point"] == {"sim.contrast_decay": 4.0, "2x1d.ceiling": 0.5}
    assert table[0]["loss"] == pytest.approx(0.0, abs=1e-12) and table[1]["loss"] > 1e-6
    got = json.loads(best.read_text())
    assert got["sim"]["contrast_decay"] == 4.0 and got["levels"][0]["ceiling"] == 0.5
    assert "fit_level_grid.py on GRPO alone" in got["source"]


def test_a_real_set_of_grpo_with_small_steps_is_simulated_with_them(tmp_path, load_benchmark):
    # "real" runs: GRPO with a one-prompt step after each full one, on the preset with wear 0.01 in
    # prompts. Simulated with the same option the grid finds wear 0.01 at loss 0; simulated as
    # plain GRPO (the option left out) no candidate matches the curves
    grid = load_benchmark("fit_level_grid")
    truth = json.loads(PRESET.read_text())
    truth["sim"].update(wear_unit="prompts", wear_rate=0.01, wear_noise=7.0)
    real = _real_grpo(truth, tmp_path, options=("small_every=1",))
    args = ["--grid", "sim.wear_unit=prompts", "--grid", "sim.wear_rate=0,0.01", "--grid",
            "sim.wear_noise=7", "--seeds", "0,1", "--table", str(tmp_path / "t.json"), "--", *SIM]  # fmt: skip
    grid.main(["--preset", str(PRESET), "--real", f"{real}:realGrpo:64:small_every=1", *args])
    rows = json.loads((tmp_path / "t.json").read_text())
    assert list(rows[0]["by_real_set"]) == ["realGrpo:small_every=1"]
    losses = {r["point"]["sim.wear_rate"]: r["loss"] for r in rows}
    assert losses[0.01] == pytest.approx(0.0, abs=1e-12) and losses[0] > 1e-6
    # plain GRPO evaluates at other cum_rollouts (8 fewer rollouts a small step): only the start
    # would match, which scored every candidate 0 before this was refused
    with pytest.raises(SystemExit, match="no evaluation after the start is at the simulated"):
        grid.main(["--preset", str(PRESET), "--real", f"{real}:realGrpo:64", *args])
    with pytest.raises(SystemExit, match="CSV:NAME:TRAIN_PROMPTS"):
        grid.main(["--preset", str(PRESET), "--real", f"{real}:realGrpo:64:small_every="])


def test_a_gap_set_is_scored_by_its_difference_from_its_base(tmp_path, load_benchmark):
    # "real" runs on another warm start: the truth (wear 0.01) with every 2x1d accuracy 0.05
    # higher, plain GRPO and GRPO with small steps. Scored directly both sets pay the offset at every
    # candidate; the small steps scored as their gap from plain GRPO find wear 0.01 at 0
    grid = load_benchmark("fit_level_grid")
    truth = json.loads(PRESET.read_text())
    truth["sim"].update(wear_unit="prompts", wear_rate=0.01, wear_noise=7.0)
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    plain = _real_grpo(truth, tmp_path / "a", shift_2x1d=0.05)
    small = _real_grpo(truth, tmp_path / "b", shift_2x1d=0.05, options=("small_every=1",))
    small.write_text(small.read_text().replace("realGrpo", "realSmall"))
    table = tmp_path / "t.json"
    args = ["--grid", "sim.wear_unit=prompts", "--grid", "sim.wear_rate=0,0.01", "--grid",
            "sim.wear_noise=7", "--seeds", "0,1", "--table", str(table), "--", *SIM]  # fmt: skip
    grid.main([
        "--preset", str(PRESET), "--real", f"{plain}:realGrpo:64",
        "--real", f"{small}:realSmall:64:small_every=1", "--gap", "realSmall=realGrpo", *args,
    ])  # fmt: skip
    by = {r["point"]["sim.wear_rate"]: r["by_real_set"] for r in json.loads(table.read_text())}
    assert by[0.01]["realSmall:small_every=1"] == pytest.approx(0.0, abs=1e-12)
    assert by[0]["realSmall:small_every=1"] > 1e-6
    assert all(set(b) == {"realSmall:small_every=1"} for b in by.values())  # the base: not alone
    grid.main([
        "--preset", str(PRESET), "--real", f"{plain}:realGrpo:64",
        "--real", f"{small}:realSmall:64:small_every=1", "--gap", "realSmall=realGrpo",
        "--score-base", "realGrpo", *args,
    ])  # fmt: skip
    alone = {r["point"]["sim.wear_rate"]: r["by_real_set"] for r in json.loads(table.read_text())}
    assert min(b["realGrpo"] for b in alone.values()) > 0.0025  # the offset, at least once
    assert alone[0.01]["realSmall:small_every=1"] == by[0.01]["realSmall:small_every=1"]
    two = ["--preset", str(PRESET), "--real", f"{plain}:realGrpo:64",
           "--real", f"{small}:realSmall:64:small_every=1"]  # fmt: skip
    for bad, msg in (
        (["--gap", "realSmall=realSmall"], "two different NAMEs"),
        (["--gap", "x=realGrpo"], "NAME=BASE"),
        (["--gap", "realSmall=realGrpo", "--gap", "realSmall=realGrpo"], "already has a base"),
        (["--gap", "realSmall=realGrpo", "--gap", "realGrpo=realSmall"], "not supported"),
        (["--gap", "realSmall=realGrpo", "--score-base", "realSmal"], "not the base of any"),
    ):
        with pytest.raises(SystemExit, match=msg):
            grid.main([*two, *bad])


def test_difference_interpolates_the_base_at_the_other_evaluations(load_benchmark):
    grid = load_benchmark("fit_level_grid")
    base = {"a": {0.0: 0.5, 100.0: 0.7, 200.0: 0.6}, "b": {0.0: 0.1}}
    other = {"a": {0.0: 0.5, 25.0: 0.6, 150.0: 0.6, 250.0: 0.9}, "c": {0.0: 0.2}}
    got = grid.difference(other, base)
    # by hand: at 25 the base is 0.5 + 0.25 * 0.2 = 0.55; at 150 it is 0.65; 250 is past its end
    assert set(got) == {"a"} and set(got["a"]) == {0.0, 25.0, 150.0}
    assert got["a"][0.0] == 0.0
    assert got["a"][25.0] == pytest.approx(0.05) and got["a"][150.0] == pytest.approx(-0.05)


def test_a_wrong_grid_key_fails_before_any_simulation(load_benchmark):
    grid = load_benchmark("fit_level_grid")
    for spec, msg in (("9x1d.ceiling=0.5", "no level '9x1d'"), ("gains=a", "must be numbers"),
                      ("ceiling", "KEY=V1"), ("3x1d/9x1d.plasticity=0.5", "no level '9x1d'"),
                      ("2x1d.ceilng=0.5", "no field 'ceilng'"), ("sim.contrast=1", "no field 'contrast'")):  # fmt: skip
        with pytest.raises(SystemExit, match=msg):
            grid.main(["--preset", str(PRESET), "--real", f"{PRESET}:x:64", "--grid", spec])


def test_a_grid_value_also_set_after_the_dashes_and_curves_that_never_match_are_refused(
    tmp_path, load_benchmark
):
    grid = load_benchmark("fit_level_grid")
    with pytest.raises(SystemExit, match="also set after --"):
        grid.main(["--preset", str(PRESET), "--real", f"{PRESET}:x:64", "--grid",
                   "sim.contrast_decay=0,4", "--", "--set", "sim.contrast_decay=2"])  # fmt: skip
    real = tmp_path / "real.csv"  # a level the preset does not have: no point could be scored
    real.write_text("strategy,seed,cum_rollouts,accuracy,accuracy_9x1d\nr,0,0,0.5,0.5\n")
    with pytest.raises(SystemExit, match="no \\(level, cum_rollouts\\) point"):
        grid.main(["--preset", str(PRESET), "--real", f"{real}:r:64", "--grid",
                   "sim.contrast_decay=0", "--seeds", "0", "--", *SIM])  # fmt: skip


def test_an_integer_grid_value_stays_an_integer(load_benchmark):
    # SimConfig.repeat_grace refuses 2.0: a grid over it failed in every simulation (session 40)
    grid = load_benchmark("fit_level_grid")
    key, vals = grid.parse_axis("sim.repeat_grace=0,2")
    assert key == "sim.repeat_grace" and vals == [0, 2]
    assert all(type(v) is int for v in vals)
    assert [type(v) for v in grid.parse_axis("gains=1,1.25")[1]] == [int, float]
    assert grid.parse_axis("sim.repeat_unit=visits")[1] == ["visits"]


def test_one_grid_value_for_several_levels(load_benchmark):
    grid = load_benchmark("fit_level_grid")
    preset = json.loads(PRESET.read_text())
    before = {lv["name"]: lv.get("plasticity") for lv in preset["levels"]}
    grid.apply(preset, "3x1d/5x1d/7x1d.plasticity", 0.25)
    after = {lv["name"]: lv.get("plasticity") for lv in preset["levels"]}
    assert {k for k in after if after[k] != before[k]} == {"3x1d", "5x1d", "7x1d"}
    assert after["3x1d"] == after["5x1d"] == after["7x1d"] == 0.25


def test_from_start_ignores_a_start_the_preset_misses(tmp_path, load_benchmark):
    # "real" runs: the preset with contrast_decay 4, every 2x1d accuracy moved up 0.05 (a start
    # the preset misses). Scored on accuracy, the offset is in every candidate's loss; scored on
    # gains over the start (--from-start), the truth is found at loss 0
    grid = load_benchmark("fit_level_grid")
    truth = json.loads(PRESET.read_text())
    truth["sim"]["contrast_decay"] = 4.0
    _real_grpo(truth, tmp_path, shift_2x1d=0.05)
    tables = {}
    for flag in ([], ["--from-start"]):
        table = tmp_path / f"table{len(flag)}.json"
        grid.main([
            "--preset", str(PRESET), "--real", f"{tmp_path / 'real.csv'}:realGrpo:64",
            "--grid", "sim.contrast_decay=0,4", "--seeds", "0,1", "--table", str(table), *flag,
            "--", *SIM,
        ])  # fmt: skip
        tables[len(flag)] = {
            r["point"]["sim.contrast_decay"]: r["loss"] for r in json.loads(table.read_text())
        }
    points = tables[0]  # the offset's 0.05^2 at each of the 2x1d evaluations, in both candidates
    assert min(points.values()) > 0.0025 * 4
    assert tables[1][4] == pytest.approx(0.0, abs=1e-12) and tables[1][0] > 1e-6


def test_from_start_needs_the_real_start_and_says_so_before_simulating(tmp_path, load_benchmark):
    grid = load_benchmark("fit_level_grid")
    real = tmp_path / "real.csv"  # 2x1d evaluated, but never at cum_rollouts 0
    real.write_text("strategy,seed,cum_rollouts,accuracy,accuracy_2x1d\nr,0,1024,0.5,0.5\n")
    with pytest.raises(SystemExit, match=r"no evaluation at cum_rollouts 0 for \['2x1d'\]"):
        grid.main(["--preset", str(PRESET), "--real", f"{real}:r:64", "--grid",
                   "sim.contrast_decay=0", "--from-start", "--", "--no-such-flag"])  # fmt: skip


def test_two_sets_of_one_name_are_each_scored_against_their_own_simulation(
    tmp_path, load_benchmark
):
    # "real" GRPO at 64 a step, given twice under one name: once at 64 (loss 0 at the truth) and
    # once at 32 (a different simulation). Each set is scored against its own run, so the name's
    # loss is the 32 set's alone; a run keyed by name would score both against one simulation.
    grid = load_benchmark("fit_level_grid")
    truth = json.loads(PRESET.read_text())
    real = _real_grpo(truth, tmp_path)
    table = tmp_path / "t.json"
    args = ["--grid", "sim.contrast_decay=0", "--seeds", "0,1", "--table", str(table), "--", *SIM]
    grid.main(["--preset", str(PRESET), "--real", f"{real}:realGrpo:64", *args])
    assert json.loads(table.read_text())[0]["loss"] == pytest.approx(0.0, abs=1e-12)
    grid.main(["--preset", str(PRESET), "--real", f"{real}:realGrpo:32", *args])
    at32 = json.loads(table.read_text())[0]["loss"]
    grid.main(["--preset", str(PRESET), "--real", f"{real}:realGrpo:64",
               "--real", f"{real}:realGrpo:32", *args])  # fmt: skip
    both = json.loads(table.read_text())[0]
    assert at32 > 1e-6 and both["loss"] == pytest.approx(at32, rel=1e-12)
    assert both["by_real_set"] == {"realGrpo": pytest.approx(at32, rel=1e-12)}
