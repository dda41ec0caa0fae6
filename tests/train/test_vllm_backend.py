"""The vLLM backend against a fake `vllm` module (vLLM is not installed here, and needs a GPU).

The fake engine holds its own copy of the policy, loaded from the checkpoint directory as vLLM's
would be, samples with Hugging Face `generate`, and returns log-probs the way vLLM's
`logprobs_mode` says (vllm/config/model.py, ModelConfig.logprobs_mode): "raw_logprobs" (vLLM's
default) are of the logits before temperature, "processed_logprobs" of softmax(logits / T). Its
model's `load_weights` (the path TRL's colocate mode and rollalloc use) records every call.
"""

from __future__ import annotations

import json
import sys
import types
from dataclasses import dataclass

import numpy as np
import pytest
import torch

from rollalloc.train.learner import GRPOLearner, LearnerConfig, pack
from rollalloc.train.model import TinyModelConfig, load_policy, make_char_tokenizer, make_tiny_model
from rollalloc.train.sampler import MissingLogprobError, Sampler, VLLMGenerator, left_pad
from rollalloc.train.trainer import build_parts, train
from rollalloc.types import Request


@dataclass
class _Logprob:  # vllm.logprobs.Logprob
    logprob: float


@dataclass
class _Completion:  # vllm.outputs.CompletionOutput
    token_ids: list[int]
    logprobs: list[dict[int, _Logprob]] | None


@dataclass
class _RequestOutput:  # vllm.outputs.RequestOutput
    outputs: list[_Completion]


class _SamplingParams:
    def __init__(self, **kw) -> None:
        self.__dict__.update(kw)


class _EngineModel:
    """The engine's nn.Module side: `load_weights(iterable of (name, tensor))`."""

    def __init__(self, hf) -> None:
        self.hf = hf
        self.loads: list[dict[str, torch.Tensor]] = []

    def load_weights(self, items) -> None:
        sd = {k: v.detach().clone() for k, v in items}
        self.loads.append(sd)
        self.hf.load_state_dict(sd)


class FakeLLM:
    DEFAULT_LOGPROBS_MODE = "raw_logprobs"  # vLLM's ModelConfig default

    def __init__(self, model: str, tokenizer: str, **kwargs) -> None:
        self.kwargs = kwargs
        self.mode = kwargs.get("logprobs_mode", self.DEFAULT_LOGPROBS_MODE)
        self.hf, self.tok = load_policy(model)  # the engine's own copy of the starting weights
        self.hf.eval()
        self.engine_model = _EngineModel(self.hf)
        runner = types.SimpleNamespace(model=self.engine_model)
        worker = types.SimpleNamespace(model_runner=runner)
        self.llm_engine = types.SimpleNamespace(
            model_executor=types.SimpleNamespace(driver_worker=worker)
        )
        self.drop: dict[int, str] = {}  # rollout -> "rows" (no log-probs) or "token" (one missing)

    @torch.no_grad()
    def generate(self, prompts, params):
        ids, mask = left_pad([p["prompt_token_ids"] for p in prompts], self.tok.pad_token_id)
        greedy = params.temperature == 0
        eos = params.stop_token_ids[0]
        out = self.hf.generate(
            input_ids=ids,
            attention_mask=mask,
            do_sample=not greedy,
            temperature=None if greedy else params.temperature,
            top_k=None if greedy else 0,
            top_p=None if greedy else 1.0,
            max_new_tokens=params.max_tokens,
            pad_token_id=self.tok.pad_token_id,
            eos_token_id=eos,
            return_dict_in_generate=True,
            output_scores=True,
            output_logits=True,
        )
        new = out.sequences[:, ids.shape[1] :]  # (N, S)
        which = out.scores if self.mode == "processed_logprobs" else out.logits
        logp = torch.log_softmax(torch.stack(which, dim=1).float(), dim=-1)  # (N, S, V)
        results = []
        for i in range(len(prompts)):
            row = new[i].tolist()
            n = row.index(eos) + 1 if eos in row else len(row)
            rows = None
            if params.logprobs is not None and self.drop.get(i) != "rows":
                rows = [{t: _Logprob(float(logp[i, k, t]))} for k, t in enumerate(row[:n])]
                if self.drop.get(i) == "token":
                    rows[-1] = {}
            results.append(_RequestOutput([_Completion(row[:n], rows)]))
        return results


@pytest.fixture
def fake_vllm(monkeypatch):
    vllm = types.ModuleType("vllm")
    inputs = types.ModuleType("vllm.inputs")
    vllm.LLM, vllm.SamplingParams, vllm.inputs = FakeLLM, _SamplingParams, inputs
    inputs.TokensPrompt = lambda prompt_token_ids: {"prompt_token_ids": prompt_token_ids}
    monkeypatch.setitem(sys.modules, "vllm", vllm)
    monkeypatch.setitem(sys.modules, "vllm.inputs", inputs)
    return vllm


@pytest.fixture
def checkpoint(tmp_path):
    tok = make_char_tokenizer()
    model = make_tiny_model(len(tok), TinyModelConfig(32, 1, 2, 64, 32), seed=0)
    model.save_pretrained(tmp_path / "policy")
    tok.save_pretrained(tmp_path / "policy")
    return str(tmp_path / "policy")


def _sampler(checkpoint, temperature):
    from rollalloc.tasks import load_task

    _, tok = load_policy(checkpoint)
    task = load_task("arith", {"num_train": 16, "num_eval": 4, "terms": [2, 3]})
    gen = VLLMGenerator(checkpoint, tok, max_new_tokens=4)
    return gen, Sampler(gen, task, temperature=temperature)


def test_vllm_log_probs_are_the_processed_ones_the_learner_computes(fake_vllm, checkpoint):
    torch.manual_seed(0)
    gen, sampler = _sampler(checkpoint, temperature=0.5)
    out = sampler.generate(Request(0, 0, [0, 1, 2], [3, 2, 4], ("rollout",) * 3))
    # independent of the engine: the learner's log softmax(logits / 0.5) on the same tokens
    model, _ = load_policy(checkpoint)
    learner = GRPOLearner(model, sampler.store, LearnerConfig(temperature=0.5))
    ids, attn, mask, old = pack(sampler.store, out.handles)
    with torch.no_grad():
        logp = learner._logp(model.eval(), ids, attn)  # (R, L-1)
    assert torch.allclose(logp * mask, old * mask, atol=1e-4)
    assert (old * mask).abs().sum() > 0
    assert gen.llm.kwargs["logprobs_mode"] == "processed_logprobs"
    with pytest.raises(ValueError, match="logprobs_mode"):
        VLLMGenerator(checkpoint, gen.tokenizer, max_new_tokens=4, logprobs_mode="raw_logprobs")


@pytest.mark.parametrize("how", ["rows", "token"])
def test_a_missing_vllm_log_prob_raises_naming_the_rollout(fake_vllm, checkpoint, how):
    torch.manual_seed(0)
    gen, sampler = _sampler(checkpoint, temperature=1.0)
    gen.llm.drop = {2: how}
    with pytest.raises(MissingLogprobError, match=r"rollout 2 .*prompt id 1") as e:
        sampler.generate(Request(0, 0, [0, 1], [2, 2], ("rollout",) * 2))
    assert e.value.rollout == 2
    assert len(sampler.store) == 0  # nothing stored with a made-up 0.0


def _state(model) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def test_every_update_reaches_the_vllm_engine(fake_vllm, small_config):
    """Rollouts must come from the current policy: after N updates the engine got N weight loads,
    the last equal to the learner's weights, and on-policy ratios are 1 at every step."""
    steps = 3
    cfg = small_config(
        backend="vllm",
        max_steps=steps,
        temperature=0.7,
        learner={"num_minibatches": 1},  # one optimiser step per batch: fresh rollouts have ratio 1
    )
    parts = build_parts(cfg, log=None)
    engine = parts.sampler.generator.llm
    start = _state(engine.hf)
    train(cfg, parts=parts, log=lambda *_: None)
    loads = engine.engine_model.loads
    assert len(loads) == steps == parts.learner.version == parts.sampler.policy_version
    now = _state(parts.model)
    assert loads[-1].keys() == now.keys()
    assert all(torch.equal(loads[-1][k], now[k]) for k in now)
    assert all(torch.equal(v, now[k]) for k, v in _state(engine.hf).items())
    assert any(not torch.equal(start[k], now[k]) for k in now)  # the policy did move
    records = [json.loads(line) for line in open(f"{cfg.out}/steps.jsonl")]
    ratios = [r["learner"]["ratio_mean"] for r in records if r["trained_rollouts"]]
    assert len(ratios) == steps
    np.testing.assert_allclose(ratios, 1.0, atol=1e-4)
    # a restored checkpoint reaches the engine too: a resume syncs once, with the saved policy
    again = build_parts(cfg, log=None)
    train(cfg, resume=True, parts=again, log=lambda *_: None)
    reloads = again.sampler.generator.llm.engine_model.loads
    assert len(reloads) == 1 and again.sampler.policy_version == again.learner.version == steps
    assert all(torch.equal(reloads[0][k], now[k]) for k in now)
    assert all(torch.equal(v, now[k]) for k, v in _state(again.sampler.generator.llm.hf).items())
