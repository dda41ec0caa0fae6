"""Overhead of rollalloc's generation layer over a plain Hugging Face `generate` of the same batch,
and the trainer's throughput (tokens/s of generation, seconds per update).

    python benchmarks/bench_generate.py [--threads 1] [--repeats 7] [--json out.json]

Both sides sample the same warm-started tiny policy (the default testbed's, from the warm-start
cache) on the same 512 prompt rows (64 prompts x 8) with temperature 1 and the same
max_new_tokens. "plain" is `model.generate(**tokenizer(prompts, padding=True), do_sample=True)`;
"rollalloc" is `Sampler.generate(Request)`: prompt lookup, padding, generate with behaviour
log-probs, EOS trimming, decoding, verification and storage of every rollout. Medians of
`--repeats` interleaved runs; only the ratio is a claim (the machine is shared).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np
import torch


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--prompts", type=int, default=64)
    ap.add_argument("--n", type=int, default=8)
    ap.add_argument("--cache-dir", default=".cache/rollalloc", help="warm-start cache")
    ap.add_argument("--json", help="write the measurements here")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    from rollalloc.allocator import make_allocator
    from rollalloc.train.config import TrainConfig
    from rollalloc.train.trainer import build_parts

    cfg = TrainConfig(
        max_steps=1,
        threads=args.threads,
        cache_dir=args.cache_dir,
        progress=False,
        train_prompts=args.prompts,
        group_size=args.n,
    )
    parts = build_parts(cfg, log=None)
    model, tok, sampler = parts.model, parts.tokenizer, parts.sampler
    alloc = make_allocator(
        "grpo", num_prompts=parts.task.num_train, seed=0, **cfg.strategy_options()
    )
    request = alloc.ask()
    prompts = [parts.task.train["prompt"][p] for p in request.expand().tolist()]
    model.eval()

    def plain() -> float:
        enc = tok(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
        t0 = time.perf_counter()
        with torch.no_grad():
            model.generate(
                **enc,
                do_sample=True,
                temperature=1.0,
                top_k=0,
                top_p=1.0,
                max_new_tokens=cfg.max_new_tokens,
                pad_token_id=tok.pad_token_id,
                eos_token_id=tok.eos_token_id,
            )
        return time.perf_counter() - t0

    def ours() -> tuple[float, int]:
        t0 = time.perf_counter()
        out = sampler.generate(request)
        dt = time.perf_counter() - t0
        sampler.release(out.handles)
        return dt, int(out.tokens.sum())

    plain(), ours()  # warm up
    t_plain, t_ours, toks = [], [], []
    for _ in range(args.repeats):
        t_plain.append(plain())
        dt, n_tok = ours()
        t_ours.append(dt)
        toks.append(n_tok)

    # seconds per update on a real 64 x 8 batch of this policy
    alloc.tell(sampler.generate(request))
    assert alloc.ask() is None
    batch = alloc.batch()
    upd = []
    for _ in range(max(3, args.repeats // 2)):
        t0 = time.perf_counter()
        metrics = parts.learner.update(batch)
        upd.append(time.perf_counter() - t0)
    med_plain, med_ours = statistics.median(t_plain), statistics.median(t_ours)
    res = {
        "threads": args.threads,
        "rollouts_per_pass": len(prompts),
        "plain_generate_s": med_plain,
        "rollalloc_generate_s": med_ours,
        "overhead_ratio": med_ours / med_plain,
        "rollalloc_rollouts_per_s": len(prompts) / med_ours,
        "plain_rollouts_per_s": len(prompts) / med_plain,
        "generated_tokens_per_s": float(np.median(toks)) / med_ours,
        "update_s": statistics.median(upd),
        "update_active_rollouts": metrics.get("active_rollouts"),
        "effective_prompt_ratio": batch.stats.effective_prompt_ratio,
    }
    print(json.dumps(res, indent=1))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
