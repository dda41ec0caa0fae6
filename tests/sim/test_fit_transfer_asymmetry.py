"""benchmarks/fit_transfer_asymmetry.py recovers the simulator's transfer asymmetry from group values
measured the way measure_group_value.py measures them on the real policy: the held-out accuracy
change of one learner step on each group alone, here in the simulator (SimLearner, group_advantages),
an implementation the fit does not share."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest

from rollalloc.sim.policy import SimPolicy, preset_from_dict
from rollalloc.sim.roles import SimLearner, SimRollouts, SimSampler
from rollalloc.testing import make_batch

N = 8


def measured_values(beta: float, groups: int, seed: int) -> dict:
    """A measure_group_value.py-shaped result: each informative group's held-out accuracy change
    (relative to the mean over the groups drawn), its k and its cluster as the level."""
    preset = preset_from_dict(
        {
            "num_prompts": 64,
            "pass_rate_histogram": [[0.02, 0.98, 1.0]],
            "sim": {"eval_prompts": 200, "ref_group_size": N, "transfer_asymmetry": beta,
                    "num_clusters": 2, "memorize_gain": 0.0},
        },
        "fit-test",
    )  # fmt: skip
    base = SimPolicy(preset)
    acc0 = float(base.eval_success_prob().mean())
    rng = np.random.default_rng(seed)
    values, ks, levels = [], [], []
    while len(values) < groups:
        pid = int(rng.integers(0, base.num_prompts))
        r = (rng.random(N) < base.success_prob(np.array([pid]))[0]).astype(float)
        if r.min() == r.max():
            continue
        pol = copy.deepcopy(base)
        sampler = SimSampler(pol, 0)
        h = sampler.store.add(SimRollouts(np.full(N, pid), r, np.ones(N, np.int64), 0))
        SimLearner(pol, sampler.store, 0).update(make_batch(np.array([pid]), [N], h, r))
        values.append(float(pol.eval_success_prob().mean()) - acc0)
        ks.append(int(r.sum()))
        levels.append(f"c{int(base.cluster[pid])}")
    ref = float(np.mean(values))
    return {
        "group_size": N,
        "results": [
            {
                "checkpoint": "warm",
                "sgd": {"reference_value_per_group": ref},
                "raw": {"values": {"sgd": values}, "k": ks, "levels": levels},
            }
        ],
    }


@pytest.mark.parametrize("beta", [0.0, 1.0, 2.0])
def test_fit_recovers_the_simulators_asymmetry(beta, tmp_path, load_benchmark):
    fta = load_benchmark("fit_transfer_asymmetry")
    path = tmp_path / "v.json"
    path.write_text(json.dumps(measured_values(beta, 300, seed=1)))
    r = fta.fit(fta.load(str(path)), resamples=50)
    assert abs(r["beta"] - beta) <= 0.1, r
    if beta > 0:
        assert r["sse_ratio_symmetric"] > 1.0
