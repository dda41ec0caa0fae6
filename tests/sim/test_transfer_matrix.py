"""Levels with a transfer matrix W (Level.transfer): a group of level a moves level b's skill by
cluster_gain W[a, b] u_g (interference where W < 0), and benchmarks/transfer_matrix.py recovers W
from one-group steps measured the way measure_group_value.py measures the real policy."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest

from rollalloc.sim.policy import SimPolicy, preset_from_dict
from rollalloc.sim.roles import SimLearner, SimRollouts, SimSampler
from rollalloc.testing import make_batch

N = 8
W_TRUE = {"a": {"a": 1.0, "b": -0.4, "c": 0.2}, "b": {"a": 0.3, "b": 0.6}, "c": {}}


def preset(transfer=True, plasticity_b=1.0, **sim) -> dict:
    levels = []
    for name, lo, hi in (("a", 0.1, 0.5), ("b", 0.3, 0.7), ("c", 0.5, 0.9)):
        lv = {"name": name, "share": 1.0, "eval_share": 1.0, "pass_rate_histogram": [[lo, hi, 1]]}
        if name == "b":
            lv["plasticity"] = plasticity_b
        if transfer:
            lv["transfer"] = W_TRUE[name]
        levels.append(lv)
    return {
        "num_prompts": 90,
        "pass_rate_histogram": [[0.1, 0.9, 1]],
        "levels": levels,
        "sim": {"eval_prompts": 300, "ref_group_size": N, "memorize_gain": 0.0, **sim},
    }


def one_group(pol: SimPolicy, pid: int, r: np.ndarray) -> SimPolicy:
    pol = copy.deepcopy(pol)
    sampler = SimSampler(pol, 0)
    h = sampler.store.add(SimRollouts(np.full(len(r), pid), r, np.ones(len(r), np.int64), 0))
    SimLearner(pol, sampler.store, 0).update(make_batch(np.array([pid]), [len(r)], h, r))
    return pol


def level_accuracy(pol: SimPolicy) -> np.ndarray:
    p = pol.eval_success_prob()
    return np.array([p[pol.eval_cluster == j].mean() for j in range(len(pol.level_names))])


def test_a_group_moves_each_skill_by_its_row_of_w():
    """sgd: s_b moves by cluster_gain W[a, b] u, u = G / (n / 2) from the advantages by hand; s_0
    gets nothing; a negative entry lowers that level's held-out accuracy."""
    pol = SimPolicy(preset_from_dict(preset(), "w"))
    pid = int(np.flatnonzero(pol.cluster == 0)[0])  # a prompt of level a
    r = np.array([1, 0, 0, 1, 0, 0, 0, 0], float)
    a = (r - r.mean()) / (r.std(ddof=1) + pol.config.adv_eps)
    u = float((a * (r - r.mean())).sum()) / (N / 2)
    after = one_group(pol, pid, r)
    want = pol.config.cluster_gain * u * np.array([1.0, -0.4, 0.2])
    np.testing.assert_allclose(after.s - pol.s, want, rtol=1e-9)
    assert after.s0 == pol.s0
    moved = level_accuracy(after) - level_accuracy(pol)
    assert moved[0] > 0 and moved[1] < 0 and moved[2] > 0
    # level c has no row: its groups teach nothing
    pid_c = int(np.flatnonzero(pol.cluster == 2)[0])
    np.testing.assert_array_equal(one_group(pol, pid_c, r).s, pol.s)


def test_unknown_level_in_a_row_is_refused():
    bad = preset()
    bad["levels"][0]["transfer"] = {"z": 1.0}
    with pytest.raises(ValueError, match=r"transfer names unknown levels \['z'\]"):
        preset_from_dict(bad, "w")


def test_transfer_matrix_recovers_w_from_one_group_steps(tmp_path, load_benchmark):
    """Measured at a policy the skills have moved from the preset's start, with a level of
    plasticity 1/2 (the simulator scales its signal and its logits by it: divided out)."""
    tm = load_benchmark("transfer_matrix")
    pol = SimPolicy(preset_from_dict(preset(plasticity_b=0.5, cluster_gain=0.05), "w"))
    rng = np.random.default_rng(0)
    for _ in range(30):  # move the skills first: the measurement is not at the preset's start
        pid = int(rng.integers(0, pol.num_prompts))
        pol = one_group(pol, pid, np.array([1, 1, 0, 0, 0, 0, 0, 1], float))
    pol.config = pol.config.replace(cluster_gain=1e-4)  # one-group steps: first order
    assert np.abs(pol.s).max() > 0.05
    acc0 = level_accuracy(pol)
    levels, ks, per_level = [], [], []
    while len(ks) < 240:
        pid = int(rng.integers(0, pol.num_prompts))
        r = (rng.random(N) < pol.success_prob(np.array([pid]))[0]).astype(float)
        if r.min() == r.max():
            continue
        levels.append(pol.level_names[pol.cluster[pid]])
        ks.append(int(r.sum()))
        per_level.append(level_accuracy(one_group(pol, pid, r)) - acc0)
    dv = np.array(per_level)  # (K, L)
    names = pol.level_names
    lv = np.array(levels)
    transfer = {a: {b: float(dv[lv == a, j].mean()) for j, b in enumerate(names)} for a in names}
    result = {
        "group_size": N,
        "results": [
            {
                "checkpoint": "warm",
                "heldout_accuracy": dict(zip(names, acc0.tolist())),
                "sgd": {"transfer": transfer},
                "raw": {"levels": levels, "k": ks},
            }
        ],
    }
    path = tmp_path / "v.json"
    path.write_text(json.dumps(result))
    got_names, W = tm.matrix(preset(transfer=False, plasticity_b=0.5), f"{path}:sgd", min_groups=20)
    assert got_names == names
    want = np.array([[W_TRUE[a].get(b, 0.0) for b in names] for a in names])
    np.testing.assert_allclose(W, want / np.abs(want).max(), atol=0.02)


def test_ceiling_weighs_a_group_by_its_row_of_w():
    """The ceiling's held-out gain per unit of signal (heldout_gain_weight) is the held-out accuracy
    a one-group step adds, per unit u, through W (negative for a level that only interferes)."""
    from rollalloc.sim.oracle import heldout_gain_weight

    pol = SimPolicy(preset_from_dict(preset(), "w"))
    r = np.array([1, 1, 0, 0, 0, 0, 0, 0], float)
    a = (r - r.mean()) / (r.std(ddof=1) + pol.config.adv_eps)
    G = float((a * (r - r.mean())).sum())
    w = heldout_gain_weight(pol)
    for level in (0, 1, 2):
        pid = int(np.flatnonzero(pol.cluster == level)[0])
        gain = pol.eval_success_prob().mean()
        gain = one_group(pol, pid, r).eval_success_prob().mean() - gain
        assert w(np.array([pid]))[0] * G == pytest.approx(gain, rel=1e-3, abs=1e-12), level


def test_w_ramps_from_the_early_rows_to_the_late_ones():
    """transfer_ramp_steps T: W at update t is early + min(1, t / T) (late - early); T = 0 keeps
    the early rows."""
    d = preset(transfer_ramp_steps=10.0)
    late = {"a": {"a": 0.0, "b": 1.0}, "b": {"a": -1.0}, "c": {"c": 0.5}}
    for lv in d["levels"]:
        lv["transfer_late"] = late[lv["name"]]
    pol = SimPolicy(preset_from_dict(d, "w"))
    names = pol.level_names
    early = np.array([[W_TRUE[a].get(b, 0.0) for b in names] for a in names])
    final = np.array([[late[a].get(b, 0.0) for b in names] for a in names])
    np.testing.assert_allclose(pol.transfer, early)
    pol.version = 5
    np.testing.assert_allclose(pol.transfer, (early + final) / 2)
    pol.version = 40
    np.testing.assert_allclose(pol.transfer, final)
    d["sim"]["transfer_ramp_steps"] = 0.0
    pol0 = SimPolicy(preset_from_dict(d, "w"))
    pol0.version = 40
    np.testing.assert_allclose(pol0.transfer, early)
