"""`arith`: the built-in testbed task, chain sums of single digits of mixed length (docs/testbed.md).

A prompt is the bare expression and `=`, e.g. `7+4-0-3=`; the answer is the integer (`8`). The
difficulty of a prompt for a small model grows with its number of terms, so a pool that mixes
lengths spreads per-prompt pass rates from ~0 to ~1, the regime where allocation matters.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from rollalloc.tasks import Task
from rollalloc.tasks.safe_parse import parse_number


@dataclass
class ArithConfig:
    """The mix of the `arith` task (see docs/testbed.md for why these defaults)."""

    terms: list[int] = field(default_factory=lambda: [2, 3, 4, 5, 6, 7])
    """Number of terms of a chain sum, one entry per difficulty level."""
    weights: list[float] | None = None
    """Relative share of each level in the train pool and the eval set (None: equal shares)."""
    eval_weights: list[float] | None = None
    """Relative share of each level in the eval set, when it differs from the pool's (None: as
    `weights`): e.g. 0 for a level that is in the pool but not in the benchmark."""
    digits: list[int] | None = None
    """Digits of the operands of each level (None: 1 everywhere); a d-digit operand is drawn
    uniformly from 0..10^d - 1."""
    num_train: int = 4096
    """Prompts in the training pool."""
    num_eval: int = 512
    """Prompts in the held-out evaluation set (disjoint from the pool)."""
    num_sft: int = 8192
    """Warm-start examples, drawn after the pool and disjoint from it and from the eval set (a
    level whose prompts are used up contributes fewer; docs/testbed.md)."""
    sft_weights: list[float] | None = None
    """Relative share of each level among the warm-start examples (None: as `weights`)."""
    max_answer_digits: int = 6
    """A completion with more digits than this scores 0 without being parsed further."""


def arith_reward(completions: list[str], *, answer: list[str], **_: Any) -> list[float]:
    """1.0 where the completion is exactly the integer answer (whitespace aside), else 0.0."""
    out = []
    for text, ans in zip(completions, answer):
        value = parse_number(text, max_digits=ArithConfig.max_answer_digits)
        out.append(float(value is not None and value == parse_number(ans)))
    return out


def _chain(rng: np.random.Generator, terms: int, digits: int) -> tuple[str, int]:
    """A chain prompt (`12+3-45=`) and its value."""
    nums = rng.integers(0, 10**digits, size=terms)
    ops = rng.choice(["+", "-"], size=terms - 1)
    expr = str(nums[0]) + "".join(o + str(n) for o, n in zip(ops, nums[1:]))
    value = int(nums[0]) + sum(int(n) if o == "+" else -int(n) for o, n in zip(ops, nums[1:]))
    return expr + "=", value


def make_arith_task(config: dict[str, Any], *, seed: int = 0) -> Task:
    unknown = set(config) - set(ArithConfig.__dataclass_fields__)
    if unknown:
        raise ValueError(f"arith: unknown config field(s) {sorted(unknown)}")
    cfg = ArithConfig(**config)
    if cfg.weights is None:
        cfg.weights = [1.0] * len(cfg.terms)
    if cfg.digits is None:
        cfg.digits = [1] * len(cfg.terms)
    if len(cfg.digits) != len(cfg.terms) or min(cfg.digits) < 1 or max(cfg.digits) > 6:
        raise ValueError("arith: digits must have one entry (1..6) per level of terms")
    if len(cfg.terms) != len(cfg.weights) or not cfg.terms:
        raise ValueError("arith: terms and weights must be non-empty and of equal length")
    if min(cfg.terms) < 1 or min(cfg.weights) < 0 or sum(cfg.weights) <= 0:
        raise ValueError("arith: terms must be >= 1 and weights >= 0 with a positive sum")
    if cfg.eval_weights is not None and (
        len(cfg.eval_weights) != len(cfg.terms)
        or min(cfg.eval_weights) < 0
        or sum(cfg.eval_weights) <= 0
    ):
        raise ValueError("arith: eval_weights must have one entry >= 0 per level, positive sum")
    rng = np.random.default_rng([seed, 20261129])
    probs = np.asarray(cfg.weights, dtype=float) / sum(cfg.weights)
    eval_w = cfg.weights if cfg.eval_weights is None else cfg.eval_weights
    eval_probs = np.asarray(eval_w, dtype=float) / sum(eval_w)

    def draw(
        n: int, exclude: set[str], probs: np.ndarray, unique: bool = False, rng=rng
    ) -> dict[str, list[Any]]:
        cols: dict[str, list[Any]] = {"prompt": [], "answer": [], "terms": [], "level": []}
        seen: set[str] = set()
        used_up: set[int] = set()
        levels = rng.choice(len(cfg.terms), size=n, p=probs)
        for level in levels:
            if level in used_up:
                continue
            # Never a prompt of the excluded set; prefer unseen ones, but short chains have
            # few distinct prompts (2 terms: 200), so after 100 tries a repeat is accepted
            # (unique: the draw is skipped instead, the warm-start split).
            for attempt in range(1_000 if unique else 100_000):
                prompt, value = _chain(rng, cfg.terms[level], cfg.digits[level])
                if prompt not in exclude and (
                    prompt not in seen or (attempt >= 100 and not unique)
                ):
                    break
            else:
                if unique:
                    used_up.add(int(level))  # this level's prompts are used up
                    continue
                raise ValueError(f"arith: cannot draw a {cfg.terms[level]}-term prompt")
            seen.add(prompt)
            cols["prompt"].append(prompt)
            cols["answer"].append(str(value))
            cols["terms"].append(int(cfg.terms[level]))
            cols["level"].append(f"{cfg.terms[level]}x{cfg.digits[level]}d")
        return cols

    eval_cols = draw(cfg.num_eval, set(), eval_probs)
    train_cols = draw(cfg.num_train, set(eval_cols["prompt"]), probs)
    # drawn last and from a stream of its own, so the pool and the eval set are those of a config
    # without it
    sft_w = cfg.weights if cfg.sft_weights is None else cfg.sft_weights
    if len(sft_w) != len(cfg.terms) or min(sft_w) < 0 or sum(sft_w) <= 0:
        raise ValueError("arith: sft_weights must have one entry >= 0 per level, positive sum")
    sft_cols = (
        draw(
            cfg.num_sft,
            set(eval_cols["prompt"]) | set(train_cols["prompt"]),
            np.asarray(sft_w, dtype=float) / sum(sft_w),
            unique=True,
            rng=np.random.default_rng([seed, 20261129, 1]),
        )
        if cfg.num_sft > 0
        else None
    )
    return Task(
        "arith",
        train_cols,
        eval_cols,
        [arith_reward],
        config=asdict(cfg),
        sft=sft_cols if sft_cols and sft_cols["prompt"] else None,
        answer_is_completion=True,
    )
