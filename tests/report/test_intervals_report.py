"""summary.json /2 end to end: the baseline sanity warning, no fake "0 rollouts to target", /1 files
still read, intervals and verdicts in report.html, the CLI table and benchmarks/summary_table.py."""

from __future__ import annotations

import importlib.util
import io
import json
import logging
from pathlib import Path

import numpy as np
import pytest

from rollalloc.report import load_summary, rebuild_report, warnings_text, write_report
from rollalloc.report.summary import NO_BASELINE_GAIN

ROOT = Path(__file__).resolve().parents[2]
X = [1000 * k for k in range(11)]


def run(acc, tokens_per_rollout=700):
    return {
        "evals": [
            {
                "step": k,
                "cum_rollouts": x,
                "cum_tokens": x * tokens_per_rollout,
                "wall_s": 0.01 * k,
                "accuracy": float(a),
            }
            for k, (x, a) in enumerate(zip(X, acc))
        ],
        "steps": [
            {"effective_prompt_ratio": 0.5, "mean_group_reward_var": 0.1, "discarded_rollouts": 0}
        ],
    }


def rising(rate, a0=0.3):
    return [a0 + 0.3 * (1 - np.exp(-rate * x)) for x in X]


def write(tmp_path, runs, **kw):
    seeds = sorted({k for by in runs.values() for k in by})
    return write_report(
        tmp_path,
        kind="simulate",
        task="t",
        seeds=seeds,
        budget_rollouts=10000,
        runs=runs,
        strategy_configs={},
        **kw,
    )


def noise_baseline():
    """Baseline seeds that do not learn: flat at 0.30 plus offsets whose seed means straddle 0."""
    offsets = [0.01, -0.01, 0.002]
    wiggle = [0.0, 0.004, -0.003, 0.002, -0.004, 0.003, -0.002, 0.001, 0.0, 0.0, 0.0]
    return {
        i: run([0.3 + (o if k > 0 else 0) + w for k, w in enumerate(wiggle)])
        for i, o in enumerate(offsets)
    }


def test_a_baseline_that_learned_nothing_is_a_loud_warning(tmp_path, caplog):
    runs = {
        "grpo": noise_baseline(),
        "fast": {i: run(rising(r)) for i, r in enumerate((3e-4, 4e-4, 5e-4))},
    }
    with caplog.at_level(logging.WARNING, logger="rollalloc.report"):
        summary = write(tmp_path, runs)
    gain = summary["baseline_gain"]
    assert not gain["learned"] and gain["final_ci"][0] <= 0 < gain["final_ci"][1]
    assert gain["peak"] > 0  # the peak of noise is above the start: why the check is on the end
    (w,) = [w for w in summary["warnings"] if "did not learn beyond noise" in w]
    assert NO_BASELINE_GAIN in w
    assert any(NO_BASELINE_GAIN in r.getMessage() for r in caplog.records)  # logged for CLIs
    assert set(summary["speedup_verdict"]["fast"].values()) == {"undefined"}
    assert json.loads((tmp_path / "summary.json").read_text())["warnings"] == summary["warnings"]
    page = (tmp_path / "report.html").read_text()
    top = page[: page.index("<h2>")]  # before the first table
    assert 'class="warn"' in top and "did not learn beyond noise" in top
    assert warnings_text(summary)[0].startswith("WARNING: ")
    # a baseline that did learn: no warning
    runs["grpo"] = {i: run(rising(r)) for i, r in enumerate((1e-4, 1.5e-4, 2e-4))}
    summary = write(tmp_path, runs)
    assert summary["baseline_gain"]["learned"] and summary["warnings"] == []
    assert 'class="warn"' not in (tmp_path / "report.html").read_text()


def test_no_fake_zero_when_the_baseline_does_not_improve(tmp_path):
    """The baseline only gets worse: its peak is the start, the target equals the initial accuracy
    and every curve "reaches" it at 0 rollouts. That is no result: null with a reason."""
    falling = [0.3 - 0.002 * k for k in range(11)]
    runs = {
        "grpo": {0: run(falling), 1: run(falling)},
        "fast": {0: run(rising(3e-4)), 1: run(rising(4e-4))},
    }
    summary = write(tmp_path, runs)
    for s in ("grpo", "fast"):
        st = summary["strategies"][s]
        assert st["rollouts_to_target"] is None and st["to_target_status"] == "no_baseline_gain"
        assert st["per_seed_rollouts_to_target"] == [None, None]
        assert st["per_seed_to_target_status"] == ["no_baseline_gain"] * 2
        assert st["tokens_to_target"] is None
    assert summary["speedup"]["fast"]["grpo"] is None
    assert summary["speedup_verdict"]["fast"]["grpo"] == "undefined"
    assert all(
        v is None for d in summary["targets_at"].values() for v in d["rollouts_to_target"].values()
    )
    assert any("never rose above the initial accuracy" in w for w in summary["warnings"])
    assert "no baseline gain" in (tmp_path / "report.html").read_text()


def test_a_curve_starting_above_the_target_is_at_start_not_zero(tmp_path):
    runs = {
        "grpo": {0: run(rising(2e-4)), 1: run(rising(2.5e-4))},
        "warm": {0: run([0.7] * 11), 1: run([0.7] * 11)},  # starts above every target
    }
    summary = write(tmp_path, runs)
    st = summary["strategies"]["warm"]
    assert st["rollouts_to_target"] is None and st["to_target_status"] == "at_start"
    assert st["per_seed_to_target_status"] == ["at_start", "at_start"]
    assert summary["speedup"]["warm"]["grpo"] is None
    assert summary["speedup_verdict"]["warm"]["grpo"] == "undefined"
    assert summary["strategies"]["warm"]["undefined_share"] == 1.0
    assert any("'warm' starts at or above the target" in w for w in summary["warnings"])


def test_within_noise_is_labelled(tmp_path):
    # the same three learning rates in another seed order: identical means, speedup exactly 1
    runs = {
        "grpo": {i: run(rising(r)) for i, r in enumerate((1e-4, 2e-4, 1.5e-4))},
        "same": {i: run(rising(r)) for i, r in enumerate((1.5e-4, 1e-4, 2e-4))},
        "fast": {i: run(rising(r)) for i, r in enumerate((4e-4, 5e-4, 6e-4))},
    }
    summary = write(tmp_path, runs)
    assert summary["speedup"]["same"]["grpo"] == pytest.approx(1.0)
    lo, hi = summary["speedup_ci"]["same"]["grpo"]
    assert lo < 1 < hi and summary["speedup_verdict"]["same"]["grpo"] == "within noise"
    assert summary["vs_baseline"]["same"]["final_accuracy_verdict"] == "within noise"
    assert summary["speedup_verdict"]["fast"]["grpo"] == "faster"
    assert summary["speedup_verdict"]["grpo"]["fast"] == "slower"
    assert summary["vs_baseline"]["fast"]["final_accuracy_verdict"] == "higher"
    page = (tmp_path / "report.html").read_text()
    assert '<span class="noise">within noise</span>' in page
    assert '<span class="faster">faster</span>' in page
    assert "1.00x [" in page and "intervals_vs_baseline.png" in page


def test_one_seed_gives_no_verdict(tmp_path):
    runs = {"grpo": {0: run(rising(1e-4))}, "fast": {0: run(rising(4e-4))}}
    summary = write(tmp_path, runs)
    ci = summary["speedup_ci"]["fast"]["grpo"]
    assert ci[0] == ci[1]  # one seed: every resample is the same run
    assert summary["speedup_verdict"]["fast"]["grpo"] == "undefined"
    assert summary["vs_baseline"]["fast"]["final_accuracy_verdict"] == "undefined"
    assert any("one seed" in w for w in summary["warnings"])


def test_adding_a_strategy_moves_no_other_comparison(tmp_path):
    # BENCHMARKS.md: the target is acc0 + f (peak(baseline) - acc0), acc0 the initial policy's
    # accuracy; so A against B (and against the baseline) may depend on A, B and the baseline only.
    # The added strategy starts higher (its own initial evaluations: another eval set, a noisy
    # first evaluation) and is evaluated more often (every 250 rollouts, not 1,000: most of the
    # evaluations of the comparison are its own).
    inits = (0.30, 0.31, 0.29)
    runs = {
        "grpo": {
            i: run(rising(r, a0)) for i, (r, a0) in enumerate(zip((1e-4, 1.5e-4, 2e-4), inits))
        },
        "fast": {i: run(rising(r, a0)) for i, (r, a0) in enumerate(zip((3e-4, 4e-4, 5e-4), inits))},
        "mid": {i: run(rising(r, a0)) for i, (r, a0) in enumerate(zip((2e-4, 2e-4, 3e-4), inits))},
    }
    odd = {}
    for i in range(4):
        xs = [250 * k for k in range(41)]
        odd[i] = {
            "evals": [
                {"step": k, "cum_rollouts": x, "cum_tokens": 700 * x, "wall_s": 0.0025 * k,
                 "accuracy": 0.40 + 0.2 * (1 - np.exp(-3e-4 * x))}
                for k, x in enumerate(xs)
            ],
            "steps": run(X)["steps"],
        }  # fmt: skip
    alone = write(tmp_path / "a", runs)
    joined = write(tmp_path / "b", {**runs, "odd": odd})
    assert joined["target"] == alone["target"]
    assert joined["initial_accuracy"] == alone["initial_accuracy"] == pytest.approx(0.30)
    for a in runs:
        for key in ("rollouts_to_target", "per_seed_rollouts_to_target", "rollouts_to_target_ci"):
            assert joined["strategies"][a][key] == alone["strategies"][a][key], (a, key)
        for b in runs:
            if a != b:
                assert joined["speedup"][a][b] == alone["speedup"][a][b]
                assert joined["speedup_ci"][a][b] == alone["speedup_ci"][a][b], (a, b)
        if a != "grpo":
            assert joined["vs_baseline"][a] == alone["vs_baseline"][a]


def v1_of(summary):
    """The /1 summary an older rollalloc wrote: only the keys of schema /1."""
    v1 = {
        k: v
        for k, v in summary.items()
        if k
        in (
            "kind",
            "task",
            "seeds",
            "budget_rollouts",
            "initial_accuracy",
            "target",
            "strategies",
            "speedup",
            "targets_at",
            "grid_spacing",
            "strategy_configs",
            "extra",
        )
    }
    v1["schema"] = "rollalloc.summary/1"
    drop = {
        "to_target_status",
        "per_seed_to_target_status",
        "rollouts_to_target_ci",
        "tokens_to_target_ci",
        "final_accuracy_ci",
        "never_reached_share",
        "undefined_share",
    }
    v1["strategies"] = {
        s: {k: v for k, v in st.items() if k not in drop} for s, st in summary["strategies"].items()
    }
    return v1


@pytest.fixture
def three(tmp_path):
    runs = {
        "grpo": {i: run(rising(r)) for i, r in enumerate((1e-4, 1.5e-4, 2e-4))},
        "fast": {i: run(rising(r)) for i, r in enumerate((3e-4, 4e-4, 5e-4))},
    }
    return runs


def test_summary_v1_still_reads_and_rebuilds(tmp_path, three):
    summary = write(tmp_path, three)
    (tmp_path / "summary.json").write_text(json.dumps(v1_of(summary)))
    assert load_summary(tmp_path)["schema"] == "rollalloc.summary/1"
    assert load_summary(tmp_path / "summary.json")["schema"] == "rollalloc.summary/1"
    again = rebuild_report(tmp_path)  # reads /1, writes /2
    assert again == summary and again["schema"] == "rollalloc.summary/2"
    (tmp_path / "summary.json").write_text('{"schema": "rollalloc.summary/3"}')
    with pytest.raises(
        ValueError, match=r"expected 'rollalloc.summary/1' or 'rollalloc.summary/2'"
    ):
        rebuild_report(tmp_path)


def test_rebuild_keeps_the_bootstrap_settings(tmp_path, three):
    first = write(tmp_path, three, bootstrap_resamples=300, bootstrap_seed=7, level=0.8)
    assert first["bootstrap"]["resamples"] == 300 and first["bootstrap"]["level"] == 0.8
    assert rebuild_report(tmp_path) == first
    other = write(tmp_path / "b", three, bootstrap_resamples=300, bootstrap_seed=8, level=0.8)
    assert other["speedup_ci"] != first["speedup_ci"]  # the RNG seed is the only difference
    assert (
        write(tmp_path / "c", three, bootstrap_resamples=300, bootstrap_seed=7, level=0.8) == first
    )


def _summary_table():
    spec = importlib.util.spec_from_file_location(
        "summary_table", ROOT / "benchmarks/summary_table.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_summary_table_prints_intervals_and_reads_v1(tmp_path, three):
    summary = write(tmp_path, three)
    mod = _summary_table()
    out = mod.table(summary)
    lo, hi = summary["speedup_ci"]["fast"]["grpo"]
    assert f"[{lo:.2f}, {hi:.2f}] faster" in out
    assert "final acc - grpo" in out and "higher" in out
    out1 = mod.table(v1_of(summary))  # a /1 summary: the numbers, no intervals
    assert "faster" not in out1 and f"{summary['speedup']['fast']['grpo']:.2f}" in out1


def test_cli_table_prints_intervals_and_warnings(tmp_path):
    from rich.console import Console

    from rollalloc.sim.cli import print_summary

    runs = {
        "grpo": noise_baseline(),
        "fast": {i: run(rising(r)) for i, r in enumerate((3e-4, 4e-4, 5e-4))},
    }
    summary = write(tmp_path, runs)
    buf = io.StringIO()
    print_summary(summary, Console(file=buf, width=200))
    text = buf.getvalue()
    assert "WARNING: the baseline 'grpo' did not learn beyond noise" in text
    assert "bootstrap intervals over seeds" in text
    lo, hi = summary["vs_baseline"]["fast"]["final_accuracy_diff_ci"]
    assert f"[{lo:+.4f}, {hi:+.4f}] higher" in text  # final accuracy - baseline, interval, verdict
    r_lo, r_hi = summary["strategies"]["fast"]["rollouts_to_target_ci"]
    assert f"[{r_lo:,.0f}, {r_hi:,.0f}]" in text
    assert "undefined" in text  # no speedup verdict without a baseline that learned


def test_simulate_writes_intervals_over_simulator_seeds(tmp_path, capsys):
    from rollalloc.cli import main

    out = tmp_path / "sim"
    argv = [
        "simulate",
        "--preset",
        "uniform",
        "--seeds",
        "0,1",
        "--budget-rollouts",
        "4000",
        "--train-prompts",
        "16",
        "--group-size",
        "8",
        "--eval-points",
        "8",
        "--no-progress",
        "--strategies",
        "grpo,pilot-commit",
        "--out",
        str(out),
    ]
    assert main(argv) == 0
    summary = load_summary(out)
    assert summary["schema"] == "rollalloc.summary/2" and summary["bootstrap"]["resamples"] == 2000
    assert (
        "pilot-commit" in summary["vs_baseline"] and "grpo" in summary["speedup_ci"]["pilot-commit"]
    )
    assert summary["strategies"]["grpo"]["final_accuracy_ci"] is not None
    err = capsys.readouterr().err
    assert "bootstrap intervals over seeds" in err
