"""What a one-group step costs GRPO, real and simulated (docs/simulator.md "Session 44").

`grpo` with `small_every=1` follows each full step (64 prompts) with a step of one prompt, the
pattern of CERO's primal-dual pacing. Real (10 seeds each, against GRPO of the same build) it costs
1.94 [1.22, 2.64] points at 49,152 rollouts on the default testbed's ws4 and 1.53 [1.12, 1.95] on
the hard pool's rebuilt warm start. The default testbed's wear preset (`-s41-prompts`) put that
cost at 5.5 points and the preset without wear at 0.1; the hard presets *credit* the small steps
(token-mean normalisation gives a one-group update a full batch's weight). Refitted with the small
steps' gap (GRPO alone), `-s44-steps` carries the cost and, out of sample, CERO's pacing cost on
ws4 inside the real interval. On the hard pool a constant normaliser (`testbed-hard-s44-const`)
gets the small steps' sign and six of seven peers' speedups within 25%. Steps of eight prompts,
run after every fit, cost about half as much on ws4 and as much on the hard pool; no preset gets
both."""

from __future__ import annotations

import csv
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from rollalloc.sim.policy import load_preset
from rollalloc.sim.run import simulate_run, strategy_options

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
RESULTS = BENCH / "results"
SMALL = RESULTS / "sim-session44-small-steps.csv"  # the presets' predictions, seeds 10-19
WS4 = ["default-testbed-s40-ws4.csv", "default-testbed-s44-ws4-small-steps.csv"]
HARD = ["hard-testbed-s43-cero.csv", "hard-testbed-s44-small-steps.csv"]
CONST = RESULTS / "sim-testbed-hard-s44-const.csv"
EIGHT = ["grpo", "dapo", "pilot-commit", "cero", "speed-rl", "greso", "mopps", "knapsack"]
COMMITTED = [RESULTS / f for f in ("hard-testbed-s27.csv", "hard-testbed-s28.csv",
                                   "hard-testbed-s28-ablations.csv", "hard-testbed-s29.csv")]  # fmt: skip
STEPS = RESULTS / "sim-testbed-default-disjoint-s44-steps.csv"
AT = [49152]


def real_gap(gg, files, base, other, at=AT):
    runs = gg.load_evals([str(RESULTS / f) for f in files], None, [base, other])
    assert sorted(runs[base]) == sorted(runs[other]) == list(range(10))
    ((est, (lo, hi)),) = gg.gaps(gg.gains_at(runs[base], at), gg.gains_at(runs[other], at),
                                 (base, other))  # fmt: skip
    return est, lo, hi


def sim_gap(gg, path, base, other, at=AT):
    paths = path if isinstance(path, list) else [path]
    runs = gg.load_evals([str(p) for p in paths], None, [base, other])
    return float(gg.gains_at(runs[other], at).mean() - gg.gains_at(runs[base], at).mean())


def test_small_steps_cost_real_grpo_on_both_testbeds_and_the_old_presets_miss_it(load_benchmark):
    gg = load_benchmark("gain_gap")
    est, lo, hi = real_gap(gg, ["default-testbed-s40-ws4.csv", "default-testbed-s44-ws4-small-steps.csv"],
                           "w4Grpo", "w4GrpoS1")  # fmt: skip
    assert hi < 0 and est == pytest.approx(-0.0194, abs=5e-4)  # -1.94 [-2.64, -1.22] points
    wear = sim_gap(gg, SMALL, "p41-dGrpo", "p41-dGrpoS1")  # -s41-prompts: -5.46
    plain = sim_gap(gg, SMALL, "p40-dGrpo", "p40-dGrpoS1")  # -s40-plain: -0.08
    assert wear < 2.5 * est and wear < lo and hi < plain
    est, lo, hi = real_gap(gg, ["hard-testbed-s43-cero.csv", "hard-testbed-s44-small-steps.csv"],
                           "grpo", "grpoS1")  # fmt: skip
    assert hi < 0 and est == pytest.approx(-0.0153, abs=5e-4)  # -1.53 [-1.95, -1.12]
    for tag in ("h31", "h43"):  # s31-levels-steps +0.59, s43-wear -0.18: both above the interval
        assert sim_gap(gg, SMALL, f"{tag}-grpo", f"{tag}-grpoS1") > hi


def test_the_refitted_wear_carries_the_small_steps_and_cero_s_pacing_cost(load_benchmark):
    gg = load_benchmark("gain_gap")
    _, lo, hi = real_gap(gg, ["default-testbed-s40-ws4.csv", "default-testbed-s44-ws4-small-steps.csv"],
                         "w4Grpo", "w4GrpoS1")  # fmt: skip
    assert lo <= sim_gap(gg, STEPS, "dGrpo", "dGrpoS1") <= hi  # fitted: -1.58
    # out of sample: CERO's runs were not read by the fit. Fixed-batch minus paced CERO on ws4,
    # real +0.80 [+0.30, +1.25]; -s44-steps +1.17, -s41-prompts +2.59
    _, lo, hi = real_gap(gg, ["default-testbed-s41-ws4-peers.csv", "default-testbed-s43-ws4-cero.csv"],
                         "w4-cero", "w4CeroFB")  # fmt: skip
    assert lo <= sim_gap(gg, STEPS, "d-cero", "d-ceroFB") <= hi
    old = RESULTS / "sim-testbed-default-disjoint-s41-prompts-cerofb.csv"
    assert sim_gap(gg, old, "d-cero", "dCeroFB") > hi


def test_the_refitted_wear_ranks_the_two_fresh_warm_starts(load_benchmark):
    """ws4 and ws5's seven (as tests/sim/test_wear_preset.py reads them): tau 0.87 and 0.70 with
    6 and 5 of 6 speedups within 25% (`-s41-prompts`: 1.00 and 0.86, 6 and 5)."""
    rp = load_benchmark("ranking_power")
    seven = ["dGrpo", "d-dapo", "d-cero", "d-speed-rl", "d-greso", "dMopps", "d-knapsack"]
    sim = rp.load_evals([str(STEPS)], None, seven)
    for ws, tau, within in ((4, 0.867, 6), (5, 0.701, 5)):
        files = [f"default-testbed-s40-ws{ws}.csv", f"default-testbed-s40-ws{ws}-mopps.csv",
                 f"default-testbed-s41-ws{ws}-peers.csv"]  # fmt: skip
        runs = rp.load_evals([str(RESULTS / f) for f in files], None, None)
        names = {f"w{ws}Grpo": "dGrpo", f"w{ws}Knapsack": "d-knapsack", f"w{ws}Mopps": "dMopps"}
        real = {names.get(k, k.replace(f"w{ws}-", "d-")): v for k, v in runs.items()}
        real = {k: v for k, v in real.items() if k in seven}
        assert sorted(real) == sorted(seven)
        res = rp.analyse(real, sim, baseline="dGrpo", fraction=0.9, arms=[5], resamples=5, seed=0)
        assert res["tau_observed"] == pytest.approx(tau, abs=5e-4), ws
        assert sum(res["speedup_within_tolerance"].values()) == within, ws


def test_the_committed_curves_are_the_presets():
    """Two seed-10 runs of each committed CSV rebuilt (the small-step GRPO and a plain one)."""
    cases = [(STEPS, "testbed-default-disjoint-s44-steps", "dGrpoS1", 8192, True),
             (SMALL, "testbed-default-disjoint-s41-prompts", "p41-dGrpoS1", 8192, True),
             (SMALL, "testbed-hard-s31-levels-steps", "h31-grpoS1", 4096, False)]  # fmt: skip
    for path, name, strategy, every, short in cases:
        preset = load_preset(str(BENCH / "presets" / f"{name}.json"))
        if short:  # as sim_variants was run on the default testbed
            preset = replace(preset, sim=preset.sim.replace(short_answers=12))
        options = {**strategy_options("grpo", train_prompts=64, group_size=8), "small_every": 1}
        evals = simulate_run("grpo", preset, 10, budget_rollouts=98304, eval_every_rollouts=every,
                             options=options)["evals"]  # fmt: skip
        with path.open() as f:
            want = [r for r in csv.DictReader(f) if r["strategy"] == strategy and r["seed"] == "10"]
        assert [e["cum_rollouts"] for e in evals] == [int(r["cum_rollouts"]) for r in want]
        np.testing.assert_allclose(
            [e["accuracy"] for e in evals], [float(r["accuracy"]) for r in want], atol=1e-6
        )


def test_steps_of_eight_prompts_a_dose_no_fit_saw(load_benchmark):
    """benchmarks/predictions/session44.md, section 3 (written before the runs): grpoS8 (an
    8-prompt step after each full one) costs -0.87 [-1.24, -0.48] points at 49,152 on ws4, half of
    grpoS1's cost beyond noise, and -1.42 [-1.95, -0.92] on the hard pool, as much as grpoS1's.
    `-s44-steps` credits it (+0.30, the wrong sign), `-s41-prompts` overstates it (-1.41); on the
    hard pool `s44-const` is inside the interval at its upper edge (-0.920 against -0.919) and
    `s43-wear` inside (-1.67)."""
    gg = load_benchmark("gain_gap")
    est, lo, hi = real_gap(gg, WS4, "w4Grpo", "w4GrpoS8")
    assert hi < 0 and est == pytest.approx(-0.0087, abs=5e-4)
    _, s1_lo, _ = real_gap(gg, WS4[1:], "w4GrpoS1", "w4GrpoS8")
    assert s1_lo > 0  # less than the one-prompt steps' cost, beyond noise
    assert sim_gap(gg, [STEPS, SMALL], "dGrpo", "p44-dGrpoS8") > hi  # a known miss
    assert sim_gap(gg, SMALL, "p41-dGrpo", "p41-dGrpoS8") < lo
    est, lo, hi = real_gap(gg, HARD, "grpo", "grpoS8")
    assert hi < 0 and est == pytest.approx(-0.0142, abs=5e-4)
    _, s1_lo, s1_hi = real_gap(gg, HARD[1:], "grpoS1", "grpoS8")
    assert s1_lo < 0 < s1_hi  # within noise of the one-prompt steps' cost
    assert lo <= sim_gap(gg, SMALL, "hconst-grpo", "hconst-grpoS8") <= hi < -0.009  # at its edge
    assert lo <= sim_gap(gg, SMALL, "h43-grpo", "h43-grpoS8") <= hi
    assert sim_gap(gg, SMALL, "htm-grpo", "htm-grpoS8") > hi


def test_a_constant_normaliser_on_the_hard_pool(load_benchmark):
    """`testbed-hard-s44-const` against every committed real seed: the eight at tau 0.764 with six
    of seven speedups within 25% (SPEED-RL 2.97x against 4.22x misses), CERO minus GRPO inside the
    real interval at all seven points of session 43's table; the small steps cost (-0.63 at 49,152,
    real -1.53; token-mean with the same wear, `s44-tm`, +0.82)."""
    gg, rp = load_benchmark("gain_gap"), load_benchmark("ranking_power")
    real = rp.load_evals([str(p) for p in COMMITTED], None, EIGHT)
    sim = rp.load_evals([str(CONST)], None, EIGHT)
    res = rp.analyse(real, sim, baseline="grpo", fraction=0.9, arms=[5], resamples=5, seed=0)
    assert res["tau_observed"] == pytest.approx(0.764, abs=5e-4)
    within = res["speedup_within_tolerance"]
    assert sum(within.values()) == 6 and not within["speed-rl"]
    at = [16384, 24576, 32768, 49152, 65536, 81920, 98304]
    runs = gg.load_evals([str(p) for p in COMMITTED[:2]], None, ["grpo", "cero"])
    real_gaps = gg.gaps(gg.gains_at(runs["grpo"], at), gg.gains_at(runs["cero"], at), ("g", "c"))
    sims = gg.load_evals([str(CONST)], None, ["grpo", "cero"])
    sim_gaps = gg.gains_at(sims["cero"], at).mean(0) - gg.gains_at(sims["grpo"], at).mean(0)
    assert all(lo <= s <= hi for s, (_, (lo, hi)) in zip(sim_gaps, real_gaps))
    _, lo, hi = real_gap(gg, HARD, "grpo", "grpoS1")
    assert (
        lo
        < sim_gap(gg, CONST, "grpo", "grpoS1")
        < 0
        < sim_gap(gg, RESULTS / "sim-testbed-hard-s44-tm.csv", "grpo", "grpoS1")
    )


@pytest.mark.parametrize("name", ["testbed-hard-s44-const", "testbed-hard-s44-tm"])
def test_the_committed_hard_curves_are_the_presets(name, rebuilds):
    preset = load_preset(str(BENCH / "presets" / f"{name}.json"))
    rebuilds(preset, RESULTS / f"sim-{name}.csv", ["grpo", "cero"])
