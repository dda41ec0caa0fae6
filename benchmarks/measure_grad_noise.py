"""Measure the gradient noise scale of real GRPO on a testbed, in units of informative groups.

    python benchmarks/measure_grad_noise.py --config configs/testbed-paper.yaml \
        --set cache_dir=/work/main/.cache/rollalloc --groups 128 \
        --checkpoint warm --checkpoint /tmp/grpo64/checkpoints/step-0000064 --out runs/i15/noise.json

At each policy (`warm`: the cached warm start every run starts from; else a training checkpoint
directory, rollalloc.train.checkpoint, whose model.safetensors is loaded), pool prompts are drawn
uniformly (as GRPO's epoch shuffle), groups of `group_size` rollouts are generated with the real
Sampler, and the first K groups with reward variance > 0 (informative) are kept. Each kept group's
policy gradient g_i is computed alone with the trainer's loss (rollalloc.train.loss.policy_loss on
the fast path's log-probs, the learner's group-normalised advantages, behaviour log-probs as old
log-probs, dual clip): the token-mean denominator is the same constant for every group (group_size x
the mean completion length of the kept rollouts), so a batch's gradient is the sum of its groups'
g_i, as in a training step (up to the batch's own token count). Only the Gram matrix M = g g^T (K,
K) is kept.

Estimates (McCandlish et al. 2018, arXiv 1812.06162, App. A; "example" = one informative group):

    |G|^2    = sum_{i != j} M_ij / (K (K - 1))      (unbiased; = |mean|^2 - tr Sigma / K)
    tr Sigma = sum_i M_ii / K - |G|^2                (per-group variance, unbiased)
    B_simple = tr Sigma / |G|^2                      noise equals signal at B_simple groups a step

and along the direction that matters, G itself: B_G = G^T Sigma G / |G|^4, with
E[(g_i . g_j)(g_i . g_k)] = G^T Sigma G + |G|^4 for distinct i, j, k (a U-statistic of the Gram
matrix) and |G|^4 the square of the unbiased |G|^2. B_simple is what a per-coordinate normalised
optimiser (Adam) sees: the G_i^2-weighted mean of the coordinates' noise-to-signal ratios
Sigma_ii / G_i^2 is tr Sigma / |G|^2. B_G is what first-order progress of plain SGD sees. Intervals:
percentile bootstrap over groups (the Gram matrix resampled by rows and columns).

The per-group signal and noise energy of the simulator (rollalloc.sim.roles.group_signal /
group_noise_energy, ref_group_size = the group size) are computed on the same rewards, so that the
measurement maps onto SimConfig.noise_scale (docs/simulator.md, "Gradient noise, measured"); B_G,
with the same mapping (sim_noise_scale_from_B_G), onto SimConfig.noise_progress_scale ("Trace noise
and projected noise").
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

GRAM_DTYPE = np.float64


def noise_scales(M: np.ndarray, weights: np.ndarray | None = None) -> dict[str, float]:
    """B_simple and B_G (see the module docstring) from the Gram matrix M (K, K) of K per-example
    gradients; also tr Sigma, |G|^2 and E|g|^2. `weights` (K,) >= 0 (default 1) weight the examples:
    a bootstrap resample's counts, with pairs and triples always of *distinct* examples (a copy of
    an example is never paired with itself, which would read its noise as signal)."""
    M = np.asarray(M, dtype=np.float64)
    K = M.shape[0]
    c = np.ones(K) if weights is None else np.asarray(weights, dtype=np.float64)  # (K,)
    if int((c > 0).sum()) < 3:
        raise ValueError(f"noise_scales: need at least 3 examples, got {int((c > 0).sum())}")
    diag = np.diag(M)  # (K,) |g_i|^2
    e_sq = float((c * diag).sum() / c.sum())  # E |g|^2
    a = c.sum() - c  # (K,) sum_{j != i} c_j
    s = M @ c - c * diag  # (K,) sum_{j != i} c_j M_ij
    g_sq = float((c * s).sum() / (c * a).sum())  # E g_i . g_j, i != j: |G|^2
    tr_sigma = e_sq - g_sq
    b = (c**2).sum() - c**2  # (K,) sum_{j != i} c_j^2
    q = (M**2) @ c**2 - c**2 * diag**2  # (K,) sum_{j != i} c_j^2 M_ij^2
    t = float((c * (s**2 - q)).sum() / (c * (a**2 - b)).sum())  # E (g_i.g_j)(g_i.g_k)
    gsg = t - g_sq**2  # G^T Sigma G
    return {
        "B_simple": tr_sigma / g_sq if g_sq > 0 else float("inf"),
        "B_G": gsg / g_sq**2 if g_sq > 0 else float("inf"),
        "tr_sigma": tr_sigma,
        "G_sq": g_sq,
        "E_g_sq": e_sq,
    }


def bootstrap(
    M: np.ndarray, resamples: int = 2000, level: float = 0.9, seed: int = 0
) -> dict[str, list[float]]:
    """Percentile intervals of B_simple and B_G over groups resampled with replacement (as
    multinomial counts, see `noise_scales`)."""
    rng = np.random.default_rng(seed)
    K = M.shape[0]
    draws: dict[str, list[float]] = {"B_simple": [], "B_G": []}
    for _ in range(resamples):
        counts = np.bincount(rng.integers(0, K, size=K), minlength=K)  # (K,)
        est = noise_scales(M, counts)
        for k in draws:
            draws[k].append(est[k])
    lo, hi = (1 - level) / 2, 1 - (1 - level) / 2
    q = lambda v, x: float(np.quantile(v, x, method="inverted_cdf"))  # noqa: E731 (inf-safe)
    return {k: [q(v, lo), q(v, hi)] for k, v in draws.items()}


def _config(args: argparse.Namespace):
    from rollalloc.settings import apply_sets
    from rollalloc.train.config import TrainConfig, config_from_dict, load_config, merge

    d = merge(load_config(args.config), {"strategy": "grpo", "threads": args.threads})
    cfg = config_from_dict(apply_sets(d, args.set, TrainConfig))
    if cfg.pool_levels is not None:  # the measurement draws from the whole pool
        raise SystemExit(
            "pool_levels is not supported here: the groups are drawn from the whole pool"
        )
    return cfg


def sample_groups(
    cfg,
    checkpoint: str,
    groups: int,
    seed: int,
    batch_prompts: int,
    log=print,
    keep_flat: bool = False,
) -> dict[str, Any]:
    """At `checkpoint` ('warm' or a checkpoint directory), groups of cfg.group_size rollouts of
    uniformly drawn pool prompts (epochs of shuffles, at most 4) until `groups` informative ones are kept
    (with `keep_flat`, the zero-variance groups drawn meanwhile too). Returns the model, task,
    sampler and the kept groups [(prompt, handles, rewards (n,))]."""
    import torch

    from rollalloc.train.model import load_policy
    from rollalloc.train.sampler import HFGenerator, Sampler
    from rollalloc.train.trainer import build_task, prepare_policy
    from rollalloc.types import Request

    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    task = build_task(cfg)
    path, _ = prepare_policy(cfg, task, log=log)
    model, tokenizer = load_policy(path, device=cfg.device)
    if checkpoint != "warm":
        from safetensors.torch import load_model

        load_model(model, str(Path(checkpoint) / "model.safetensors"))
    torch.manual_seed(seed)
    gen = HFGenerator(model, tokenizer, max_new_tokens=cfg.max_new_tokens, device=cfg.device)
    sampler = Sampler(gen, task, temperature=cfg.temperature)
    n = cfg.group_size
    rng = np.random.default_rng([seed, 17])
    order = rng.permutation(task.num_train)  # (N,) one epoch of the pool, as GRPO's shuffle
    kept: list[tuple[int, np.ndarray, np.ndarray]] = []  # (prompt, handles, rewards)
    drawn = informative = 0
    t0 = time.perf_counter()
    model.eval()
    while informative < groups:
        if drawn >= len(order):  # another epoch: fresh groups of the same prompts, at most 4
            if len(order) >= 4 * task.num_train:
                raise ValueError(
                    f"{checkpoint}: fewer than {groups} informative groups in 4 epochs"
                )
            order = np.concatenate([order, rng.permutation(task.num_train)])
        pids = order[drawn : drawn + batch_prompts]
        drawn += len(pids)
        req = Request(0, 0, pids, np.full(len(pids), n), ("grpo",) * len(pids))
        with torch.no_grad():
            out = sampler.generate(req)
        for j, pid in enumerate(pids.tolist()):
            h, r = out.handles[j * n : (j + 1) * n], out.rewards[j * n : (j + 1) * n]
            varies = bool(r.max() > r.min())
            if informative < groups and (varies or keep_flat):
                kept.append((pid, h, np.asarray(r, dtype=np.float64)))
            else:
                sampler.release(h)
            informative += int(varies)
    return {"model": model, "task": task, "sampler": sampler, "kept": kept, "drawn": int(drawn),
            "informative": int(informative), "gen_s": round(time.perf_counter() - t0, 1)}  # fmt: skip


def group_grad_fn(cfg, model, sampler, kept):
    """grad(hs, r) -> the trainer's policy-loss gradient of one group (flat float32 numpy), with
    one token-mean denominator for every group (n x the kept rollouts' mean completion length),
    so that a batch's gradient is the sum of its groups'; and the parameter list."""
    import torch

    from rollalloc.advantages import group_advantages_torch
    from rollalloc.train.learner import layout
    from rollalloc.train.loss import policy_loss
    from rollalloc.train.model import Qwen2Runner

    n, lc = cfg.group_size, cfg.learner
    lengths = [len(sampler.store[h].completion_tokens) for _, hs, _ in kept for h in hs.tolist()]
    denom = n * float(np.mean(lengths))  # the same token-mean denominator for every group
    runner = Qwen2Runner(model)
    params = [p for p in model.parameters() if p.requires_grad]
    model.train()

    def grad(hs, r):
        adv = group_advantages_torch(
            torch.as_tensor(r, dtype=torch.float32), [n], normalize_std=lc.normalize_std
        )  # (n,)
        prompts, group, comps, old = layout(sampler.store, hs)
        logp, mask = runner.completion_logprobs(prompts, group, comps, cfg.temperature)
        loss, _ = policy_loss(
            logp,
            old,
            adv,
            mask,
            clip_low=lc.clip_low,
            clip_high=lc.clip_high,
            num_tokens=denom,
            clip_ratio_c=lc.clip_ratio_c,
        )
        gs = torch.autograd.grad(loss, params)
        return torch.cat([g.reshape(-1) for g in gs]).numpy()

    return grad, params, denom


def group_gradients(
    cfg, checkpoint: str, groups: int, seed: int, batch_prompts: int, log=print
) -> dict[str, Any]:
    """The Gram matrix of K = `groups` informative groups' policy gradients at `checkpoint`, and
    the groups' rewards."""
    g = sample_groups(cfg, checkpoint, groups, seed, batch_prompts, log=log)
    kept, task = g["kept"], g["task"]
    grad, params, denom = group_grad_fn(cfg, g["model"], g["sampler"], kept)
    dim = sum(p.numel() for p in params)
    grads = np.empty((groups, dim), dtype=np.float32)  # (K, D)
    t1 = time.perf_counter()
    for i, (_, hs, r) in enumerate(kept):
        grads[i] = grad(hs, r)
    grad_s = time.perf_counter() - t1
    M = np.zeros((groups, groups), dtype=GRAM_DTYPE)  # (K, K), accumulated in float64 chunks
    for lo in range(0, dim, 1 << 16):
        chunk = grads[:, lo : lo + (1 << 16)].astype(GRAM_DTYPE)  # (K, <=65536)
        M += chunk @ chunk.T
    rewards = np.stack([r for _, _, r in kept])  # (K, n)
    level_of = task.train.get("level")  # arith: the level's name, e.g. "2x1d"
    return {
        "levels": [str(level_of[p]) if level_of is not None else "" for p, _, _ in kept],
        "gram": M,
        "rewards": rewards,
        "prompts": [p for p, _, _ in kept],
        "groups_drawn": g["drawn"],
        "informative_drawn": g["informative"],
        "params": int(dim),
        "token_mean_denominator": denom,
        "gen_s": g["gen_s"],
        "grad_s": round(grad_s, 1),
    }


def sim_units(rewards: np.ndarray, ref_group_size: int) -> dict[str, float]:
    """The simulator's per-group signal u_g = G_g / (ref/2) and noise energy e_g
    (rollalloc.sim.roles) of the kept groups' rewards (K, n): mean u, var u, mean e."""
    from rollalloc.sim.roles import group_noise_energy, group_signal

    K, n = rewards.shape
    sizes = np.full(K, n)
    u = group_signal(rewards.reshape(-1), sizes) / (ref_group_size / 2.0)  # (K,)
    e = group_noise_energy(rewards.reshape(-1), sizes, ref_group_size=ref_group_size)  # (K,)
    return {
        "u_mean": float(u.mean()),
        "u_var": float(u.var(ddof=1)),
        "e_mean": float(e.mean()),
        "pass_rate_mean": float(rewards.mean()),
    }


def sim_noise_scale(b_simple: float, units: dict[str, float]) -> float:
    """SimConfig.noise_scale whose simulated per-group noise-to-signal ratio equals `b_simple`.

    In the simulator one informative group moves a skill by u_g + N(0, B_noise e_g): its B_simple
    (per-group variance / squared mean) is (B_noise E[e] + Var u) / E[u]^2. The real per-group
    variance also holds the groups' different signal sizes, so Var u is taken out:
    B_noise = (B_simple E[u]^2 - Var u) / E[e] (0 if negative)."""
    return max(0.0, (b_simple * units["u_mean"] ** 2 - units["u_var"]) / units["e_mean"])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--config", default="configs/testbed-paper.yaml")
    p.add_argument("--set", action="append", metavar="PATH=VALUE", help="a TrainConfig field")
    p.add_argument(
        "--checkpoint",
        action="append",
        help="'warm' (the warm start) or a checkpoint directory (repeatable; default: warm)",
    )
    p.add_argument("--groups", type=int, default=128, help="informative groups K per policy")
    p.add_argument("--batch-prompts", type=int, default=64, help="prompts per generation pass")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--resamples", type=int, default=2000)
    p.add_argument("--out", help="write the results as JSON here (and the Gram matrices as .npz)")
    p.add_argument(
        "--subset-levels",
        default="2x1d,3x1d",
        help="also estimate on the groups of these task levels only (comma-separated)",
    )
    args = p.parse_args(argv)
    cfg = _config(args)
    results = []
    for ck in args.checkpoint or ["warm"]:
        r = group_gradients(cfg, ck, args.groups, args.seed, args.batch_prompts)
        est = noise_scales(r["gram"])
        ci = bootstrap(r["gram"], args.resamples, seed=args.seed)
        units = sim_units(r["rewards"], cfg.group_size)
        informative = r["informative_drawn"] / r["groups_drawn"]
        row = {
            "checkpoint": ck,
            "groups": args.groups,
            "groups_drawn": r["groups_drawn"],
            "informative_share": round(informative, 4),
            "params": r["params"],
            "B_simple": round(est["B_simple"], 3),
            "B_simple_ci90": [round(v, 3) for v in ci["B_simple"]],
            "B_G": round(est["B_G"], 3),
            "B_G_ci90": [round(v, 3) for v in ci["B_G"]],
            "tr_sigma": est["tr_sigma"],
            "G_sq": est["G_sq"],
            "sim_units": {k: round(v, 4) for k, v in units.items()},
            "sim_noise_scale": round(sim_noise_scale(est["B_simple"], units), 3),
            "sim_noise_scale_ci90": [round(sim_noise_scale(v, units), 3) for v in ci["B_simple"]],
            "sim_noise_scale_from_B_G": round(sim_noise_scale(est["B_G"], units), 3),
            "token_mean_denominator": r["token_mean_denominator"],
            "gen_s": r["gen_s"],
            "grad_s": r["grad_s"],
        }
        subset = [i for i, lv in enumerate(r["levels"]) if lv in args.subset_levels.split(",")]
        row["groups_by_level"] = {lv: r["levels"].count(lv) for lv in sorted(set(r["levels"]))}
        if len(subset) >= 3:
            Ms = r["gram"][np.ix_(subset, subset)]
            est_s, ci_s = noise_scales(Ms), bootstrap(Ms, args.resamples, seed=args.seed)
            units_s = sim_units(r["rewards"][subset], cfg.group_size)
            row["subset"] = {
                "levels": args.subset_levels,
                "groups": len(subset),
                "B_simple": round(est_s["B_simple"], 3),
                "B_simple_ci90": [round(v, 3) for v in ci_s["B_simple"]],
                "B_G": round(est_s["B_G"], 3),
                "B_G_ci90": [round(v, 3) for v in ci_s["B_G"]],
                "sim_units": {k: round(v, 4) for k, v in units_s.items()},
                "sim_noise_scale": round(sim_noise_scale(est_s["B_simple"], units_s), 3),
            }
        if args.out:
            Path(args.out).parent.mkdir(parents=True, exist_ok=True)
            np.savez_compressed(
                Path(args.out).with_suffix(f".{len(results)}.npz"),
                gram=r["gram"],
                rewards=r["rewards"],
                prompts=np.array(r["prompts"]),
                levels=np.array(r["levels"]),
            )
        results.append(row)
        print(json.dumps(row))
    out = {
        "config": args.config,
        "sets": args.set or [],
        "group_size": cfg.group_size,
        "seed": args.seed,
        "resamples": args.resamples,
        "results": results,
    }
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
