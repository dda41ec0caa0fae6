"""benchmarks/estimate_capture.py: the offline replay's capture, on traces whose answer is known.
Expected values come from a direct binomial sum of GRPO's signal and a brute-force choice, not
from the replay's signal table and sort."""

from __future__ import annotations

import itertools
import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import estimate_capture as ec  # noqa: E402


def _signal(p: float, n: int) -> float:
    """E_{k~Bin(n,p)} sqrt(n(n-1)) sqrt(k/n (1 - k/n)), summed term by term."""
    return sum(
        math.comb(n, k) * p**k * (1 - p) ** (n - k) * math.sqrt(n * (n - 1) * k / n * (1 - k / n))
        for k in range(n + 1)
    )


def _trace(N=40, B=4, n=8, epochs=3, p=None, seed=0):
    rng = np.random.default_rng(seed)
    stream = np.concatenate([rng.permutation(N) for _ in range(epochs)])
    steps = len(stream) // B
    trace = []
    for s in range(steps):
        pids = stream[s * B : (s + 1) * B]
        k = rng.binomial(n, p[pids])
        trace.append(
            {"step": s, "prompt_ids": pids.tolist(), "group_sizes": [n] * B,
             "success_rate": (k / n).tolist()}
        )  # fmt: skip
    return trace, stream


def test_a_rule_that_knows_p_captures_all_and_one_that_ignores_it_nothing():
    N, B, n, W = 40, 4, 8, 6
    p = np.random.default_rng(1).uniform(0.02, 0.98, N)
    trace, stream = _trace(N, B, n, p=p)
    snaps = np.arange(0, len(trace), 3)
    P = np.tile(p, (len(snaps), 1))
    level = np.zeros(N, dtype=int)
    rules = {
        "knows": lambda win, s, v, ctx: ctx["p"][win],
        "blind": lambda win, s, v, ctx: np.zeros(len(win)),
        "worst": lambda win, s, v, ctx: -np.array([_signal(x, n) for x in ctx["p"][win]]),
    }
    out = ec.replay(trace, P, snaps, level, window=W, rules=rules, score={"worst": lambda x: x})
    assert out["rules"]["knows"]["all"] == pytest.approx(1.0)
    assert out["rules"]["blind"]["all"] == 0.0
    # brute force: every snapshot's best and worst B-subset of its window, by the direct sum
    first, best, worst = [], [], []
    for s in snaps:
        win = stream[s * B : s * B + W]
        if len(win) < W:
            continue
        sig = [_signal(p[i], n) for i in win]
        means = [np.mean([sig[j] for j in c]) for c in itertools.combinations(range(W), B)]
        first.append(np.mean(sig[:B]))
        best.append(max(means))
        worst.append(min(means))
    expect = (np.mean(worst) - np.mean(first)) / (np.mean(best) - np.mean(first))
    assert out["points"] == len(first)
    assert out["rules"]["worst"]["all"] == pytest.approx(expect, abs=2e-3)
    assert out["gain"] == pytest.approx(np.mean(best) - np.mean(first), rel=2e-3)


def test_the_level_mean_separates_levels_once_both_were_seen():
    # level 0 at p = 0.5 (most signal), level 1 at 0.97: from the second epoch on the level rule
    # ranks every level-0 prompt first, as knowing p does; at step 0 nothing was seen: GRPO's choice
    N, B, n = 40, 4, 8
    level = np.arange(N) % 2
    p = np.where(level == 0, 0.5, 0.97)
    trace, _ = _trace(N, B, n, p=p, seed=3)
    snaps = np.arange(len(trace))
    out = ec.replay(trace, np.tile(p, (len(snaps), 1)), snaps, level, window=8)
    lv = out["rules"]["level"]["epochs"]
    assert out["epochs"] == [0, 1, 2]
    assert lv[1] == pytest.approx(1.0) and lv[2] == pytest.approx(1.0)
    assert out["rules"]["stale64"]["points"] == 0  # 30 steps: never a snapshot 64 steps back
    # at step 0 no rule that reads history has anything: each makes GRPO's choice (a leak of
    # step 0's own groups would not)
    only_first = ec.replay(trace[:2], np.tile(p, (1, 1)), np.array([0]), level, window=8)
    for name in ("last", "level", "shrunk"):
        assert only_first["rules"][name]["all"] == 0.0, name


def test_stale64_reads_the_snapshot_64_steps_back_and_only_where_there_is_one():
    # p changes at every snapshot but repeats with a period of 64 steps: the p of 64 steps ago is
    # today's, so the rule must capture all, on exactly the snapshot steps >= 64
    N, B, n = 40, 4, 8
    rng = np.random.default_rng(5)
    cycle = rng.uniform(0.02, 0.98, (16, N))  # one vector per 4 steps of the period
    trace, _ = _trace(N, B, n, epochs=14, p=cycle[0])
    snaps = np.arange(0, len(trace), 4)
    P = cycle[(snaps % 64) // 4]
    out = ec.replay(trace, P, snaps, np.zeros(N, dtype=int), window=6)
    later = [s for s in snaps if s >= 64 and s * B + 6 <= len(trace) * B]
    assert out["rules"]["stale64"]["points"] == len(later)
    assert out["rules"]["stale64"]["all"] == pytest.approx(1.0)
    assert out["rules"]["stale64"]["epochs"][0] != out["rules"]["stale64"]["epochs"][0]  # NaN


def test_epochs_are_the_traces_own():
    N, B, n = 41, 4, 8  # N not a multiple of B
    p = np.random.default_rng(2).uniform(0.1, 0.9, N)
    trace, _ = _trace(N, B, n, epochs=3, p=p)
    for t in trace:
        t["epoch"] = t["step"] // 7  # not step * B // N: the field must be the one read
    snaps = np.arange(len(trace))
    out = ec.replay(trace, np.tile(p, (len(snaps), 1)), snaps, np.zeros(N, dtype=int), window=5)
    want = sorted({t["epoch"] for t in trace if t["step"] * B + 5 <= len(trace) * B})
    assert out["epochs"] == want
    assert (
        sum(out["rules"]["last"]["epoch_points"]) == out["rules"]["last"]["points"] == out["points"]
    )


def test_bad_traces_are_refused(tmp_path):
    p = np.full(8, 0.5)
    trace, _ = _trace(8, 2, 4, p=p)
    trace[1]["group_sizes"] = [4, 6]
    with pytest.raises(ValueError, match="B groups of n"):
        ec.replay(trace, p[None], np.array([0]), np.zeros(8, int), window=3)
    trace, _ = _trace(8, 2, 4, p=p)
    with pytest.raises(ValueError, match="smaller than the run's train_prompts 2"):
        ec.replay(trace, p[None], np.array([0]), np.zeros(8, int), window=1)
    (tmp_path / "run.json").write_text(json.dumps({"config": {"strategy": "mopps"}}))
    with pytest.raises(ValueError, match="needs a GRPO run"):
        ec.load_run(tmp_path)


def test_seen_is_blind_on_first_looks_and_exact_after():
    # `seen` knows p only of prompts trained before the step: in the first epoch of a permuted
    # stream every window (but one that crosses into epoch 2) holds prompts never trained, so it
    # makes GRPO's choice; from the second epoch on every prompt was trained: it knows p
    N, B, n, W = 40, 4, 8, 6
    p = np.random.default_rng(6).uniform(0.02, 0.98, N)
    trace, _ = _trace(N, B, n, p=p, seed=7)
    snaps = np.arange(len(trace))
    inside = [s for s in snaps if s * B + W <= N]  # windows within the first epoch
    out = ec.replay(trace[: len(inside)], np.tile(p, (len(inside), 1)), np.array(inside),
                    np.zeros(N, dtype=int), window=W)  # fmt: skip
    assert out["rules"]["seen"]["all"] == 0.0
    full = ec.replay(trace, np.tile(p, (len(snaps), 1)), snaps, np.zeros(N, dtype=int), window=W)
    assert full["rules"]["seen"]["epochs"][1] == pytest.approx(1.0)
    assert full["rules"]["seen"]["epochs"][2] == pytest.approx(1.0)


def test_a_large_fresh_look_captures_nearly_all_and_a_small_one_less():
    N, B, n, W = 60, 4, 8, 8
    p = np.random.default_rng(8).uniform(0.02, 0.98, N)
    trace, _ = _trace(N, B, n, p=p, seed=9)
    snaps = np.arange(len(trace))
    rules = {"fresh2": ec.make_fresh(2), "fresh100k": ec.make_fresh(100_000)}
    out = ec.replay(trace, np.tile(p, (len(snaps), 1)), snaps, np.zeros(N, dtype=int),
                    window=W, rules=rules)  # fmt: skip
    assert out["rules"]["fresh100k"]["all"] == pytest.approx(1.0, abs=0.02)
    assert out["rules"]["fresh2"]["all"] < 0.8


def _random_stream_trace(N, B, n, steps, p, seed):
    """A trace whose stream revisits prompts at random (each step's B distinct): windows mix
    prompts trained before with prompts never trained, and some hold a prompt twice."""
    rng = np.random.default_rng(seed)
    trace = []
    for s in range(steps):
        pids = rng.choice(N, B, replace=False)
        k = rng.binomial(n, p[pids])
        trace.append(
            {"step": s, "prompt_ids": pids.tolist(), "group_sizes": [n] * B,
             "success_rate": (k / n).tolist(), "epoch": 0}
        )  # fmt: skip
    return trace, np.concatenate([t["prompt_ids"] for t in trace])


def _window(stream, s, B, W):
    win = stream[s * B : s * B + W]
    return [int(x) for j, x in enumerate(win) if x not in win[:j]]  # each prompt once, in order


def test_seen_ranks_a_never_trained_prompt_at_the_windows_mean_signal():
    # brute force on windows that mix trained and never-trained prompts: the value of a prompt
    # trained before the step is its direct-sum signal, of one never trained the mean over the
    # window; the B best by value (ties: window order), scored by the exact signal
    N, B, n, W = 30, 3, 8, 7
    p = np.random.default_rng(12).uniform(0.02, 0.98, N)
    trace, stream = _random_stream_trace(N, B, n, 40, p, seed=13)
    snaps = np.arange(len(trace))
    out = ec.replay(trace, np.tile(p, (len(snaps), 1)), snaps, np.zeros(N, dtype=int), window=W,
                    rules={"seen": ec.rule_seen})  # fmt: skip
    first, best, got, mixed = [], [], [], 0
    for s in snaps:
        if s * B + W > len(stream):
            continue
        win = _window(stream, s, B, W)
        trained = {int(i) for t in trace[:s] for i in t["prompt_ids"]}
        sig = [_signal(p[i], n) for i in win]
        value = [sig[j] if win[j] in trained else np.mean(sig) for j in range(len(win))]
        order = sorted(range(len(win)), key=lambda j: (-value[j], j))
        first.append(np.mean(sig[:B]))
        best.append(np.mean(sorted(sig)[-B:]))
        got.append(np.mean([sig[j] for j in order[:B]]))
        mixed += 0 < sum(i in trained for i in win) < len(win)
    assert mixed >= 5
    expect = (np.mean(got) - np.mean(first)) / (np.mean(best) - np.mean(first))
    assert 0.05 < expect < 0.95  # a rule between GRPO's choice and knowing p
    assert out["rules"]["seen"]["all"] == pytest.approx(expect, abs=2e-3)


def test_drop_bands_count_the_prompts_knowing_p_leaves_out():
    # brute force: each window (each prompt once, in order) loses its W - B prompts of least
    # direct-sum signal, binned by p; windows that hold a prompt twice are included
    N, B, n, W = 24, 4, 8, 7
    p = np.random.default_rng(10).uniform(0.0, 1.0, N)
    trace, stream = _random_stream_trace(N, B, n, 30, p, seed=11)
    snaps = np.arange(len(trace))
    bins = [0.0, 0.2, 0.5, 0.8, 1.01]
    win_share, drop_share = ec.drop_bands(trace, np.tile(p, (len(snaps), 1)), snaps, window=W,
                                          bins=bins)  # fmt: skip
    seen, dropped, repeats = np.zeros(4), np.zeros(4), 0
    for s in snaps:
        if s * B + W > len(stream):
            continue
        win = _window(stream, s, B, W)
        repeats += len(win) < W
        sig = [_signal(p[i], n) for i in win]
        out = [win[j] for j in sorted(range(len(win)), key=lambda j: (-sig[j], j))[B:]]
        seen += np.histogram(p[win], bins)[0]
        dropped += np.histogram(p[out], bins)[0]
    assert repeats >= 3
    np.testing.assert_allclose(win_share, seen / seen.sum(), atol=1e-9)
    np.testing.assert_allclose(drop_share, dropped / dropped.sum(), atol=1e-9)


def test_visit_ranks_by_the_pass_rate_at_each_prompts_last_group():
    # brute force: p changes at every step; a prompt trained before the step is valued at the
    # direct-sum signal of its p at the step of its last group (the snapshot then), one never
    # trained at the mean of the trained ones' values; scored by today's exact signal
    N, B, n, W = 30, 3, 8, 7
    rng = np.random.default_rng(21)
    trace, stream = _random_stream_trace(N, B, n, 40, rng.uniform(0.02, 0.98, N), seed=22)
    snaps = np.arange(len(trace))
    P = rng.uniform(0.02, 0.98, (len(snaps), N))  # a new p at every step
    out = ec.replay(trace, P, snaps, np.zeros(N, dtype=int), window=W,
                    rules={"visit": ec.rule_visit})  # fmt: skip
    first, best, got, mixed = [], [], [], 0
    for s in snaps:
        if s * B + W > len(stream):
            continue
        win = _window(stream, s, B, W)
        last = {}
        for t in trace[:s]:
            for i in t["prompt_ids"]:
                last[int(i)] = t["step"]
        sig = [_signal(P[s][i], n) for i in win]
        old = {int(i): _signal(P[last[int(i)]][i], n) for i in win if int(i) in last}
        mean = np.mean(list(old.values())) if old else 0.0
        value = [old.get(int(i), mean) for i in win]
        order = sorted(range(len(win)), key=lambda j: (-value[j], j))
        first.append(np.mean(sig[:B]))
        best.append(np.mean(sorted(sig)[-B:]))
        got.append(np.mean([sig[j] for j in order[:B]]))
        mixed += 0 < len(old) < len(win)
    assert mixed >= 5
    expect = (np.mean(got) - np.mean(first)) / (np.mean(best) - np.mean(first))
    assert out["rules"]["visit"]["all"] == pytest.approx(expect, abs=2e-3)
