"""benchmarks/merge_testbed_runs.py --export / --csv: a report rebuilt from the exported
evaluations alone (what the repository keeps of real runs) has the run directories' figures."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest


def _write_run(d, strategy, seed, slope, start=0.0, fingerprint=None):
    d.mkdir(parents=True)
    rng = np.random.default_rng(seed)
    evals = [
        {
            "step": 8 * i,
            "cum_rollouts": 4096 * i,
            "cum_tokens": 13000 * i,
            "wall_s": 0.5 * i,
            "accuracy": 0.3 + slope * i + 0.003 * rng.standard_normal() * (i > 0) + start,
            "accuracy_2x1d": 0.1 + slope * i,
        }
        for i in range(25)
    ]  # fmt: skip  (one policy: every run starts at one accuracy)
    (d / "evals.jsonl").write_text("".join(json.dumps(e) + "\n" for e in evals))
    steps = [
        {"step": s, "effective_prompt_ratio": 0.5, "mean_group_reward_var": 0.1, "rollouts": 512}
        for s in range(192)
    ]
    (d / "steps.jsonl").write_text("".join(json.dumps(s) + "\n" for s in steps))
    run = {"config": {"budget_rollouts": 98304, "strategy_config": {"n": 32, "who": strategy}},
           "warm_start": {"key": "abc", "fingerprint": fingerprint}}  # fmt: skip
    (d / "run.json").write_text(json.dumps(run))


def test_export_then_csv_gives_the_same_speedups(tmp_path, load_benchmark, monkeypatch):
    merge = load_benchmark("merge_testbed_runs")
    for seed in range(4):
        _write_run(tmp_path / "runs" / "grpo" / f"seed{seed}", "grpo", seed, 0.002)
        _write_run(tmp_path / "runs" / "fast" / f"seed{seed}", "fast", seed + 10, 0.003)
    csv_path = tmp_path / "ev.csv"

    def summary(*args):
        out = tmp_path / f"out{len(list(tmp_path.glob('out*')))}"
        monkeypatch.setattr(sys, "argv", ["m", *args, "--seeds", "0,1,2,3", "--out", str(out)])
        merge.main()
        return json.loads((out / "summary.json").read_text())

    a = summary("--roots", str(tmp_path / "runs"), "--export", str(csv_path))
    b = summary("--csv", str(csv_path))
    meta = json.loads(csv_path.with_suffix(".json").read_text())
    assert (
        meta["fast"]["strategy_config"]["who"] == "fast" and meta["grpo"]["warm_start_key"] == "abc"
    )
    for s in ("grpo", "fast"):
        ra, rb = a["strategies"][s], b["strategies"][s]
        assert np.allclose(ra["per_seed_rollouts_to_target"], rb["per_seed_rollouts_to_target"])
        assert np.isclose(ra["final_accuracy"], rb["final_accuracy"])
    assert np.isclose(a["speedup"]["fast"]["grpo"], b["speedup"]["fast"]["grpo"], rtol=1e-6)
    assert a["speedup"]["fast"]["grpo"] > 1.2  # the faster strategy is faster (1.5x by slope)
    assert np.allclose(a["speedup_ci"]["fast"]["grpo"], b["speedup_ci"]["fast"]["grpo"], rtol=1e-6)


def test_runs_of_one_key_from_two_policies_are_refused(tmp_path, load_benchmark, monkeypatch):
    # session 39: a warm start rebuilt in another environment keeps its key and is another policy
    # (held-out 0.5812 against 0.5778 at the start); merging its runs with the old ones compared
    # two policies without a word. The first evaluation shows it.
    merge = load_benchmark("merge_testbed_runs")
    for seed in range(3):
        _write_run(tmp_path / "runs" / "grpo" / f"seed{seed}", "grpo", seed, 0.002)
        _write_run(tmp_path / "runs" / "late" / f"seed{seed}", "late", seed, 0.003, start=0.0034)

    def run(*extra):
        out = tmp_path / f"out{len(list(tmp_path.glob('out*')))}"
        argv = ["m", "--roots", str(tmp_path / "runs"), "--seeds", "0-2", "--out", str(out)]
        monkeypatch.setattr(sys, "argv", [*argv, *extra])
        merge.main()
        return out

    with pytest.raises(SystemExit, match=r"key abc start from different policies: seed 0 .*"
                       r"grpo 0\.300000, late 0\.303400 \(3 \(key, seed\) pairs"):  # fmt: skip
        run()
    assert (run("--allow-different-starts") / "summary.json").is_file()
    for seed in range(3):  # within the tolerance (another machine's CPUs: ~1e-8) it merges
        _write_run(tmp_path / "runs2" / "grpo" / f"seed{seed}", "grpo", seed, 0.002)
        _write_run(tmp_path / "runs2" / "b" / f"seed{seed}", "b", seed, 0.003, start=2.5e-8)
    out = tmp_path / "near"
    argv = ["m", "--roots", str(tmp_path / "runs2"), "--seeds", "0-2", "--out", str(out)]
    monkeypatch.setattr(sys, "argv", argv)
    merge.main()
    assert (out / "summary.json").is_file()
    # equal starts, other weights (run.json's warm_start.fingerprint, since session 39): refused
    for seed in range(3):
        _write_run(
            tmp_path / "runs3" / "grpo" / f"seed{seed}", "grpo", seed, 0.002, fingerprint="f1"
        )
        _write_run(tmp_path / "runs3" / "c" / f"seed{seed}", "c", seed, 0.003, fingerprint="f2")
    csv_path = tmp_path / "fp.csv"
    argv = [
        "m",
        "--roots",
        str(tmp_path / "runs3"),
        "--seeds",
        "0-2",
        "--out",
        str(tmp_path / "fp"),
    ]
    monkeypatch.setattr(sys, "argv", [*argv, "--allow-different-starts", "--export", str(csv_path)])
    merge.main()
    meta = json.loads(csv_path.with_suffix(".json").read_text())
    assert meta["c"]["warm_start_fingerprint"] == "f2"  # exported, and read back from the CSV
    for args in (
        argv,
        ["m", "--csv", str(csv_path), "--seeds", "0-2", "--out", str(tmp_path / "f")],
    ):
        monkeypatch.setattr(sys, "argv", args)
        with pytest.raises(SystemExit, match="weights fingerprints c f2, grpo f1"):
            merge.main()


def test_the_start_check_across_seeds_and_with_known_weights(tmp_path, load_benchmark, monkeypatch):
    # a review's cases: (1) two strategies on different seeds, each starting at one accuracy
    # whatever its seed (an exact evaluation), from two policies: refused though no seed is shared;
    # (2) a strategy whose seeds come from two builds (fingerprints): refused; (3) sampled first
    # evaluations that differ between runs of one known fingerprint (another device's RNG): merged
    merge = load_benchmark("merge_testbed_runs")

    def run(root, seeds="0-5"):
        out = tmp_path / f"out{len(list(tmp_path.glob('out*')))}"
        argv = ["m", "--roots", str(tmp_path / root), "--seeds", seeds, "--out", str(out)]
        monkeypatch.setattr(sys, "argv", argv)
        merge.main()
        return out

    for seed in range(3):
        _write_run(tmp_path / "a" / "grpo" / f"seed{seed}", "grpo", seed, 0.002)
        _write_run(tmp_path / "a" / "x" / f"seed{seed + 3}", "x", seed + 3, 0.003, start=0.0044)
    with pytest.raises(
        SystemExit, match=r"every seed of each starts at one accuracy: grpo 0\.300000, x 0\.304400"
    ):
        run("a")
    for seed in range(3):
        fp = "f1" if seed < 2 else "f2"
        _write_run(tmp_path / "b" / "grpo" / f"seed{seed}", "grpo", seed, 0.002, fingerprint=fp)
    with pytest.raises(SystemExit, match="weights fingerprints grpo f1/f2"):
        run("b", "0-2")
    for seed in range(3):
        _write_run(tmp_path / "c" / "grpo" / f"seed{seed}", "grpo", seed, 0.002, fingerprint="f1")
        _write_run(tmp_path / "c" / "y" / f"seed{seed}", "y", seed, 0.003, start=0.01 * seed,
                   fingerprint="f1")  # fmt: skip
    assert (run("c", "0-2") / "summary.json").is_file()


def _committed(tmp_path, load_benchmark, monkeypatch, testbed, names, seeds, out="r", extra=()):
    """The report of benchmarks/results/{testbed}-testbed-{name}.csv (each of `names`), seeds 0 to
    seeds - 1 (or the seeds of a list), rebuilt by merge_testbed_runs.py alone (with `extra`
    arguments): its summary.json."""
    from pathlib import Path

    merge = load_benchmark("merge_testbed_runs")
    results = Path(__file__).resolve().parents[2] / "benchmarks/results"
    csvs = [a for n in names for a in ("--csv", str(results / f"{testbed}-testbed-{n}.csv"))]
    seed_list = ",".join(str(s) for s in (range(seeds) if isinstance(seeds, int) else seeds))
    monkeypatch.setattr(
        sys, "argv", ["m", *csvs, "--seeds", seed_list, "--out", str(tmp_path / out), *extra]
    )
    merge.main()
    return json.loads((tmp_path / out / "summary.json").read_text())


def _figure(summary, a, b):
    """a's speedup over b and its 90% interval, to two decimals."""
    sp, ci = summary["speedup"][a][b], summary["speedup_ci"][a][b]
    return (None if sp is None else round(sp, 2)), [None if x is None else round(x, 2) for x in ci]


def test_the_committed_paper_testbed_runs_give_the_documented_figures(
    tmp_path, load_benchmark, monkeypatch
):
    # benchmarks/results/paper-testbed-s10-warm0.csv, exported from the run directories whose
    # report docs/posterior-signal.md ("Session 10") quotes: rebuilt from the file alone, the same
    # speedups and intervals come back
    s = _committed(tmp_path, load_benchmark, monkeypatch, "paper", ["s10-warm0"], 20)
    assert round(s["speedup"]["posterior-signal"]["grpo"], 2) == 1.95
    assert [round(x, 2) for x in s["speedup_ci"]["posterior-signal"]["grpo"]] == [1.73, 2.21]
    assert round(s["speedup"]["posterior-signal"]["pilot-commit"], 2) == 1.17
    assert [round(x, 2) for x in s["speedup_ci"]["posterior-signal"]["pilot-commit"]] == [
        1.05,
        1.27,
    ]
    assert round(s["speedup"]["pilot-commit"]["grpo"], 2) == 1.67


def test_the_speedup_across_warm_starts_from_the_committed_runs(
    tmp_path, load_benchmark, monkeypatch
):
    # docs/testbed.md, "Five warm starts": the four warm starts of this machine rebuilt from
    # benchmarks/results/ alone, then benchmarks/warm_start_interval.py across them
    parts = {"ws0": (["s10-warm0"], 20), "ws1": (["s10-ws1"], 6), "ws2": (["s11-ws2"], 4),
             "ws3": (["s11-ws3"], 4)}  # fmt: skip
    strategies = "posterior-signal,pilot-commit,posterior-signal/pilot-commit"
    got = _across_warm_starts(tmp_path, load_benchmark, monkeypatch, parts, strategies)
    assert got["posterior-signal vs baseline"] == (2.17, [1.61, 2.92])
    assert got["pilot-commit vs baseline"] == (1.83, [1.36, 2.46])
    assert got["posterior-signal vs pilot-commit"] == (1.19, [1.11, 1.27])


def _across_warm_starts(tmp_path, load_benchmark, monkeypatch, parts, strategies, extra=()):
    """Each warm start's report rebuilt from benchmarks/results/ alone ({label: (CSV names,
    seeds)}), then warm_start_interval.py across them: {comparison: (mean, [90% interval])}."""

    wsi = load_benchmark("warm_start_interval")
    args = []
    for label, (names, seeds) in parts.items():
        if not (tmp_path / label / "summary.json").exists():
            _committed(tmp_path, load_benchmark, monkeypatch, "paper", names, seeds, out=label)
        args.append(f"{label}={tmp_path / label / 'summary.json'}")
    table = tmp_path / "across.json"
    assert wsi.main([*args, "--strategies", strategies, "--out", str(table), *extra]) == 0
    res = json.loads(table.read_text())
    return {
        k: (round(v["geometric_mean"], 2), [round(x, 2) for x in v["ci90"]]) for k, v in res.items()
    }


def test_the_level_prior_across_five_warm_starts_from_the_committed_runs(
    tmp_path, load_benchmark, monkeypatch
):
    # docs/testbed.md, "The level prior across warm starts" (session 17): psF, Pilot-Commit and
    # GRPO on five warm starts rebuilt from benchmarks/results/ alone, then the interval across them
    parts = {
        "ws0": (["s12-peers", "s13-peers", "s16-strata"], 20),
        "ws1": (["s16-ws1", "s17-ws1"], 20),
        "ws2": (["s17-ws2"], 8),
        "ws3": (["s17-ws3"], 8),
        "ws4": (["s17-ws4"], 8),
    }
    got = _across_warm_starts(tmp_path, load_benchmark, monkeypatch, parts, "psF,psF/pilot-commit")
    assert got["psF vs baseline"] == (1.83, [1.56, 2.15])
    assert got["psF vs pilot-commit"] == (1.33, [1.20, 1.47])


def test_the_default_with_probes_fit_across_five_warm_starts_from_the_committed_runs(
    tmp_path, load_benchmark, monkeypatch
):
    # docs/posterior-signal.md, "Probes that fit their extension" (session 18): the default with
    # and without strata=level on the same five warm starts
    parts = {
        "ws0": (["s12-peers", "s13-peers", "s16-strata", "s17-stream-strata", "s18"], 20),
        "ws1": (["s16-ws1", "s17-ws1", "s18-ws1"], 10),
        "ws2": (["s17-ws2", "s18-ws2"], 8),
        "ws3": (["s17-ws3", "s18-ws3"], 8),
        "ws4": (["s17-ws4", "s18-ws4"], 8),
    }
    got = _across_warm_starts(
        tmp_path, load_benchmark, monkeypatch, parts,
        "psSsfit,psSsfit/pilot-commit,psDfit/pilot-commit,psSsfit/psF",
    )  # fmt: skip
    assert got["psSsfit vs baseline"] == (1.82, [1.58, 2.09])
    assert got["psSsfit vs pilot-commit"] == (1.33, [1.17, 1.51])
    assert got["psDfit vs pilot-commit"] == (1.08, [0.95, 1.23])
    assert got["psSsfit vs psF"] == (0.97, [0.90, 1.06])


FIVE_WARM_STARTS = {
    "ws0": (["s12-peers", "s13-peers", "s16-strata", "s18", "s23f"], 20),
    "ws1": (["s16-ws1", "s17-ws1", "s18-ws1", "s24-ws1"], 10),
    "ws2": (["s17-ws2", "s18-ws2", "s24-ws2"], 8),
    "ws3": (["s17-ws3", "s18-ws3", "s24-ws3"], 8),
    "ws4": (["s17-ws4", "s18-ws4", "s24-ws4"], 8),
}
"""The paper testbed's five warm starts as session 24 merged them: {label: (CSV names, seeds)}."""


def test_likelihood_rank_level_quotas_across_five_warm_starts_from_the_committed_runs(
    tmp_path, load_benchmark, monkeypatch
):
    # docs/likelihood-rank.md, "Five warm starts" (session 24): lrQFp and lrQFP1p beside GRPO,
    # Pilot-Commit, psSsfit and psF on the five warm starts, rebuilt from benchmarks/results/ alone
    got = _across_warm_starts(
        tmp_path, load_benchmark, monkeypatch, FIVE_WARM_STARTS,
        "lrQFp,lrQFP1p,lrQFp/pilot-commit,lrQFP1p/pilot-commit,lrQFP1p/lrQFp,lrQFp/psSsfit",
    )  # fmt: skip
    assert got["lrQFp vs baseline"] == (1.58, [1.38, 1.81])
    assert got["lrQFP1p vs baseline"] == (1.38, [1.20, 1.58])
    assert got["lrQFp vs pilot-commit"] == (1.16, [0.97, 1.38])
    assert got["lrQFP1p vs pilot-commit"] == (1.01, [0.83, 1.22])
    assert got["lrQFP1p vs lrQFp"] == (0.87, [0.84, 0.90])
    assert got["lrQFp vs psSsfit"] == (0.87, [0.80, 0.94])


def test_eight_and_ten_warm_starts_from_the_committed_runs(tmp_path, load_benchmark, monkeypatch):
    # docs/likelihood-rank.md, "Eight warm starts" (session 25): the five above plus warm starts
    # 5-7 (7 seeds each, run on the GPU machine's CPUs), then 8 (2 seeds, on its GPU) and 9 (3)
    parts = {**FIVE_WARM_STARTS, **{f"ws{w}": ([f"s25-ws{w}"], 7) for w in (5, 6, 7)}}
    across = lambda parts, extra=(): _across_warm_starts(  # noqa: E731
        tmp_path, load_benchmark, monkeypatch, parts,
        "lrQFp,pilot-commit,psSsfit/pilot-commit,lrQFp/pilot-commit,lrQFp/psSsfit", extra,
    )  # fmt: skip
    got = across(parts)
    assert got["lrQFp vs baseline"] == (1.47, [1.32, 1.64])
    assert got["pilot-commit vs baseline"] == (1.24, [1.05, 1.46])
    assert got["lrQFp vs pilot-commit"] == (1.19, [1.05, 1.34])
    assert got["psSsfit vs pilot-commit"] == (1.42, [1.26, 1.60])  # ws5 left out: psSsfit never
    got = across(parts, ("--never", "budget"))
    assert got["psSsfit vs pilot-commit"] == (1.33, [1.14, 1.56])
    assert got["lrQFp vs psSsfit"] == (0.89, [0.81, 0.99])
    got = across({**parts, "ws8": (["s25-ws8"], 2), "ws9": (["s25-ws9"], 3)}, ("--never", "budget"))
    assert got["lrQFp vs pilot-commit"] == (1.09, [0.94, 1.26])
    assert got["psSsfit vs pilot-commit"] == (1.25, [1.08, 1.44])


EIGHT_WARM_STARTS = {
    "ws0": (["s12-peers", "s13-peers", "s16-strata", "s18", "s23f", "s25-probe-ws0"], 10),
    "ws1": (["s16-ws1", "s17-ws1", "s18-ws1", "s24-ws1", "s25-probe-ws1"], 10),
    **{f"ws{w}": ([f"s17-ws{w}", f"s18-ws{w}", f"s24-ws{w}", f"s25-probe-ws{w}"], 8)
       for w in (2, 3, 4)},
    **{f"ws{w}": ([f"s25-ws{w}", f"s25-probe-ws{w}"], 7) for w in (5, 6, 7)},
}  # fmt: skip
"""The eight warm starts as session 25 merged them with the refresh's runs: {label: (CSV names,
seeds)}."""


def test_probe_judged_across_eight_warm_starts_from_the_committed_runs(
    tmp_path, load_benchmark, monkeypatch
):
    # docs/posterior-signal.md, "A level written off" (session 25): psSsfit with probe_judged=4
    # (psSsfitR4, now the default with strata) on the eight warm starts; ws0 on seeds 0-9
    got = _across_warm_starts(
        tmp_path, load_benchmark, monkeypatch, EIGHT_WARM_STARTS,
        "psSsfitR4,psSsfitR4/pilot-commit,psSsfitR4/lrQFp,psSsfitR4/psSsfit", ("--never", "budget"),
    )  # fmt: skip
    assert got["psSsfitR4 vs baseline"] == (1.63, [1.46, 1.82])
    assert got["psSsfitR4 vs pilot-commit"] == (1.31, [1.18, 1.46])
    assert got["psSsfitR4 vs lrQFp"] == (1.10, [1.05, 1.16])
    assert got["psSsfitR4 vs psSsfit"] == (1.00, [0.92, 1.08])  # ws5 bounded: psSsfit never
    # the refresh as one probe outside the probe round (code 9c4b01c, the default since)
    got = _across_warm_starts(
        tmp_path, load_benchmark, monkeypatch, EIGHT_WARM_STARTS,
        "psSsfitR4b,psSsfitR4b/pilot-commit,psSsfitR4b/lrQFp,psSsfitR4b/psSsfit,psSsfitR4b/psSsfitR4",
        ("--never", "budget"),
    )  # fmt: skip
    assert got["psSsfitR4b vs baseline"] == (1.66, [1.53, 1.81])
    assert got["psSsfitR4b vs pilot-commit"] == (1.34, [1.21, 1.48])
    assert got["psSsfitR4b vs lrQFp"] == (1.13, [1.06, 1.20])
    assert got["psSsfitR4b vs psSsfit"] == (1.02, [0.91, 1.13])
    assert got["psSsfitR4b vs psSsfitR4"] == (1.02, [0.98, 1.06])


def test_group_ema_across_eight_warm_starts_from_the_committed_runs(
    tmp_path, load_benchmark, monkeypatch
):
    # docs/posterior-signal.md, "A group's prior that follows its recent first visits" (session
    # 26): psGE (strata=level, group_ema=0.1, now the default with strata) on the eight warm
    # starts beside the session-25 default (psSsfitR4b), on the same seeds
    parts = {w: ([*names, f"s26-{w}"], seeds) for w, (names, seeds) in EIGHT_WARM_STARTS.items()}
    psge = "psGE,psGE/pilot-commit,psGE/lrQFp,psGE/psSsfitR4b"
    got = _across_warm_starts(
        tmp_path, load_benchmark, monkeypatch, parts, psge, ("--never", "budget")
    )
    assert got["psGE vs baseline"] == (1.67, [1.47, 1.91])
    assert got["psGE vs pilot-commit"] == (1.35, [1.26, 1.43])
    assert got["psGE vs lrQFp"] == (1.13, [1.04, 1.23])
    assert got["psGE vs psSsfitR4b"] == (1.01, [0.94, 1.07])
    # and with warm start 9 (seeds 0-6: a held-out check, run after the default was chosen)
    parts["ws9"] = (["s25-ws9", "s26-ws9"], 7)
    got = _across_warm_starts(
        tmp_path, load_benchmark, monkeypatch, parts, psge, ("--never", "budget")
    )
    assert got["psGE vs baseline"] == (1.69, [1.51, 1.90])
    assert got["psGE vs pilot-commit"] == (1.31, [1.21, 1.41])
    assert got["psGE vs lrQFp"] == (1.15, [1.06, 1.24])
    assert got["psGE vs psSsfitR4b"] == (1.01, [0.95, 1.07])
    # ws5, where psSsfitR4b starved a level, on 14 seeds (7-13 added this session)
    csvs = ["s25-ws5", "s25-probe-ws5", "s26-ws5", "s26-ws5b"]
    s = _committed(tmp_path, load_benchmark, monkeypatch, "paper", csvs, 14, "ws5x")
    assert _figure(s, "psGE", "grpo") == (1.39, [1.26, 1.74])
    assert _figure(s, "psSsfitR4b", "grpo") == (1.50, [1.28, 1.81])
    assert _figure(s, "psGE", "psSsfitR4b") == (0.93, [0.79, 1.16])
    # verl's two configurations with a column on ws5, seeds 0-6 (docs/trl.md, docs/verl.md)
    csvs = ["s25-ws5", "s25-probe-ws5", "s26-ws5", "s26-ws5-verl"]
    s = _committed(tmp_path, load_benchmark, monkeypatch, "paper", csvs, 7, "ws5v")
    assert _figure(s, "psSsCB26", "grpo") == (1.57, [1.41, 1.98])
    assert _figure(s, "psF", "grpo") == (1.37, [1.10, 1.66])
    assert _figure(s, "psSsCB26", "psF") == (1.15, [1.01, 1.42])
    # the default testbed with a column: today's defaults (refresh, group_ema) against both off
    d = _committed(tmp_path, load_benchmark, monkeypatch, "default", ["s15-oracle", "s26"], 10, "d")
    assert _figure(d, "psSs26", "psSs26off") == (0.98, [0.93, 1.03])
    assert _figure(d, "psSs26", "grpo") == (0.97, [0.91, 1.02])


def test_probes_that_fit_their_extension_from_the_committed_runs(
    tmp_path, load_benchmark, monkeypatch
):
    # session 18 (docs/posterior-signal.md, "Probes that fit their extension"): the default with
    # probes_fit and strata=level against every committed configuration of the same warm start
    csvs = ["s12-peers", "s13-peers", "s16-strata", "s17-stream-strata", "s18", "s18-cb"]
    s = _committed(tmp_path, load_benchmark, monkeypatch, "paper", csvs, 20)
    figure = lambda a, b: _figure(s, a, b)  # noqa: E731
    assert figure("psSsfit", "grpo") == (1.94, [1.71, 2.11])
    assert figure("psSsfit", "pilot-commit") == (1.51, [1.39, 1.74])
    assert figure("psSsfit", "psSs") == (1.12, [1.02, 1.23])
    assert figure("psDfit", "grpo") == (1.21, [1.04, 1.31])
    assert figure("psDfit", "psD") == (1.03, [0.92, 1.14])
    assert figure("psSsCB", "grpo") == (1.83, [1.63, 1.97])  # under TRL's / verl's constant batch
    assert figure("psSsCB", "pilot-commit") == (1.42, [1.33, 1.64])


def test_ranking_over_a_window_of_four_on_the_default_testbed_from_the_committed_runs(
    tmp_path, load_benchmark, monkeypatch
):
    # session 19 (docs/posterior-signal.md, "Where the simulator's testbed-arith misleads"): the
    # variant that passes MoPPS in the simulator is slower than GRPO on the real pool
    s = _committed(tmp_path, load_benchmark, monkeypatch, "default", ["s15-oracle", "s19-psR4"], 10)
    sp, ci = s["speedup"], s["speedup_ci"]
    figure = lambda a, b: _figure(s, a, b)  # noqa: E731
    assert sp["psR4"]["grpo"] is None and round(ci["psR4"]["grpo"][1], 2) == 0.87
    assert figure("og80", "grpo") == (1.12, [1.07, 1.18])
    assert figure("og128", "grpo") == (1.01, [0.94, 1.07])
    assert figure("psTop2", "grpo") == (0.92, [0.86, 0.98])
    assert figure("mopps", "grpo") == (0.96, [0.90, 1.01])
    # and over a window of 16 (seeds 0-4; GRPO from -s13): never at the target, 3 points lower
    r16 = _committed(
        tmp_path, load_benchmark, monkeypatch, "default", ["s13", "s19-psR16"], 5, "r16"
    )
    v = r16["vs_baseline"]["psR16"]
    assert v["speedup_verdict"] == "slower" and v["speedup"] is None
    assert round(v["final_accuracy_diff"], 3) == -0.030


def test_shares_per_level_on_the_default_testbed_from_the_committed_runs(
    tmp_path, load_benchmark, monkeypatch
):
    # sessions 19-20 (docs/posterior-signal.md, "Shares per level"): knowing p, each level's share
    # is what makes a window of 128 pay; with the posterior's estimates it is level with GRPO
    def summary(names, seeds, out):
        return _committed(tmp_path, load_benchmark, monkeypatch, "default", names, seeds, out)

    s = summary(["s15-oracle", "s16", "s18", "s19-og128q", "s20-quota"], 10, "r10")
    sp, ci = s["speedup"], s["speedup_ci"]
    figure = lambda a, b: _figure(s, a, b)  # noqa: E731
    assert figure("og128q", "grpo") == (1.10, [1.03, 1.15])
    assert figure("og128q", "og128") == (1.08, [1.03, 1.16])
    # at 80 candidates, where one ranking starves nothing, the shares change nothing
    sp80 = summary(["s15-oracle", "s20-og80q"], 10, "r80")["speedup"]["og80q"]
    assert (round(sp80["grpo"], 2), round(sp80["og80"], 2)) == (1.11, 0.99)
    # ranking by a free fresh look of 8 / 24 rollouts instead of p: about half of the gain
    look = summary(["s15-oracle", "s20-look"], 10, "rl")
    assert _figure(look, "og80L8", "grpo") == (1.07, [0.99, 1.13])
    assert _figure(look, "og80L24", "grpo")[0] == 1.06
    assert _figure(look, "og80L24", "og80")[1][1] == 0.98
    assert figure("psQA2", "grpo") == (0.99, [0.91, 1.06])
    assert figure("psQA125", "grpo") == (1.00, [0.91, 1.05])
    assert figure("psQ125", "psS125") == (1.00, [0.93, 1.10])
    assert round(sp["psQ2"]["grpo"], 2) == 0.98 and round(ci["psQ2"]["grpo"][1], 2) == 1.08
    # quota ends the starvation of strata=answer: psA125 never reaches the target, psQA125 does
    assert sp["psQA125"]["psA125"] is None and round(ci["psQA125"]["psA125"][0], 2) == 1.22
    assert figure("psQA125b", "grpo") == (1.01, [0.89, 1.08])  # ties by rank (by_shares): the same
    s = summary(["s15-oracle", "s16", "s20-quota"], 20, "r20")
    v = s["vs_baseline"]["psQ125"]
    assert (round(v["speedup"], 2), [round(x, 2) for x in v["speedup_ci"]]) == (1.01, [0.97, 1.06])
    assert v["speedup_verdict"] == "within noise"
    assert round(s["speedup"]["psQ125"]["psT125"], 2) == 1.01


def test_first_looks_and_column_ranking_on_the_default_testbed_from_the_committed_runs(
    tmp_path, load_benchmark, monkeypatch
):
    # session 21 (docs/posterior-signal.md, "The first-look tax and ranking by a column"): knowing
    # p only after a prompt's first look keeps most of knowing it; ranking by the answer column's
    # recent success rate (column-rank, offline capture 0.78) is slower than GRPO
    s = _committed(
        tmp_path, load_benchmark, monkeypatch, "default", ["s15-oracle", "s16", "s21"], 20, "r21"
    )
    assert _figure(s, "og80S", "grpo") == (1.07, [1.02, 1.1])
    assert _figure(s, "og80", "grpo") == (1.09, [1.05, 1.14])  # og80 seeds 10-19 in -s21
    assert _figure(s, "og80S", "og80") == (0.97, [0.93, 1.02])
    assert _figure(s, "og80S", "psT125") == (1.06, [1.02, 1.11])
    v = s["vs_baseline"]["crA"]
    assert v["speedup"] is None and v["speedup_verdict"] == "slower"
    assert round(v["final_accuracy_diff"], 4) == -0.0044
    ten = _committed(
        tmp_path, load_benchmark, monkeypatch, "default", ["s15-oracle", "s21"], 10, "r21b"
    )
    assert _figure(ten, "og80S", "grpo")[0] == 1.11


def test_likelihood_rank_on_the_paper_testbed_from_the_committed_runs(
    tmp_path, load_benchmark, monkeypatch
):
    # docs/likelihood-rank.md, "Real paper-regime testbed": 10 seeds (lrWp4S: 4)
    names = ["s12-peers", "s13-peers", "s16-strata", "s18", "s22"]
    s = _committed(tmp_path, load_benchmark, monkeypatch, "paper", names, 10, "p22")
    assert _figure(s, "lrWp4", "grpo") == (1.05, [0.96, 1.12])
    assert _figure(s, "lrWp4", "pilot-commit") == (0.78, [0.72, 0.84])
    assert _figure(s, "psSsfit", "pilot-commit") == (1.38, [1.24, 1.56])
    assert _figure(s, "pilot-commit", "grpo") == (1.34, [1.22, 1.48])
    v = s["vs_baseline"]["lrWp4S"]
    assert v["speedup"] is None and round(v["final_accuracy_diff"], 4) == -0.0138


def test_likelihood_rank_on_the_default_testbed_from_the_committed_runs(
    tmp_path, load_benchmark, monkeypatch
):
    # docs/likelihood-rank.md, "Real default testbed" and "Why each part is there": 20 seeds
    names = ["s15-oracle", "s16", "s21", "s22"]
    s = _committed(tmp_path, load_benchmark, monkeypatch, "default", names, 20, "r22")
    assert _figure(s, "lrP1", "grpo") == (1.06, [1.01, 1.1])
    assert _figure(s, "lrP1", "mopps") == (1.09, [1.04, 1.16])
    assert _figure(s, "lrP1", "og80S") == (0.99, [0.95, 1.04])
    assert _figure(s, "lrP1", "psT125") == (1.05, [1.01, 1.1])
    assert _figure(s, "lrP1", "lrW2") == (0.98, [0.95, 1.06])
    assert _figure(s, "lrW2", "grpo") == (1.07, [0.99, 1.11])
    assert _figure(s, "lrW2nd", "lrW2") == (0.92, [0.89, 1.0])
    assert _figure(s, "lr0", "grpo") == (1.04, [0.99, 1.07])
    assert _figure(s, "lr0", "lrW2") == (0.97, [0.93, 1.04])
    assert _figure(s, "lrR", "lrW2") == (0.96, [0.92, 1.05])
    assert _figure(s, "lrW", "lrW2") == (0.95, [0.91, 1.02])
    assert round(s["strategies"]["lrP1"]["tokens_to_target"]) == 222068


def test_likelihood_rank_at_thirty_seeds_from_the_committed_runs(
    tmp_path, load_benchmark, monkeypatch
):
    # docs/likelihood-rank.md, "Thirty seeds": grpo, lrP1 and lr0 with seeds 20-29 from -s22b
    names = ["s15-oracle", "s16", "s22", "s22b"]
    s = _committed(tmp_path, load_benchmark, monkeypatch, "default", names, 30, "r30")
    assert _figure(s, "lrP1", "grpo") == (1.09, [1.06, 1.13])
    assert _figure(s, "lr0", "grpo") == (1.04, [1.01, 1.07])
    assert _figure(s, "lrP1", "lr0") == (1.05, [1.02, 1.08])
    assert sum(x is not None for x in s["strategies"]["grpo"]["per_seed_rollouts_to_target"]) == 27


def test_likelihood_rank_quota_on_the_paper_testbed_from_the_committed_runs(
    tmp_path, load_benchmark, monkeypatch
):
    # docs/likelihood-rank.md, "Real paper-regime testbed": 10 seeds each (session 23)
    names = ["s12-peers", "s13-peers", "s16-strata", "s18", "s22", "s23"]
    s = _committed(tmp_path, load_benchmark, monkeypatch, "paper", names, 10, "p23")
    assert _figure(s, "lrQ2p", "grpo") == (1.73, [1.55, 1.96])
    assert _figure(s, "lrQ2p", "pilot-commit") == (1.29, [1.19, 1.44])
    assert _figure(s, "lrQ2p", "psSsfit") == (0.94, [0.83, 1.06])
    assert _figure(s, "lrW15p", "pilot-commit") == (1.0, [0.9, 1.07])
    assert _figure(s, "lrW2p", "grpo") == (1.33, [1.11, 1.46])
    assert _figure(s, "lrW2S", "grpo") == (1.02, [0.94, 1.15])
    assert _figure(s, "lrP1w2p", "pilot-commit") == (0.84, [0.75, 0.94])
    v = s["strategies"]["lrQ2pN"]["per_seed_rollouts_to_target"]
    assert sum(x is not None for x in v) == 6  # shares by count: 4 of 10 never at the target


def test_wider_windows_and_quota_on_the_default_testbed_from_the_committed_runs(
    tmp_path, load_benchmark, monkeypatch
):
    # docs/likelihood-rank.md, "One configuration for both testbeds": lrWw15 20 seeds, lrQ2 10
    names = ["s15-oracle", "s16", "s21", "s22", "s23"]
    s = _committed(tmp_path, load_benchmark, monkeypatch, "default", names, 20, "d23")
    assert _figure(s, "lrWw15", "grpo") == (0.94, [0.89, 0.99])
    assert _figure(s, "lrWw15", "lrP1") == (0.89, [0.84, 0.94])
    ten = _committed(tmp_path, load_benchmark, monkeypatch, "default", names, 10, "d23b")
    assert _figure(ten, "lrQ2", "grpo") == (0.86, [0.0, 0.92])


def test_the_paper_configuration_of_likelihood_rank_on_both_testbeds_from_the_committed_runs(
    tmp_path, load_benchmark, monkeypatch
):
    # docs/likelihood-rank.md, "Real paper-regime testbed" (20 and 10 seeds) and "One
    # configuration for both testbeds?" (30 seeds), code 00c8580
    paper = ["s12-peers", "s13-peers", "s16-strata", "s18", "s23f"]
    s = _committed(tmp_path, load_benchmark, monkeypatch, "paper", paper, 20, "p23f")
    assert _figure(s, "lrQFp", "grpo") == (1.76, [1.55, 1.91])
    assert _figure(s, "lrQFp", "pilot-commit") == (1.37, [1.27, 1.57])
    assert _figure(s, "psSsfit", "lrQFp") == (1.1, [1.01, 1.22])
    ten = _committed(tmp_path, load_benchmark, monkeypatch, "paper", paper, 10, "p23f10")
    assert _figure(ten, "lrFp", "lrQFp") == (0.57, [0.52, 0.65])
    assert _figure(ten, "lrQF0p", "lrQFp") == (1.0, [0.93, 1.09])
    more = _committed(tmp_path, load_benchmark, monkeypatch, "paper", [*paper, "s23"], 10, "p23g")
    assert _figure(more, "lrQFp", "lrQ2p") == (1.05, [0.95, 1.14])
    assert _figure(more, "lrQFP1p", "lrQFp") == (0.9, [0.81, 1.03])
    assert _figure(more, "lrP1w2p", "lrW2p") == (0.84, [0.74, 1.02])
    default = ["s15-oracle", "s16", "s22", "s22b", "s23f"]
    d = _committed(tmp_path, load_benchmark, monkeypatch, "default", default, 30, "d23f")
    assert _figure(d, "lrQF", "grpo") == (1.04, [0.99, 1.08])
    assert _figure(d, "lrQF", "lrP1") == (0.95, [0.91, 0.99])
    assert _figure(d, "lrQF", "mopps") == (1.07, [1.01, 1.13])
    assert _figure(d, "lrQFP1", "grpo") == (1.06, [1.02, 1.09])  # one configuration, both
    assert _figure(d, "lrQFP1", "mopps") == (1.09, [1.04, 1.14])
    assert _figure(d, "lrQFP1", "lrP1") == (0.97, [0.94, 1.0])
    assert _figure(ten, "lrQFP1p", "pilot-commit") == (1.23, [1.11, 1.4])
    assert _figure(s, "lrQFP1p", "grpo") == (1.62, [1.43, 1.75])
    assert _figure(s, "lrQFP1p", "pilot-commit") == (1.26, [1.15, 1.44])
    assert _figure(s, "lrQFP1p", "lrQFp") == (0.92, [0.84, 1.01])
    d20 = _committed(tmp_path, load_benchmark, monkeypatch, "default", default, 20, "d23f20")
    assert _figure(d20, "lrQFP1", "grpo") == (1.03, [1.0, 1.07])  # [0.998, 1.068]: within noise
    assert _figure(d20, "lrQFP1", "lrP1") == (0.98, [0.94, 1.01])


def test_a_run_in_two_csvs_is_refused_not_mixed(tmp_path, load_benchmark, monkeypatch):
    # default-testbed-s13.csv and -s15-oracle.csv both hold grpo seeds 0-9: reading both would
    # append one run's evaluations to the other's; the merge names the clash instead
    with pytest.raises(
        SystemExit, match=r"grpo seed 0 is in both .*s13\.csv and .*s15-oracle\.csv"
    ):
        _committed(tmp_path, load_benchmark, monkeypatch, "default", ["s13", "s15-oracle"], 10)


def test_lrqfp1_on_the_default_testbeds_second_warm_start_from_the_committed_runs(
    tmp_path, load_benchmark, monkeypatch
):
    # docs/likelihood-rank.md, "Default testbed, a second warm start" (session 24)
    s = _committed(tmp_path, load_benchmark, monkeypatch, "default", ["s24-ws1"], 10)
    assert _figure(s, "lrQFP1", "grpo") == (1.06, [0.98, 1.14])
    assert _figure(s, "lrQFP1", "mopps") == (1.14, [1.0, None])
    assert s["speedup"]["pilot-commit"]["grpo"] is None


def test_a_seed_without_a_finished_run_is_named(tmp_path, load_benchmark, monkeypatch, capsys):
    # seed 3 of "fast" is still running (no run.json): the report goes on with three seeds for it
    # and says which seed is missing, instead of comparing on different seed sets in silence
    merge = load_benchmark("merge_testbed_runs")
    for seed in range(4):
        _write_run(tmp_path / "runs" / "grpo" / f"seed{seed}", "grpo", seed, 0.002)
        _write_run(tmp_path / "runs" / "fast" / f"seed{seed}", "fast", seed + 10, 0.003)
    (tmp_path / "runs" / "fast" / "seed3" / "run.json").unlink()
    argv = [
        "m",
        "--roots",
        str(tmp_path / "runs"),
        "--seeds",
        "0,1,2,3",
        "--out",
        str(tmp_path / "o"),
    ]
    monkeypatch.setattr(sys, "argv", argv)
    merge.main()
    assert "without a finished run (run.json): {'fast': [3]}" in capsys.readouterr().err


def test_the_hard_pool_with_every_peer_from_the_committed_runs(
    tmp_path, load_benchmark, monkeypatch
):
    # docs/testbed.md, "Eight seeds, every peer and rollalloc's strategies" (session 27): the pool
    # with a too-hard half, groups of 8; greso and knapsack on seeds 0-4 only
    s = _committed(tmp_path, load_benchmark, monkeypatch, "hard", ["s27"], 8)
    assert _figure(s, "psS", "grpo") == (3.31, [2.50, 3.93])
    assert _figure(s, "speed-rl", "grpo") == (3.52, [2.00, 4.00])
    assert _figure(s, "pilot-commit", "grpo") == (3.39, [1.58, 3.95])
    assert _figure(s, "psS", "speed-rl") == (0.94, [0.79, 1.51])
    assert _figure(s, "psS", "pilot-commit") == (0.98, [0.79, 1.99])
    assert _figure(s, "psS", "dapo") == (1.75, [1.39, 2.81])
    assert _figure(s, "psS", "ps") == (1.93, [1.32, 2.27])
    assert _figure(s, "psS", "lrQFP1") == (1.16, [0.90, 1.40])
    assert _figure(s, "ps", "speed-rl") == (0.49, [0.43, 0.86])
    fin = {k: round(v["final_accuracy"], 3) for k, v in s["strategies"].items()}
    assert fin["psS"] == 0.693 and fin["speed-rl"] == 0.683 and fin["pilot-commit"] == 0.658
    # per level: psS above GRPO on all six held-out levels, Pilot-Commit below on 3x1d, 4x1d, 5x1d
    lv = s["levels"]
    assert len(lv) == 6 and all(lv[L]["psS"]["diff_verdict"] == "higher" for L in lv)
    low = [L for L in lv if lv[L]["pilot-commit"]["diff_verdict"] == "lower"]
    assert low == ["3x1d", "4x1d", "5x1d"]
    assert any(
        w.startswith("'pilot-commit': its held-out accuracy on 3 of 6") for w in s["warnings"]
    )


def test_the_hard_pool_at_twenty_two_seeds_from_the_committed_runs(
    tmp_path, load_benchmark, monkeypatch
):
    # docs/testbed.md, "Twenty-two seeds: who is first depends on the target" (session 28): seeds
    # 8-15 and 20-25 of GRPO, psS, SPEED-RL and Pilot-Commit ran on the GPU machine's CPUs
    # (bit-identical to this machine's runs), GRESO and Knapsack-RL seeds 5-7 too
    seeds = [*range(16), *range(20, 26)]

    def hard(names, out, *extra):
        return _committed(
            tmp_path, load_benchmark, monkeypatch, "hard", names, seeds, out, extra=list(extra)
        )

    s = hard(["s27", "s28"], "h22")
    assert (
        len(s["strategies"]["psS"]["seeds"]) == 22 and len(s["strategies"]["greso"]["seeds"]) == 8
    )
    assert _figure(s, "psS", "grpo") == (3.33, [2.71, 4.05])
    assert _figure(s, "speed-rl", "grpo") == (4.22, [3.52, 5.09])
    assert _figure(s, "pilot-commit", "grpo") == (4.01, [3.34, 4.80])
    # at eight seeds psS vs SPEED-RL was within noise (0.94x [0.79, 1.51]); at 22 it is slower
    assert _figure(s, "psS", "speed-rl") == (0.79, [0.64, 0.95])
    assert s["speedup_verdict"]["psS"]["speed-rl"] == "slower"
    assert _figure(s, "psS", "pilot-commit") == (0.83, [0.67, 1.00])
    assert _figure(s, "speed-rl", "pilot-commit") == (1.05, [0.88, 1.26])
    assert _figure(s, "greso", "grpo") == (2.11, [1.24, 2.67])
    assert _figure(s, "knapsack", "grpo") == (1.10, [0.95, 1.35])
    d = {k: v["final_accuracy_diff_ci"] for k, v in s["vs_baseline"].items()}
    assert [round(x, 3) for x in d["psS"]] == [0.019, 0.025]
    assert [round(x, 3) for x in d["speed-rl"]] == [0.010, 0.017]
    assert [round(x, 3) for x in d["pilot-commit"]] == [-0.024, -0.014]
    # the target of SPEED-RL's own curve (0.675): psS gets there first, GRPO and Pilot-Commit never
    t = hard(["s27", "s28"], "h22s", "--baseline", "speed-rl")
    assert round(t["target"]["value"], 4) == 0.6753
    assert _figure(t, "psS", "speed-rl") == (1.25, [1.09, 1.42])
    assert _figure(t, "lrQFP1", "speed-rl") == (1.39, [1.22, 1.80])
    assert t["strategies"]["pilot-commit"]["never_reached_share"] == 1.0
    assert t["strategies"]["grpo"]["never_reached_share"] == 1.0
    # half of GRPO's gain: SPEED-RL first again
    h = hard(["s27", "s28"], "h22h", "--fraction", "0.5")
    assert _figure(h, "psS", "grpo") == (1.37, [1.23, 1.53])
    assert _figure(h, "psS", "speed-rl") == (0.87, [0.78, 0.97])
    # docs/posterior-signal.md, "SPEED-RL's early lead on the hard pool: three ablations"
    with_ablations = ["s27", "s28", "s28-ablations"]
    a = hard(with_ablations, "h22a")
    assert _figure(a, "psSp", "psS") == (0.61, [0.54, 1.02])
    assert _figure(a, "psSp4", "psS") == (0.89, [0.60, 1.32])
    assert _figure(a, "psSm", "psS") == (1.07, [0.86, 1.42])
    assert _figure(a, "psSp4", "speed-rl") == (0.70, [0.47, 1.04])
    assert len(a["strategies"]["psSm"]["seeds"]) == 8
    # docs/testbed.md, "Part of the speedups may be the update rate": 128 prompts a step
    assert _figure(a, "grpo128", "grpo") == (1.72, [1.49, 3.59])
    assert _figure(a, "psS128", "psS") == (1.52, [1.24, 1.92])
    assert _figure(a, "psS128", "speed-rl") == (1.20, [0.99, 1.46])
    g = hard(with_ablations, "h22g", "--baseline", "grpo128")
    assert _figure(g, "speed-rl", "grpo128") == (1.60, [1.18, 2.04])
    assert _figure(g, "psS", "grpo128") == (1.60, [1.28, 1.99])
    assert _figure(g, "psS128", "grpo128") == (2.17, [1.55, 3.28])


def test_the_hard_pool_on_a_second_warm_start_from_the_committed_runs(
    tmp_path, load_benchmark, monkeypatch
):
    # docs/testbed.md, "A second warm start" (session 28; predictions committed before the runs)
    s = _committed(tmp_path, load_benchmark, monkeypatch, "hard", ["s28-ws1"], 5, "w1")
    assert _figure(s, "psS", "grpo") == (2.80, [1.70, 4.20])
    assert _figure(s, "speed-rl", "grpo") == (3.31, [2.05, 3.97])
    assert _figure(s, "psS", "speed-rl") == (0.85, [0.71, 1.36])
    d = s["vs_baseline"]
    assert [round(x, 3) for x in d["psS"]["final_accuracy_diff_ci"]] == [0.015, 0.026]
    assert [round(x, 3) for x in d["pilot-commit"]["final_accuracy_diff_ci"]] == [-0.039, -0.023]
    t = _committed(
        tmp_path,
        load_benchmark,
        monkeypatch,
        "hard",
        ["s28-ws1"],
        5,
        "w1s",
        extra=["--baseline", "speed-rl"],
    )
    assert _figure(t, "psS", "speed-rl") == (1.50, [1.14, 1.73])
    assert [round(x, 3) for x in t["vs_baseline"]["psS"]["final_accuracy_diff_ci"]] == [
        0.009,
        0.014,
    ]


def test_grpo_with_twice_the_step_on_the_paper_testbed_from_the_committed_runs(
    tmp_path, load_benchmark, monkeypatch
):
    # docs/testbed.md, "The paper testbed behaves the other way" (session 28): train_prompts=32
    s = _committed(tmp_path, load_benchmark, monkeypatch, "paper", ["s28-batch"], 6, "pb")
    assert _figure(s, "grpo32", "grpo") == (0.94, [0.87, 1.00])
    assert s["speedup_verdict"]["grpo32"]["grpo"] == "slower"
    assert s["vs_baseline"]["grpo32"]["final_accuracy_verdict"] == "within noise"
    # the default testbed (4 updates a step, as the hard pool): GRPO at 128 never reaches the target
    d = _committed(tmp_path, load_benchmark, monkeypatch, "default", ["s28-batch"], 4, "db")
    assert d["strategies"]["grpo128"]["rollouts_to_target"] is None
    assert d["vs_baseline"]["grpo128"]["final_accuracy_verdict"] == "lower"


def test_every_strategy_at_its_best_step_on_the_hard_pool_from_the_committed_runs(
    tmp_path, load_benchmark, monkeypatch
):
    # docs/testbed.md, "Every strategy at its best step on the hard pool" (session 29, seeds 0-7;
    # predictions in benchmarks/predictions/session29.md)
    names = ["s27", "s28-ablations", "s29"]

    def hard(out, *extra):
        return _committed(
            tmp_path, load_benchmark, monkeypatch, "hard", names, 8, out, extra=list(extra)
        )

    s = hard("b")
    assert _figure(s, "grpo512", "grpo") == (3.78, [3.40, 4.57])
    assert _figure(s, "grpo256", "grpo") == (3.41, [1.58, 3.81])
    assert _figure(s, "grpoMB1", "grpo") == (1.64, [1.01, 2.21])
    assert _figure(s, "grpoMB2", "grpo") == (1.26, [0.66, 1.45])
    assert _figure(s, "grpoLR", "grpo") == (1.45, [1.15, 2.82])
    assert _figure(s, "srl32", "speed-rl") == (0.44, [0.36, 0.73])
    assert _figure(s, "psS256", "speed-rl") == (1.31, [1.05, 1.90])
    # the tuned GRPO's own target: no allocator ahead beyond noise, psS ends highest
    t = hard("b512", "--baseline", "grpo512")
    assert round(t["target"]["value"], 4) == 0.6717
    assert _figure(t, "psS256", "grpo512") == (1.71, [0.82, 1.91])
    assert _figure(t, "srl128", "grpo512") == (1.52, [0.74, 1.88])
    assert _figure(t, "psS", "grpo512") == (1.08, [0.53, 1.70])
    assert _figure(t, "pilot-commit", "grpo512") == (0.88, [0.00, 0.99])
    d = {k: [round(x, 3) for x in v["final_accuracy_diff_ci"]] for k, v in t["vs_baseline"].items()}
    assert d["psS"] == [0.014, 0.019] and d["pilot-commit"] == [-0.023, -0.015]
    # the same updates and batch per update, a larger step: the larger step wins
    g = hard("b128", "--baseline", "grpo128")
    assert _figure(g, "grpoMB2", "grpo128") == (0.63, [0.00, 0.80])
    assert _figure(g, "grpo256", "grpo128") == (1.00, [0.86, 1.63])
    h = hard("b256", "--baseline", "grpo256")
    assert _figure(h, "grpoMB1", "grpo256") == (0.94, [0.00, 1.00])
    assert _figure(h, "grpo512", "grpo256") == (1.34, [0.97, 1.59])


def test_the_best_steps_at_sixteen_seeds_from_the_committed_runs(
    tmp_path, load_benchmark, monkeypatch
):
    # docs/testbed.md, "Sixteen seeds of the best steps" (session 29): at 8 seeds within noise,
    # at 16 the allocators at their best step are ahead of the tuned GRPO beyond noise
    s = _committed(
        tmp_path,
        load_benchmark,
        monkeypatch,
        "hard",
        ["s27", "s28", "s28-ablations", "s29"],
        16,
        "b16",
        extra=["--baseline", "grpo512"],
    )
    assert len(s["strategies"]["psS256"]["seeds"]) == 16 == len(s["strategies"]["grpo512"]["seeds"])
    assert round(s["target"]["value"], 4) == 0.6720
    assert _figure(s, "psS256", "grpo512") == (1.75, [1.46, 1.97])
    assert _figure(s, "srl128", "grpo512") == (1.67, [1.31, 1.93])
    assert _figure(s, "psS256", "srl128") == (1.04, [0.91, 1.23])
    assert _figure(s, "speed-rl", "grpo512") == (1.22, [0.83, 1.40])
    assert _figure(s, "psS", "grpo512") == (1.12, [0.92, 1.41])
    assert s["speedup_verdict"]["pilot-commit"]["grpo512"] == "slower"
    # a seventh wave: likelihood-rank lrQFP1 at the default step, 16 seeds, stays ahead
    assert len(s["strategies"]["lrQFP1"]["seeds"]) == 16
    assert _figure(s, "lrQFP1", "grpo512") == (1.35, [1.11, 1.55])
    # a sixth wave: 1,024 prompts a step is no faster than 512 (8 seeds) and ends lower
    assert _figure(s, "grpo1024", "grpo512") == (1.11, [0.84, 1.83])
    assert s["vs_baseline"]["grpo1024"]["final_accuracy_verdict"] == "lower"
    d = {k: [round(x, 3) for x in v["final_accuracy_diff_ci"]] for k, v in s["vs_baseline"].items()}
    assert d["psS"] == [0.012, 0.016] and d["pilot-commit"] == [-0.033, -0.022]


def test_likelihood_rank_at_its_best_step_on_the_hard_pool_from_the_committed_runs(
    tmp_path, load_benchmark, monkeypatch
):
    # docs/testbed.md, "likelihood-rank at its best step" (session 30): lrQFP1 at 256 a step
    # ahead of the tuned GRPO beyond noise, within noise of psS256, ending below itself at 64
    csvs = ["s27", "s28", "s28-ablations", "s29", "s30"]
    s = _committed(
        tmp_path, load_benchmark, monkeypatch, "hard", csvs, 16, "l16", ["--baseline", "grpo512"]
    )
    assert len(s["strategies"]["lrQFP1_256"]["seeds"]) == 16
    assert _figure(s, "lrQFP1_256", "grpo512") == (1.92, [1.57, 2.28])
    assert _figure(s, "lrQFP1_128", "grpo512") == (1.83, [1.39, 2.49])
    assert _figure(s, "lrQFP1_256", "psS256") == (1.10, [0.98, 1.29])
    assert s["speedup_verdict"]["lrQFP1_256"]["psS256"] == "within noise"
    d = _committed(
        tmp_path, load_benchmark, monkeypatch, "hard", csvs, 16, "l16b", ["--baseline", "lrQFP1"]
    )
    assert d["vs_baseline"]["lrQFP1_256"]["final_accuracy_verdict"] == "lower"


def test_twice_the_step_on_the_paper_testbed_costs_the_allocators_from_the_committed_runs(
    tmp_path, load_benchmark, monkeypatch
):
    # docs/testbed.md, "The same tuning on the paper testbed" (session 30)
    csvs = ["s12-peers", "s26-ws0", "s23f", "s30"]
    s = _committed(tmp_path, load_benchmark, monkeypatch, "paper", csvs, 20, "p32")
    assert (
        len(s["strategies"]["psS32"]["seeds"]) == 8 == len(s["strategies"]["lrQFP1_32p"]["seeds"])
    )
    assert _figure(s, "psS32", "psGE") == (0.78, [0.69, 0.91])
    assert _figure(s, "lrQFP1_32p", "lrQFP1p") == (0.84, [0.76, 0.91])
    assert _figure(s, "psS32", "grpo") == (1.45, [1.29, 1.74])
    assert s["speedup_verdict"]["psS32"]["pilot-commit"] == "within noise"


def test_grpo_at_half_the_step_on_the_paper_and_default_testbeds_from_the_committed_runs(
    tmp_path, load_benchmark, monkeypatch
):
    # docs/testbed.md, "Part of the speedups may be the update rate" (session 29): half the step
    # is within noise of GRPO's on both testbeds
    p = _committed(
        tmp_path, load_benchmark, monkeypatch, "paper", ["s28-batch", "s29-batch"], 6, "p8"
    )
    assert _figure(p, "grpo8", "grpo") == (0.96, [0.89, 1.09])
    assert p["vs_baseline"]["grpo8"]["final_accuracy_verdict"] == "within noise"
    d = _committed(
        tmp_path, load_benchmark, monkeypatch, "default", ["s28-batch", "s29-batch"], 4, "d32"
    )
    assert _figure(d, "grpo32", "grpo") == (1.02, [0.96, 1.10])
    assert [round(x, 3) for x in d["vs_baseline"]["grpo32"]["final_accuracy_diff_ci"]] == [
        0.000,
        0.015,
    ]


def test_likelihood_rank_at_32_a_step_on_the_default_testbed_from_the_committed_runs(
    tmp_path, load_benchmark, monkeypatch
):
    # docs/likelihood-rank.md, "Half the step on the default testbed" (session 31): GRPO's better
    # step there is 32 a step, and lrP1 at 32 a step is ahead of it beyond noise
    csvs = ["s15-oracle", "s16", "s21", "s22", "s22b", "s29-batch", "s31"]
    s = _committed(tmp_path, load_benchmark, monkeypatch, "default", csvs, 30, "d31")
    assert len(s["strategies"]["lrP1_32"]["seeds"]) == 20 == len(s["strategies"]["grpo32"]["seeds"])
    assert _figure(s, "lrP1_32", "grpo32") == (1.06, [1.02, 1.11])
    assert _figure(s, "lrP1_32", "grpo") == (1.14, [1.10, 1.19])
    assert _figure(s, "grpo32", "grpo") == (1.07, [1.04, 1.10])
    assert _figure(s, "lrP1", "grpo32") == (1.02, [0.98, 1.06])
    assert _figure(s, "lrP1_32", "lrP1") == (1.04, [1.00, 1.09])
    # the best peer at the same smaller step (10 seeds) does not gain from it
    assert len(s["strategies"]["mopps32"]["seeds"]) == 10
    assert _figure(s, "lrP1_32", "mopps32") == (1.21, [1.14, 1.27])
    assert _figure(s, "mopps32", "grpo32") == (0.88, [0.84, 0.93])


def test_one_generation_split_into_updates_beats_as_many_generations_from_the_committed_runs(
    tmp_path, load_benchmark, monkeypatch
):
    # docs/simulator.md, "Session 31": the same update size and updates per rollout, all seeds
    # (GRPO 22, each variant 8); what the simulator cannot tell apart, the real runs do
    names = ["s27", "s28", "s28-ablations", "s29"]
    s = _committed(tmp_path, load_benchmark, monkeypatch, "hard", names, range(26), "mb")
    assert len(s["strategies"]["grpo"]["seeds"]) == 22
    assert _figure(s, "grpo256", "grpoMB1") == (2.08, [1.15, 2.43])
    assert _figure(s, "grpo128", "grpoMB2") == (1.25, [1.06, 2.86])


def test_the_asymmetric_score_from_the_committed_runs(tmp_path, load_benchmark, monkeypatch):
    # docs/likelihood-rank.md, "Ranking by what a group teaches" (session 36)
    d = _committed(
        tmp_path, load_benchmark, monkeypatch, "default", ["s13", "s35-lrA", "s36-asym"], 10, "d36"
    )
    assert _figure(d, "lrP1b1", "lrP1") == (0.95, [0.88, 1.03])
    assert _figure(d, "lrP1w15b1", "lrP1") == (0.9, [0.86, 0.94])
    assert _figure(d, "lrP1w15b1", "lrP1w15") == (0.97, [0.89, 1.01])
    paper = ["s12-peers", "s13-peers", "s16-strata", "s23f", "s36-asym"]
    p = _committed(tmp_path, load_benchmark, monkeypatch, "paper", paper, 20, "p36")
    assert _figure(p, "lrQFpB", "lrQFp") == (1.01, [0.93, 1.1])
    ten = _committed(tmp_path, load_benchmark, monkeypatch, "paper", paper, 10, "p36b")
    assert _figure(ten, "psFB", "psF") == (0.99, [0.91, 1.07])


def _finals(names, testbed, strategy, seeds):
    """{seed: (first, last) overall accuracy} of `strategy` in the committed CSVs."""
    import csv
    from pathlib import Path

    results = Path(__file__).resolve().parents[2] / "benchmarks/results"
    runs: dict[int, list] = {}
    for n in names:
        with open(results / f"{testbed}-testbed-{n}.csv") as f:
            for r in csv.DictReader(f):
                if r["strategy"] == strategy and int(r["seed"]) in seeds:
                    runs.setdefault(int(r["seed"]), []).append(
                        (int(r["cum_rollouts"]), float(r["accuracy"]))
                    )
    return {s: (min(v)[1], max(v)[1]) for s, v in runs.items()}


# one-sided 0.95 quantiles of Student's t (printed tables): 9, 19 and 29 degrees of freedom
_T95 = {10: 1.8331, 20: 1.7291, 30: 1.6991}


def _paired(a, b):
    """Mean of the per-seed differences of the final accuracy, points, and its 90% t-interval."""
    d = np.array([a[s][1] - b[s][1] for s in sorted(a)]) * 100
    h = _T95[len(d)] * d.std(ddof=1) / np.sqrt(len(d))
    return round(d.mean(), 2), [round(d.mean() - h, 2), round(d.mean() + h, 2)]


def test_the_asymmetric_scores_final_accuracy_from_the_committed_runs():
    # docs/likelihood-rank.md, "Ranking by what a group teaches": paired finals (session 36)
    paper, seeds = ["s23f", "s36-asym"], set(range(20))
    assert _paired(
        _finals(paper, "paper", "lrQFpB", seeds), _finals(paper, "paper", "lrQFp", seeds)
    ) == (
        0.35,
        [0.11, 0.59],
    )
    default, ten = ["s36-asym"], set(range(10))
    b1, w = (
        _finals(default, "default", "lrP1w15b1", ten),
        _finals(default, "default", "lrP1w15", ten),
    )
    assert _paired(b1, w) == (-0.35, [-0.53, -0.17])
    parts = _finals(["s36-random3072"], "default", "grpoQ3072", set(range(1, 11)))
    assert len(parts) == 10
    assert round(np.mean([(last - first) * 100 for first, last in parts.values()]), 2) == 4.28


def test_the_default_testbed_on_a_warm_start_that_never_saw_the_pool(
    tmp_path, load_benchmark, monkeypatch
):
    # docs/likelihood-rank.md, "Default testbed, a warm start that never saw the pool" (session 36)
    ten = _committed(
        tmp_path,
        load_benchmark,
        monkeypatch,
        "default",
        ["s36-disjoint"],
        10,
        "dj10",
        ["--baseline", "dGrpo"],
    )
    assert _figure(ten, "dLrP1b1", "dGrpo") == (0.99, [0.92, 1.07])
    assert _figure(ten, "d-knapsack", "dGrpo") == (0.99, [0.93, 1.05])
    assert _figure(ten, "dLrQFP1", "dGrpo") == (0.91, [0.86, 0.96])
    assert _figure(ten, "dLrP1", "dGrpo") == (None, [0.0, 0.9])
    assert _figure(ten, "dMopps", "dGrpo") == (None, [0.0, 0.0])
    twenty = _committed(
        tmp_path,
        load_benchmark,
        monkeypatch,
        "default",
        ["s36-disjoint"],
        20,
        "dj20",
        ["--baseline", "dGrpo"],
    )
    assert _figure(twenty, "dLrP1b1", "dGrpo") == (1.01, [0.96, 1.05])
    grpo = _finals(["s36-disjoint"], "default", "dGrpo", set(range(10)))
    assert _paired(_finals(["s36-disjoint"], "default", "dLrP1", set(range(10))), grpo) == (
        -1.01,
        [-1.4, -0.61],
    )
    assert _paired(_finals(["s36-disjoint"], "default", "dLrP1b1", set(range(10))), grpo) == (
        0.18,
        [-0.14, 0.49],
    )


def test_half_the_step_on_the_warm_start_that_never_saw_the_pool(
    tmp_path, load_benchmark, monkeypatch
):
    # docs/likelihood-rank.md, "Default testbed, a warm start that never saw the pool" (session 36)
    names = ["s36-disjoint", "s36-disjoint32"]
    s = _committed(
        tmp_path, load_benchmark, monkeypatch, "default", names, 10, "dj32", ["--baseline", "dGrpo"]
    )
    assert _figure(s, "dGrpo32", "dGrpo") == (1.17, [1.08, 1.25])
    assert _figure(s, "dLrP1b1_32", "dGrpo32") == (1.06, [0.99, 1.14])


@pytest.fixture
def default_merge(tmp_path, load_benchmark, monkeypatch):
    """_committed on the default testbed with a baseline: merged(names, seeds, baseline, out)."""

    def merged(names, seeds, baseline, out):
        return _committed(
            tmp_path, load_benchmark, monkeypatch, "default", names, seeds, out,
            ["--baseline", baseline],
        )  # fmt: skip

    return merged


def _paired_finals(names, testbed, a, b, seeds):
    """_paired of a's and b's final accuracies in the committed CSVs `names`, on `seeds`."""
    return _paired(_finals(names, testbed, a, seeds), _finals(names, testbed, b, seeds))


def test_asymmetry_two_on_both_warm_starts_and_twenty_seeds_at_half_the_step(
    tmp_path, load_benchmark, monkeypatch, default_merge
):
    # docs/likelihood-rank.md, "Default testbed, a warm start that never saw the pool" and
    # "`asymmetry=2` on both warm starts" (session 37)
    disjoint = ["s36-disjoint", "s36-disjoint32", "s37-disjoint"]

    def merged(seeds, out, baseline):
        return default_merge(disjoint, seeds, baseline, out)

    twenty = merged(20, "d20", "dGrpo")
    assert _figure(twenty, "dGrpo32", "dGrpo") == (1.13, [1.07, 1.19])
    assert _figure(twenty, "dLrP1b1_32", "dGrpo32") == (1.06, [1.01, 1.12])
    assert _figure(twenty, "dLrP1b2", "dGrpo") == (1.05, [1.02, 1.09])
    assert _figure(twenty, "dLrP1b2", "dLrP1b1") == (1.04, [1.0, 1.09])
    assert _figure(merged(20, "d20b", "dGrpo32"), "dLrP1b1_32", "dGrpo32") == (1.01, [0.95, 1.08])
    assert _figure(merged(30, "d30", "dGrpo"), "dLrP1b2", "dGrpo") == (1.04, [1.01, 1.07])
    fresh = merged(range(20, 30), "dF", "dGrpo")
    assert _figure(fresh, "dLrP1b2", "dGrpo") == (1.03, [0.96, 1.09])
    assert _figure(merged(10, "d32", "dGrpo32"), "dLrP1b2_32", "dGrpo32") == (1.06, [0.94, 1.12])
    s30 = set(range(30))
    assert _paired_finals(disjoint, "default", "dLrP1b2", "dGrpo", s30) == (0.14, [-0.09, 0.38])
    pool = ["s15-oracle", "s16", "s21", "s22", "s37-asym2"]
    p = _committed(tmp_path, load_benchmark, monkeypatch, "default", pool, 20, "p20")
    assert _figure(p, "lrP1b2", "grpo") == (1.0, [0.95, 1.05])
    assert _figure(p, "lrP1b2", "lrP1") == (0.95, [0.9, 0.99])
    assert _figure(p, "lrP1", "grpo") == (1.06, [1.01, 1.1])
    assert _paired_finals(pool, "default", "lrP1b2", "grpo", set(range(20))) == (
        0.16,
        [-0.08, 0.41],
    )


def test_asymmetry_two_on_a_second_warm_start_that_never_saw_the_pool(default_merge):
    # docs/likelihood-rank.md, "`asymmetry=2` on both warm starts" (session 37, predictions 14-16)
    ws1 = ["s37-ws1"]
    w = default_merge(ws1, 10, "w1Grpo", "w1")
    assert _figure(w, "w1LrP1b2", "w1Grpo") == (1.08, [1.03, 1.12])
    assert _figure(w, "w1LrP1", "w1Grpo") == (0.91, [0.87, 0.96])
    assert _figure(w, "w1LrP1b2", "w1LrP1") == (1.18, [1.12, 1.23])
    ten = set(range(10))
    assert _paired_finals(ws1, "default", "w1LrP1b2", "w1Grpo", ten) == (0.4, [0.13, 0.67])
    assert _paired_finals(ws1, "default", "w1LrP1", "w1Grpo", ten) == (-0.09, [-0.38, 0.2])
    twenty = default_merge(ws1, 20, "w1Grpo", "w20")
    assert _figure(twenty, "w1LrP1b2", "w1Grpo") == (1.08, [1.05, 1.12])
    s20 = set(range(20))
    assert _paired_finals(ws1, "default", "w1LrP1b2", "w1Grpo", s20) == (0.36, [0.2, 0.53])


def test_asymmetry_two_against_every_peer_on_both_disjoint_warm_starts(default_merge):
    # docs/likelihood-rank.md, "Against every peer on the disjoint warm starts" (session 38,
    # predictions 1-4, 10-11): the best peer there is Knapsack-RL; rebuilt from the CSVs alone
    ws1 = ["s37-ws1", "s38-ws1-peers"]
    w = default_merge(ws1, 20, "w1Grpo", "w")
    assert _figure(w, "w1LrP1b2", "w1Knapsack") == (1.09, [1.05, 1.13])
    assert _figure(w, "w1Knapsack", "w1Grpo") == (1.0, [0.96, 1.03])
    ten = default_merge(ws1, 10, "w1Grpo", "w10")
    assert _figure(ten, "w1Mopps", "w1Grpo") == (0.88, [0.82, 0.92])
    assert _figure(ten, "w1LrP1b2", "w1Knapsack") == (1.08, [1.05, 1.15])
    s20 = set(range(20))
    assert _paired_finals(ws1, "default", "w1LrP1b2", "w1Knapsack", s20) == (0.54, [0.33, 0.74])
    d1 = ["s36-disjoint", "s37-disjoint", "s38-disjoint"]
    d = default_merge(d1, 20, "dGrpo", "d")
    assert _figure(d, "dLrP1b2", "d-knapsack") == (1.08, [1.04, 1.12])
    assert _figure(d, "d-knapsack", "dGrpo") == (0.97, [0.94, 1.02])
    assert _paired_finals(d1, "default", "dLrP1b2", "d-knapsack", s20) == (0.42, [0.15, 0.68])
    fresh = default_merge(d1, range(10, 20), "dGrpo", "f")
    assert _figure(fresh, "d-knapsack", "dGrpo") == (0.96, [0.92, 1.02])
    half = default_merge(["s36-disjoint32", "s37-disjoint", "s38-disjoint"], 20, "dGrpo32", "h")
    assert _figure(half, "dLrP1b2_32", "dGrpo32") == (1.06, [0.97, 1.11])


def test_asymmetry_two_on_the_paper_testbed(tmp_path, load_benchmark, monkeypatch):
    # docs/likelihood-rank.md, "Against every peer on the disjoint warm starts, and on the paper
    # testbed" (session 38, predictions 7 and 14): ahead of GRPO, a tie with Pilot-Commit, well
    # behind the level quotas (lrQFp)
    names = ["s12-peers", "s13-peers", "s23f", "s38"]
    p = _committed(tmp_path, load_benchmark, monkeypatch, "paper", names, 20, "p")
    assert _figure(p, "lrP1b2p", "grpo") == (1.16, [1.03, 1.33])
    assert _figure(p, "lrP1b2p", "pilot-commit") == (0.9, [0.84, 1.07])
    assert _figure(p, "lrP1b2p", "lrQFp") == (0.66, [0.61, 0.76])
    s20 = set(range(20))
    assert _paired_finals(names, "paper", "lrP1b2p", "grpo", s20) == (0.39, [0.09, 0.7])
    assert _paired_finals(names, "paper", "lrP1b2p", "lrQFp", s20) == (-0.68, [-1.01, -0.36])


def test_asymmetry_two_on_a_third_disjoint_warm_start(default_merge):
    # docs/likelihood-rank.md, "Against every peer on the disjoint warm starts" (session 38,
    # predictions 12-13 and 15): the lead over GRPO is gone there, the lead over Knapsack-RL is not
    ws2 = ["s38-ws2"]
    w = default_merge(ws2, 20, "w2Grpo", "w2")
    assert _figure(w, "w2LrP1b2", "w2Grpo") == (1.01, [0.98, 1.05])
    assert _figure(w, "w2Knapsack", "w2Grpo") == (0.95, [0.92, 0.99])
    assert _figure(w, "w2LrP1b2", "w2Knapsack") == (1.06, [1.02, 1.11])
    s20 = set(range(20))
    assert _paired_finals(ws2, "default", "w2LrP1b2", "w2Grpo", s20) == (-0.1, [-0.29, 0.1])
    assert _paired_finals(ws2, "default", "w2LrP1b2", "w2Knapsack", s20) == (0.01, [-0.24, 0.27])
    ten = default_merge(ws2, 10, "w2Grpo", "w10")
    assert _figure(ten, "w2Mopps", "w2Grpo") == (0.93, [0.88, 0.99])
    assert _figure(ten, "w2LrP1b2", "w2Mopps") == (1.08, [1.01, 1.15])
    five = default_merge(ws2, 5, "w2Grpo", "w5")
    assert _figure(five, "w2-speed-rl", "w2Grpo") == (0.8, [0.77, 0.86])
    # and a fourth (prediction 18), GRPO and lrP1b2 only
    w3 = default_merge(["s38-ws3"], 10, "w3Grpo", "w3")
    assert _figure(w3, "w3LrP1b2", "w3Grpo") == (1.06, [1.02, 1.09])


_DISJOINT = {  # the disjoint warm starts: committed CSVs, seeds, baseline, lrP1b2's, Knapsack-RL's name
    "ws0": (["s36-disjoint", "s37-disjoint", "s38-disjoint"], 20, "dGrpo", "dLrP1b2", "d-knapsack"),
    "ws1": (["s37-ws1", "s38-ws1-peers"], 20, "w1Grpo", "w1LrP1b2", "w1Knapsack"),
    "ws2": (["s38-ws2"], 20, "w2Grpo", "w2LrP1b2", "w2Knapsack"),
    "ws3": (["s38-ws3"], 10, "w3Grpo", "w3LrP1b2", None),
    "ws3b": (["s39-ws3b"], 10, "w3bGrpo", "w3bLrP1b2", "w3bKnapsack"),
    "ws2b": (["s39-ws2b"], 10, "w2bGrpo", "w2bLrP1b2", "w2bKnapsack"),
    "ws4": (["s40-ws4"], 10, "w4Grpo", "w4LrP1b2", "w4Knapsack"),
    "ws5": (["s40-ws5"], 10, "w5Grpo", "w5LrP1b2", "w5Knapsack"),
    "ws6": (["s42-ws6"], 10, "w6Grpo", "w6LrP1b2", "w6Knapsack"),
}  # fmt: skip


def _disjoint_speedups(default_merge, which, intervals=None):
    """lrP1b2 vs GRPO, Knapsack-RL vs GRPO and lrP1b2 vs Knapsack-RL on each warm start of `which`
    (merged alone from its committed CSVs); a warm start without Knapsack-RL has only the first.
    `intervals`, a dict, gets the three comparisons' 90% intervals per warm start (lr, knap,
    lr_knap; the last two None without Knapsack-RL)."""
    lr, knap, lr_knap = {}, {}, {}
    for ws in which:
        names, seeds, base, a, k = _DISJOINT[ws]
        summary = default_merge(names, seeds, base, f"x{ws}")
        sp = summary["speedup"]
        lr[ws] = sp[a][base]
        if intervals is not None:
            ci = summary["speedup_ci"]
            intervals[ws] = (ci[a][base], k and ci[k][base], k and ci[a][k])
        if k is not None:
            knap[ws], lr_knap[ws] = sp[k][base], sp[a][k]
    return lr, knap, lr_knap


def _rounded(fig):
    return round(fig[0], 2), [round(x, 2) for x in fig[1]]


def test_asymmetry_two_on_the_rebuilt_warm_starts_and_across_six(default_merge, load_benchmark):
    # docs/likelihood-rank.md, "Rebuilt warm starts, and six policies" (session 39, predictions 9-10):
    # this machine's build of warm_start.seed=3 is another policy under the same key (w3b); its
    # runs are not mergeable with session 38's (the start check), and on it lrP1b2 leads again
    with pytest.raises(SystemExit, match="key 07fb602e4d28134cd8fe start from different policies"):
        default_merge(["s38-ws3", "s39-ws3b"], 10, "w3Grpo", "mixed")
    ws3b = ["s39-ws3b"]
    w = default_merge(ws3b, 10, "w3bGrpo", "w3b")
    assert _figure(w, "w3bLrP1b2", "w3bGrpo") == (1.09, [1.04, 1.13])
    assert _figure(w, "w3bKnapsack", "w3bGrpo") == (1.03, [0.96, 1.09])
    assert _figure(w, "w3bMopps", "w3bGrpo") == (0.87, [0.84, 0.91])
    assert _figure(w, "w3bLrP1b2", "w3bKnapsack") == (1.06, [1.0, 1.13])
    s10 = set(range(10))
    assert _paired_finals(ws3b, "default", "w3bLrP1b2", "w3bGrpo", s10) == (0.68, [0.38, 0.98])
    assert _paired_finals(ws3b, "default", "w3bLrP1b2", "w3bKnapsack", s10) == (0.51, [0.11, 0.92])
    # across the five disjoint policies, a t-interval over their speedups (warm_start_interval.py;
    # the point estimates do not depend on the strategies' names, the per-warm-start intervals do)
    across = load_benchmark("warm_start_interval").across
    six = ["ws0", "ws1", "ws2", "ws3", "ws3b", "ws2b"]
    lr, knap, lr_knap = _disjoint_speedups(default_merge, six)
    rounded = _rounded

    five = [v for ws, v in lr.items() if ws != "ws2b"]  # before the sixth (prediction 10)
    assert rounded(across(five)) == (1.06, [1.03, 1.09])
    assert rounded(across([v for ws, v in lr.items() if ws not in ("ws0", "ws2b")])) == (
        1.06,
        [1.02, 1.1],
    )
    assert rounded(across(list(lr.values()))) == (1.05, [1.02, 1.08])  # the six
    assert rounded(across([v for ws, v in lr.items() if ws != "ws0"])) == (1.05, [1.01, 1.09])
    assert rounded(across(list(knap.values()))) == (0.97, [0.94, 1.01])
    assert rounded(across(list(lr_knap.values()))) == (1.07, [1.06, 1.09])
    # the sixth policy, ws2b (this machine's build of warm_start.seed=2): level with GRPO, ahead of
    # Knapsack-RL; Pilot-Commit (5 seeds) never at the target
    w2b = default_merge(["s39-ws2b"], 10, "w2bGrpo", "w2b")
    assert _figure(w2b, "w2bLrP1b2", "w2bGrpo") == (1.0, [0.93, 1.07])
    assert _figure(w2b, "w2bKnapsack", "w2bGrpo") == (0.92, [0.85, 1.01])
    assert _figure(w2b, "w2bLrP1b2", "w2bKnapsack") == (1.09, [1.0, 1.17])
    assert w2b["strategies"]["w2b-pilot-commit"]["rollouts_to_target"] is None
    s10 = set(range(10))
    assert _paired_finals(["s39-ws2b"], "default", "w2bLrP1b2", "w2bGrpo", s10) == (
        0.05,
        [-0.15, 0.24],
    )
    assert _paired_finals(["s39-ws2b"], "default", "w2bLrP1b2", "w2bKnapsack", s10) == (
        0.55,
        [0.35, 0.75],
    )


def test_every_peer_on_the_rebuilt_warm_starts(default_merge):
    # docs/likelihood-rank.md, "Every peer on the rebuilt warm starts, and two fresh ones"
    # (session 40, predictions 1-4): the other peers on ws3b and ws2b, merged with session 39's runs
    ws3b = ["s39-ws3b", "s40-ws3b-peers"]
    w = default_merge(ws3b, 5, "w3bGrpo", "p3")
    assert _figure(w, "w3bLrP1b2", "w3bGrpo") == (1.06, [1.02, 1.1])
    assert _figure(w, "w3bKnapsack", "w3bGrpo") == (1.01, [0.91, 1.09])
    assert _figure(w, "w3bMopps", "w3bGrpo") == (0.86, [0.8, 0.96])
    for peer in ("speed-rl", "greso", "cero", "dapo", "pilot-commit"):
        assert w["strategies"][f"w3b-{peer}"]["rollouts_to_target"] is None, peer
    ws2b = ["s39-ws2b", "s40-ws2b-peers"]
    w = default_merge(ws2b, 5, "w2bGrpo", "p2")
    assert _figure(w, "w2bLrP1b2", "w2bGrpo") == (1.02, [0.92, 1.14])
    assert _figure(w, "w2b-speed-rl", "w2bGrpo")[0] == 0.77
    for peer in ("greso", "cero", "dapo", "pilot-commit"):
        assert w["strategies"][f"w2b-{peer}"]["rollouts_to_target"] is None, peer
    ten = default_merge(ws2b, 10, "w2bGrpo", "p2t")
    assert _figure(ten, "w2bMopps", "w2bGrpo") == (0.87, [0.81, 0.95])
    assert _figure(ten, "w2bLrP1b2", "w2bMopps") == (1.15, [1.07, 1.23])
    assert _figure(ten, "w2bKnapsack", "w2bGrpo") == (0.92, [0.85, 1.01])


def test_the_five_other_peers_on_the_fresh_warm_starts(default_merge):
    # docs/likelihood-rank.md, "The five other peers on the fresh warm starts" (session 41,
    # predictions 1-5): SPEED-RL, GRESO, CERO, DAPO and Pilot-Commit on ws4 and ws5, seeds 0-4
    for ws in (4, 5):
        names = [f"s40-ws{ws}", f"s40-ws{ws}-mopps", f"s41-ws{ws}-peers"]
        w = default_merge(names, 10, f"w{ws}Grpo", f"o{ws}")
        alone = default_merge([f"s40-ws{ws}"], 10, f"w{ws}Grpo", f"a{ws}")
        lr = _figure(w, f"w{ws}LrP1b2", f"w{ws}Grpo")
        assert lr == _figure(alone, f"w{ws}LrP1b2", f"w{ws}Grpo")  # the peers move no figure
        for peer in ("speed-rl", "greso", "cero", "dapo", "pilot-commit"):
            st = w["strategies"][f"w{ws}-{peer}"]
            assert st["rollouts_to_target"] is None, (ws, peer)
            assert len(st["per_seed_rollouts_to_target"]) == 5
        assert w["strategies"][f"w{ws}-pilot-commit"]["final_accuracy"] < 0.33
        knap = _figure(w, f"w{ws}Knapsack", f"w{ws}Grpo")[0]
        assert lr[0] >= knap  # lrP1b2 at or ahead of the best peer's point on both
    assert lr == (1.05, [1.0, 1.1])  # ws5


def test_two_fresh_warm_starts_and_across_eight(default_merge, load_benchmark):
    # docs/likelihood-rank.md, "Every peer on the rebuilt warm starts, and two fresh ones"
    # (session 40, predictions 6-9): warm_start.seed=4 and =5, built for the first time
    s10 = set(range(10))
    w4 = default_merge(["s40-ws4"], 10, "w4Grpo", "w4")
    assert _figure(w4, "w4LrP1b2", "w4Grpo") == (0.96, [0.9, 1.03])
    assert _figure(w4, "w4Knapsack", "w4Grpo") == (0.94, [0.88, 1.01])
    assert _figure(w4, "w4LrP1b2", "w4Knapsack") == (1.02, [0.97, 1.07])
    assert _paired_finals(["s40-ws4"], "default", "w4LrP1b2", "w4Grpo", s10) == (
        -0.15,
        [-0.52, 0.21],
    )
    assert _paired_finals(["s40-ws4"], "default", "w4LrP1b2", "w4Knapsack", s10) == (
        0.27,
        [0.0, 0.53],
    )
    w5 = default_merge(["s40-ws5"], 10, "w5Grpo", "w5")
    assert _figure(w5, "w5LrP1b2", "w5Grpo") == (1.05, [1.0, 1.1])
    assert w5["speedup_ci"]["w5LrP1b2"]["w5Grpo"][0] > 1.0  # just: 1.003
    assert _figure(w5, "w5Knapsack", "w5Grpo") == (0.96, [0.91, 1.01])
    assert _figure(w5, "w5LrP1b2", "w5Knapsack") == (1.09, [1.04, 1.14])
    assert _paired_finals(["s40-ws5"], "default", "w5LrP1b2", "w5Grpo", s10) == (
        0.36,
        [-0.04, 0.77],
    )
    assert _paired_finals(["s40-ws5"], "default", "w5LrP1b2", "w5Knapsack", s10) == (
        0.8,
        [0.38, 1.22],
    )
    # MoPPS on both (prediction 22), a file of its own: adding it moves no other figure
    m4 = default_merge(["s40-ws4", "s40-ws4-mopps"], 10, "w4Grpo", "m4")
    assert _figure(m4, "w4Mopps", "w4Grpo") == (0.86, [0.0, 0.99])
    assert _figure(m4, "w4LrP1b2", "w4Grpo") == _figure(w4, "w4LrP1b2", "w4Grpo")
    assert _figure(m4, "w4LrP1b2", "w4Mopps")[0] == 1.12
    m5 = default_merge(["s40-ws5", "s40-ws5-mopps"], 10, "w5Grpo", "m5")
    assert m5["strategies"]["w5Mopps"]["rollouts_to_target"] is None
    assert _paired_finals(["s40-ws5-mopps", "s40-ws5"], "default", "w5Mopps", "w5Grpo", s10)[0] < 0
    across = load_benchmark("warm_start_interval").across
    eight = [ws for ws in _DISJOINT if ws != "ws6"]  # ws6: session 42
    lr, knap, lr_knap = _disjoint_speedups(default_merge, eight)
    rounded = _rounded

    assert rounded(across(list(lr.values()))) == (1.04, [1.01, 1.07])  # the eight
    after = across([v for ws, v in lr.items() if ws != "ws0"])  # run after the choice
    assert rounded(after) == (1.04, [1.0, 1.07]) and after[1][0] > 1.0
    assert rounded(across(list(knap.values()))) == (0.97, [0.94, 0.99])
    assert rounded(across(list(lr_knap.values()))) == (1.07, [1.05, 1.09])
    assert min(lr_knap.values()) > 1.0  # at or ahead of Knapsack-RL on each of the seven


def test_a_sixth_fresh_warm_start_and_across_nine(default_merge, load_benchmark):
    # docs/likelihood-rank.md, "A sixth fresh warm start" (session 42, predictions 10-11 of
    # benchmarks/predictions/session42.md, written before the warm start was built):
    # warm_start.seed=6; GRPO, lrP1b2, Knapsack-RL, MoPPS seeds 0-9, four other peers 0-4
    s10 = set(range(10))
    w = default_merge(["s42-ws6"], 10, "w6Grpo", "w6")
    assert _figure(w, "w6LrP1b2", "w6Grpo") == (1.06, [1.01, 1.11])
    assert _figure(w, "w6Knapsack", "w6Grpo") == (0.9, [0.86, 0.96])
    assert _figure(w, "w6Mopps", "w6Grpo") == (0.9, [0.83, 0.97])
    assert _figure(w, "w6LrP1b2", "w6Knapsack") == (1.17, [1.11, 1.23])
    assert _figure(w, "w6LrP1b2", "w6Mopps") == (1.18, [1.09, 1.27])
    assert _figure(w, "w6-speed-rl", "w6Grpo")[0] == 0.85
    for peer in ("greso", "cero", "dapo"):
        st = w["strategies"][f"w6-{peer}"]
        assert st["rollouts_to_target"] is None and len(st["per_seed_rollouts_to_target"]) == 5
    sp = w["speedup"]
    assert max(v["w6Grpo"] or 0 for k, v in sp.items() if k not in ("w6Grpo", "w6LrP1b2")) < 0.91
    assert _paired_finals(["s42-ws6"], "default", "w6LrP1b2", "w6Grpo", s10) == (
        -0.07,
        [-0.41, 0.28],
    )
    wsi = load_benchmark("warm_start_interval")
    across, cis = wsi.across, {}
    lr, knap, lr_knap = _disjoint_speedups(default_merge, list(_DISJOINT), cis)
    assert len(lr) == 9 and len(knap) == 8
    # session 43: is the spread of lrP1b2's lead (0.96x-1.09x) more than each policy's seed noise?
    # Cochran's Q 12.94 on 8 df, p 0.11; between-policy sd of the log speedup 0.020; pooled 1.05x
    h = wsi.heterogeneity(list(lr.values()), [cis[ws][0] for ws in lr])
    assert h["df"] == 8 and h["q"] == pytest.approx(12.94, abs=0.01)
    assert h["p"] == pytest.approx(0.114, abs=0.001) and h["between_sd"] < 0.025
    # and over the eight with Knapsack-RL: its lead over it (Q 10.09, p 0.18), its own (p 0.18)
    h = wsi.heterogeneity(list(lr_knap.values()), [cis[ws][2] for ws in lr_knap])
    assert h["q"] == pytest.approx(10.09, abs=0.01) and h["p"] == pytest.approx(0.183, abs=0.001)
    h = wsi.heterogeneity(list(knap.values()), [cis[ws][1] for ws in knap])
    assert h["p"] == pytest.approx(0.179, abs=0.001)
    assert _rounded(across(list(lr.values()))) == (1.04, [1.01, 1.06])  # the nine
    after = across([v for ws, v in lr.items() if ws != "ws0"])  # the eight run after the choice
    assert _rounded(after) == (1.04, [1.01, 1.07])
    assert _rounded(across(list(knap.values()))) == (0.96, [0.93, 0.99])
    assert _rounded(across(list(lr_knap.values()))) == (1.08, [1.05, 1.11])
    assert min(lr_knap.values()) > 1.0  # at or ahead of Knapsack-RL on each of the eight


def test_heterogeneity_by_hand_and_chi_square_tails_from_scipy(load_benchmark):
    import math

    # warm_start_interval.heterogeneity: three figures whose 90% intervals are exp(+-z se) around
    # them (z = 1.6449, the normal quantile), se 0.1, 0.1, 0.2: weights 100, 100, 25; logs 0, 0.2,
    # 0.4: m = (0 + 20 + 10) / 225 = 2/15; Q = 100 (2/15)^2 + 100 (1/15)^2 + 25 (4/15)^2 = 900/225 = 4.
    # The tails are scipy.stats.chi2.sf's (scipy 1.x, recorded here; the module has no scipy).
    wsi = load_benchmark("warm_start_interval")
    z = 1.6448536269514722
    logs, ses = [0.0, 0.2, 0.4], [0.1, 0.1, 0.2]
    x = [math.exp(v) for v in logs]
    ci = [[math.exp(v - z * s), math.exp(v + z * s)] for v, s in zip(logs, ses)]
    h = wsi.heterogeneity(x, ci)
    assert h["q"] == pytest.approx(4.0, rel=1e-6) and h["df"] == 2
    assert h["pooled"] == pytest.approx(math.exp(2 / 15), rel=1e-6)
    # tau^2 = (Q - 2) / (225 - (100^2 + 100^2 + 25^2) / 225)
    tau2 = (4.0 - 2) / (225 - 20625 / 225)
    assert h["between_sd"] == pytest.approx(math.sqrt(tau2), rel=1e-5)
    assert h["p"] == pytest.approx(math.exp(-2.0), rel=1e-9)  # chi-square, 2 df: e^(-q/2)
    assert h["i2"] == pytest.approx(0.5)
    # a spread smaller than the noise: Q below its df, tau^2 and I^2 cut off at 0
    near = [0.0, 0.1, 0.05]  # se 0.1, 0.1, 1: Q = 100 (0.05^2 + 0.05^2) + 0 = 0.5 < 2
    h = wsi.heterogeneity(
        [math.exp(v) for v in near],
        [[math.exp(v - z * s), math.exp(v + z * s)] for v, s in zip(near, [0.1, 0.1, 1.0])],
    )
    assert h["q"] == pytest.approx(0.5, rel=1e-6)
    assert h["q"] < h["df"] and h["between_sd"] == 0.0 and h["i2"] == 0.0
    with pytest.raises(ValueError, match="0 < low < high"):
        wsi.heterogeneity([1.0, 1.1], [[0.9, 1.1], [1.1, 1.1]])
    for q, df, sf in ((12.95, 8, 0.11358157172329683), (2.0, 2, 0.36787944117144245),
                      (30.0, 5, 1.4748581038443073e-05), (0.5, 1, 0.47950012218695337),
                      (200.0, 3, 4.218541107192018e-43), (60.0, 50, 0.1572420272383916)):  # fmt: skip
        assert wsi.chi2_sf(q, df) == pytest.approx(sf, rel=1e-9)


def test_eviction_switched_off_and_a_tenth_paper_policy_from_the_committed_runs(
    tmp_path, load_benchmark, monkeypatch
):
    # docs/testbed.md, "Eviction switched off" (session 46, benchmarks/predictions/session46.md):
    # the paper testbed's peers' warm start rebuilt (another policy), seeds 0-9 of GRPO,
    # Pilot-Commit, pcNE (exclude_threshold=None) and posterior-signal strata=level
    p = _committed(tmp_path, load_benchmark, monkeypatch, "paper", ["s46-rebuilt"], 10, "p")
    assert _figure(p, "psS", "grpo") == (1.56, [1.35, 1.85])
    assert _figure(p, "psS", "pilot-commit") == (1.41, [1.17, 1.57])
    assert _figure(p, "psS", "pcNE") == (1.49, [1.24, 1.74])
    assert _figure(p, "pilot-commit", "grpo") == (1.1, [0.98, 1.41])
    assert _figure(p, "pcNE", "pilot-commit") == (0.95, [0.77, 1.13])
    # every other peer on that policy: none ahead of GRPO beyond noise, psS ahead of each
    q = _committed(tmp_path, load_benchmark, monkeypatch, "paper",
                   ["s46-rebuilt", "s46-rebuilt-peers"], 10, "q")  # fmt: skip
    assert _figure(q, "cero", "grpo") == (1.07, [0.85, 1.26])
    assert _figure(q, "speed-rl", "grpo") == (1.01, [0.84, 1.18])
    assert _figure(q, "psS", "cero") == (1.46, [1.27, 1.84])
    assert _figure(q, "psS", "speed-rl") == (1.55, [1.39, 1.9])
    for never in ("dapo", "greso", "mopps"):
        assert q["strategies"][never]["rollouts_to_target"] is None
    lr = _committed(tmp_path, load_benchmark, monkeypatch, "paper",
                    ["s46-rebuilt", "s46-rebuilt-lr"], 10, "lr")  # fmt: skip
    assert _figure(lr, "lrP1b2", "grpo") == (1.27, [1.11, 1.49])
    assert _figure(lr, "lrP1b2", "pilot-commit") == (1.15, [0.95, 1.32])
    assert _figure(lr, "lrP1b2", "psS") == (0.82, [0.71, 0.94])
    ps = _committed(tmp_path, load_benchmark, monkeypatch, "paper",
                    ["s46-rebuilt", "s46-rebuilt-ps"], 10, "ps")  # fmt: skip
    assert _figure(ps, "ps", "pilot-commit") == (0.98, [0.0, 1.18])  # 0.0: never, in resamples
    assert _figure(ps, "ps", "psS") == (0.69, [0.0, 0.84])
    assert sum(r is None for r in ps["strategies"]["ps"]["per_seed_rollouts_to_target"]) == 2
    # the hard pool's rebuilt warm start: pcNE and psS at 16 seeds against the peers' 16, GRPO's 10
    h = _committed(tmp_path, load_benchmark, monkeypatch, "hard",
                   ["s43-cero", "s45-rebuilt-peers", "s45-rebuilt-peers-8-15", "s45-rebuilt-own",
                    "s46-evict"], 16, "h")  # fmt: skip
    assert _figure(h, "pcNE", "grpo") == (3.12, [1.6, 3.61])
    assert _figure(h, "pcNE", "pilot-commit") == (1.0, [0.64, None])
    assert _figure(h, "psS", "grpo") == (2.79, [1.96, 3.12])
    assert _figure(h, "psS", "speed-rl") == (0.95, [0.77, 1.25])
    assert _figure(h, "psS", "pcNE") == (0.89, [0.72, 1.54])


def test_a_fresh_machine_rebuilds_ws0_as_session_13s_policy(load_benchmark):
    # docs/testbed.md, "Which machine builds which policy" (session 47): GRPO seeds 10-19 on this
    # machine's build of ws0 (exported as grpoRebuild) are session 13's runs, evaluation for
    # evaluation; a different build (session 46's rebuild) is not
    rp = load_benchmark("ranking_power")
    results = Path(__file__).resolve().parents[2] / "benchmarks/results"

    def curves(name, label):  # {seed: (rollouts, accuracies)} of one label in a committed CSV
        return rp.load_evals([str(results / f"{name}.csv")], None, [label])[label]

    def same(a, b):
        return sorted(a) == sorted(b) and all(
            np.array_equal(a[s][0], b[s][0]) and np.array_equal(a[s][1], b[s][1]) for s in a
        )

    new = curves("paper-testbed-s47-ws0", "grpoRebuild")
    old = curves("paper-testbed-s13-peers", "grpo")
    assert sorted(new) == list(range(10, 20)) and same(new, old)
    # session 46's build of the same key is another policy: another held-out start accuracy
    other = curves("paper-testbed-s46-rebuilt", "grpo")
    assert {float(c[1][0]) for c in other.values()} == {0.357575892}
    assert {float(c[1][0]) for c in new.values()} == {0.332510741}
    # and the hard pool's warm start as session 27 built it (GRPO seed 0, 25 evaluations)
    hard = curves("hard-testbed-s47-rebuild", "grpoRebuild")
    assert list(hard) == [0] and len(hard[0][0]) == 25
    assert same(hard, {0: curves("hard-testbed-s27", "grpo")[0]})


def test_two_new_paper_recipes_and_across_eleven_from_the_committed_runs(
    tmp_path, load_benchmark, monkeypatch
):
    # docs/posterior-signal.md, "Two recipes never built, ws0 at twenty seeds, and recheck without
    # a column" (session 47): psGE is strata=level (today's code reproduces session 26's psGE)
    ws0 = (["s12-peers", "s13-peers", "s26-ws0", "s47-ws0"], 20)
    s = _committed(tmp_path, load_benchmark, monkeypatch, "paper", *ws0, "ws0x")
    assert _figure(s, "psGE", "grpo") == (1.83, [1.62, 1.99])
    assert _figure(s, "psGE", "pilot-commit") == (1.42, [1.32, 1.64])
    w10 = _committed(tmp_path, load_benchmark, monkeypatch, "paper", ["s47-ws10"], 10, "w10")
    assert _figure(w10, "psGE", "grpo") == (1.0, [0.0, 1.29])  # 0.0: never, in resamples
    assert _figure(w10, "pilot-commit", "grpo") == (1.2, [1.06, 1.52])
    assert _figure(w10, "ps", "grpo") == (1.53, [1.28, 1.76])
    assert _figure(w10, "ps", "pilot-commit") == (1.28, [1.02, 1.45])
    assert sum(r is None for r in w10["strategies"]["psGE"]["per_seed_rollouts_to_target"]) == 4
    w11 = _committed(tmp_path, load_benchmark, monkeypatch, "paper", ["s47-ws11"], 10, "w11")
    assert _figure(w11, "psGE", "grpo") == (3.43, [1.97, 3.97])
    assert _figure(w11, "psGE", "pilot-commit") == (1.34, [0.74, 1.65])
    assert _figure(w11, "pilot-commit", "grpo") == (2.56, [1.74, 3.91])
    parts = {w: ([*names, f"s26-{w}"], seeds) for w, (names, seeds) in EIGHT_WARM_STARTS.items()}
    parts["ws0"] = ([*parts["ws0"][0], "s47-ws0"], 20)
    parts["ws9"] = (["s25-ws9", "s26-ws9"], 7)
    parts["ws10"] = (["s47-ws10"], 10)
    parts["ws11"] = (["s47-ws11"], 10)
    got = _across_warm_starts(
        tmp_path, load_benchmark, monkeypatch, parts, "psGE,psGE/pilot-commit,pilot-commit",
        ("--never", "budget"),
    )  # fmt: skip
    assert got["psGE vs baseline"] == (1.72, [1.44, 2.05])
    assert got["psGE vs pilot-commit"] == (1.26, [1.14, 1.39])
    assert got["pilot-commit vs baseline"] == (1.37, [1.15, 1.62])
    # recheck without a column on ws0, 20 seeds, against session 18's default (psDfit, the same
    # code as today's default: seeds 10-19 reproduce bit for bit)
    rc = _committed(tmp_path, load_benchmark, monkeypatch, "paper",
                    ["s12-peers", "s13-peers", "s18", "s47-ws0-recheck"], 20, "rc")  # fmt: skip
    assert _figure(rc, "psR", "grpo") == (1.21, [1.07, 1.33])
    assert _figure(rc, "psR", "psDfit") == (1.0, [0.92, 1.16])
    assert _figure(rc, "psR", "pilot-commit") == (0.94, [0.87, 1.11])
    assert _figure(w10, "psR", "ps") == (0.99, [0.84, 1.15])
