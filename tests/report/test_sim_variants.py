"""benchmarks/sim_variants.py: named variants of one strategy simulated side by side. Expected values
come from separate `rollalloc simulate` runs of each variant (the same settings, its options set
by --set), not from the script's own bookkeeping."""

from __future__ import annotations

import csv
import json

import pytest

from rollalloc.cli import main as cli

COMMON = [
    "--preset", "uniform", "--seeds", "0,1", "--budget-rollouts", "6000", "--train-prompts", "16",
    "--group-size", "8",
]  # fmt: skip


def _rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_parse_variant_names_the_bad_part(load_benchmark):
    sv = load_benchmark("sim_variants")
    assert sv.parse_variant("w2=likelihood-rank:window=2,unseen=wrong") == (
        "w2",
        "likelihood-rank",
        ["options.likelihood-rank.window=2", "options.likelihood-rank.unseen=wrong"],
    )
    assert sv.parse_variant("g=grpo") == ("g", "grpo", [])
    with pytest.raises(SystemExit, match="NAME=STRATEGY"):
        sv.parse_variant("likelihood-rank")
    with pytest.raises(SystemExit, match="is not KEY=VALUE"):
        sv.parse_variant("w=likelihood-rank:window")


def test_each_variant_is_its_own_run_under_its_own_name(load_benchmark, tmp_path):
    sv = load_benchmark("sim_variants")
    out = tmp_path / "v"
    assert sv.main(["--out", str(out), "grpo=grpo", "w1=likelihood-rank",
                    "w3=likelihood-rank:window=3", "--", *COMMON]) == 0  # fmt: skip
    rows = _rows(out / "curves.csv")
    assert sorted({r["strategy"] for r in rows}) == ["grpo", "w1", "w3"]
    speed = json.loads((out / "speedups.json").read_text())
    for name, extra in (("w1", []), ("w3", ["--set", "options.likelihood-rank.window=3"])):
        alone = tmp_path / f"alone-{name}"
        cli(["simulate", "--no-progress", "--strategies", "grpo,likelihood-rank", "--out",
             str(alone), *COMMON, *extra])  # fmt: skip
        want = [r for r in _rows(alone / "curves.csv") if r["strategy"] == "likelihood-rank"]
        got = [r for r in rows if r["strategy"] == name]
        key = ("seed", "cum_rollouts", "accuracy")
        assert [tuple(r[k] for k in key) for r in got] == [tuple(r[k] for k in key) for r in want]
        summary = json.loads((alone / "summary.json").read_text())
        assert speed[name]["speedup"] == summary["speedup"]["likelihood-rank"]["grpo"]
    w1 = [r["accuracy"] for r in rows if r["strategy"] == "w1"]
    assert w1 != [r["accuracy"] for r in rows if r["strategy"] == "w3"]  # the option took effect
    assert sum(r["strategy"] == "grpo" for r in rows) == len(w1)  # the baseline once
    with pytest.raises(SystemExit, match="exists"):
        sv.main(["--out", str(out), "grpo=grpo", "--", *COMMON])
