"""The exact held-out metric, the warm-start split and the memorisation check (issue 16).

Expected values come from elsewhere than the code under test: the exact pass rate against Monte
Carlo sampling with the generator the trainer uses; the memorisation check against hand-made pass
rates whose answer is obvious.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

from rollalloc.tasks import load_task
from rollalloc.train.evaluator import HeldOutEvaluator, exact_pass_rates
from rollalloc.train.model import TinyModelConfig, make_char_tokenizer, make_tiny_model
from rollalloc.train.sampler import HFGenerator, encode_prompts
from rollalloc.train.warmstart import WarmStartConfig, memorisation_check, sft


@pytest.fixture(scope="module")
def trained():
    """A tiny policy fine-tuned briefly on 2-term sums: right on some prompts some of the time."""
    torch.manual_seed(0)
    torch.set_num_threads(1)
    task = load_task("arith", {"num_train": 64, "num_eval": 32, "terms": [2], "num_sft": 64})
    tok = make_char_tokenizer()
    cfg = TinyModelConfig(
        hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64, max_positions=32
    )
    model = make_tiny_model(len(tok), cfg, seed=0)
    ws = WarmStartConfig(steps=60, batch_size=64, lr=0.01, warmup_steps=2)
    sft(model, tok, task, ws, seed=0, log=None)
    return task, model, tok


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_exact_pass_rate_matches_monte_carlo(trained, temperature):
    task, model, tok = trained
    rows = list(range(6))
    prompts = [task.eval["prompt"][i] for i in rows]
    answers = [task.eval["answer"][i] for i in rows]
    exact = exact_pass_rates(model, tok, prompts, answers, temperature=temperature)
    assert np.all((exact >= 0) & (exact <= 1)) and exact.max() > 0.05  # informative prompts
    gen = HFGenerator(model, tok, max_new_tokens=8)
    n = 1500
    torch.manual_seed(1)
    for p, a, e in zip(prompts, answers, exact):
        want = encode_prompts(tok, [a])[0] + [tok.eos_token_id]
        tokens, _ = gen(encode_prompts(tok, [p]) * n, temperature=temperature)
        hits = np.mean([t.tolist() == want for t in tokens])
        se = np.sqrt(max(e * (1 - e), 1e-4) / n)
        assert abs(hits - e) < 4.5 * se + 1e-3, (p, a, hits, e)


def test_fast_path_equals_the_padded_hf_forward(trained):
    # the learner's unpadded forward and transformers' padded one, prompts of mixed lengths, in
    # chunks that split the batch unevenly
    task, model, tok = trained
    rows = list(range(min(40, task.num_eval)))
    prompts = [task.eval["prompt"][i] for i in rows] + ["7=", "1+2+3+4+5+6+7="]
    answers = [task.eval["answer"][i] for i in rows] + ["7", "28"]
    assert len({len(p) for p in prompts}) >= 3
    hf = exact_pass_rates(model, tok, prompts, answers, temperature=0.7, fast=False)
    model.train()
    for chunk in (1024, 7):
        fast = exact_pass_rates(model, tok, prompts, answers, temperature=0.7, chunk=chunk)
        np.testing.assert_allclose(fast, hf, rtol=1e-4, atol=1e-7)
        assert model.training  # the caller's mode is restored


def test_evaluator_exact_metric_is_the_mean_and_needs_a_capable_task(trained):
    task, model, tok = trained
    gen = HFGenerator(model, tok, max_new_tokens=8)
    ev = HeldOutEvaluator(gen, task, k=0, metric="exact", greedy=False)
    out = ev.evaluate()
    want = exact_pass_rates(model, tok, task.eval["prompt"], task.eval["answer"], temperature=1.0)
    assert out["accuracy"] == pytest.approx(float(want.mean()))
    assert "accuracy_sampled" not in out
    both = HeldOutEvaluator(gen, task, k=2, metric="exact", greedy=True).evaluate()
    assert both["accuracy"] == out["accuracy"] and "accuracy_sampled" in both
    # the report's per-level table (rollalloc.report.levels) finds the task's levels and no
    # other accuracy_<metric> key among them
    from rollalloc.report.levels import level_names

    assert "accuracy_greedy" in both
    assert level_names({"grpo": {0: {"evals": [both, both]}}}) == sorted(set(task.eval["level"]))
    task.answer_is_completion = False
    try:
        with pytest.raises(ValueError, match="answer_is_completion"):
            HeldOutEvaluator(gen, task, k=0, metric="exact")
    finally:
        task.answer_is_completion = True
    with pytest.raises(ValueError, match="eval_k must be >= 1"):
        HeldOutEvaluator(gen, task, k=0, metric="sampled")


def test_warm_start_split_is_disjoint_and_leaves_pool_and_eval_unchanged():
    cfg = {"terms": [2, 3, 5], "num_train": 600, "num_eval": 100}
    with_sft = load_task("arith", {**cfg, "num_sft": 3000})
    without = load_task("arith", {**cfg, "num_sft": 0})
    assert with_sft.train == without.train and with_sft.eval == without.eval
    assert without.sft is None
    s = set(with_sft.sft["prompt"])
    assert len(s) == len(with_sft.sft["prompt"])  # no repeats
    assert not s & set(with_sft.train["prompt"]) and not s & set(with_sft.eval["prompt"])
    # 2-term chains have 200 distinct prompts: what the pool and eval set leave is all there is
    two = {p for p, lv in zip(with_sft.sft["prompt"], with_sft.sft["level"]) if lv == "2x1d"}
    used = {
        p
        for p in with_sft.train["prompt"] + with_sft.eval["prompt"]
        if p.count("+") + p.count("-") == 1
    }
    assert len(two) <= 200 - len(used)
    for p, a in zip(with_sft.sft["prompt"][:50], with_sft.sft["answer"][:50]):
        nums = [int(x) for x in re.findall(r"\d+", p)]
        signs = [1] + [1 if c == "+" else -1 for c in p if c in "+-"]
        assert str(sum(s * x for s, x in zip(signs, nums))) == a


def test_memorisation_check_on_hand_made_pass_rates():
    rng = np.random.default_rng(0)
    held = rng.uniform(0.3, 0.7, 500)
    # the pool is 0.3 easier than the held-out set: memorised
    mem = memorisation_check(np.clip(held + 0.3, 0, 1), None, held, None)
    assert mem["gap"] == pytest.approx(0.3, abs=0.02) and "memorisation" in mem["warning"]
    # same distribution: no warning
    same = memorisation_check(rng.uniform(0.3, 0.7, 500), None, held, None)
    assert "warning" not in same
    # a pool that also holds a level the benchmark leaves out (always solved): weighted by the
    # eval set's levels, no warning, although the pool's plain mean is far higher
    pool = np.concatenate([np.ones(500), rng.uniform(0.3, 0.7, 500)])
    lv_pool = np.array(["copy"] * 500 + ["band"] * 500)
    mixed = memorisation_check(pool, lv_pool, held, np.array(["band"] * 500))
    assert "warning" not in mixed and abs(mixed["gap"]) < 0.03
    assert "warning" in memorisation_check(pool, None, held, None)


def test_disjoint_warm_start_refuses_a_task_without_the_split():
    task = load_task("arith", {"num_train": 32, "num_eval": 8, "terms": [3], "num_sft": 0})
    tok = make_char_tokenizer()
    model = make_tiny_model(
        len(tok),
        TinyModelConfig(
            hidden_size=16, num_layers=1, num_heads=2, intermediate_size=32, max_positions=32
        ),
    )
    with pytest.raises(ValueError, match="no warm-start split"):
        sft(model, tok, task, WarmStartConfig(steps=1), seed=0, log=None)
    with pytest.raises(ValueError, match="'disjoint' or 'pool'"):
        sft(model, tok, task, WarmStartConfig(steps=1, data="both"), seed=0, log=None)


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_sampled_completion_logprob_is_the_teacher_forced_one(trained, temperature):
    # Outcome.logprob of a rollout whose completion is the answer + EOS is log P(answer + EOS),
    # the exact pass rate by teacher forcing: what likelihood-rank's p_hat reads (rollalloc.likelihood)
    from rollalloc.likelihood import sampled_mass
    from rollalloc.train.sampler import Sampler
    from rollalloc.types import Request

    task, model, tok = trained
    rows = np.arange(8)
    exact = exact_pass_rates(
        model,
        tok,
        [task.train["prompt"][i] for i in rows],
        [task.train["answer"][i] for i in rows],
        temperature=temperature,
    )
    gen = HFGenerator(model, tok, max_new_tokens=8)
    sampler = Sampler(gen, task, temperature=temperature)
    torch.manual_seed(2)
    n = 32
    out = sampler.generate(Request(0, 0, rows, np.full(len(rows), n), ("rollout",) * len(rows)))
    pids = out.prompt_ids
    want = {
        int(i): encode_prompts(tok, [task.train["answer"][i]])[0] + [tok.eos_token_id] for i in rows
    }
    exact_rows = [
        j
        for j, h in enumerate(out.handles)
        if sampler.store[int(h)].completion_tokens.tolist() == want[int(pids[j])]
    ]
    assert len(exact_rows) >= 8
    np.testing.assert_allclose(out.logprob[exact_rows], np.log(exact[pids[exact_rows]]), atol=2e-4)
    # equal completions share a key, and the distinct ones of a prompt hold at most probability 1
    m_c, m_w = sampled_mass(np.full(len(rows), n), out.completion_key, out.logprob, out.rewards)
    assert np.all(m_c + m_w <= 1 + 1e-4) and np.all(m_c <= exact + 1e-4)
