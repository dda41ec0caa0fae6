"""Shared checks of the simulator tests."""

import csv
from pathlib import Path

import numpy as np
import pytest

from rollalloc.sim.run import simulate_run, strategy_options


def _rebuilds(preset, path: Path, strategies, seed: int = 10, every: int = 4096,
              train_prompts: int = 64, group_size: int = 8) -> None:  # fmt: skip
    """Each strategy's seed-`seed` curve in the committed CSV `path` is the one `preset` gives
    now (train_prompts a step, groups of group_size, 98,304 rollouts): the committed simulated figures are
    the code's, not an older model's. A strategy is a name, or (CSV name, strategy, {option:
    value}) for a variant (`sim_variants.py`'s NAME=STRATEGY:KEY=VALUE)."""
    with path.open() as f:
        rows = list(csv.DictReader(f))
    for item in strategies:
        name, strategy, extra = (item, item, {}) if isinstance(item, str) else item
        options = strategy_options(strategy, train_prompts=train_prompts, group_size=group_size,
                                   options=extra)  # fmt: skip
        evals = simulate_run(strategy, preset, seed, budget_rollouts=98304,
                             eval_every_rollouts=every, options=options)["evals"]  # fmt: skip
        want = [r for r in rows if r["strategy"] == name and r["seed"] == str(seed)]
        assert want, f"{path.name} has no {name} seed {seed}"
        assert [e["cum_rollouts"] for e in evals] == [int(r["cum_rollouts"]) for r in want]
        np.testing.assert_allclose(
            [e["accuracy"] for e in evals], [float(r["accuracy"]) for r in want], atol=1e-6
        )


@pytest.fixture(scope="session")
def rebuilds():
    """rebuilds(PRESET, CSV, STRATEGIES): the committed curves are the preset's (see _rebuilds)."""
    return _rebuilds


@pytest.fixture
def points_gap(load_benchmark):
    """points_gap(FILES, BASE, OTHER, AT=98304) -> (mean, [lo, hi]): OTHER minus BASE in points of
    held-out gain over each run's start at AT rollouts, with the 90% interval over seeds, as
    benchmarks/gain_gap.py gives it from the evaluation CSVs FILES."""
    gg = load_benchmark("gain_gap")

    def gap(files, base, other, at=98304):
        runs = gg.load_evals([str(p) for p in files], None, [base, other])
        b, o = gg.gains_at(runs[base], [at]), gg.gains_at(runs[other], [at])
        ((_, ci),) = gg.gaps(b, o, (base, other))
        return 100 * (o.mean() - b.mean()), [100 * x for x in ci]

    return gap
