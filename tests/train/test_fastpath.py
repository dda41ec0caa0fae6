"""The trainer's fast path (model.Qwen2Runner) computes what the generic Hugging Face path does.

- learner: prefix-shared, unpadded log-probs == HF forward on padded prompt+completion rows, and the
  GRPO loss and its gradients equal on a fixed batch (clip, dual clip and KL all binding);
  a whole update (mini-batches, recompute, KL) leaves the same parameters as the generic learner;
- generator: the KV-cache sampling loop draws the same tokens as `generate` under the same seed
  (rows that finish early leave the batch, the RNG stream must not shift), its behaviour log-probs
  equal a teacher-forced recompute at temperature T, and its first tokens follow softmax(logits/T)
  (chi-square).
"""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
import torch

from rollalloc.train.learner import GRPOLearner, LearnerConfig, layout, pack
from rollalloc.train.loss import policy_loss, token_logprobs
from rollalloc.train.model import (
    Qwen2Runner,
    TinyModelConfig,
    fast_path_supported,
    make_char_tokenizer,
    make_tiny_model,
)
from rollalloc.train.sampler import HFGenerator, Rollout, RolloutStore, Sampler
from rollalloc.types import Request, StepStats, TrainBatch

EOS = 1


def _model(dtype=torch.float32, eos_boost: float = 0.0, seed: int = 0):
    """A random tiny Qwen2 (2 layers, 4 heads); eos_boost > 0 makes EOS likely at every step, so
    that rows end at different steps."""
    tok = make_char_tokenizer()
    model = make_tiny_model(len(tok), TinyModelConfig(32, 2, 4, 64, 64), seed=seed).to(dtype)
    if eos_boost:
        with torch.no_grad():
            ids = torch.randint(3, len(tok), (16, 12), generator=torch.Generator().manual_seed(1))
            h = model(input_ids=ids, output_hidden_states=True).hidden_states[-1]  # after norm
            u = h.reshape(-1, h.shape[-1]).mean(0)
            # tied weights: row EOS is also EOS's input embedding, never fed (rows end at EOS)
            model.lm_head.weight[EOS] = eos_boost * u / u.pow(2).sum()
    model.eval()
    return model, tok


def _batch(seed: int = 0, vocab: int = 99):
    """Random prompts (lengths 3..9, two prompts of equal length) and ragged groups of completions
    (lengths 1..6, some ending in EOS)."""
    rng = np.random.default_rng(seed)
    plens = [3, 9, 5, 5, 7]
    prompts = [rng.integers(3, vocab, size=n) for n in plens]
    store = RolloutStore()
    handles = []
    for g, p in enumerate(prompts):
        for _ in range([3, 1, 4, 2, 5][g]):
            C = int(rng.integers(1, 7))
            c = rng.integers(3, vocab, size=C)
            if rng.random() < 0.5:
                c[-1] = EOS
            lp = -rng.random(C).astype(np.float32) * 3
            handles.extend(store.add([Rollout(g, p.astype(np.int64), c, lp, 0.0, 0)]).tolist())
    rng.shuffle(handles)  # rollouts of a group not contiguous
    return store, np.array(handles)


def _hf_rows(model, store, handles, T):
    ids, attn, mask, old = pack(store, handles)
    logp = token_logprobs(model(input_ids=ids, attention_mask=attn).logits[:, :-1], ids[:, 1:], T)
    return logp, mask, old


def _to_rows(x_c, store, handles, L1):
    """(R, Cmax) completion-aligned -> (R, L-1) row-aligned, as `pack` lays them out."""
    out = torch.zeros((len(handles), L1), dtype=x_c.dtype)
    for i, h in enumerate(handles.tolist()):
        P, C = len(store[h].prompt_tokens), len(store[h].completion_tokens)
        out[i, P - 1 : P - 1 + C] = x_c[i, :C]
    return out


def test_tiny_model_takes_the_fast_path():
    model, tok = _model()
    assert fast_path_supported(model)
    assert not fast_path_supported(torch.nn.Linear(2, 2))
    assert HFGenerator(model, tok, max_new_tokens=2).runner is not None
    # a checkpoint whose generation_config adds a logits processor keeps `generate`
    model.generation_config.repetition_penalty = 1.2
    assert HFGenerator(model, tok, max_new_tokens=2).runner is None


@pytest.mark.parametrize("T", [1.0, 0.7])
def test_prefix_shared_logprobs_equal_the_hf_forward(T):
    for dtype, tol in ((torch.float64, 1e-10), (torch.float32, 2e-6)):
        model, _ = _model(dtype)
        store, handles = _batch()
        with torch.no_grad():
            ref, mask, _ = _hf_rows(model, store, handles, T)
            prompts, group, comps, old = layout(store, handles)
            assert len(prompts) == 5 and old.shape == (len(handles), 6)
            lp, cmask = Qwen2Runner(model).completion_logprobs(prompts, group, comps, T)
        L1 = ref.shape[1]
        assert torch.equal(_to_rows(cmask, store, handles, L1), mask)
        got = _to_rows(lp, store, handles, L1)
        assert (got - ref * mask).abs().max() < tol, dtype
        assert torch.equal(_to_rows(old, store, handles, L1).float(), pack(store, handles)[3])


def test_loss_and_gradients_equal_the_hf_path():
    """The GRPO loss (token-mean, clip 0.2/0.28, dual clip 3.0, k3 KL) and every parameter's
    gradient on a fixed batch, generic padded path vs prefix-shared path, in float64 and float32."""
    # (both paths take log_softmax in float32, so float64 agrees to ~1e-8, not 1e-15)
    for dtype, tol in ((torch.float64, 1e-7), (torch.float32, 1e-6)):
        model, _ = _model(dtype)
        store, handles = _batch(seed=3)
        R = len(handles)
        adv = torch.tensor(np.random.default_rng(0).normal(size=R), dtype=dtype)
        kw = dict(clip_low=0.2, clip_high=0.28, clip_ratio_c=3.0, kl_coef=0.05, num_tokens=40.0)
        with torch.no_grad():
            logp0, mask, _ = _hf_rows(model, store, handles, 0.8)
        # old log-probs around the current ones so that every clip branch binds somewhere
        noise = torch.tensor(np.random.default_rng(1).normal(scale=1.5, size=logp0.shape))
        old_rows = (logp0 + noise.to(dtype)) * mask
        ref_rows = (logp0 - 0.3 * noise.to(dtype)) * mask

        model.zero_grad()
        logp, mask, _ = _hf_rows(model, store, handles, 0.8)
        loss_a, st_a = policy_loss(logp, old_rows, adv, mask, ref_logp=ref_rows, **kw)
        loss_a.backward()
        grads_a = [p.grad.clone() for p in model.parameters()]
        assert st_a["clip_frac_dual"] > 0 and st_a["clip_frac_high"] > 0

        model.zero_grad()
        prompts, group, comps, _ = layout(store, handles)
        lp, cmask = Qwen2Runner(model).completion_logprobs(prompts, group, comps, 0.8)
        old_c = torch.zeros(lp.shape, dtype=old_rows.dtype)
        ref_c = torch.zeros(lp.shape, dtype=old_rows.dtype)
        for i, h in enumerate(handles.tolist()):
            P, C = len(store[h].prompt_tokens), len(store[h].completion_tokens)
            old_c[i, :C] = old_rows[i, P - 1 : P - 1 + C]
            ref_c[i, :C] = ref_rows[i, P - 1 : P - 1 + C]
        loss_b, st_b = policy_loss(lp, old_c, adv, cmask, ref_logp=ref_c, **kw)
        loss_b.backward()
        assert abs(loss_a.item() - loss_b.item()) < tol
        for k in st_a:
            assert abs(float(st_a[k]) - float(st_b[k])) < tol, k
        for (name, p), ga in zip(model.named_parameters(), grads_a):
            scale = max(1.0, float(ga.abs().max()))
            assert (p.grad - ga).abs().max() < tol * scale, name


def _sampler(model, tok, fast=True, T=1.0):
    from rollalloc.tasks import load_task

    task = load_task("arith", {"num_train": 16, "num_eval": 4, "terms": [2, 3]})
    gen = HFGenerator(model, tok, max_new_tokens=5, fast=fast)
    assert (gen.runner is not None) == fast
    return Sampler(gen, task, temperature=T)


@pytest.mark.parametrize(
    "cfg",
    [
        dict(num_minibatches=3),
        dict(num_minibatches=2, old_logprobs="recompute"),
        dict(num_minibatches=2, kl_coef=0.1),
        dict(num_minibatches=1, skip_zero_advantage=False, clip_ratio_c=None),
    ],
)
def test_learner_update_equals_the_generic_update(cfg):
    """Two updates on the same batches: parameters and metrics of the fast learner equal the
    generic learner's to float tolerance."""
    base, tok = _model(eos_boost=4.0)
    sampler = _sampler(copy.deepcopy(base), tok, T=0.9)
    torch.manual_seed(0)
    out = sampler.generate(Request(0, 0, [0, 1, 2, 3], [4, 3, 4, 5], ("rollout",) * 4))
    rewards = np.random.default_rng(0).integers(0, 2, size=len(out)).astype(float)
    rewards[:4] = 1.0  # group 0 zero variance
    stats = StepStats(0, 0, 1, 4, {}, {}, 0, 16, 16, 0, 0.75, 0.1)
    batch = TrainBatch(
        0,
        np.array([0, 1, 2, 3]),
        np.array([4, 3, 4, 5]),
        out.handles,
        rewards,
        np.array(["rollout"] * 16),
        np.zeros(0, dtype=np.int64),
        stats,
    )
    results = []
    for fast in (False, True):
        m = copy.deepcopy(base).train()
        sampler.generator.model = m
        learner = GRPOLearner(
            m, sampler.store, LearnerConfig(lr=1e-2, temperature=0.9, **cfg), seed=3, fast=fast
        )
        assert (learner.runner is not None) == fast
        metrics = [learner.update(batch) for _ in range(2)]
        results.append((m, metrics))
    (ma, ra), (mb, rb) = results
    # Adam divides by sqrt(v): a gradient entry near 0 turns float noise into a visible part of a
    # step, so the bound is 1% of one step (lr); the gradients themselves agree to 1e-6 (above)
    for pa, pb in zip(ma.parameters(), mb.parameters()):
        assert (pa - pb).abs().max() < 0.01 * 1e-2
    for a, b in zip(ra, rb):
        assert a.keys() == b.keys()
        for k in a:
            assert abs(a[k] - b[k]) < 1e-5 * max(1.0, abs(a[k])), k


@pytest.mark.parametrize("T", [1.0, 0.6, 1.7])
def test_sampling_loop_draws_what_generate_draws(T):
    """Same seed, same prompts (repeated, as a group's rollouts are): the same tokens as HF
    `generate` with top_k=0/top_p=1 at temperature T, including rows that end early, and
    log-probs equal to generate's processed scores."""
    model, tok = _model(eos_boost=5.0)
    rng = np.random.default_rng(0)
    prompts = [list(rng.integers(3, 99, size=n)) for n in (4, 9, 6, 6, 2)]
    prompts = [p for p in prompts for _ in range(6)] + [prompts[1]]
    fast = HFGenerator(model, tok, max_new_tokens=6)
    slow = HFGenerator(model, tok, max_new_tokens=6, fast=False)
    assert fast.runner is not None and slow.runner is None
    for seed in range(3):
        torch.manual_seed(seed)
        ta, la = slow(prompts, temperature=T)
        torch.manual_seed(seed)
        tb, lb = fast(prompts, temperature=T)
        after = torch.rand(1)  # the RNG stream continues at the same place
        torch.manual_seed(seed)
        slow(prompts, temperature=T)
        assert torch.equal(after, torch.rand(1))
        lens = {len(t) for t in ta}
        assert len(lens) >= 3, "the premise: rows end at different steps"
        for a, b, x, y in zip(ta, tb, la, lb):
            assert np.array_equal(a, b)
            assert np.abs(x - y).max() < 1e-5
    ga, _ = slow(prompts, temperature=T, greedy=True)
    gb, lgb = fast(prompts, temperature=T, greedy=True)
    assert all(np.array_equal(a, b) for a, b in zip(ga, gb))
    assert all(np.all(x == 0) for x in lgb)


def test_behaviour_logprobs_equal_a_teacher_forced_recompute():
    model, tok = _model(eos_boost=3.0)
    sampler = _sampler(model, tok, T=0.7)
    torch.manual_seed(0)
    out = sampler.generate(Request(0, 0, [0, 1, 2, 5], [4, 3, 5, 2], ("rollout",) * 4))
    with torch.no_grad():
        logp, mask, old = _hf_rows(model, sampler.store, out.handles, 0.7)
    assert float(mask.sum()) > len(out)  # some completions longer than one token
    assert (logp * mask - old * mask).abs().max() < 1e-5


def test_first_tokens_follow_softmax_over_temperature():
    """Chi-square of the first sampled token's counts (one prompt, 6000 rows) against the exact
    probabilities softmax(logits / T), p < 1e-4 bound (Wilson-Hilferty); a wrong temperature fails."""
    model, tok = _model(seed=2)
    with torch.no_grad():  # a peaked distribution (random init is nearly uniform)
        model.lm_head.weight.mul_(3.0)
    T = 0.5
    prompt = [5, 17, 30, 8]
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([prompt])).logits[0, -1].double()

    def chi2_stat(probs, counts, n):
        exp = probs * n
        keep = exp >= 5
        o, e = counts[keep].astype(float), exp[keep]
        if (~keep).any():  # pool the rare tokens
            o, e = np.append(o, counts[~keep].sum()), np.append(e, exp[~keep].sum())
        return float(((o - e) ** 2 / e).sum()), len(o) - 1

    def critical(df, z=3.719):  # upper 1e-4 quantile of chi2(df), Wilson-Hilferty
        return df * (1 - 2 / (9 * df) + z * math.sqrt(2 / (9 * df))) ** 3

    gen = HFGenerator(model, tok, max_new_tokens=1)
    n = 6000
    torch.manual_seed(0)
    toks, _ = gen([prompt] * n, temperature=T)
    counts = np.bincount(np.array([t[0] for t in toks]), minlength=logits.shape[0])
    probs = torch.softmax(logits / T, -1).numpy()
    stat, df = chi2_stat(probs, counts, n)
    assert stat < critical(df), (stat, df)
    wrong = torch.softmax(logits / (T * 1.3), -1).numpy()
    stat_w, df_w = chi2_stat(wrong, counts, n)
    assert stat_w > critical(df_w), (stat_w, df_w)
