"""The oracles on real runs: `rollalloc train --strategy oracle | oracle-greedy` reads the live
policy's exact pool pass rates (rollalloc.train.evaluator.PoolPassRates).

Expected values come from elsewhere than the code under test: the pass rates from a fresh
`exact_pass_rates` call on the policy at that moment (itself checked against Monte Carlo sampling in
test_exact_eval.py); the prompts the oracle must choose from a brute-force enumeration of all 2^n
reward vectors of a group, with GRPO's advantages written out here, not from the simulator's table.
"""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest
import torch

from rollalloc.train.evaluator import PoolPassRates, exact_pass_rates
from rollalloc.train.trainer import build_parts, train


def _read(path):
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _expected_signal_brute_force(p: float, n: int) -> float:
    """E[sum_j A_j (r_j - mean r)] over all 2^n reward vectors, A = (r - mean) / (std + 1e-6),
    std the unbiased sample std: the gradient of GRPO's objective on a Bernoulli logit."""
    total = 0.0
    for r in itertools.product((0.0, 1.0), repeat=n):
        r = np.array(r)
        k = r.sum()
        prob = p**k * (1 - p) ** (n - k)
        dev = r - r.mean()
        std = r.std(ddof=1)
        total += prob * float(np.sum(dev / (std + 1e-6) * dev))
    return total


def _pool_rates(parts):
    col = parts.task.train
    return exact_pass_rates(
        parts.model,
        parts.tokenizer,
        list(col["prompt"]),
        list(col["answer"]),
        temperature=1.0,
    )


def test_pool_pass_rates_follow_the_policy_and_refresh_as_told(small_config):
    parts = build_parts(small_config(strategy="grpo", max_steps=1), log=None)
    version = {"v": 0}
    fresh = PoolPassRates(
        parts.model, parts.tokenizer, parts.task, temperature=1.0, version=lambda: version["v"]
    )
    lazy = PoolPassRates(
        parts.model,
        parts.tokenizer,
        parts.task,
        temperature=1.0,
        version=lambda: version["v"],
        refresh=2,
    )
    ids = np.array([5, 0, 17, 5])  # a repeat, out of order
    before = _pool_rates(parts)
    assert fresh(ids) == pytest.approx(before[ids], abs=1e-12)
    assert lazy(ids) == pytest.approx(before[ids], abs=1e-12)
    assert fresh.computed == 3  # the repeated id is computed once
    with torch.no_grad():  # an update: every weight moves
        for w in parts.model.parameters():
            w.add_(0.05 * torch.randn_like(w))
    version["v"] = 1
    after = _pool_rates(parts)
    assert np.abs(after[ids] - before[ids]).max() > 1e-3  # the update changed the pass rates
    assert fresh(ids) == pytest.approx(after[ids], abs=1e-12)  # refresh=1: the live policy's
    assert lazy(ids) == pytest.approx(before[ids], abs=1e-12)  # refresh=2: one update old, kept
    assert lazy(np.array([3]))[0] == pytest.approx(after[3], abs=1e-12)  # never asked: computed now
    version["v"] = 2
    assert lazy(ids) == pytest.approx(after[ids], abs=1e-12)  # two updates old: recomputed
    with pytest.raises(ValueError, match=r"prompt ids must be in \[0, 96\)"):
        fresh(np.array([96]))
    with pytest.raises(ValueError, match="refresh must be an integer >= 1"):
        PoolPassRates(parts.model, parts.tokenizer, parts.task, temperature=1.0,
                      version=lambda: 0, refresh=0)  # fmt: skip


def test_oracle_greedy_trains_the_prompts_of_largest_expected_signal(
    small_config, tmp_path, monkeypatch
):
    # all 96 pool prompts as candidates: step 0 must train the 4 of largest E[G(p, 8)] under the
    # warm-started policy's exact pass rates (no stream order, no ties: p is continuous)
    opts = {"candidates": 96}
    cfg = small_config(
        strategy="oracle-greedy",
        max_steps=2,
        log_groups=True,
        strategy_config=opts,
        out=str(tmp_path / "og"),
    )
    p0 = _pool_rates(build_parts(cfg, log=None))  # the warm start's policy, before any update
    import rollalloc.train.evaluator as ev

    calls, real = [], ev.exact_pass_rates

    def spy(model, tokenizer, prompts, answers, **kw):  # which policy the oracle reads, when
        calls.append((len(prompts), [w.detach().clone() for w in model.parameters()]))
        return real(model, tokenizer, prompts, answers, **kw)

    monkeypatch.setattr(ev, "exact_pass_rates", spy)
    train(cfg, log=lambda *_: None)
    # every step reads the whole pool again (oracle_refresh=1), each time under a newer policy
    assert [n for n, _ in calls] == [96, 96]
    assert any(not torch.equal(a, b) for a, b in zip(calls[0][1], calls[1][1], strict=True))
    steps = _read(tmp_path / "og/steps.jsonl")
    signal = np.array([_expected_signal_brute_force(p, 8) for p in p0])  # (96,)
    expected = set(np.argsort(-signal)[:4].tolist())
    assert set(steps[0]["trained"]["prompt_ids"]) == expected
    assert steps[0]["trained"]["group_sizes"] == [8, 8, 8, 8]
    run = json.loads((tmp_path / "og/run.json").read_text())
    assert run["config"]["strategy"] == "oracle-greedy"


def test_the_ceiling_oracle_runs_in_the_trainer_within_the_step_budget(small_config, tmp_path):
    cfg = small_config(strategy="oracle", max_steps=3, oracle_refresh=2, out=str(tmp_path / "c"))
    train(cfg, log=lambda *_: None)
    steps = _read(tmp_path / "c/steps.jsonl")
    assert len(steps) == 3
    assert all(0 < s["rollouts"] <= 4 * 8 for s in steps)  # at most GRPO's B x n per step


def test_an_oracle_on_a_task_without_exact_pass_rates_is_refused_before_the_warm_start(
    small_config,
):
    from dataclasses import replace

    from rollalloc.train.preflight import check_task
    from rollalloc.train.trainer import build_task

    cfg = small_config(strategy="oracle-greedy", max_steps=1)
    # the arith pool, as a task whose verifier would accept other spellings too
    task = replace(build_task(cfg), answer_is_completion=False, name="free-form")
    with pytest.raises(ValueError, match="oracle-greedy reads every pool prompt's exact pass rate"):
        check_task(cfg, task)
    check_task(small_config(strategy="grpo", max_steps=1), task)  # other strategies do not care
