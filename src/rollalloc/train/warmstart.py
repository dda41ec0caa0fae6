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
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rollalloc.tasks import Task
from rollalloc.train.evaluator import answer_batch, pass_rate_histogram, sample_rewards
from rollalloc.train.model import save_policy
from rollalloc.train.sampler import encode_prompts

CACHE_FORMAT = 2  # 2: warm start on the task's disjoint split (warm_start.data), issue 16


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
    """Train only on examples of these difficulty levels (the task's `level` column, e.g.
    arith's "2x1d"); None: on all of them."""
    data: str = "disjoint"
    """'disjoint': the task's warm-start split (Task.sft), disjoint from the RL pool and the eval
    set, as real pipelines do; 'pool': the RL pool's own reference answers (a small model may
    memorise the pool: the held-out accuracy then trails the pool's pass rate, which the warm
    start measures and warns about)."""
    seed: int | None = None
    """Seed of the warm start (the tiny model's initialisation, the SFT's order and sampling);
    None: `data_seed`, as before this option. Another value gives another warm-started policy on
    the same pool and held-out set: a benchmark's speedups can differ between warm starts more
    than between run seeds (docs/testbed.md, "A second warm start"), so replicate across them."""


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


def sft_columns(task: Task, cfg: WarmStartConfig) -> dict[str, list[Any]]:
    """The examples the warm start trains on (cfg.data), or ValueError naming the problem."""
    if cfg.data == "pool":
        return task.train
    if cfg.data != "disjoint":
        raise ValueError(f"warm_start.data must be 'disjoint' or 'pool', got {cfg.data!r}")
    if task.sft is None:
        raise ValueError(
            f"warm_start.data='disjoint': task {task.name!r} has no warm-start split (Task.sft, "
            "examples disjoint from the pool and the eval set); give the task one, set "
            "warm_start.steps=0 for a checkpoint that needs none, or warm_start.data='pool' "
            "(fine-tune on the RL pool itself: a small model may memorise it)"
        )
    return task.sft


def weights_fingerprint(path: str | Path) -> str:
    """sha256 (20 hex digits) of a saved checkpoint's weight files (*.safetensors, by name): one
    policy, one fingerprint. The cache key names the recipe, not the result: a warm start rebuilt
    under another torch / transformers keeps its key and can train another policy (session 39:
    the first disjoint warm start starts at 0.5066 held out, 0.5022 in sessions 36-38)."""
    h = hashlib.sha256()
    files = sorted(Path(path).glob("*.safetensors"))
    if not files:
        raise ValueError(f"weights_fingerprint: no *.safetensors under {path}")
    for f in files:
        h.update(f.name.encode())
        with open(f, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()[:20]


def library_versions() -> dict[str, str]:
    """The versions that decide a build's numerics (recorded beside the fingerprint)."""
    import transformers

    return {"torch": torch.__version__, "transformers": transformers.__version__,
            "numpy": np.__version__}  # fmt: skip


def memorisation_check(
    pool: np.ndarray,
    pool_levels: np.ndarray | None,
    held_out: np.ndarray,
    eval_levels: np.ndarray | None,
    *,
    tolerance: float = 0.05,
) -> dict[str, Any]:
    """Pool pass rate vs held-out accuracy of the warm-started policy, on the eval's level mix.

    `pool` and `held_out` are per-prompt pass rates (exact or sampled). The pool's rate is taken
    per level and weighted by the eval set's level shares (pools may hold levels the benchmark
    leaves out). `warning` is set when the pool is easier by more than max(tolerance, 3 standard
    errors): the policy memorised the pool, and RL gains on the pool need not show on held-out."""
    pool, held_out = np.asarray(pool, float), np.asarray(held_out, float)
    if pool_levels is not None and eval_levels is not None:
        pool_levels, eval_levels = np.asarray(pool_levels), np.asarray(eval_levels)
        shares = {lv: float(np.mean(eval_levels == lv)) for lv in np.unique(eval_levels)}
        missing = [lv for lv in shares if not np.any(pool_levels == lv)]
        if missing:
            return {
                "pool": None,
                "held_out": float(held_out.mean()),
                "gap": None,
                "note": f"levels {missing} of the eval set are not among the measured pool prompts",
            }
        p_mean = sum(w * pool[pool_levels == lv].mean() for lv, w in shares.items())
        p_var = sum(
            w**2 * pool[pool_levels == lv].var() / max(1, int(np.sum(pool_levels == lv)))
            for lv, w in shares.items()
        )
    else:
        p_mean, p_var = float(pool.mean()), float(pool.var() / max(1, len(pool)))
    h_mean = float(held_out.mean())
    se = float(np.sqrt(p_var + held_out.var() / max(1, len(held_out))))
    gap = float(p_mean - h_mean)
    out: dict[str, Any] = {"pool": float(p_mean), "held_out": h_mean, "gap": gap, "se": se}
    if gap > max(tolerance, 3 * se):
        out["warning"] = (
            f"memorisation: after the warm start the pool's pass rate ({p_mean:.3f}, on the eval "
            f"set's level mix) exceeds the held-out accuracy ({h_mean:.3f}) by {gap:.3f} "
            f"(> max({tolerance}, 3 x s.e. {se:.3f})): the policy has memorised the pool, so RL "
            "gains on it may not transfer and held-out comparisons may measure noise "
            "(warm_start.data='disjoint' trains on other examples)"
        )
    return out


def sft(
    model, tokenizer, task: Task, cfg: WarmStartConfig, seed: int, device: str = "cpu", log=print
) -> dict[str, float]:
    """Train `model` in place on prompt -> answer + EOS (loss on the answer tokens only)."""
    cols = sft_columns(task, cfg)
    rows = list(range(len(cols["prompt"])))
    if cfg.levels is not None:
        if "level" not in cols:
            raise ValueError(f"warm_start.levels: task {task.name!r} has no 'level' column")
        rows = [i for i, lv in enumerate(cols["level"]) if lv in set(cfg.levels)]
        if not rows:
            known = sorted(set(cols["level"]))
            raise ValueError(f"warm_start.levels {cfg.levels} match no example (levels: {known})")
    prompts = encode_prompts(tokenizer, [cols["prompt"][i] for i in rows])
    answers = encode_prompts(tokenizer, [cols["answer"][i] for i in rows])
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
        ids, attn, mask = answer_batch([prompts[i] for i in idx], [answers[i] for i in idx], eos)
        B, L = ids.shape
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


def measure_memorisation(
    generator, task: Task, cfg: WarmStartConfig, temperature: float, seed: int
) -> dict[str, Any]:
    """memorisation_check on up to 2,048 pool and held-out prompts: exact pass rates where the
    task allows (answer_is_completion), else `histogram_samples` samples per prompt."""
    n_pool, n_eval = min(2048, task.num_train), min(2048, task.num_eval)
    if task.answer_is_completion and getattr(generator, "model", None) is not None:
        from rollalloc.train.evaluator import exact_pass_rates

        def rates(cols, n):
            return exact_pass_rates(
                generator.model,
                generator.tokenizer,
                cols["prompt"][:n],
                cols["answer"][:n],
                temperature=temperature,
                device=getattr(generator, "device", "cpu"),
            )

        pool, held, how = rates(task.train, n_pool), rates(task.eval, n_eval), "exact"
    else:
        n_pool, n_eval = min(n_pool, cfg.histogram_prompts), min(n_eval, cfg.histogram_prompts)
        k = cfg.histogram_samples
        pool = sample_rewards(generator, task, "train", list(range(n_pool)), k, temperature, seed)
        held = sample_rewards(generator, task, "eval", list(range(n_eval)), k, temperature, seed)
        pool, held, how = pool.mean(axis=1), held.mean(axis=1), f"{k} samples"
    lv_p = np.array(task.train["level"][:n_pool]) if "level" in task.train else None
    lv_e = np.array(task.eval["level"][:n_eval]) if "level" in task.eval else None
    out = memorisation_check(pool, lv_p, held, lv_e)
    out.update(pool_prompts=n_pool, eval_prompts=n_eval, measured=how, data=cfg.data)
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


WARM_START_THREADS = 1
"""Torch threads the warm start is built with, whatever the caller runs with. The order of a float
sum, and so the trained policy, depends on the thread count, and one cache key must name one
policy: before this, `rollalloc compare` built it with torch's default (the machine's cores) and
`rollalloc train --threads 1` with one, two policies under one key (docs/design-notes.md)."""


@contextmanager
def torch_threads(n: int):
    """torch.set_num_threads(n) inside the block, the caller's count restored after."""
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


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
            if meta.get("threads") is None:
                log(
                    "warm start: this cache entry predates the fixed thread count; if `rollalloc "
                    "compare` built it, its policy may differ from a fresh build (delete it to rebuild)"
                )
        return final, meta, True
    with torch_threads(WARM_START_THREADS):
        model, tokenizer = build_model()
        model.to(device)
        torch.manual_seed(seed)
        stats = sft(model, tokenizer, task, cfg, seed, device=device, log=log) if cfg.steps else {}
        generator = make_generator(model, tokenizer)
        hist = measure_pass_rates(generator, task, cfg, temperature, seed + 7)
        memo = measure_memorisation(generator, task, cfg, temperature, seed + 11)
    meta = {
        "key": key,
        "config": asdict(cfg),
        "payload": key_payload,
        "threads": WARM_START_THREADS,
        "sft": stats,
        "pass_rates": hist,
        "memorisation": memo,
    }
    if log and meta["memorisation"].get("warning"):
        log("WARNING " + meta["memorisation"]["warning"])
    tmp = final.parent / f".{key}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    save_policy(model, tokenizer, tmp)
    meta["fingerprint"] = weights_fingerprint(tmp)
    meta["versions"] = library_versions()
    (tmp / "meta.json").write_text(json.dumps(meta, indent=1))
    final.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.rename(tmp, final)
    except OSError:  # another process finished the same warm start first: use theirs (its meta)
        shutil.rmtree(tmp, ignore_errors=True)
        meta = json.loads((final / "meta.json").read_text())
    return final, meta, False
