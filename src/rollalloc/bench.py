"""`rollalloc bench overhead`: what the allocator itself costs per step and per epoch boundary.

Every registered strategy runs on a synthetic Bernoulli pool (the Sampler's work is not timed; a
strategy that reads the completions' log-probs gets them, rollalloc.testing.ShortAnswerPool):
the median milliseconds of ask + tell + batch per step in steady state, the median of an epoch
boundary (new permutation of the pool, deferred prompts back), and the bytes of per-prompt state.
"""

from __future__ import annotations

import argparse
import json
import platform
import time

import numpy as np


def measure_overhead(
    name: str, pool: int, train_prompts: int = 128, steps: int = 30, warmup: int = 5, seed: int = 0
) -> dict:
    from rollalloc.allocator import get_strategy, make_allocator
    from rollalloc.testing import BernoulliPool, ShortAnswerPool

    cls = get_strategy(name)
    extra = {k: v for k, v in cls.example_config().items() if callable(v)}  # sources, not sizes
    alloc = make_allocator(name, pool, seed=seed, train_prompts=train_prompts, **extra)
    env = BernoulliPool.mixed(pool, seed=seed, solved=0.1, hopeless=0.3)
    if cls.reads_mass:  # outcomes with completion log-probs, whose mass tell() then computes
        env = ShortAnswerPool(p=env.p, seed=seed)
    per_step, boundary = [], []
    for i in range(warmup + steps):
        spent = 0.0
        t = time.perf_counter()
        while (req := alloc.ask()) is not None:
            spent += time.perf_counter() - t
            out = env.generate(req)
            t = time.perf_counter()
            alloc.tell(out)
        alloc.batch()
        spent += time.perf_counter() - t
        if i >= warmup:
            per_step.append(spent * 1e3)
    for _ in range(3):
        t = time.perf_counter()
        alloc._end_epoch()
        boundary.append((time.perf_counter() - t) * 1e3)
    state_bytes = alloc.table.nbytes + alloc._order.nbytes
    return {
        "strategy": name,
        "pool": pool,
        "train_prompts": train_prompts,
        "median_step_ms": float(np.median(per_step)),
        "p90_step_ms": float(np.percentile(per_step, 90)),
        "median_epoch_boundary_ms": float(np.median(boundary)),
        "bytes_per_prompt": state_bytes / pool,
        "rollouts_per_step": alloc.cum_rollouts / (warmup + steps),
    }


def measure_scale(name: str, pool: int, path: str, steps: int = 3, seed: int = 0) -> dict:
    """Memory of a `pool`-prompt allocator's state, and the seconds to save and load it."""
    import os
    import resource

    from rollalloc.allocator import get_strategy, make_allocator
    from rollalloc.state import load_state, save_state
    from rollalloc.testing import BernoulliPool, drive

    cls = get_strategy(name)
    extra = {k: v for k, v in cls.example_config().items() if callable(v)}
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t = time.perf_counter()
    alloc = make_allocator(name, pool, seed=seed, **extra)
    build_s = time.perf_counter() - t
    drive(alloc, BernoulliPool(np.full(pool, 0.5), seed=seed), steps)
    t = time.perf_counter()
    save_state(path, alloc.state_dict())
    save_s = time.perf_counter() - t
    t = time.perf_counter()
    fresh = make_allocator(name, pool, seed=seed, **extra)
    fresh.load_state_dict(load_state(path))
    load_s = time.perf_counter() - t
    size = os.path.getsize(path)
    os.remove(path)
    return {
        "strategy": name,
        "pool": pool,
        "state_bytes": alloc.table.nbytes + alloc._order.nbytes,
        "file_bytes": size,
        "peak_rss_growth_bytes": (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss0) * 1024,
        "build_s": build_s,
        "save_s": save_s,
        "load_s": load_s,
    }


def _cmd_scale(args: argparse.Namespace) -> int:
    import tempfile
    from pathlib import Path

    import rollalloc.sim  # noqa: F401  (registers the simulator's oracle)
    from rollalloc.allocator import available_strategies

    names = args.strategies.split(",") if args.strategies else available_strategies()
    rows = []
    with tempfile.TemporaryDirectory() as d:
        for n in names:
            rows.append(measure_scale(n, args.pool, str(Path(d) / "state.npz")))
    if args.json:
        print(json.dumps({"machine": {"cpus": _cpus()}, "results": rows}, indent=2))
    else:
        print(f"{'strategy':<14}{'state MB':>10}{'file MB':>10}{'save s':>8}{'load s':>8}")
        for r in rows:
            print(
                f"{r['strategy']:<14}{r['state_bytes'] / 1e6:>10.0f}{r['file_bytes'] / 1e6:>10.0f}"
                f"{r['save_s']:>8.2f}{r['load_s']:>8.2f}"
            )
    return 0


def _cmd_overhead(args: argparse.Namespace) -> int:
    import rollalloc.sim  # noqa: F401  (registers the simulator's oracle)
    from rollalloc.allocator import available_strategies

    names = args.strategies.split(",") if args.strategies else available_strategies()
    rows = [measure_overhead(n, args.pool, args.train_prompts, args.steps) for n in names]
    if args.json:
        print(
            json.dumps(
                {
                    "machine": {"cpus": _cpus(), "python": platform.python_version()},
                    "results": rows,
                },
                indent=2,
            )
        )
    else:
        print(
            f"{'strategy':<14}{'step ms':>10}{'p90 ms':>10}{'epoch ms':>10}{'B/prompt':>10}{'rollouts/step':>15}"
        )
        for r in rows:
            print(
                f"{r['strategy']:<14}{r['median_step_ms']:>10.2f}{r['p90_step_ms']:>10.2f}"
                f"{r['median_epoch_boundary_ms']:>10.1f}{r['bytes_per_prompt']:>10.1f}"
                f"{r['rollouts_per_step']:>15.0f}"
            )
    return 0


def _cpus() -> int:
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def register(sub) -> None:
    p = sub.add_parser("bench", help="measure rollalloc's own overhead")
    bsub = p.add_subparsers(dest="bench", metavar="BENCH")
    o = bsub.add_parser("overhead", help="allocator ms per step and per epoch boundary")
    o.add_argument("--pool", type=int, default=1_000_000, help="prompts in the pool")
    o.add_argument("--train-prompts", type=int, default=128, help="groups trained per step")
    o.add_argument("--steps", type=int, default=30, help="timed steady-state steps")
    o.add_argument("--strategies", default="", help="comma-separated names (default: all)")
    o.add_argument("--json", action="store_true", help="print JSON")
    o.set_defaults(func=_cmd_overhead)
    sc = bsub.add_parser("scale", help="memory and save/load seconds of a huge pool's state")
    sc.add_argument("--pool", type=int, default=10_000_000, help="prompts in the pool")
    sc.add_argument("--strategies", default="", help="comma-separated names (default: all)")
    sc.add_argument("--json", action="store_true", help="print JSON")
    sc.set_defaults(func=_cmd_scale)
    p.set_defaults(func=lambda a: (p.print_help(), 2)[1])
