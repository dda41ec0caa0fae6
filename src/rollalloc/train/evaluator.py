"""loop.Evaluator: accuracy on the task's fixed held-out set, the same for every strategy.

`accuracy` is avg@k at the training temperature (the mean reward of k samples per prompt, as the
papers report); `accuracy_greedy` is the greedy answer's; `pass_at_k` is the share of prompts with
at least one correct sample. Sampling uses its own seed, reset before every evaluation (common
random numbers): two policies are compared on the same random draws, and evaluating does not touch
the training RNG, so a run with more or fewer evaluations trains identically.
"""

from __future__ import annotations

import numpy as np
import torch

from rollalloc.tasks import Task
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
    ) -> None:
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
            seed=cfg.eval_seed,
            max_prompts=cfg.eval_prompts,
        )

    def evaluate(self) -> dict[str, float]:
        rewards = sample_rewards(
            self.generator, self.task, "eval", self.indices, self.k, self.temperature, self.seed
        )  # (N, k)
        out = {
            "accuracy": float(rewards.mean()),
            "pass_at_k": float((rewards.max(axis=1) > 0).mean()),
        }
        if self.greedy:
            tokens, _ = self.generator(self.prompts, temperature=1.0, greedy=True)
            texts = decode(self.generator.tokenizer, tokens)
            greedy = self.task.score(texts, "eval", self.indices)  # (N,)
            out["accuracy_greedy"] = float(greedy.mean())
        if "level" in self.task.eval:  # the arith task: accuracy per difficulty level
            levels = np.array([self.task.eval["level"][i] for i in self.indices])
            for lv in np.unique(levels):
                out[f"accuracy_{lv}"] = float(rewards[levels == lv].mean())
        return out
