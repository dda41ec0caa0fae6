"""Design a testbed's pool before spending real runs on it (docs/testbed.md, "The paper-regime
testbed"): the warm-started policy's exact pass rate on every pool prompt, by level; the share of
GRPO groups with zero variance at each group size; and a simulator preset with that pool.

    python benchmarks/design_testbed.py --config configs/testbed-paper.yaml \
        [--group-sizes 8,16,32,64] [--preset-out src/rollalloc/sim/presets/testbed-paper.json] \
        [--fit-from testbed-arith] [--levels] [--pass-rates-json FILE]

The warm start is the one `rollalloc compare --config ...` builds (the same cache). Pass rates are
exact, P(answer + EOS | prompt) at the training temperature (rollalloc.train.evaluator), so the
histogram needs no deconvolution: a group of n rollouts of a prompt with pass rate p has zero
variance with probability p^n + (1 - p)^n, which is what the table sums.

The committed `testbed-paper.json` is the fitted preset (docs/simulator.md, "Predicting the
paper-regime testbed"): write a new one elsewhere and fit it (fit_testbed_preset.py fit
--base-preset) rather than over it.

`--levels` writes the preset with `levels` (docs/simulator.md, "Levels"): one entry per task
level with its pool share and held-out share (the real eval_weights: 0 for a level outside the
benchmark), its own histograms of the pool's and the held-out set's exact pass rates, and a
plasticity of 0 for a level whose pool prompts average below 1e-3 (never learnt), 1 otherwise (the fit
sets the others). `--pass-rates-json FILE` stores the exact pass rates (pool and held-out, with
levels) in FILE, or reads them from it if it exists (no model is loaded then).

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
    """Exact pass rates (N,) and levels (N,) of the pool; info has the config, the warm start's
    meta, the task and the held-out set's pass rates and levels (eval_p, eval_levels)."""
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
    ev = task.eval
    eval_p = exact_pass_rates(model, tok, ev["prompt"], ev["answer"], temperature=cfg.temperature)
    eval_levels = np.array(ev.get("level", ["all"] * len(ev["prompt"])))
    info = {"cfg": cfg, "meta": meta, "task": task, "eval_p": eval_p, "eval_levels": eval_levels}
    return p, levels, info


LEVEL_EDGES = np.unique(
    np.concatenate(
        [[0.0, 0.001, 0.003, 0.01, 0.02], np.arange(1, 32) / 32, [0.99, 0.997, 0.999, 1.0]]
    )
)
"""Bins of a level's histogram: 1/32 wide, finer near 0 and 1 where a group of 32 is most
sensitive to p (at p = 0.005 a group is informative 15% of the time, at 0.02 47%)."""


def level_histogram(p: np.ndarray) -> list[list[float]]:
    """[lo, hi, share] bins of LEVEL_EDGES holding `p` (ranged bins only: the simulator draws
    uniformly inside, so p < 1e-3 stays below 1e-3, unlike the log-uniform point bin [0, 0])."""
    counts, _ = np.histogram(np.clip(p, 0.0, 1.0), bins=LEVEL_EDGES)
    hist = [
        [float(lo), float(hi), round(float(c) / len(p), 6)]
        for lo, hi, c in zip(LEVEL_EDGES[:-1], LEVEL_EDGES[1:], counts)
        if c
    ]
    top = max(range(len(hist)), key=lambda j: hist[j][2])  # takes the rounding residue
    hist[top][2] = round(1.0 - sum(h[2] for j, h in enumerate(hist) if j != top), 6)
    return hist


def distinct_prompts(cfg) -> dict[str, int]:
    """Distinct prompt strings of each level of the config's pool (arith repeats a short chain
    once the held-out set has taken most of its strings: Level.distinct)."""
    from rollalloc.tasks import load_task, restrict_pool

    task = load_task(cfg.task, cfg.task_config, seed=cfg.data_seed)
    task = restrict_pool(task, cfg.pool_levels, cfg.pool_size, cfg.data_seed)
    if "level" not in task.train:
        return {}
    out: dict[str, set[str]] = {}
    for prompt, lv in zip(task.train["prompt"], task.train["level"], strict=True):
        out.setdefault(str(lv), set()).add(str(prompt))
    return {lv: len(v) for lv, v in out.items()}


def levels_preset(p: np.ndarray, levels: np.ndarray, info: dict, name: str, fit_from: str) -> dict:
    """The preset with `levels`: per level its pool share, held-out share, histograms and
    plasticity (0 where the pool prompts average below 1e-3: never learnt)."""
    from rollalloc.sim.policy import load_preset

    base = load_preset(fit_from)
    cfg, eval_p, eval_lv = info["cfg"], info["eval_p"], info["eval_levels"]
    out = []
    for lv in sorted(set(levels.tolist()) | set(eval_lv.tolist())):
        q, e = p[levels == lv], eval_p[eval_lv == lv]
        entry = {
            "name": lv,
            "share": round(len(q) / len(p), 6),
            "eval_share": round(len(e) / len(eval_p), 6),
            "plasticity": 0.0 if len(q) and float(q.mean()) < IMPOSSIBLE else 1.0,
            "pass_rate_histogram": level_histogram(q if len(q) else e),
        }
        if len(e):
            entry["eval_pass_rate_histogram"] = level_histogram(e)
        distinct = info.get("distinct", {}).get(lv)
        if distinct is not None and distinct < len(q):  # the pool repeats this level's prompts
            entry["distinct"] = int(distinct)
        out.append(entry)
    sim = {k: getattr(base.sim, k) for k in ("global_gain", "cluster_gain", "memorize_gain")} | {
        "eval_prompts": len(eval_p),
        "ref_group_size": cfg.group_size,
        "unlearnable_fraction": 0.0,
    }
    return {
        "name": name,
        "description": (
            "A real CPU testbed as the warm-started policy sees it, level by level: exact pass "
            "rates (teacher forcing) of the pool and of the held-out set per task level, each "
            "level its own skill cluster, the held-out set with the benchmark's levels only. "
            f"Learning speed copied from {fit_from!r}: fit it on this testbed's GRPO runs."
        ),
        "source": f"benchmarks/design_testbed.py --levels (warm start {info['meta'].get('key')})",
        "num_prompts": len(p),
        "levels": out,
        "sim": sim,
    }


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
    ap.add_argument("--levels", action="store_true", help="write the preset with levels")
    ap.add_argument("--pass-rates-json", help="cache of the exact pass rates (read if it exists)")
    args = ap.parse_args(argv)
    cache = Path(args.pass_rates_json) if args.pass_rates_json else None
    if cache is not None and cache.is_file():
        from rollalloc.train.config import config_from_dict, load_config

        d = json.loads(cache.read_text())
        p, levels = np.array(d["pool"]["p"]), np.array(d["pool"]["level"])
        cfg = config_from_dict({**load_config(args.config), "budget_rollouts": 10**9})
        info = {
            "cfg": cfg,
            "meta": d.get("meta", {}),
            "eval_p": np.array(d["eval"]["p"]),
            "eval_levels": np.array(d["eval"]["level"]),
        }
        print(f"exact pass rates read from {cache}")
    else:
        p, levels, info = pool_pass_rates(args.config, args.threads)
        if cache is not None:
            cache.write_text(
                json.dumps(
                    {
                        "meta": {"key": info["meta"].get("key")},
                        "pool": {"p": p.tolist(), "level": levels.tolist()},
                        "eval": {
                            "p": info["eval_p"].tolist(),
                            "level": info["eval_levels"].tolist(),
                        },
                    }
                )
            )
    info["distinct"] = distinct_prompts(info["cfg"])
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
        if args.levels:
            d = levels_preset(p, levels, info, args.preset_name, args.fit_from)
        else:
            d = preset_from(p, len(p), args.preset_name, args.fit_from, info)
        Path(args.preset_out).write_text(json.dumps(d, indent=2) + "\n")
        print(f"wrote {args.preset_out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
