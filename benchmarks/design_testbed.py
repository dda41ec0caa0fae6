"""Design a testbed's pool before spending real runs on it (docs/testbed.md, "The paper-regime
testbed"): the warm-started policy's exact pass rate on every pool prompt, by level; the share of
GRPO groups with zero variance at each group size; and a simulator preset with that pool.

    python benchmarks/design_testbed.py --config configs/testbed-paper.yaml \
        [--group-sizes 8,16,32,64] [--preset-out src/rollalloc/sim/presets/testbed-paper.json] \
        [--fit-from testbed-arith]

The warm start is the one `rollalloc compare --config ...` builds (the same cache). Pass rates are
exact, P(answer + EOS | prompt) at the training temperature (rollalloc.train.evaluator), so the
histogram needs no deconvolution: a group of n rollouts of a prompt with pass rate p has zero
variance with probability p^n + (1 - p)^n, which is what the table sums.

The preset takes its learning speed (global, cluster and memorisation gains) from --fit-from, a
preset fitted to real GRPO runs of another pool of the same task and model
(benchmarks/fit_testbed_preset.py); fit it again on this testbed's GRPO runs once they exist.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

BINS = 32
SOLVED, IMPOSSIBLE = 0.999, 1e-3


def pool_pass_rates(config: str, threads: int = 1) -> tuple[np.ndarray, np.ndarray, dict]:
    import torch

    from rollalloc.train.config import config_from_dict, load_config
    from rollalloc.train.evaluator import exact_pass_rates
    from rollalloc.train.model import load_policy
    from rollalloc.train.trainer import build_task, prepare_policy

    torch.set_num_threads(threads)
    cfg = config_from_dict({**load_config(config), "budget_rollouts": 10**9})
    task = build_task(cfg)
    path, meta = prepare_policy(cfg, task, log=print)
    model, tok = load_policy(path)
    p = exact_pass_rates(
        model, tok, task.train["prompt"], task.train["answer"], temperature=cfg.temperature
    )
    levels = np.array(task.train.get("level", ["all"] * task.num_train))
    return p, levels, {"cfg": cfg, "meta": meta, "task": task}


def zero_variance_share(p: np.ndarray, n: int) -> float:
    """Expected share of groups of n rollouts whose rewards are all equal, prompts drawn uniformly."""
    return float(np.mean(p**n + (1 - p) ** n))


def preset_from(p: np.ndarray, num_prompts: int, name: str, fit_from: str, info: dict) -> dict:
    from rollalloc.sim.policy import load_preset

    base = load_preset(fit_from)
    hist = [[0.0, 0.0, float(np.mean(p < IMPOSSIBLE))], [1.0, 1.0, float(np.mean(p > SOLVED))]]
    mid = p[(p >= IMPOSSIBLE) & (p <= SOLVED)]
    edges = np.linspace(0, 1, BINS + 1)
    counts, _ = np.histogram(mid, bins=edges)
    for lo, hi, c in zip(edges[:-1], edges[1:], counts):
        if c:
            hist.append([float(lo), float(hi), float(c / len(p))])
    total = sum(h[2] for h in hist)
    for h in hist:
        h[2] = round(h[2] / total, 6)
    hist[-1][2] = round(1.0 - sum(h[2] for h in hist[:-1]), 6)
    cfg = info["cfg"]
    sim = {k: getattr(base.sim, k) for k in ("global_gain", "cluster_gain", "memorize_gain")} | {
        "eval_prompts": cfg.eval_prompts or info["task"].num_eval,
        "ref_group_size": cfg.group_size,
        "unlearnable_fraction": round(float(np.mean(p < IMPOSSIBLE)), 6),
    }
    return {
        "name": name,
        "description": (
            "A real CPU testbed's pool as the warm-started policy sees it: exact per-prompt pass "
            "rates (teacher forcing) binned in 1/32, with point bins for p < 1e-3 (never solved, "
            "taken as unlearnable) and p > 0.999 (always solved). Learning speed copied from "
            f"{fit_from!r} (fitted to GRPO runs of another pool); not yet fitted to this pool's runs."
        ),
        "source": f"benchmarks/design_testbed.py --config ... (warm start {info['meta'].get('key')})",
        "num_prompts": num_prompts,
        "pass_rate_histogram": hist,
        "sim": sim,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", required=True)
    ap.add_argument("--group-sizes", default="8,16,32,64")
    ap.add_argument("--preset-out")
    ap.add_argument("--preset-name", default="testbed-paper")
    ap.add_argument("--fit-from", default="testbed-arith")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    p, levels, info = pool_pass_rates(args.config, args.threads)
    print(f"pool: {len(p)} prompts, mean exact pass rate {p.mean():.3f}")
    print(f"{'level':<8}{'share':>7}{'mean p':>8}{'p<1e-3':>8}{'p>.999':>8}{'p>.97':>7}")
    for lv in np.unique(levels):
        q = p[levels == lv]
        print(
            f"{lv:<8}{len(q) / len(p):>7.2f}{q.mean():>8.3f}{np.mean(q < IMPOSSIBLE):>8.2f}"
            f"{np.mean(q > SOLVED):>8.2f}{np.mean(q > 0.97):>7.2f}"
        )
    sizes = [int(x) for x in args.group_sizes.split(",")]
    print(
        "GRPO zero-variance share at the start: "
        + ", ".join(f"n={n}: {zero_variance_share(p, n):.3f}" for n in sizes)
    )
    mem = info["meta"].get("memorisation") or {}
    if mem:
        print(
            f"after warm start: pool {mem.get('pool')}, held-out {mem.get('held_out')} "
            f"({mem.get('measured')}); {mem.get('warning', 'no memorisation warning')}"
        )
    if args.preset_out:
        d = preset_from(p, len(p), args.preset_name, args.fit_from, info)
        Path(args.preset_out).write_text(json.dumps(d, indent=2) + "\n")
        print(f"wrote {args.preset_out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
