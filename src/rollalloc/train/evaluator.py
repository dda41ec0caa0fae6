"""loop.Evaluator: accuracy on the task's fixed held-out set, the same for every strategy.

`accuracy` is avg@k at the training temperature (the mean reward of k samples per prompt, as the
papers report); `accuracy_greedy` is the greedy answer's; `pass_at_k` is the share of prompts with
at least one correct sample.

With `metric="exact"` (tasks whose `answer` column is the one completion the verifier accepts, e.g.
`arith`), `accuracy` is instead the *exact* expected avg@k at the training temperature, k -> inf:

    accuracy_exact = mean_i  P_theta(answer_i + EOS | prompt_i)     (teacher forcing, logits / T)

the probability that one sample is exactly the reference answer. It is what avg@k estimates without
the sampling noise of k draws per prompt (a lower bound where the verifier accepts other spellings
too, e.g. leading whitespace; tests/train/test_exact_eval.py checks it against sampling), and it
costs one forward pass instead of k generations. Sampling uses its own seed, reset before every evaluation (common
random numbers): two policies are compared on the same random draws, and evaluating does not touch
the training RNG, so a run with more or fewer evaluations trains identically.
"""

from __future__ import annotations

import numpy as np
import torch

from rollalloc.tasks import Task
from rollalloc.train.model import Qwen2Runner, fast_path_supported
from rollalloc.train.sampler import decode, encode_prompts


def fork_rng(seed: int):
    """A context in which torch's RNG is seeded with `seed`, restored afterwards."""
    devices = [torch.cuda.current_device()] if torch.cuda.is_available() else []
    ctx = torch.random.fork_rng(devices=devices)

    class _Seeded:
        def __enter__(self):
            ctx.__enter__()
            torch.manual_seed(seed)

        def __exit__(self, *exc):
            return ctx.__exit__(*exc)

    return _Seeded()


def sample_rewards(
    generator,
    task: Task,
    split: str,
    indices: list[int],
    k: int,
    temperature: float,
    seed: int,
    chunk: int = 4096,
) -> np.ndarray:
    """Rewards of k samples of each prompt: shape (len(indices), k)."""
    cols = task.train if split == "train" else task.eval
    prompts = encode_prompts(generator.tokenizer, [cols["prompt"][i] for i in indices])
    expanded = [j for j in range(len(indices)) for _ in range(k)]  # prompt-major
    rewards = np.zeros(len(expanded))
    with fork_rng(seed):
        for s in range(0, len(expanded), chunk):
            part = expanded[s : s + chunk]
            tokens, _ = generator([prompts[j] for j in part], temperature=temperature)
            texts = decode(generator.tokenizer, tokens)
            rewards[s : s + len(part)] = task.score(texts, split, [indices[j] for j in part])
    return rewards.reshape(len(indices), k)


def pass_rate_histogram(pass_rates: np.ndarray) -> dict[str, int]:
    """Counts of per-prompt pass rates in 0 | (0,.25] | (.25,.5] | (.5,.75] | (.75,1) | 1."""
    p = np.asarray(pass_rates)
    return {
        "0": int((p == 0).sum()),
        "(0,.25]": int(((p > 0) & (p <= 0.25)).sum()),
        "(.25,.5]": int(((p > 0.25) & (p <= 0.5)).sum()),
        "(.5,.75]": int(((p > 0.5) & (p <= 0.75)).sum()),
        "(.75,1)": int(((p > 0.75) & (p < 1)).sum()),
        "1": int((p == 1).sum()),
    }


def answer_batch(
    prompts: list[list[int]], answers: list[list[int]], eos: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Teacher-forcing batch of prompt + answer + EOS: right-padded ids (B, L), attention mask
    (B, L), and the (B, L-1) mask of the targets that are answer tokens or EOS (the warm start's
    loss, the exact metric's log-probability)."""
    seqs = [p + a + [eos] for p, a in zip(prompts, answers)]
    B, L = len(seqs), max(len(x) for x in seqs)
    ids = torch.zeros((B, L), dtype=torch.long)
    attn = torch.zeros((B, L), dtype=torch.long)
    mask = torch.zeros((B, L - 1))
    for r, (seq, p) in enumerate(zip(seqs, prompts)):
        ids[r, : len(seq)] = torch.tensor(seq)
        attn[r, : len(seq)] = 1
        mask[r, len(p) - 1 : len(seq) - 1] = 1.0
    return ids, attn, mask


@torch.no_grad()
def exact_pass_rates(
    model,
    tokenizer,
    prompts: list[str],
    answers: list[str],
    *,
    temperature: float,
    device: str = "cpu",
    chunk: int = 1024,
    fast: bool = True,
) -> np.ndarray:
    """P(answer + EOS | prompt) under softmax(logits / temperature), one value per prompt: (N,).
    A Qwen2 policy takes the learner's fast path (`model.Qwen2Runner`, equal to the padded HF
    forward up to float rounding: tests/train/test_exact_eval.py); `fast=False` forces the latter."""
    if len(prompts) != len(answers):
        raise ValueError("exact_pass_rates: prompts and answers differ in length")
    p_ids = encode_prompts(tokenizer, prompts)
    a_ids = encode_prompts(tokenizer, [str(a) for a in answers])
    eos = tokenizer.eos_token_id
    was_training = model.training
    model.eval()
    out = np.zeros(len(prompts))
    if fast and fast_path_supported(model):  # the learner's forward: prompts without padding
        runner = Qwen2Runner(model)
        for s in range(0, len(prompts), chunk):
            comp = [np.array(a + [eos], dtype=np.int64) for a in a_ids[s : s + chunk]]
            logp, mask = runner.completion_logprobs(
                p_ids[s : s + chunk], np.arange(len(comp)), comp, temperature
            )  # (B, Cmax) each
            out[s : s + len(comp)] = torch.exp((logp * mask).sum(dim=1)).cpu().numpy()
        model.train(was_training)
        return out
    for s in range(0, len(prompts), chunk):
        ids, attn, mask = answer_batch(p_ids[s : s + chunk], a_ids[s : s + chunk], eos)
        B = len(ids)
        logits = model(input_ids=ids.to(device), attention_mask=attn.to(device)).logits
        logp = torch.log_softmax(logits[:, :-1].float() / temperature, dim=-1)  # (B, L-1, V)
        tok = logp.gather(-1, ids[:, 1:].unsqueeze(-1).to(device)).squeeze(-1).cpu()  # (B, L-1)
        out[s : s + B] = torch.exp((tok * mask).sum(dim=1)).numpy()
    model.train(was_training)
    return out


class PoolPassRates:
    """The live policy's exact pass rate of pool prompts, `ids (P,) -> p (P,)`: what the oracles
    (`oracle`, `oracle-greedy`, rollalloc.sim.oracle) read as `success_prob` in a real run, where the
    simulator gives them its true p_i. Same quantity as the exact metric, on the pool:

        p_i = P_theta(answer_i + EOS | prompt_i)      under softmax(logits / T), T the sampling one

    A prompt's value is computed when asked and kept until the policy is `refresh` updates newer
    (`version()`: the learner's update count), so `refresh=1` is exact at every step and larger
    values trade staleness for time (the whole default-testbed pool, 4,096 prompts, is ~1.3 s on
    one core). A resumed run restarts with an empty cache: with `refresh > 1` its oracle may read
    values a few updates fresher than the unbroken run did."""

    def __init__(
        self,
        model,
        tokenizer,
        task: Task,
        *,
        temperature: float,
        version,
        refresh: int = 1,
        device: str = "cpu",
    ) -> None:
        if not getattr(task, "answer_is_completion", False):
            raise ValueError(
                "exact pool pass rates need a task whose answer column is the completion the "
                "verifier accepts (e.g. arith)"
            )
        if isinstance(refresh, bool) or not isinstance(refresh, int) or refresh < 1:
            raise ValueError(f"refresh must be an integer >= 1, got {refresh!r}")
        self.model, self.tokenizer, self.task = model, tokenizer, task
        self.temperature, self.device = temperature, device
        self.version, self.refresh = version, refresh
        self.value = np.zeros(task.num_train)  # (N,) cached p_i
        self.at = np.full(task.num_train, -(10**9), dtype=np.int64)  # (N,) version computed at
        self.computed = 0  # prompts evaluated so far (the oracle's cost, for tests and logs)

    def __repr__(self) -> str:
        return f"exact pool pass rates of the live policy (refresh {self.refresh})"

    def __call__(self, prompt_ids: np.ndarray) -> np.ndarray:
        ids = np.asarray(prompt_ids, dtype=np.int64).reshape(-1)  # (P,)
        if len(ids) and (ids.min() < 0 or ids.max() >= len(self.value)):
            raise ValueError(f"prompt ids must be in [0, {len(self.value)})")
        v = int(self.version())
        stale = np.unique(ids[v - self.at[ids] >= self.refresh])  # (S,)
        if len(stale):
            col = self.task.train
            self.value[stale] = exact_pass_rates(
                self.model,
                self.tokenizer,
                [col["prompt"][i] for i in stale],
                [col["answer"][i] for i in stale],
                temperature=self.temperature,
                device=self.device,
            )
            self.at[stale] = v
            self.computed += len(stale)
        return self.value[ids].copy()


class HeldOutEvaluator:
    def __init__(
        self,
        generator,
        task: Task,
        *,
        k: int = 4,
        temperature: float = 1.0,
        greedy: bool = True,
        seed: int = 1234,
        max_prompts: int | None = None,
        metric: str = "sampled",
    ) -> None:
        if metric not in ("sampled", "exact"):
            raise ValueError(f"eval_metric must be 'sampled' or 'exact', got {metric!r}")
        if metric == "exact" and not getattr(task, "answer_is_completion", False):
            raise ValueError(
                f"eval_metric='exact' needs a task whose answer column is the completion the "
                f"verifier accepts (task {task.name!r} does not declare answer_is_completion); "
                "use eval_metric='sampled'"
            )
        if metric == "exact" and getattr(generator, "model", None) is None:
            raise ValueError("eval_metric='exact' needs the policy in-process (backend 'hf')")
        if k < (0 if metric == "exact" else 1):
            raise ValueError(f"eval_k must be >= 1 (>= 0 with eval_metric='exact'), got {k}")
        self.metric = metric
        self.generator = generator
        self.task = task
        self.k = k
        self.temperature = temperature
        self.greedy = greedy
        self.seed = seed
        n = task.num_eval if max_prompts is None else min(max_prompts, task.num_eval)
        self.indices = list(range(n))
        self.prompts = encode_prompts(
            generator.tokenizer, [task.eval["prompt"][i] for i in self.indices]
        )

    @classmethod
    def from_config(cls, generator, task: Task, cfg) -> HeldOutEvaluator:
        """The held-out evaluator a TrainConfig describes (eval_k, temperature, seed, prompts)."""
        return cls(
            generator,
            task,
            k=cfg.eval_k,
            temperature=cfg.temperature,
            greedy=cfg.eval_greedy,
            seed=cfg.eval_seed,
            max_prompts=cfg.eval_prompts,
            metric=cfg.eval_metric,
        )

    def evaluate(self) -> dict[str, float]:
        out: dict[str, float] = {}
        levels = (
            np.array([self.task.eval["level"][i] for i in self.indices])
            if "level" in self.task.eval  # the arith task: accuracy per difficulty level
            else None
        )
        if self.metric == "exact":
            exact = exact_pass_rates(
                self.generator.model,
                self.generator.tokenizer,
                [self.task.eval["prompt"][i] for i in self.indices],
                [self.task.eval["answer"][i] for i in self.indices],
                temperature=self.temperature,
                device=getattr(self.generator, "device", "cpu"),
            )  # (N,)
            out["accuracy"] = out["accuracy_exact"] = float(exact.mean())
            if levels is not None:
                for lv in np.unique(levels):
                    out[f"accuracy_{lv}"] = float(exact[levels == lv].mean())
        if self.k > 0:
            rewards = sample_rewards(
                self.generator, self.task, "eval", self.indices, self.k, self.temperature, self.seed
            )  # (N, k)
            key = "accuracy" if self.metric == "sampled" else "accuracy_sampled"
            out[key] = float(rewards.mean())
            out["pass_at_k"] = float((rewards.max(axis=1) > 0).mean())
            if levels is not None and self.metric == "sampled":
                for lv in np.unique(levels):
                    out[f"accuracy_{lv}"] = float(rewards[levels == lv].mean())
        if self.greedy:
            tokens, _ = self.generator(self.prompts, temperature=1.0, greedy=True)
            texts = decode(self.generator.tokenizer, tokens)
            greedy = self.task.score(texts, "eval", self.indices)  # (N,)
            out["accuracy_greedy"] = float(greedy.mean())
        return out
