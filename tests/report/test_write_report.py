"""write_report: summary.json schema, its agreement with curves.csv, plots, HTML, rebuild."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from rollalloc.report import curves, read_runs, rebuild_report, write_report

SUMMARY_KEYS = {
    "schema",
    "kind",
    "task",
    "seeds",
    "budget_rollouts",
    "initial_accuracy",
    "target",
    "strategies",
    "speedup",
    "targets_at",
}
SUMMARY_KEYS_2 = {  # added by schema /2
    "interpolation",
    "bootstrap",
    "baseline_gain",
    "speedup_ci",
    "speedup_verdict",
    "speedup_undefined_share",
    "vs_baseline",
    "warnings",
}
STRATEGY_KEYS_2 = {
    "to_target_status",
    "per_seed_to_target_status",
    "rollouts_to_target_ci",
    "tokens_to_target_ci",
    "final_accuracy_ci",
    "never_reached_share",
    "undefined_share",
}
STRATEGY_KEYS = {
    "rollouts_to_target",
    "per_seed_rollouts_to_target",
    "tokens_to_target",
    "wall_s_to_target",
    "final_accuracy",
    "peak_accuracy",
    "mean_effective_prompt_ratio",
    "total_rollouts",
}


def fake_run(rate, seed, points=21, every=1000, acc0=0.3, ceiling=0.6, epr=0.5):
    """A saturating accuracy curve; `rate` sets how fast it rises per rollout."""
    rng = np.random.default_rng(seed)
    x = np.arange(points) * every
    acc = acc0 + (ceiling - acc0) * (1 - np.exp(-rate * x)) + rng.normal(0, 0.002, points) * (x > 0)
    evals = [
        {
            "step": k * 4,
            "cum_rollouts": int(x[k]),
            "cum_tokens": int(x[k] * 700),
            "wall_s": 0.01 * k,
            "accuracy": float(acc[k]),
            "train_accuracy": float(acc[k] + 0.01),
        }
        for k in range(points)
    ]
    steps = [
        {
            "step": t,
            "effective_prompt_ratio": epr,
            "mean_group_reward_var": epr / 4,
            "rollouts_by_phase": {"rollout": every // 4},
            "discarded_rollouts": 0,
            "cum_rollouts": (t + 1) * every // 4,
        }
        for t in range(4 * (points - 1))
    ]
    return {"evals": evals, "steps": steps}


@pytest.fixture
def runs():
    return {
        "grpo": {s: fake_run(1e-4, s) for s in (0, 1)},
        "fast": {s: fake_run(2e-4, s, epr=0.9) for s in (0, 1)},
        "slow": {s: fake_run(2e-5, s) for s in (0, 1)},
    }


def write(tmp_path, runs, **kw):
    return write_report(
        tmp_path,
        kind="simulate",
        task="hand-made",
        seeds=[0, 1],
        budget_rollouts=20000,
        runs=runs,
        strategy_configs={s: {"n": 8, "fn": len} for s in runs},
        **kw,
    )


def test_summary_has_the_schema_of_benchmarks_md(tmp_path, runs):
    summary = write(tmp_path, runs)
    on_disk = json.loads((tmp_path / "summary.json").read_text())
    assert on_disk == summary
    assert SUMMARY_KEYS | SUMMARY_KEYS_2 <= set(summary)
    assert summary["schema"] == "rollalloc.summary/2" and summary["kind"] == "simulate"
    assert summary["bootstrap"] == {
        "resamples": 2000,
        "seed": 0,
        "level": 0.9,
        "method": summary["bootstrap"]["method"],
    }
    assert set(summary["vs_baseline"]) == {"fast", "slow"} and summary["warnings"] == []
    assert set(summary["target"]) == {"value", "fraction", "baseline"}
    assert summary["target"]["baseline"] == "grpo" and summary["target"]["fraction"] == 0.9
    for row in summary["strategies"].values():
        assert STRATEGY_KEYS | STRATEGY_KEYS_2 <= set(row)
        assert len(row["per_seed_rollouts_to_target"]) == 2
    assert {"0.5", "1.0"} <= set(summary["targets_at"])
    for d in summary["targets_at"].values():
        assert set(d) == {"value", "rollouts_to_target"} and set(d["rollouts_to_target"]) == set(
            runs
        )
    assert summary["strategy_configs"]["grpo"]["n"] == 8  # callables are shown, not executed
    assert isinstance(summary["strategy_configs"]["grpo"]["fn"], str)


def test_summary_numbers_match_curves_csv(tmp_path, runs):
    summary = write(tmp_path, runs)
    rows = list(csv.DictReader(open(tmp_path / "curves.csv")))
    assert {
        "strategy",
        "seed",
        "eval_point",
        "cum_rollouts",
        "cum_tokens",
        "wall_s",
        "accuracy",
    } <= set(rows[0])
    data: dict = {}
    for r in rows:
        data.setdefault(r["strategy"], {}).setdefault(int(r["seed"]), []).append(
            (float(r["cum_rollouts"]), float(r["accuracy"]))
        )
    xs = {s: [np.array([p[0] for p in v]) for v in d.values()] for s, d in data.items()}
    ys = {s: [np.array([p[1] for p in v]) for v in d.values()] for s, d in data.items()}
    grid = curves.common_grid([x for v in xs.values() for x in v])
    acc0 = np.mean([y[0] for v in ys.values() for y in v])
    assert summary["initial_accuracy"] == pytest.approx(acc0)
    _, grpo_mean = curves.seed_curves(xs["grpo"], ys["grpo"], grid)
    target = acc0 + 0.9 * (np.nanmax(grpo_mean) - acc0)
    assert summary["target"]["value"] == pytest.approx(target)
    for s in data:
        r, per_seed = curves.rollouts_to_target(xs[s], ys[s], target, grid)
        assert summary["strategies"][s]["rollouts_to_target"] == r
        assert summary["strategies"][s]["per_seed_rollouts_to_target"] == per_seed
        finals = [y[-1] for y in ys[s]]
        assert summary["strategies"][s]["final_accuracy"] == pytest.approx(
            np.mean(finals), abs=1e-6
        )
    rtt = {s: summary["strategies"][s]["rollouts_to_target"] for s in data}
    assert rtt["fast"] < rtt["grpo"] and rtt["slow"] is None  # hand-made: fast is ~2x, slow never
    assert summary["speedup"]["fast"]["grpo"] == pytest.approx(rtt["grpo"] / rtt["fast"])
    assert summary["speedup"]["slow"]["grpo"] is None
    assert summary["strategies"]["fast"]["mean_effective_prompt_ratio"] == pytest.approx(0.9)
    assert summary["strategies"]["grpo"]["total_rollouts"] == 20000
    # tokens: 700 per rollout, so tokens to target is 700 x rollouts to target (same eval points)
    assert summary["strategies"]["fast"]["tokens_to_target"] == pytest.approx(700 * rtt["fast"])


def test_plots_and_self_contained_html(tmp_path, runs):
    write(tmp_path, runs)
    for name in (
        "accuracy_vs_rollouts.png",
        "effective_prompt_ratio.png",
        "group_reward_variance.png",
        "rollouts_by_phase.png",
    ):
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    page = (tmp_path / "report.html").read_text()
    assert page.count("data:image/png;base64,") >= 4
    assert 'src="http' not in page and "<script" not in page
    assert "Speedup" in page and "&quot;n&quot;: 8" in page  # configs of every strategy


def test_rebuild_from_the_logs_gives_the_same_summary(tmp_path, runs):
    first = write(tmp_path, runs, extra={"note": "x"})
    (tmp_path / "report.html").unlink()
    assert read_runs(tmp_path)["fast"][1]["evals"][3]["accuracy"] == pytest.approx(
        runs["fast"][1]["evals"][3]["accuracy"]
    )
    again = rebuild_report(tmp_path)
    assert again == first and (tmp_path / "report.html").is_file()


def test_bad_input_names_the_problem(tmp_path, runs):
    with pytest.raises(ValueError, match="baseline strategy 'dapo'"):
        write(tmp_path, runs, baseline="dapo")
    runs["fast"][0]["evals"] = runs["fast"][0]["evals"][:1]
    with pytest.raises(ValueError, match="'fast' seed 0 has 1 evaluations"):
        write(tmp_path, runs)
    with pytest.raises(FileNotFoundError, match="not a report directory"):
        rebuild_report(tmp_path / "nothing-here")
