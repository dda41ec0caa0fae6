"""The prediction check of benchmarks/fit_testbed_preset.py compare: Kendall tau, the ranking rule
and the per-strategy speedup verdicts (issue 15's floors)."""

from __future__ import annotations

import itertools
import math
import random

import pytest


@pytest.fixture(scope="module")
def fitter(load_benchmark):
    return load_benchmark("fit_testbed_preset")


def brute_force_tau_b(x, y):
    """Count every pair by hand: concordant, discordant, tied in x only / y only / both."""
    conc = disc = tx = ty = 0
    for i, j in itertools.combinations(range(len(x)), 2):
        dx, dy = x[i] - x[j], y[i] - y[j]
        if dx == 0 and dy == 0:
            continue
        if dx == 0:
            tx += 1
        elif dy == 0:
            ty += 1
        elif (dx > 0) == (dy > 0):
            conc += 1
        else:
            disc += 1
    return (conc - disc) / math.sqrt((conc + disc + tx) * (conc + disc + ty))


def test_kendall_tau_known_values(fitter):
    assert fitter.kendall_tau([1, 2, 3, 4], [1, 2, 3, 4]) == 1.0
    assert fitter.kendall_tau([1, 2, 3, 4], [4, 3, 2, 1]) == -1.0
    # one swapped adjacent pair of 4: 5 concordant, 1 discordant of 6 -> 4/6
    assert fitter.kendall_tau([1, 2, 3, 4], [2, 1, 3, 4]) == pytest.approx(4 / 6)
    # eight strategies, one adjacent swap: (27 - 1) / 28 = 0.929; two: 24/28 = 0.857
    assert fitter.kendall_tau(range(8), [1, 0, 2, 3, 4, 5, 6, 7]) == pytest.approx(26 / 28)
    assert math.isnan(fitter.kendall_tau([1, 1, 1], [1, 2, 3]))


def test_kendall_tau_matches_a_brute_force_pair_count(fitter):
    rng = random.Random(0)
    for n in range(2, 9):
        for _ in range(20):
            x = [rng.randint(0, 4) for _ in range(n)]  # ties included
            y = [rng.randint(0, 4) for _ in range(n)]
            if len(set(x)) < 2 or len(set(y)) < 2:
                continue
            assert fitter.kendall_tau(x, y) == pytest.approx(brute_force_tau_b(x, y))


def summary(rows, baseline="grpo"):
    return {
        "target": {"baseline": baseline},
        "strategies": {
            s: {"rollouts_to_target": r, "final_accuracy": a} for s, (r, a) in rows.items()
        },
    }


def test_ranking_rule_and_verdicts(fitter):
    real = summary(
        {"grpo": (80, 0.70), "a": (40, 0.68), "b": (80, 0.72), "c": (None, 0.69), "d": (None, 0.60)}
    )
    sim = summary(
        {
            "grpo": (80, 0.70),
            "a": (60, 0.69),
            "b": (None, 0.71),
            "c": (None, 0.65),
            "d": (None, 0.66),
        }
    )
    # rollouts ascending; equal rollouts -> higher final accuracy first; never last, by accuracy
    assert fitter.ranking(real, list(real["strategies"])) == ["a", "b", "grpo", "c", "d"]
    assert fitter.ranking(sim, list(sim["strategies"])) == ["a", "grpo", "b", "d", "c"]
    check = fitter.prediction_check(real, sim, ["grpo", "a", "b", "c", "d"])
    rows = check["strategies"]
    assert rows["a"]["real_speedup"] == 2.0 and rows["a"]["sim_speedup"] == pytest.approx(4 / 3)
    assert rows["a"]["verdict"] == "miss"  # -33%
    assert rows["b"]["verdict"].startswith("miss (reached on one side")
    assert rows["c"]["verdict"] == rows["d"]["verdict"] == "both never"
    assert check["kendall_tau"] == pytest.approx((8 - 2) / 10)
    assert not check["speedup_floor_holds"] and not check["tau_floor_holds"]


def summary_of(speedups, base="grpo", budget=100):
    """A summary.json with rollouts to target giving these speedups vs `base` (None: never)."""
    rows = {base: {"rollouts_to_target": 60.0}}
    for s, v in speedups.items():
        rows[s] = {"rollouts_to_target": None if v is None else 60.0 / v}
    return {"target": {"baseline": base}, "strategies": rows, "budget_rollouts": budget}


def test_speedup_check_scores_never_as_zero_and_ratios(fitter):
    # the paper-regime testbed's first prediction (docs/testbed.md: "tau-b 0.58"): real 5-seed
    # speedups vs the simulator's of the copied preset
    real = summary_of(
        {
            "pilot-commit": 1.316,
            "cero": 1.133,
            "mopps": 1.019,
            "speed-rl": 0.968,
            "knapsack": 0.952,
            "dapo": None,
            "greso": None,
        }
    )
    sim = summary_of(
        {
            "pilot-commit": 1.51,
            "cero": 1.19,
            "mopps": 1.44,
            "speed-rl": 1.64,
            "knapsack": None,
            "dapo": None,
            "greso": None,
        }
    )
    names = ["grpo", "pilot-commit", "cero", "mopps", "speed-rl", "knapsack", "dapo", "greso"]
    res = fitter.speedup_check(real, sim, names)
    r = [1.0, 1.316, 1.133, 1.019, 0.968, 0.952, 0.0, 0.0]
    m = [1.0, 1.51, 1.19, 1.44, 1.64, 0.0, 0.0, 0.0]
    assert res["kendall_tau_b"] == pytest.approx(brute_force_tau_b(r, m))
    assert round(res["kendall_tau_b"], 2) == 0.58  # the figure docs/testbed.md reports
    rows = res["strategies"]
    assert rows["pilot-commit"]["ratio"] == pytest.approx(1.51 / 1.316)
    assert rows["pilot-commit"]["verdict"] == "ok"  # +15%
    assert rows["mopps"]["verdict"] == "miss"  # +41%
    assert rows["knapsack"]["verdict"].startswith("miss")  # never on one side
    assert rows["dapo"]["verdict"] == "both never"
    assert not res["tau_floor_holds"] and not res["speedup_floor_holds"]


def test_check_adds_a_variant_from_another_simulation(fitter, tmp_path, capsys):
    """`check --add DIR:STRATEGY=NAME` scores a variant simulated in another run (posterior-signal
    with p_max, say) under the real summary's name; a STRATEGY missing from DIR is refused."""
    import json

    real = summary_of({"pilot-commit": 1.5, "psPmax": 2.0})
    main, other = tmp_path / "main", tmp_path / "other"
    main.mkdir(), other.mkdir()
    (main / "summary.json").write_text(json.dumps(summary_of({"pilot-commit": 1.2})))
    (other / "summary.json").write_text(json.dumps(summary_of({"posterior-signal": 1.8})))
    (tmp_path / "real.json").write_text(json.dumps(real))
    out = tmp_path / "check.md"
    argv = ["check", str(main), str(tmp_path / "real.json"), "--out", str(out)]
    assert fitter.main([*argv, "--add", f"{other}:posterior-signal=psPmax"]) in (0, 1)
    res = json.loads(out.with_suffix(".json").read_text())
    assert res["strategies"]["psPmax"]["sim"] == pytest.approx(1.8)
    assert res["kendall_tau_b"] == pytest.approx(1.0)
    with pytest.raises(SystemExit, match="expected DIR:STRATEGY=NAME"):
        fitter.main([*argv, "--add", f"{other}:cero=psPmax"])
