"""benchmarks/level_gains.py: per-level held-out gains and their difference from the baseline."""

from __future__ import annotations

import json

import numpy as np
import pytest


def write_runs(root, strategy, gains, pool_levels=None):
    """Runs whose held-out accuracy per level rises by gains[seed][level] from 0.3 in 3 evals."""
    for seed, g in enumerate(gains):
        d = root / strategy / f"seed{seed}"
        d.mkdir(parents=True)
        evals = []
        for i, x in enumerate((0, 50, 100)):
            lv = {f"accuracy_{k}": 0.3 + g[k] * i / 2 for k in g}
            evals.append({"cum_rollouts": x, "accuracy": float(np.mean(list(lv.values()))), **lv})
        (d / "evals.jsonl").write_text("".join(json.dumps(e) + "\n" for e in evals))
        cfg = {"budget_rollouts": 100, "pool_levels": pool_levels}
        (d / "run.json").write_text(json.dumps({"config": cfg}))


def test_level_gains_means_and_differences(load_benchmark, tmp_path, capsys):
    lg = load_benchmark("level_gains")
    write_runs(
        tmp_path / "a", "grpo", [{"2x1d": 0.10, "4x1d": -0.02}, {"2x1d": 0.14, "4x1d": -0.04}]
    )
    write_runs(tmp_path / "a", "x", [{"2x1d": 0.02, "4x1d": 0.01}] * 3)
    write_runs(tmp_path / "b", "grpo", [{"2x1d": 0.3, "4x1d": -0.2}], pool_levels=["2x1d"])
    lg.main(["--roots", str(tmp_path / "a"), f"{tmp_path / 'b'}=short"])
    out = capsys.readouterr().out
    rows = {line.split("|")[1].strip(): line for line in out.splitlines() if line.startswith("| ")}
    # grpo: mean of 0.10 / 0.14 = +12.0 points on 2x1d, -3.0 on 4x1d, overall their mean +4.5
    assert "| grpo | 2 | +4.5 " in rows["grpo"] and "+12.0 [+10.0, +14.0]" in rows["grpo"]
    assert "| x | 3 | +1.5 [+1.5, +1.5] | +2.0 [+2.0, +2.0] | +1.0 [+1.0, +1.0] |" in out
    # x - grpo on 2x1d: 2.0 - 12.0 = -10.0, beyond noise (the interval is -12.0..-8.0)
    diff = out.splitlines()[out.splitlines().index(rows["x"]) + 1]
    assert "-10.0* [-12.0, -8.0]" in diff and "+4.0* [+3.0, +5.0]" in diff
    assert "| grpo:short | 1 | +5.0" in out
    with pytest.raises(SystemExit, match="unknown strategies"):
        lg.main(["--roots", str(tmp_path / "a"), "--strategies", "grpo,nope"])
