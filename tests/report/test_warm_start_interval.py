"""benchmarks/warm_start_interval.py: Student's t quantiles against the printed table, and the
interval's coverage by Monte Carlo (speedups log-normal around a known centre)."""

from __future__ import annotations

import json

import numpy as np
import pytest


@pytest.fixture(scope="module")
def wsi(load_benchmark):
    return load_benchmark("warm_start_interval")


def test_t_quantiles_match_the_table(wsi):
    # t_{0.95, df} from any statistics table
    for df, want in ((1, 6.314), (2, 2.920), (3, 2.353), (4, 2.132), (9, 1.833), (30, 1.697)):
        assert wsi.t_quantile(0.95, df) == pytest.approx(want, abs=2e-3), df


def test_interval_covers_the_centre_nine_times_in_ten(wsi):
    rng = np.random.default_rng(0)
    centre, hits, trials = 1.5, 0, 2000
    for _ in range(trials):
        x = centre * np.exp(rng.normal(0.0, 0.3, size=4))
        _, (lo, hi) = wsi.across(list(x))
        hits += lo <= centre <= hi
    assert 0.87 <= hits / trials <= 0.93


def test_table_from_summaries_names_a_never(wsi, tmp_path, capsys):
    def summary(x):
        return {"target": {"baseline": "grpo"}, "speedup": {"ps": {"grpo": x}},
                "speedup_ci": {"ps": {"grpo": [None, None] if x is None else [x / 2, x * 2]}},
                "strategies": {"grpo": {"rollouts_to_target": 100.0},
                               "ps": {"rollouts_to_target": None if x is None else 100.0 / x}}}  # fmt: skip

    paths = []
    for label, x in (("a", 2.0), ("b", 8.0), ("c", None)):
        p = tmp_path / f"{label}.json"
        p.write_text(json.dumps(summary(x)))
        paths.append(f"{label}={p}")
    out = tmp_path / "t.json"
    assert wsi.main([*paths, "--strategies", "ps", "--out", str(out)]) == 0
    res = json.loads(out.read_text())["ps vs baseline"]
    assert res["geometric_mean"] == pytest.approx(4.0)
    assert res["never"] == ["c"]
    assert "ps never" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="no strategy 'mopps'"):
        wsi.main([*paths, "--strategies", "mopps"])


def test_never_budget_enters_the_never_as_a_bound_in_its_favour(wsi, tmp_path, capsys):
    # budget 400 rollouts; GRPO reaches the target at 100 on every warm start. ps reaches it at 50
    # (2x) and 25 (4x) on two, never on the third: counted at the budget it is 100/400 = 0.25x, so
    # the geometric mean is (2 * 4 * 0.25)^(1/3) = 2^(1/3). With GRPO never and ps at 50, the bound
    # is 400/50 = 8x ("ps at least 8x").
    def summary(r_ps, r_grpo=100.0):
        x = None if r_ps is None or r_grpo is None else r_grpo / r_ps
        return {"target": {"baseline": "grpo"}, "budget_rollouts": 400,
                "speedup": {"ps": {"grpo": x}}, "speedup_ci": {"ps": {"grpo": None}},
                "strategies": {"grpo": {"rollouts_to_target": r_grpo},
                               "ps": {"rollouts_to_target": r_ps}}}  # fmt: skip

    def run(cases):
        paths = []
        for label, r_ps, r_grpo in cases:
            p = tmp_path / f"{label}.json"
            p.write_text(json.dumps(summary(r_ps, r_grpo)))
            paths.append(f"{label}={p}")
        out = tmp_path / "t.json"
        assert wsi.main([*paths, "--strategies", "ps", "--never", "budget", "--out", str(out)]) == 0
        return json.loads(out.read_text())["ps vs baseline"]

    res = run((("a", 50.0, 100.0), ("b", 25.0, 100.0), ("c", None, 100.0)))
    assert res["geometric_mean"] == pytest.approx(2 ** (1 / 3))
    assert res["never"] == ["c"] and res["per_warm_start"]["c"] == "<=0.25x (ps never)"
    res = run((("a", 50.0, 100.0), ("c", 50.0, None)))
    assert res["per_warm_start"]["c"] == ">=8.00x (grpo never)"
    assert res["geometric_mean"] == pytest.approx(4.0)  # sqrt(2 * 8)
    assert "bounded on c" in capsys.readouterr().out
