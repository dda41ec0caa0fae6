"""The `testbed-arith` preset and the conversions of benchmarks/fit_testbed_preset.py."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from rollalloc.sim.policy import SimConfig, draw_pass_rates, load_preset, preset_from_dict
from rollalloc.sim.run import simulate_run

# A hand-made run.json: the keys the fitter reads, 200 prompts measured with 16 samples each.
MEASURED = {"0": 4, "(0,.25]": 20, "(.25,.5]": 40, "(.5,.75]": 60, "(.75,1)": 66, "1": 10}
RUN_JSON = {
    "config": {
        "task_config": {},
        "group_size": 8,
        "train_prompts": 64,
        "eval_prompts": None,
        "budget_rollouts": 98304,
        "eval_every_rollouts": 8192,
    },
    "warm_start": {
        "payload": {"task_config": {"num_train": 1000, "num_eval": 100}},
        "pass_rates": {"prompts": 200, "samples": 16, "histogram": MEASURED},
    },
    "cum_rollouts": 98304,
}


@pytest.fixture(scope="module")
def fitter(load_benchmark):
    return load_benchmark("fit_testbed_preset")


def test_preset_loads_and_its_histogram_sums_to_one():
    preset = load_preset("testbed-arith")
    assert preset.name == "testbed-arith"
    assert preset.num_prompts > 0
    assert sum(w for *_, w in preset.pass_rate_histogram) == pytest.approx(1.0, abs=1e-6)
    assert preset.source  # says what it was fitted from


def test_grpo_on_the_preset_raises_held_out_accuracy():
    preset = load_preset("testbed-arith")
    g = preset.sim.ref_group_size
    r = simulate_run(
        "grpo",
        preset,
        0,
        budget_rollouts=64 * g * 48,
        eval_every_rollouts=64 * g * 16,
        options={"train_prompts": 64, "n": g},
    )
    acc = [e["accuracy"] for e in r["evals"]]
    assert len(acc) >= 3
    assert acc[-1] > acc[0] + 0.005


def test_parse_bin_label(fitter):
    assert fitter.parse_bin_label("0") == (0.0, 0.0, True, True)
    assert fitter.parse_bin_label("1") == (1.0, 1.0, True, True)
    assert fitter.parse_bin_label("(0,.25]") == (0.0, 0.25, False, True)
    assert fitter.parse_bin_label("(.75,1)") == (0.75, 1.0, False, False)
    with pytest.raises(ValueError):
        fitter.parse_bin_label("(.5,1.5]")


def test_binned_histogram_copies_the_warm_start_bins(fitter):
    hist = fitter.binned_histogram(RUN_JSON["warm_start"]["pass_rates"]["histogram"])
    want = [
        [0.0, 0.0, 0.02],  # point bin: "never solved when measured"
        [0.0, 0.25, 0.10],
        [0.25, 0.5, 0.20],
        [0.5, 0.75, 0.30],
        [0.75, 1.0, 0.33],  # (.75,1): uniform draws, the open edge does not matter
        [1.0, 1.0, 0.05],  # point bin: "always solved when measured"
    ]
    assert np.allclose(hist, want)
    preset_from_dict({"num_prompts": 10, "pass_rate_histogram": hist}, "t")  # a valid preset


def test_deconvolved_histogram_reproduces_the_measurement(fitter):
    labels, counts = list(MEASURED), np.array(list(MEASURED.values()), dtype=float)
    hist = fitter.deconvolved_histogram(MEASURED, samples=16)
    assert sum(w for *_, w in hist) == pytest.approx(1.0, abs=1e-6)
    pool = preset_from_dict({"num_prompts": 10, "pass_rate_histogram": hist}, "t")
    again = np.array(fitter.remeasured(hist, labels, 16, 200))
    assert np.abs(again - counts).max() < 0.5
    binned = np.array(fitter.remeasured(fitter.binned_histogram(MEASURED), labels, 16, 200))
    assert binned[-1] > counts[-1] + 5  # copying the bins overstates "always solved"

    # The simulator's own draws from the fitted bins, measured with 16 samples, give the counts.
    rng = np.random.default_rng(0)
    p, _ = draw_pass_rates(pool.pass_rate_histogram, 40_000, SimConfig(), rng)
    rate = rng.binomial(16, p) / 16
    seen = np.zeros(len(labels))
    for i, (lo, hi, lc, hc) in enumerate(map(fitter.parse_bin_label, labels)):
        seen[i] = np.mean(((rate > lo) | (lc & (rate == lo))) & ((rate < hi) | (hc & (rate == hi))))
    assert np.allclose(seen, counts / counts.sum(), atol=0.015)


def test_testbed_shape_reads_the_run_and_falls_back_to_task_defaults(fitter):
    shape = fitter.testbed_shape(RUN_JSON)
    assert shape == {
        "num_prompts": 1000,
        "eval_prompts": 100,
        "group_size": 8,
        "train_prompts": 64,
        "budget_rollouts": 98304,
        "eval_every_rollouts": 8192,
    }
    bare = copy.deepcopy(RUN_JSON)
    del bare["warm_start"]["payload"]
    bare["config"]["eval_prompts"] = 50
    shape = fitter.testbed_shape(bare)
    assert (shape["num_prompts"], shape["eval_prompts"]) == (4096, 50)


def test_fit_batch_response_recovers_the_speed_it_simulated(tmp_path, load_benchmark):
    """benchmarks/fit_batch_response.py on "real" curves that the simulator itself made with a
    known speed k = 2 (GRPO at two steps, rms, noise 16, update_cost 0.1): the fit finds k = 2 and
    that pair's loss is 0 (the same seeds), and a wrong pair fits worse."""
    import argparse
    import csv
    from pathlib import Path

    fit = load_benchmark("fit_batch_response")
    root = Path(__file__).resolve().parents[2]
    preset = str(root / "benchmarks/presets/testbed-hard-s27-tm.json")
    pre = fit.load_preset(preset)
    base = pre.sim
    true = dict(
        optimizer="rms",
        noise_scale=16.0,
        update_cost=0.1,
        global_gain=base.global_gain * 2,
        cluster_gain=base.cluster_gain * 2,
    )
    budget, every, seeds = 8192, 2048, [0, 1]
    variants = {"grpo": (64, 4), "grpo128": (128, 4)}
    with open(tmp_path / "real.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["strategy", "seed", "cum_rollouts", "accuracy"])
        x = np.arange(0, budget + 1, every)
        for name, (tp, m) in variants.items():
            for seed in seeds:  # one seed per "real" run: its own curve
                g = fit.sim_gain(pre, true, tp, m, 8, budget, every, [seed], x)
                for xi, gi in zip(x, g):
                    w.writerow([name, seed, int(xi), 0.5 + gi])
    real = fit.real_gains([str(tmp_path / "real.csv")], list(variants), None)
    args = argparse.Namespace(
        preset=preset, group_size=8, budget=budget, every=every, sim_seeds=seeds, target_weight=0.0
    )
    loss, k, _ = fit.fit_pair(args, real, variants, 16.0, 0.1)
    assert k == pytest.approx(2.0) and loss < 1e-12
    wrong = fit.fit_pair(args, real, variants, 16.0, 0.0)[0]
    assert wrong > 1e-4


def test_fit_batch_response_fast_recovers_the_component_it_simulated(tmp_path, load_benchmark):
    """--fast on "real" curves the simulator made with a known fast component and speed (GRPO at
    two steps): a search started one factor of 2 off in two parameters walks back to the true
    values, where the loss is 0 (the same seeds)."""
    import argparse
    import csv
    from pathlib import Path

    fit = load_benchmark("fit_batch_response")
    root = Path(__file__).resolve().parents[2]
    preset = str(root / "benchmarks/presets/testbed-hard-s27-tm.json")
    budget, every, seeds = 8192, 2048, [0, 1]
    variants = {"grpo": (64, 4), "grpo128": (128, 4)}
    args = argparse.Namespace(
        preset=preset,
        group_size=8,
        budget=budget,
        every=every,
        sim_seeds=seeds,
        fast_tol=0.5,
        target_weight=0.0,
    )
    truth = (1.0, 0.4, 0.5, 64.0, 0.004)  # FAST_PARAMS: k, F, r, B_f, rho
    pre = fit.load_preset(preset)
    sim = dict(
        global_gain=pre.sim.global_gain,
        cluster_gain=pre.sim.cluster_gain,
        fast_max=0.4,
        fast_rate=0.5,
        fast_noise=64.0,
        fast_damage=0.004,
    )
    with open(tmp_path / "real.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["strategy", "seed", "cum_rollouts", "accuracy"])
        x = np.arange(0, budget + 1, every)
        for name, (tp, m) in variants.items():
            for seed in seeds:
                g = fit.sim_gain(pre, dict(sim, fast_updates=m), tp, 1, 8, budget, every, [seed], x)
                for xi, gi in zip(x, g):
                    w.writerow([name, seed, int(xi), 0.5 + gi])
    real = fit.real_gains([str(tmp_path / "real.csv")], list(variants), None)

    class Serial:
        map = staticmethod(map)

    start = (0.5, 0.2, 0.5, 64.0, 0.004)
    assert fit.fast_loss(args, real, variants, start)[0] > 1e-3
    loss, theta, _ = fit.search_fast(args, real, variants, Serial(), start)
    assert theta == pytest.approx(truth) and loss < 1e-12


HARD_CSVS = [
    "hard-testbed-s27",
    "hard-testbed-s28",
    "hard-testbed-s28-ablations",
    "hard-testbed-s29",
]
HARD_STEPS = {"grpo": (64, 4), "grpo128": (128, 4), "grpo256": (256, 4), "grpo512": (512, 4)} | {
    "grpo1024": (1024, 4)
}


@pytest.mark.parametrize(
    "preset, csvs, variants, every, sim_seeds, rmse, speedup_error",
    [
        (
            "testbed-hard-s30-fast",
            HARD_CSVS,
            HARD_STEPS | {"grpoMB1": (64, 1), "grpoMB2": (64, 2)},
            4096,
            [2, 3],
            0.00368,
            0.682,
        ),
        (
            "testbed-hard-s31-all-steps",
            HARD_CSVS,
            HARD_STEPS | {"grpoMB1": (64, 1), "grpoMB2": (64, 2)},
            4096,
            [2, 3],
            0.00380,
            0.395,
        ),
        ("testbed-hard-s31-steps", HARD_CSVS, HARD_STEPS, 4096, [2, 3], 0.00248, 0.114),
        ("testbed-hard-s31-levels-steps", HARD_CSVS, HARD_STEPS, 4096, [2, 3], 0.00295, 0.301),
        (
            "testbed-default-s30-fast",
            [
                "default-testbed-s13",
                "default-testbed-s28-batch:grpo128",
                "default-testbed-s29-batch",
            ],
            {"grpo": (64, 4), "grpo128": (128, 4), "grpo32": (32, 4)},
            8192,
            [0, 1],
            0.00251,
            0.485,
        ),
    ],
)
def test_the_committed_fast_presets_fit_real_grpo_as_documented(
    load_benchmark, preset, csvs, variants, every, sim_seeds, rmse, speedup_error
):
    """docs/simulator.md, "Session 30" and "Session 31": each fitted preset's curve rmse and its rms
    log error of GRPO's step speedups against the committed real GRPO runs, recomputed from the
    CSVs (a change to the model or the runs that moves either shows here)."""
    import argparse
    from pathlib import Path

    fit = load_benchmark("fit_batch_response")
    root = Path(__file__).resolve().parents[2]
    paths = [str(root / "benchmarks/results" / (c.replace(":", ".csv:") if ":" in c else c + ".csv"))
             for c in csvs]  # fmt: skip
    real = fit.real_gains(paths, list(variants), None)
    args = argparse.Namespace(
        preset=str(root / "benchmarks/presets" / f"{preset}.json"),
        group_size=8,
        budget=98304,
        every=every,
        sim_seeds=sim_seeds,
        target_weight=0.0,
    )
    pre = fit.load_preset(args.preset)
    got, gains = fit.variants_loss(args, real, variants, pre, {}, fast=True)
    assert got == pytest.approx(rmse, abs=5e-6)
    assert fit.speedup_error(args, real, gains) == pytest.approx(speedup_error, abs=5e-4)


def test_fit_batch_response_speedups_are_the_reports_speedups(load_benchmark):
    """--target-weight's speedups (rollouts to GRPO-at-64's target, from seed-mean gain curves) are
    the ones a report prints: rollalloc.report.bootstrap on all the seeds of the committed real
    hard-pool runs gives the same crossings (the reports' code, from the runs, not the curves)."""
    from pathlib import Path

    from rollalloc.report import bootstrap, curves

    fit = load_benchmark("fit_batch_response")
    root = Path(__file__).resolve().parents[2] / "benchmarks/results"
    paths = [str(root / f"hard-testbed-{c}.csv") for c in ("s27", "s28", "s28-ablations", "s29")]
    # grpo1024 is evaluated every 8,192 rollouts, the rest every 4,096: the reports' common grid
    names = ["grpo", "grpo128", "grpo256", "grpo512", "grpo1024", "grpoMB1", "grpoMB2"]
    real = fit.real_gains(paths, names, None)
    got = fit.to_target({n: (r["x"], r["gain"]) for n, r in real.items()}, "grpo")

    xs, ys = {}, {}
    import csv

    for p in paths:
        with open(p, newline="") as f:
            for row in csv.DictReader(f):
                if row["strategy"] in names:
                    run = ys.setdefault(row["strategy"], {}).setdefault(int(row["seed"]), [])
                    run.append((int(row["cum_rollouts"]), float(row["accuracy"])))
    for n in names:
        runs = [np.array(sorted(r)) for r in ys[n].values()]
        xs[n], ys[n] = [r[:, 0] for r in runs], [r[:, 1] for r in runs]
    grid = curves.common_grid([x for n in names for x in xs[n]])
    counts = {n: np.ones((1, len(xs[n]))) for n in names}
    res = bootstrap.resample(xs, ys, grid, baseline="grpo", fraction=0.9, counts=counts)
    for n in names:
        assert got[n] == pytest.approx(float(res.rollouts[n][0]), rel=1e-9), n
    assert got["grpo"] / got["grpo512"] > 3.0  # real GRPO at 512 a step: about 4x sooner


def test_speedup_error_and_the_weighted_loss_from_the_reports_crossings(
    load_benchmark, monkeypatch
):
    """speedup_error on made-up curves: each side's speedups from rollalloc.report.bootstrap (the
    reports' code), a variant that never reaches the target counted at twice the budget; the
    loss with --target-weight W is the curve rmse + W x that error."""
    import argparse

    from rollalloc.report import bootstrap, curves

    fit = load_benchmark("fit_batch_response")
    budget, x = 65536, np.arange(0, 65537, 4096, dtype=float)

    def ramp(at):  # gain rising linearly to 0.05 at `at` rollouts, then flat
        return 0.05 * np.minimum(x / at, 1.0)

    real = {n: {"x": x, "gain": ramp(a)} for n, a in [("a", 48000), ("b", 24000), ("c", 16000)]}
    sim = {"a": ramp(40000), "b": ramp(30000), "c": 0.01 * ramp(16000)}  # c never reaches it
    args = argparse.Namespace(budget=budget, every=4096)

    def reports(side):  # rollouts to a's target, one run per variant
        xs = {n: [x] for n in side}
        res = bootstrap.resample(
            xs, {n: [0.5 + g] for n, g in side.items()}, curves.common_grid([x]),
            baseline="a", fraction=0.9, counts={n: np.ones((1, 1)) for n in side},
        )  # fmt: skip
        return {n: min(float(res.rollouts[n][0]), 2.0 * budget) for n in side}

    r, s = reports({n: v["gain"] for n, v in real.items()}), reports(sim)
    assert s["c"] == 2.0 * budget
    want = np.sqrt(np.mean([np.log(s["a"] / s[n] / (r["a"] / r[n])) ** 2 for n in ("b", "c")]))
    got = fit.speedup_error(args, real, sim)
    assert got == pytest.approx(want, rel=1e-9) and got > 0.3
    assert fit.speedup_error(args, real, {n: v["gain"] for n, v in real.items()}) == 0.0

    variants = {"a": (64, 4), "b": (128, 4), "c": (256, 4)}
    by_step = {tp: sim[n] for n, (tp, _) in variants.items()}
    monkeypatch.setattr(fit, "sim_gain", lambda pre, over, tp, *rest: by_step[tp])
    loss = {}
    for w in (0.0, 0.01):
        a = argparse.Namespace(**vars(args), group_size=8, sim_seeds=[0], target_weight=w)
        loss[w] = fit.variants_loss(a, real, variants, None, {}, fast=True)[0]
    rmse = np.sqrt(np.mean(np.concatenate([(sim[n] - real[n]["gain"])[1:] for n in sim]) ** 2))
    assert loss[0.0] == pytest.approx(rmse) and loss[0.01] == pytest.approx(rmse + 0.01 * want)


def test_fit_batch_response_pool_variant_draws_a_smaller_pool_and_tells_repeat_decay(
    load_benchmark,
):
    """A variant's third number is the real trainer's pool_size: sim_gain simulates GRPO on a pool
    of that many prompts, drawn as the preset's. At the same budget a small pool repeats every
    prompt many times: with repeat_decay (a prompt's repeated rollouts transfer less) GRPO gains
    less on it than on the whole pool, and without the effect as much (transfer only, no
    memorisation), so GRPO's pool response is what tells repeat_decay."""
    fit = load_benchmark("fit_batch_response")
    pre = fit.load_preset("testbed-arith")  # 4,096 prompts, memorize_gain 0
    seen = []
    real_run = fit.simulate_run

    def spy(strategy, preset, *a, **k):
        seen.append(preset.num_prompts)
        return real_run(strategy, preset, *a, **k)

    budget, every = 16384, 4096
    x = np.arange(0, budget + 1, every)
    fit.simulate_run = spy
    try:
        gain = {
            (d, pool): fit.sim_gain(pre, {"repeat_decay": d}, 64, 1, 8, budget, every, [0], x, pool)
            for d in (0.0, 0.3)
            for pool in (None, 128)
        }
    finally:
        fit.simulate_run = real_run
    assert seen == [4096, 128, 4096, 128]
    # 16,384 rollouts of groups of 8 on 128 prompts: each prompt 16 times; on 4,096 less than once
    assert gain[(0.3, None)][-1] == pytest.approx(gain[(0.0, None)][-1], rel=1e-9)
    assert gain[(0.0, 128)][-1] == pytest.approx(gain[(0.0, None)][-1], rel=0.15)
    assert gain[(0.3, 128)][-1] < 0.5 * gain[(0.0, 128)][-1]


def test_fit_batch_response_repeat_decay_grid_finds_the_decay_it_simulated(
    tmp_path, load_benchmark
):
    """--repeat-decay on "real" curves the simulator made with repeat_decay 0.2 and repeat_harm
    0.5, GRPO on the whole pool and on a pool of 64 prompts (each prompt visited ~16 times): the
    grid {0, 0.2, 0.2 with harm 0.5, 0.6}, each point's search started at the true fast component,
    picks the truth with loss 0 (the same seeds); the whole-pool variant alone could not tell (all
    its visits are first visits)."""
    import argparse
    import csv

    fit = load_benchmark("fit_batch_response")
    preset = "testbed-arith"
    budget, every, seeds = 8192, 2048, [0]
    variants = {"grpo": (64, 1), "grpoP64": (64, 1, 64)}
    pre = fit.load_preset(preset)
    truth = (1.0, 0.3, 0.5, 16.0, 0.004)  # FAST_PARAMS: k, F, r, B_f, rho
    sim = dict(fast_max=0.3, fast_rate=0.5, fast_noise=16.0, fast_damage=0.004, repeat_decay=0.2)
    sim["repeat_harm"] = 0.5
    with open(tmp_path / "real.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["strategy", "seed", "cum_rollouts", "accuracy"])
        x = np.arange(0, budget + 1, every)
        for name, (tp, m, *pool) in variants.items():
            g = fit.sim_gain(
                pre, dict(sim, fast_updates=m), tp, 1, 8, budget, every, seeds, x, *pool
            )
            for xi, gi in zip(x, g):
                w.writerow([name, 0, int(xi), 0.5 + gi])
    real = fit.real_gains([str(tmp_path / "real.csv")], list(variants), None)

    class Serial:
        map = staticmethod(map)

    args = argparse.Namespace(
        preset=preset, group_size=8, budget=budget, every=every, sim_seeds=seeds, fast_tol=1.0,
        target_weight=0.0, repeat_decay="0,0.2,0.2::0.5,0.6", fast_start=",".join(map(str, truth)),
    )  # fmt: skip
    delta, loss, theta, _ = fit.fit_fast_grid(args, real, variants, Serial())
    assert delta == (0.2, 0, 0.5, 0.0) and loss < 1e-12 and theta == pytest.approx(truth)
    assert fit.repeat_grid("0,0.2:4,0.3:6:0.25,0.1::1:8") == [
        (0.0, 0, 0.0, 0.0),
        (0.2, 4, 0.0, 0.0),
        (0.3, 6, 0.25, 0.0),
        (0.1, 0, 1.0, 8.0),
    ]
    whole = {"grpo": variants["grpo"]}
    at0 = fit.fast_loss(
        argparse.Namespace(**vars(args), delta=(0.0, 0, 0.0, 0.0)), real, whole, truth
    )[0]
    assert at0 < 1e-12


def test_fit_batch_response_part_of_pool_keeps_the_copies_a_random_part_holds(load_benchmark):
    """part_of_pool cuts a preset as pool_size cuts the real pool. Monte Carlo over uniform random
    512-parts of the whole simulated pool (the default testbed's 2x1d level: 710 prompts on 114
    originals): the mean number of originals a part's 2x1d prompts hold is the cut preset's
    `distinct` within 3%; levels without copies keep none; a size outside [1, pool] is refused."""
    from rollalloc.sim.policy import SimPolicy

    fit = load_benchmark("fit_batch_response")
    pre = fit.load_preset("benchmarks/presets/testbed-default-s33-repeat.json")
    pol = SimPolicy(pre)
    lvl = next(i for i, lv in enumerate(pre.levels) if lv.distinct)  # the level with copies
    rng = np.random.default_rng(0)
    counts = []
    for _ in range(400):
        part = rng.choice(pre.num_prompts, size=512, replace=False)
        part = part[pol.cluster[part] == lvl]
        counts.append(len(np.unique(pol.original[part])))
    cut = fit.part_of_pool(pre, 512)
    assert cut.num_prompts == 512
    assert cut.levels[lvl].distinct == pytest.approx(np.mean(counts), rel=0.03)
    assert all(lv.distinct is None for i, lv in enumerate(cut.levels) if i != lvl)
    for bad in (0, pre.num_prompts + 1):
        with pytest.raises(SystemExit, match="pool_size"):
            fit.part_of_pool(pre, bad)


def test_fit_batch_response_reads_a_chosen_part_variant(monkeypatch, load_benchmark):
    """A variant's PICK (the trainer's pool_pick) needs a POOL_SIZE and is one of the picks; the
    chosen part is the preset's prompts nearest 1/2, not a random part of the same size."""
    fit = load_benchmark("fit_batch_response")
    for bad in ("a=64,4,mid", "a=64,4,512,best", "a=64,4,512,mid,1"):
        monkeypatch.setattr(
            "sys.argv", ["fit", "--preset", "x", "--csv", "y", "--variant", bad, "--fast"]
        )
        with pytest.raises(SystemExit, match="PICK"):
            fit.main()
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    pre = fit.load_preset(str(root / "benchmarks/presets/testbed-default-s34-memory.json"))
    x = np.arange(0, 8193, 4096)
    mid = fit.sim_gain(pre, {}, 64, 1, 8, 8192, 4096, [0], x, 256, "mid")
    rand = fit.sim_gain(pre, {}, 64, 1, 8, 8192, 4096, [0], x, 256)
    assert mid.shape == rand.shape == (3,) and not np.allclose(mid, rand)
