"""`rollalloc compare --half-width`: rounds of seeds until every speedup interval is narrow enough.

The training runs are replaced by synthetic ones (curves rising linearly to a ceiling, whose per-seed rate is drawn
around a known mean), written where `compare` expects a finished run, so the rounds are tested in
seconds; the real runs' orchestration is tested in test_config_cli.py."""

from __future__ import annotations

import json
import zlib
from pathlib import Path

import numpy as np
import pytest

import rollalloc.train.compare as cmp

RATE = {"grpo": 5e-5, "dapo": 6.25e-5, "cero": 2e-6}  # dapo 1.25x faster; cero never gets there


def fake_run_all(calls, fail=()):
    def run_all(configs, workers, env, failed, t0, log):
        for cfg in configs.values():
            if cmp._done(cfg):
                continue
            calls.append((cfg.strategy, cfg.seed))
            if (cfg.strategy, cfg.seed) in fail:
                failed.append(f"{cfg.strategy} seed {cfg.seed}")
                continue
            rng = np.random.default_rng(zlib.crc32(f"{cfg.strategy}/{cfg.seed}".encode()))
            rate = RATE[cfg.strategy] * float(np.exp(rng.normal(0, 0.2)))
            x = np.arange(61) * 1000.0
            acc = 0.3 + 0.3 * np.minimum(1.0, rate * x) + rng.normal(0, 0.003, len(x)) * (x > 0)
            d = Path(cfg.out)
            d.mkdir(parents=True, exist_ok=True)
            evals = [
                {
                    "step": k,
                    "cum_rollouts": int(x[k]),
                    "cum_tokens": int(x[k]) * 3,
                    "wall_s": k,
                    "accuracy": float(acc[k]),
                }
                for k in range(len(x))
            ]
            (d / "evals.jsonl").write_text("".join(json.dumps(e) + "\n" for e in evals))
            steps = [
                {
                    "step": k,
                    "cum_rollouts": int(x[k + 1]),
                    "effective_prompt_ratio": 0.5,
                    "mean_group_reward_var": 0.1,
                    "discarded_rollouts": 0,
                }
                for k in range(len(x) - 1)
            ]
            (d / "steps.jsonl").write_text("".join(json.dumps(s) + "\n" for s in steps))
            run = {"config": cfg.to_dict(), "final_eval": {"accuracy": float(acc[-1])}}
            (d / "run.json").write_text(json.dumps(run))

    return run_all


@pytest.fixture
def by_precision(small_config, tmp_path, monkeypatch):
    """compare(strategies, seeds, half_width=..., max_seeds=...) on synthetic runs into tmp/cmp;
    returns (summary, the (strategy, seed) runs trained, in order). `fail`: runs that fail."""
    base = {k: v for k, v in small_config(max_steps=3).to_dict().items() if k != "out"}
    calls: list[tuple[str, int]] = []

    def run(strategies, seeds, fail=(), **kw):
        monkeypatch.setattr(cmp, "_run_all", fake_run_all(calls, fail=fail))
        summary = cmp.compare(
            base, strategies, seeds, tmp_path / "cmp", workers=2, log=lambda *_: None, **kw
        )
        return summary, calls

    return run


def test_rounds_until_every_interval_is_narrow(by_precision):
    summary, calls = by_precision(["grpo", "dapo", "cero"], [0, 1, 2], half_width=0.1, max_seeds=60)
    prec = summary["extra"]["precision"]
    seeds = prec["seeds"]
    # cero never reaches the target: decided at the first round, never run again
    assert seeds["cero"] == 3 and summary["vs_baseline"]["cero"]["speedup_ci"] == [0.0, 0.0]
    # dapo was not decided at 3 seeds: rounds ran, grpo kept up with it, and stopped once narrow
    assert len(prec["rounds"]) > 1 and seeds["dapo"] > 3 and seeds["grpo"] >= seeds["dapo"]
    lo, hi = summary["vs_baseline"]["dapo"]["speedup_ci"]
    assert (hi - lo) / 2 <= 0.1 and prec["left_open"] == {}
    assert prec["stopped"] == "every comparison decided"
    assert lo < 1.25 < hi  # the interval holds the true speedup, 6.25e-5 / 5e-5
    # the round before the last was still wide (it did not stop late), and every round added runs in
    # multiples of the workers
    assert prec["rounds"][-2]["open"]["dapo"] > 0.1
    for a, b in zip(prec["rounds"], prec["rounds"][1:]):
        assert sum(b["seeds"].values()) - sum(a["seeds"].values()) in (2, 4)
    # the runs of every strategy are seeds 0..n-1, and all are in the report
    for s, n in seeds.items():
        assert sorted(x for t, x in calls if t == s) == list(range(n))
        assert summary["strategies"][s]["seeds"] == list(range(n))
    # resumed: the same decisions, nothing run again
    before = list(calls)
    again, _ = by_precision(["grpo", "dapo", "cero"], [0, 1, 2], half_width=0.1, max_seeds=60)
    assert calls == before and again["extra"]["precision"]["rounds"] == prec["rounds"]


def test_the_cap_leaves_a_comparison_open(by_precision):
    summary, calls = by_precision(["grpo", "dapo"], [0, 1, 2], half_width=0.01, max_seeds=4)
    prec = summary["extra"]["precision"]
    assert prec["seeds"] == {"grpo": 4, "dapo": 4} and prec["left_open"]["dapo"] > 0.01
    assert prec["stopped"].startswith("at 4 seeds: dapo")
    assert len(calls) == 8


def test_seeds_follow_the_largest_and_a_failed_run_stops_the_rounds(by_precision):
    # the first round is seeds 3, 7, 11; the next seeds are 12, 13, ...; dapo's seed 13 fails
    summary, calls = by_precision(
        ["grpo", "dapo"], [11, 3, 7], fail={("dapo", 13)}, half_width=0.01, max_seeds=40
    )
    prec = summary["extra"]["precision"]
    assert sorted(calls[:6]) == sorted((s, k) for s in ("grpo", "dapo") for k in (3, 7, 11))
    assert sorted(calls[6:]) == [("dapo", 12), ("dapo", 13), ("grpo", 12), ("grpo", 13)]
    # the report holds what finished, strategies as given, seeds in order, and says why it stopped
    assert list(summary["strategies"]) == ["grpo", "dapo"]
    assert summary["strategies"]["dapo"]["seeds"] == [3, 7, 11, 12]
    assert summary["strategies"]["grpo"]["seeds"] == [3, 7, 11, 12, 13]
    assert summary["seeds"] == [3, 7, 11, 12, 13]
    assert prec["stopped"] == "failed runs" and prec["seeds"] == {"grpo": 5, "dapo": 4}
    assert prec["left_open"]["dapo"] == pytest.approx(
        precision_hw(summary["vs_baseline"]["dapo"]), abs=1e-4
    )
    assert summary["extra"]["failed_runs"] == ["dapo seed 13"]


def precision_hw(vs):
    from rollalloc.report.precision import speedup_half_width

    return speedup_half_width(vs)
