"""Warm start: supervised fine-tuning on the task's reference answers, cached on disk by its config.

RL from a random policy learns nothing (every group all-wrong); the warm start makes a policy that
solves some prompts, fails others and is uncertain on the rest. Every strategy of a comparison starts
from the same cached checkpoint: the cache key is a hash of everything that determines it (task and
its config, model, SFT settings, seed), and a finished checkpoint is written to a temporary
directory and renamed into place, so a crashed or concurrent warm start never leaves a half-written
one behind.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rollalloc.tasks import Task
from rollalloc.train.evaluator import pass_rate_histogram, sample_rewards
from rollalloc.train.model import save_policy
from rollalloc.train.sampler import encode_prompts

CACHE_FORMAT = 1


@dataclass
class WarmStartConfig:
    """Supervised warm start on (prompt, answer) pairs of the training pool."""

    steps: int = 600
    """Optimiser steps (0: no warm start, RL starts from the model as loaded)."""
    batch_size: int = 256
    """Sequences per step."""
    lr: float = 2e-3
    """Peak AdamW learning rate, cosine-decayed to lr_min_ratio * lr."""
    lr_min_ratio: float = 0.1
    """Final learning rate as a share of the peak."""
    warmup_steps: int = 20
    """Linear warmup steps."""
    histogram_prompts: int = 256
    """Pool prompts whose pass rate is measured after the warm start."""
    histogram_samples: int = 16
    """Samples per prompt for that histogram."""
    levels: list[str] | None = None
    """Train only on pool prompts of these difficulty levels (the task's `level` column, e.g.
    arith's "2x1d"); None: on the whole pool."""


def _without_none(x: Any) -> Any:
    if isinstance(x, dict):
        return {k: _without_none(v) for k, v in x.items() if v is not None}
    if isinstance(x, list | tuple):
        return [_without_none(v) for v in x]
    return x


def cache_key(payload: dict[str, Any]) -> str:
    """Hash of everything that determines a warm start. Fields set to None are left out, so that an
    option added later with the default None keeps the keys (and caches) of earlier configs."""
    payload = _without_none(payload)
    blob = json.dumps({"format": CACHE_FORMAT, **payload}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:20]


def sft(
    model, tokenizer, task: Task, cfg: WarmStartConfig, seed: int, device: str = "cpu", log=print
) -> dict[str, float]:
    """Train `model` in place on prompt -> answer + EOS (loss on the answer tokens only)."""
    rows = list(range(task.num_train))
    if cfg.levels is not None:
        if "level" not in task.train:
            raise ValueError(f"warm_start.levels: task {task.name!r} has no 'level' column")
        rows = [i for i, lv in enumerate(task.train["level"]) if lv in set(cfg.levels)]
        if not rows:
            known = sorted(set(task.train["level"]))
            raise ValueError(f"warm_start.levels {cfg.levels} match no prompt (levels: {known})")
    prompts = encode_prompts(tokenizer, [task.train["prompt"][i] for i in rows])
    answers = encode_prompts(tokenizer, [task.train["answer"][i] for i in rows])
    eos = tokenizer.eos_token_id
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=0.0)

    def lr_at(s: int) -> float:
        if s < cfg.warmup_steps:
            return cfg.lr * (s + 1) / cfg.warmup_steps
        frac = (s - cfg.warmup_steps) / max(1, cfg.steps - cfg.warmup_steps)
        lo = cfg.lr * cfg.lr_min_ratio
        return lo + 0.5 * (cfg.lr - lo) * (1 + math.cos(math.pi * frac))

    g = torch.Generator().manual_seed(seed)
    model.train()
    t0, loss_ema = time.perf_counter(), None
    for s in range(cfg.steps):
        idx = torch.randint(len(prompts), (cfg.batch_size,), generator=g).tolist()
        seqs = [prompts[i] + answers[i] + [eos] for i in idx]
        L = max(len(x) for x in seqs)
        B = len(seqs)
        ids = torch.zeros((B, L), dtype=torch.long)  # (B, L) right-padded
        attn = torch.zeros((B, L), dtype=torch.long)
        mask = torch.zeros((B, L - 1))  # (B, L-1) 1 where the target is an answer token or EOS
        for r, i in enumerate(idx):
            P, n = len(prompts[i]), len(seqs[r])
            ids[r, :n] = torch.tensor(seqs[r])
            attn[r, :n] = 1
            mask[r, P - 1 : n - 1] = 1.0
        for group in opt.param_groups:
            group["lr"] = lr_at(s)
        logits = model(input_ids=ids.to(device), attention_mask=attn.to(device)).logits  # (B, L, V)
        nll = torch.nn.functional.cross_entropy(
            logits[:, :-1].reshape(-1, logits.size(-1)).float(),
            ids[:, 1:].reshape(-1).to(device),
            reduction="none",
        ).view(B, L - 1)  # (B, L-1)
        loss = (nll * mask.to(device)).sum() / mask.sum()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        lv = float(loss.detach())
        loss_ema = lv if loss_ema is None else 0.95 * loss_ema + 0.05 * lv
        if log and (s + 1) % max(1, cfg.steps // 5) == 0:
            log(
                f"warm start: step {s + 1}/{cfg.steps} loss {loss_ema:.3f} "
                f"({time.perf_counter() - t0:.0f} s)"
            )
    model.eval()
    return {"final_loss": float(loss_ema or 0.0), "seconds": time.perf_counter() - t0}


def measure_pass_rates(
    generator, task: Task, cfg: WarmStartConfig, temperature: float, seed: int
) -> dict[str, Any]:
    """Pass rates of the first `histogram_prompts` pool prompts: histogram and mean."""
    n = min(cfg.histogram_prompts, task.num_train)
    rewards = sample_rewards(
        generator, task, "train", list(range(n)), cfg.histogram_samples, temperature, seed
    )  # (n, samples)
    rates = rewards.mean(axis=1)  # (n,)
    out: dict[str, Any] = {
        "prompts": n,
        "samples": cfg.histogram_samples,
        "mean_pass_rate": float(rates.mean()),
        "histogram": pass_rate_histogram(rates),
    }
    if "level" in task.train:
        levels = np.array(task.train["level"][:n])
        out["mean_pass_rate_by_level"] = {
            str(lv): float(rates[levels == lv].mean()) for lv in np.unique(levels)
        }
    return out


def format_histogram(stats: dict[str, Any]) -> str:
    h = stats["histogram"]
    line = " ".join(f"{k}: {v}" for k, v in h.items())
    s = (
        f"pass rates after warm start ({stats['prompts']} pool prompts x {stats['samples']} "
        f"samples): {line}; mean {stats['mean_pass_rate']:.3f}"
    )
    if "mean_pass_rate_by_level" in stats:
        s += "; by level " + " ".join(
            f"{t}: {v:.2f}" for t, v in stats["mean_pass_rate_by_level"].items()
        )
    return s


def warm_start(
    build_model,
    task: Task,
    cfg: WarmStartConfig,
    *,
    key_payload: dict[str, Any],
    cache_dir: str | Path,
    seed: int,
    temperature: float,
    make_generator,
    device: str = "cpu",
    log=print,
) -> tuple[Path, dict[str, Any], bool]:
    """Path of the warm-started checkpoint (built and cached unless cached already), its
    meta (config, pass-rate histogram) and whether it came from the cache."""
    key = cache_key(
        {"warm_start": asdict(cfg), "seed": seed, "temperature": temperature, **key_payload}
    )
    final = Path(cache_dir) / "warmstart" / key
    if (final / "meta.json").is_file():
        meta = json.loads((final / "meta.json").read_text())
        if log:
            log(f"warm start: cached {final}")
        return final, meta, True
    model, tokenizer = build_model()
    model.to(device)
    torch.manual_seed(seed)
    stats = sft(model, tokenizer, task, cfg, seed, device=device, log=log) if cfg.steps else {}
    hist = measure_pass_rates(make_generator(model, tokenizer), task, cfg, temperature, seed + 7)
    meta = {
        "key": key,
        "config": asdict(cfg),
        "payload": key_payload,
        "sft": stats,
        "pass_rates": hist,
    }
    tmp = final.parent / f".{key}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    save_policy(model, tokenizer, tmp)
    (tmp / "meta.json").write_text(json.dumps(meta, indent=1))
    final.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.rename(tmp, final)
    except OSError:  # another process finished the same warm start first: use theirs
        shutil.rmtree(tmp, ignore_errors=True)
    return final, meta, False
