"""Tokenizer round trip, behaviour log-probs vs the learner's, skip-zero-advantage exactness."""

from __future__ import annotations

import copy

import numpy as np
import torch
from transformers import AutoTokenizer, PreTrainedTokenizerFast

from rollalloc.train.learner import GRPOLearner, LearnerConfig, pack
from rollalloc.train.model import TinyModelConfig, make_char_tokenizer, make_tiny_model
from rollalloc.train.sampler import HFGenerator, Sampler
from rollalloc.types import Request


def test_char_tokenizer_save_load_round_trip(tmp_path):
    tok = make_char_tokenizer()
    text = "7+4-0-3= 11\nAbc!~"
    ids = tok(text, add_special_tokens=False)["input_ids"]
    assert len(ids) == len(text) and tok.decode(ids) == text
    tok.save_pretrained(tmp_path)
    loaded = AutoTokenizer.from_pretrained(tmp_path, local_files_only=True)
    assert isinstance(loaded, PreTrainedTokenizerFast)  # (TokenizersBackend in transformers 5)
    assert loaded(text, add_special_tokens=False)["input_ids"] == ids
    assert loaded.decode(ids) == text
    assert (loaded.pad_token_id, loaded.eos_token_id, loaded.padding_side) == (0, 1, "left")
    assert loaded("é", add_special_tokens=False)["input_ids"] == [loaded.unk_token_id]
    batch = loaded(["1+2=", "3="], padding=True, add_special_tokens=False)
    assert batch["input_ids"][1][:2] == [0, 0] and batch["attention_mask"][1] == [0, 0, 1, 1]


def _toy(task_cfg=None):
    from rollalloc.tasks import load_task

    torch.manual_seed(0)
    tok = make_char_tokenizer()
    model = make_tiny_model(len(tok), TinyModelConfig(32, 1, 2, 64, 32), seed=0)
    task = load_task("arith", task_cfg or {"num_train": 16, "num_eval": 4, "terms": [2, 3]})
    gen = HFGenerator(model, tok, max_new_tokens=4)
    return model, tok, task, Sampler(gen, task, temperature=1.0)


def test_behaviour_logprobs_match_the_learners_logprobs():
    model, tok, task, sampler = _toy()
    out = sampler.generate(Request(0, 0, [0, 1, 2], [3, 2, 4], ("rollout",) * 3))
    assert len(out) == 9 and sorted(out.handles.tolist()) == list(range(9))
    learner = GRPOLearner(model, sampler.store, LearnerConfig())
    ids, attn, mask, old = pack(sampler.store, out.handles)
    with torch.no_grad():
        model.eval()
        logp = learner._logp(model, ids, attn)  # (R, L-1)
    assert torch.allclose(logp * mask, old * mask, atol=1e-4)
    r = sampler.store[int(out.handles[0])]
    assert r.policy_version == 0 and np.all(r.logprobs <= 0) and len(r.logprobs) >= 1


def test_skipping_zero_advantage_rollouts_is_exact():
    from rollalloc.types import StepStats, TrainBatch

    model, tok, task, sampler = _toy()
    out = sampler.generate(Request(0, 0, [0, 1, 2], [4, 4, 4], ("rollout",) * 3))
    rewards = np.array([1, 0, 1, 0, 1, 1, 1, 1, 0, 0, 0, 1], dtype=float)  # group 2: zero variance
    stats = StepStats(0, 0, 1, 3, {}, {}, 0, 12, 12, 0, 2 / 3, 0.1)
    batch = TrainBatch(
        0,
        np.array([0, 1, 2]),
        np.array([4, 4, 4]),
        out.handles,
        rewards,
        np.array(["rollout"] * 12),
        np.zeros(0, dtype=np.int64),
        stats,
    )
    results = []
    start = copy.deepcopy(model)
    for skip in (True, False):
        m = copy.deepcopy(start)
        learner = GRPOLearner(
            m,
            sampler.store,
            LearnerConfig(skip_zero_advantage=skip, num_minibatches=2, max_grad_norm=0),
            seed=3,
        )
        # plain SGD shows the gradients themselves: Adam would blow up float noise in gradients
        # that are exactly zero in exact arithmetic (e.g. the key bias under softmax)
        learner.optimizer = torch.optim.SGD(m.parameters(), lr=0.1)
        metrics = learner.update(batch)
        results.append((m, metrics))
    (m1, r1), (m2, r2) = results
    assert r1["active_rollouts"] == 8 and r2["active_rollouts"] == 12
    for (k, a), (_, b) in zip(m1.state_dict().items(), m2.state_dict().items()):
        assert torch.allclose(a, b, atol=1e-6), k


def test_an_all_equal_group_of_inexact_rewards_is_skipped_like_any_zero_variance_group():
    """Seven rewards of 0.7 have variance 0: their rollouts carry no signal and must be skipped
    exactly like seven rewards of 1 (float32 used to give them advantages of +0.056)."""
    from rollalloc.types import StepStats, TrainBatch

    model, tok, task, sampler = _toy()
    out = sampler.generate(Request(0, 0, [0, 1], [7, 4], ("rollout",) * 2))
    start = copy.deepcopy(model)
    results = []
    for level in (0.7, 1.0):
        rewards = np.array([level] * 7 + [1.0, 0.0, 1.0, 0.0])
        stats = StepStats(0, 0, 1, 2, {}, {}, 0, 11, 11, 0, 0.5, 0.1)
        batch = TrainBatch(
            0,
            np.array([0, 1]),
            np.array([7, 4]),
            out.handles,
            rewards,
            np.array(["rollout"] * 11),
            np.zeros(0, dtype=np.int64),
            stats,
        )
        m = copy.deepcopy(start)
        learner = GRPOLearner(m, sampler.store, LearnerConfig(num_minibatches=1), seed=3)
        results.append((m, learner.update(batch)))
    (m1, r1), (m2, r2) = results
    assert r1["active_rollouts"] == r2["active_rollouts"] == 4
    for (k, a), (_, b) in zip(m1.state_dict().items(), m2.state_dict().items()):
        assert torch.equal(a, b), k  # the reward level of a zero-variance group changes nothing
