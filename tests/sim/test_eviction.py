"""Pilot-Commit without eviction on the hard pool's rebuilt warm start (docs/testbed.md, "Eviction
switched off"; docs/simulator.md, "Session 46"): the real fall below GRPO goes with eviction, and
the simulator, asked before the real runs, gives its sign and about a third of its size.

Real: `pcNE` (`exclude_threshold=None`), seeds 0-15 (`hard-testbed-s46-evict.csv`), against
Pilot-Commit (16 seeds) and GRPO (10). Simulated: `testbed-hard-s44-const`, seeds 10-19
(`sim-testbed-hard-s46-evict.csv`)."""

from __future__ import annotations

from pathlib import Path

from rollalloc.sim.policy import load_preset

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
RESULTS = BENCH / "results"
REAL = [RESULTS / "hard-testbed-s43-cero.csv", RESULTS / "hard-testbed-s45-rebuilt-peers.csv",
        RESULTS / "hard-testbed-s45-rebuilt-peers-8-15.csv", RESULTS / "hard-testbed-s46-evict.csv"]  # fmt: skip
SIM = RESULTS / "sim-testbed-hard-s46-evict.csv"
NO_EVICT = ("pcNE", "pilot-commit", {"exclude_threshold": None})


def test_without_eviction_pilot_commit_does_not_fall(load_benchmark, points_gap):
    gg = load_benchmark("gain_gap")
    runs = gg.load_evals([str(p) for p in REAL], None, ["pcNE", "pilot-commit", "grpo"])
    assert [len(runs[s]) for s in ("pcNE", "pilot-commit", "grpo")] == [16, 16, 10]
    for at, lo in ((81920, 0.5), (98304, 1.2)):  # +1.08 [+0.79, +1.38]; +1.87 [+1.53, +2.19]
        assert points_gap(REAL, "pilot-commit", "pcNE", at)[1][0] > lo
    assert points_gap(REAL, "grpo", "pcNE", 98304)[1][0] > 0  # +0.75 [+0.28, +1.29]
    assert points_gap(REAL, "grpo", "pilot-commit", 98304)[1][1] < 0  # the fall, -1.11
    _, (lo, hi) = points_gap(REAL, "pilot-commit", "pcNE", 16384)
    assert lo < 0 < hi  # the same early: eviction comes later


def test_the_simulator_gave_the_sign_and_a_third(points_gap):
    real = points_gap(REAL, "pilot-commit", "pcNE", 98304)
    sim = points_gap([SIM], "pilot-commit", "pcNE", 98304)  # +0.52 against +1.87
    assert 0 < sim[1][0] and sim[0] < real[1][0] and sim[0] > real[0] / 5


def test_the_committed_curves_are_the_preset(rebuilds):
    preset = load_preset(str(BENCH / "presets" / "testbed-hard-s44-const.json"))
    rebuilds(preset, SIM, ["grpo", "pilot-commit", NO_EVICT])


def test_pilots_of_eight_keep_eviction_and_pilots_of_two_on_the_default_testbed_do_not(
    points_gap,
):
    """The paper testbed's rebuilt warm start (pilots of 8, seeds 0-9): without eviction no better,
    -0.46 [-0.88, -0.01] at the end. The default testbed's ws4 (pilots of 2, pcNE seeds 0-7 against
    Pilot-Commit's 5 and GRPO's 10): no collapse, +24.3 [+20.7, +27.3] over Pilot-Commit, yet
    -1.05 [-1.44, -0.68] below GRPO."""
    paper = [RESULTS / "paper-testbed-s46-rebuilt.csv"]
    mean, (lo, hi) = points_gap(paper, "pilot-commit", "pcNE", 98304)
    assert mean < 0 and hi < 0
    ws4 = [RESULTS / "default-testbed-s40-ws4.csv", RESULTS / "default-testbed-s41-ws4-peers.csv",
           RESULTS / "default-testbed-s46-ws4-noevict.csv"]  # fmt: skip
    assert points_gap(ws4, "w4-pilot-commit", "w4-pcNE", 98304)[1][0] > 15
    mean, (lo, hi) = points_gap(ws4, "w4Grpo", "w4-pcNE", 98304)
    assert -3 < lo and hi < 0


def test_pilots_of_four_lose_less_than_pilots_of_two(points_gap):
    """Pilots of 4 with eviction (pc4, seeds 0-7): +1.53 [+1.18, +1.87] over pilots of 2 at the end,
    -0.33 [-0.57, -0.10] below no eviction."""
    files = REAL + [RESULTS / "hard-testbed-s46-pilots4.csv"]
    assert points_gap(files, "pilot-commit", "pc4", 98304)[1][0] > 1.0
    mean, (lo, hi) = points_gap(files, "pcNE", "pc4", 98304)
    assert -1.0 < lo and hi < 0
