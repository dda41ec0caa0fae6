"""benchmarks/measure_group_value.py: the gradient of the exact held-out accuracy per level is the
derivative of the evaluator's own accuracy (a central finite difference of exact_pass_rates)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from rollalloc.train.evaluator import exact_pass_rates  # noqa: E402
from rollalloc.train.model import TinyModelConfig, make_char_tokenizer, make_tiny_model  # noqa: E402


def _tiny(width: int):
    """A character tokenizer and a freshly initialised 1-layer Qwen2 of hidden size `width`."""
    tok = make_char_tokenizer()
    cfg = TinyModelConfig(
        hidden_size=width, num_layers=1, num_heads=2, intermediate_size=2 * width,
        max_positions=width,
    )  # fmt: skip
    return tok, make_tiny_model(len(tok), cfg)


def test_heldout_gradient_is_the_derivative_of_the_exact_accuracy(load_benchmark):
    mgv = load_benchmark("measure_group_value")
    tok, model = _tiny(32)
    model = model.double()
    prompts = ["1+2=", "3+4=", "5+1+2=", "9+9=", "2+2+2="]
    answers = ["3", "7", "8", "18", "6"]
    levels = ["a", "a", "b", "a", "b"]
    task = SimpleNamespace(
        eval={"prompt": prompts, "answer": answers, "level": levels}, num_eval=len(prompts)
    )
    cfg = SimpleNamespace(eval_prompts=None, temperature=1.0)
    params = [p for p in model.parameters() if p.requires_grad]
    grads, acc = mgv.heldout_gradients(cfg, model, tok, task, params)
    rng = np.random.default_rng(0)
    d = [torch.as_tensor(rng.standard_normal(p.shape)) for p in params]
    flat_d = torch.cat([x.reshape(-1) for x in d]).numpy()
    eps = (
        1e-4  # |d| ~ 100: large enough above the fast path's float32 rounding, small for curvature
    )

    def accuracy(sign):  # the evaluator's exact pass rates at theta + sign eps d, by level
        with torch.no_grad():
            for p, x in zip(params, d):
                p.add_(sign * eps * x)
            a = exact_pass_rates(model, tok, prompts, answers, temperature=1.0)
            for p, x in zip(params, d):
                p.sub_(sign * eps * x)
        return {lv: a[np.array(levels) == lv].mean() for lv in ("a", "b")}

    plus, minus = accuracy(1.0), accuracy(-1.0)
    base = exact_pass_rates(model, tok, prompts, answers, temperature=1.0)
    for lv in ("a", "b"):
        fd = (plus[lv] - minus[lv]) / (2 * eps)
        assert grads[lv] @ flat_d == pytest.approx(fd, rel=1e-3)
        assert acc[lv][0] == pytest.approx(base[np.array(levels) == lv].mean())
        assert acc[lv][1] == levels.count(lv)


def test_adam_preconditioner_is_one_over_the_root_of_the_bias_corrected_second_moment(
    load_benchmark, tmp_path
):
    # two AdamW steps on a tiny model; v_hat restated from the recorded gradients:
    # v = (1 - b2) (b2 g1^2 + g2^2), v_hat = v / (1 - b2^2); P = 1 / (sqrt(v_hat) + eps)
    mgv = load_benchmark("measure_group_value")
    tok, model = _tiny(16)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, betas=(0.9, 0.99), eps=1e-6)
    ids = torch.tensor([[3, 4, 5, 6, 7]])
    grads = []
    for _ in range(2):
        opt.zero_grad()
        model(input_ids=ids, labels=ids).loss.backward()
        grads.append([p.grad.detach().double().clone() for p in model.parameters()])
        opt.step()
    torch.save({"learner": {"optimizer": opt.state_dict()}}, tmp_path / "trainer.pt")
    got = mgv.adam_preconditioner(str(tmp_path), model)
    v = [(1 - 0.99) * (0.99 * a**2 + b**2) / (1 - 0.99**2) for a, b in zip(*grads)]
    want = torch.cat([(1 / (x.sqrt() + 1e-6)).reshape(-1) for x in v]).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5)
    assert mgv.adam_preconditioner("warm", model) is None
