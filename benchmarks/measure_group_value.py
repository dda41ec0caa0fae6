"""What one group teaches the held-out benchmark, measured on the real policy, by level and pass rate.

    python benchmarks/measure_group_value.py --config configs/testbed-paper.yaml --groups 512 \
        --checkpoint warm --checkpoint runs/.../grpo/seed0/checkpoints/step-0000192 --out V.json

At a policy, pool prompts are drawn uniformly (as GRPO's epoch shuffle) and groups of `group_size`
rollouts generated with the real Sampler until K groups with reward variance are in hand (the
zero-variance groups drawn meanwhile are counted: their gradient is exactly 0). For each informative
group i its policy-loss gradient g_i is computed with the trainer's loss (measure_grad_noise.py's
group_grad_fn: the same advantages, clipping and token-mean denominator for every group), and for
each held-out level L the gradient of the exact held-out accuracy of that level,
A_L = mean_{j in L} P(answer_j + EOS | prompt_j) (teacher forcing, the benchmark's metric).

The group's **value** to level L is the first-order change of A_L when the policy takes the step
the group asks for, per unit learning rate:

    v_iL = -grad A_L . P g_i          P = identity ("sgd")  or  diag 1 / (sqrt(v_hat) + eps) ("adam")

with v_hat the bias-corrected second moment of AdamW in the checkpoint (trainer.pt; not available at
the warm start). The benchmark's value is v_i = sum_L w_L v_iL with the held-out mix's weights
(the share of level L in the held-out set). Reported by the group's pool level and by its number
of correct rollouts k (bins), as mean value per informative group (per rollout is the same over n:
every group has n), each with a 90% bootstrap interval over every group drawn (the reference
resampled with it), relative to the mean value of a uniformly drawn group (GRPO's; zero-variance
groups included as 0): 1.0 = as good as GRPO's average group; the allocator's question "which
groups are worth their rollouts" read off the real model. Assumptions: first order (one small step
from this policy), each group's step alone (a batch's step is the sum, up to Adam's normaliser,
which P stands in for: the group's own share of v_hat, AdamW's momentum and gradient clipping are
left out; clipping is one factor per batch and cancels in the ratios, as does the token-mean
denominator), the benchmark gradient at this policy only. `--report FILE` prints the tables of a
saved run, among them value by sets of levels x quarter of the group correct (`--level-sets`).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import measure_grad_noise as mgn  # noqa: E402  (a sibling script)


def heldout_gradients(cfg, model, tokenizer, task, params) -> tuple[dict[str, np.ndarray], dict]:
    """{level: grad A_level (flat float64 numpy)} and {level: (A_level, prompts)} at the policy."""
    import torch

    from rollalloc.train.evaluator import encode_prompts
    from rollalloc.train.model import Qwen2Runner, fast_path_supported

    if not fast_path_supported(model):
        raise ValueError("measure_group_value: needs a policy on the learner's fast path (Qwen2)")

    ev = task.eval
    n = task.num_eval if cfg.eval_prompts is None else min(cfg.eval_prompts, task.num_eval)
    levels = np.array([ev["level"][i] for i in range(n)])
    p_ids = encode_prompts(tokenizer, [ev["prompt"][i] for i in range(n)])
    a_ids = encode_prompts(tokenizer, [str(ev["answer"][i]) for i in range(n)])
    eos = tokenizer.eos_token_id
    runner = Qwen2Runner(model)
    grads, acc = {}, {}
    for lv in np.unique(levels):
        idx = np.flatnonzero(levels == lv)
        comp = [np.array(a_ids[i] + [eos], dtype=np.int64) for i in idx]
        logp, mask = runner.completion_logprobs(
            [p_ids[i] for i in idx], np.arange(len(idx)), comp, cfg.temperature
        )  # (B, Cmax)
        a = torch.exp((logp * mask).sum(dim=1)).mean()
        gs = torch.autograd.grad(a, params)
        grads[str(lv)] = torch.cat([g.reshape(-1) for g in gs]).double().cpu().numpy()
        acc[str(lv)] = (float(a.detach()), len(idx))
    return grads, acc


def adam_preconditioner(checkpoint: str, model) -> np.ndarray | None:
    """diag 1 / (sqrt(v_hat) + eps) of the checkpoint's AdamW over the parameters that require
    gradients (flat, float64, in model.parameters() order), or None at the warm start. AdamW was
    built on all of model.parameters() (train/learner.py), which its state_dict numbers."""
    if checkpoint == "warm":
        return None
    import torch

    state = torch.load(Path(checkpoint) / "trainer.pt", map_location="cpu", weights_only=True)[
        "learner"
    ]["optimizer"]
    group = state["param_groups"][0]
    every = list(model.parameters())
    if len(state["param_groups"]) != 1 or len(group["params"]) != len(every):
        raise ValueError(
            f"{checkpoint}: the optimiser state holds {len(group['params'])} parameters in "
            f"{len(state['param_groups'])} group(s); the model has {len(every)}"
        )
    eps, beta2 = group["eps"], group["betas"][1]
    parts = []
    for i, p in enumerate(every):
        if not p.requires_grad:
            continue
        if i not in state["state"]:
            raise ValueError(f"{checkpoint}: no AdamW state for parameter {i} {tuple(p.shape)}")
        st = state["state"][i]
        v = st["exp_avg_sq"].double() / (1 - beta2 ** float(st["step"]))
        if v.shape != p.shape:
            raise ValueError(f"{checkpoint}: AdamW state {i} has shape {v.shape}, not {p.shape}")
        parts.append((1.0 / (v.sqrt() + eps)).reshape(-1))
    return torch.cat(parts).cpu().numpy()


def interval(x: np.ndarray, resamples: int, rng: np.random.Generator) -> list[float]:
    """90% percentile bootstrap interval of the mean of x."""
    if len(x) < 2:
        return [float("nan"), float("nan")]
    means = x[rng.integers(0, len(x), size=(resamples, len(x)))].mean(axis=1)
    return [float(np.quantile(means, 0.05)), float(np.quantile(means, 0.95))]


def ratio_interval(
    v: np.ndarray, mask: np.ndarray, resamples: int, rng: np.random.Generator
) -> list[float]:
    """90% bootstrap interval of mean(v[mask]) / mean(v) over every group drawn (v (N,), the
    zero-variance ones at 0): numerator and reference (GRPO's mean group) from the same resample,
    so the reference's own error is in the interval."""
    if mask.sum() < 2:
        return [float("nan"), float("nan")]
    idx = rng.integers(0, len(v), size=(resamples, len(v)))  # (R, N)
    vi, mi = v[idx], mask[idx]
    num = (vi * mi).sum(axis=1) / np.maximum(mi.sum(axis=1), 1)
    r = num / vi.mean(axis=1)
    return [float(np.quantile(r, 0.05)), float(np.quantile(r, 0.95))]


def drawn_arrays(values, levels, ks, flat_by_level):
    """Every group drawn: values (zero-variance at 0), levels, k (-1 for zero-variance)."""
    flat_lv = [lv for lv, c in sorted(flat_by_level.items()) for _ in range(c)]
    v = np.concatenate([np.asarray(values, dtype=np.float64), np.zeros(len(flat_lv))])
    lv = np.array(list(levels) + flat_lv)
    k = np.concatenate([np.asarray(ks, dtype=np.int64), np.full(len(flat_lv), -1)])
    return v, lv, k


def summarise(values: np.ndarray, rewards: np.ndarray, levels: list[str], flat_by_level: dict,
              n: int, resamples: int, seed: int) -> dict[str, Any]:  # fmt: skip
    """Value per group by pool level and by k-bin, relative to GRPO's mean group (informative and
    zero-variance groups drawn uniformly; the latter are worth 0); intervals resample every group
    drawn, the reference included. A reference <= 0 (GRPO's mean group lowers the benchmark)
    makes the ratios meaningless: `reference_ok` says so and the raw values are kept."""
    rng = np.random.default_rng(seed)
    k = rewards.sum(axis=1).astype(int)  # (K,) correct rollouts of each group
    v, lv_all, k_all = drawn_arrays(values, levels, k, flat_by_level)
    ref = float(v.mean())  # GRPO's mean value per group drawn
    inf = k_all >= 0
    out: dict[str, Any] = {
        "reference_value_per_group": ref,
        "reference_ci90": interval(v, resamples, rng),
        "reference_ok": bool(ref > 0),
        "informative": int(inf.sum()),
        "zero_variance": int((~inf).sum()),
        "by_level": {},
        "by_k": {},
    }
    for name in sorted(set(lv_all.tolist())):
        m_inf, m_all = (lv_all == name) & inf, lv_all == name
        out["by_level"][name] = {
            "informative": int(m_inf.sum()),
            "zero_variance": int((m_all & ~inf).sum()),
            "value_per_informative_group": float(v[m_inf].mean() / ref) if m_inf.any() else None,
            "ci90": ratio_interval(v, m_inf, resamples, rng),
            "value_per_group_drawn": float(v[m_all].mean() / ref),
            "ci90_drawn": ratio_interval(v, m_all, resamples, rng),
            "share_of_value": float(v[m_inf].sum() / v.sum()),
        }
    edges = sorted({1, 2, 4, n // 4, n // 2, 3 * n // 4, n - 3, n - 1, n})  # bins [lo, hi)
    for lo, hi in zip(edges[:-1], edges[1:]):
        m = (k_all >= lo) & (k_all < hi)
        out["by_k"][f"{lo}-{hi - 1}"] = {
            "groups": int(m.sum()),
            "value_per_group": float(v[m].mean() / ref) if m.any() else None,
            "ci90": ratio_interval(v, m, resamples, rng) if m.any() else None,
            "levels": {name: int(((lv_all == name) & m).sum()) for name in sorted(set(levels))},
        }
    return out


def level_k_table(result: dict[str, Any], mode: str, level_sets: dict[str, list[str]],
                  n: int, resamples: int = 2000, seed: int = 0) -> list[str]:  # fmt: skip
    """Value per informative group (GRPO's mean group = 1) by sets of pool levels x quarter of
    the group correct, with 90% bootstrap intervals (every group drawn resampled): lines."""
    raw = result["raw"]
    flat = {lv: d["zero_variance"] for lv, d in result[mode]["by_level"].items()}
    v, lv, k = drawn_arrays(raw["values"][mode], raw["levels"], raw["k"], flat)
    ref = float(v.mean())
    rng = np.random.default_rng(seed)
    edges = [1, n // 4, n // 2, 3 * n // 4, n]
    lines = [] if ref > 0 else [f"  WARNING: GRPO's mean group has value {ref:.3g} <= 0"]
    for name, members in level_sets.items():
        cells = []
        for lo, hi in zip(edges[:-1], edges[1:]):
            m = np.isin(lv, members) & (k >= lo) & (k < hi)
            ci = ratio_interval(v, m, resamples, rng)
            cells.append(f"k {lo}-{hi - 1}: " + (
                f"{v[m].mean() / ref:.2f} [{ci[0]:.2f}, {ci[1]:.2f}] ({m.sum()})" if m.sum() > 1
                else f"({m.sum()})"))  # fmt: skip
        lines.append(f"  {name}: " + " | ".join(cells))
    return lines


def measure(cfg, checkpoint: str, groups: int, seed: int, batch_prompts: int,
            resamples: int) -> dict[str, Any]:  # fmt: skip
    g = mgn.sample_groups(cfg, checkpoint, groups, seed, batch_prompts, keep_flat=True)
    model, task, sampler, kept = g["model"], g["task"], g["sampler"], g["kept"]
    level_of = task.train["level"]
    informative = [(p, h, r) for p, h, r in kept if r.max() > r.min()]
    flat_by_level: dict[str, int] = {}
    for p, _, r in kept:
        if r.max() == r.min():
            flat_by_level[str(level_of[p])] = flat_by_level.get(str(level_of[p]), 0) + 1
    grad, params, _ = mgn.group_grad_fn(cfg, model, sampler, informative)
    t0 = time.perf_counter()
    ga, acc = heldout_gradients(cfg, model, sampler.generator.tokenizer, task, params)
    weights = {lv: c for lv, (_, c) in acc.items()}
    total = sum(weights.values())
    bench = sum(ga[lv] * (c / total) for lv, c in weights.items())  # grad of the benchmark
    P = {"sgd": None, "adam": adam_preconditioner(checkpoint, model)}
    vals = {k: np.zeros(len(informative)) for k, v in P.items() if k == "sgd" or v is not None}
    per_level = {k: {lv: np.zeros(len(informative)) for lv in ga} for k in vals}
    for i, (_, hs, r) in enumerate(informative):
        gi = grad(hs, r).astype(np.float64)
        for k in vals:
            step = -gi if P[k] is None else -gi * P[k]
            vals[k][i] = float(bench @ step)
            for lv in ga:
                per_level[k][lv][i] = float(ga[lv] @ step)
    levels = [str(level_of[p]) for p, _, _ in informative]
    rewards = np.stack([r for _, _, r in informative])
    n = cfg.group_size
    res = {
        "checkpoint": checkpoint,
        "heldout_accuracy": {lv: a for lv, (a, _) in acc.items()},
        "groups_drawn": len(kept),
        "grad_s": round(time.perf_counter() - t0, 1),
    }
    drawn = len(informative) + sum(flat_by_level.values())
    for k in vals:
        res[k] = summarise(vals[k], rewards, levels, flat_by_level, n, resamples, seed)
        # transfer: the mean first-order change of each held-out level's accuracy per informative
        # group of a pool level, in units of GRPO's mean group's value to the whole benchmark
        # (one positive reference for every cell: a negative cell lowers that level); the cells
        # of a row, weighted by the held-out mix, sum to the row's value per informative group
        ref = res[k]["reference_value_per_group"]
        res[k]["transfer"] = {
            src: {dst: float(per_level[k][dst][np.array(levels) == src].mean() / ref) for dst in ga}
            for src in sorted(set(levels))
        }
        res[k]["grpo_to_level"] = {  # GRPO's mean group drawn, to each held-out level, same units
            dst: float(per_level[k][dst].sum() / drawn / ref) for dst in ga
        }
    res["raw"] = {"levels": levels, "k": rewards.sum(axis=1).astype(int).tolist(),
                  "values": {k: v.tolist() for k, v in vals.items()},
                  "per_level": {k: {lv: v.tolist() for lv, v in d.items()}
                                for k, d in per_level.items()}}  # fmt: skip
    return res


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--config", default="configs/testbed-paper.yaml")
    p.add_argument("--set", action="append", metavar="PATH=VALUE", help="a TrainConfig field")
    p.add_argument("--checkpoint", action="append", help="'warm' or a checkpoint directory")
    p.add_argument("--groups", type=int, default=512, help="informative groups K per policy")
    p.add_argument("--batch-prompts", type=int, default=64)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--resamples", type=int, default=2000)
    p.add_argument("--out", help="write the results as JSON here")
    p.add_argument("--report", help="print the tables of a JSON written by --out and stop")
    p.add_argument(
        "--level-sets",
        default="2-3 terms=2x1d,3x1d;4-7 terms=4x1d,5x1d,6x1d,7x1d;copies=1x4d",
        help="sets of pool levels for the level x k table: NAME=L1,L2;NAME=...",
    )
    args = p.parse_args(argv)
    sets = {
        a.split("=")[0]: a.split("=")[1].split(",") for a in args.level_sets.split(";") if "=" in a
    }
    if args.report:
        saved = json.loads(Path(args.report).read_text())
        for r in saved["results"]:
            for mode in ("sgd", "adam"):
                if mode in r:
                    print(f"{r['checkpoint']} [{mode}] by level set x k of {saved['group_size']}:")
                    print("\n".join(level_k_table(r, mode, sets, saved["group_size"])))
                    print("  to each held-out level:", {
                        s: round(v, 2) for s, v in r[mode]["grpo_to_level"].items()})  # fmt: skip
        return 0
    cfg = mgn._config(args)
    results = []
    for ck in args.checkpoint or ["warm"]:
        r = measure(cfg, ck, args.groups, args.seed, args.batch_prompts, args.resamples)
        results.append(r)
        for mode in ("sgd", "adam"):
            if mode in r:
                print("\n".join(level_k_table(r, mode, sets, cfg.group_size)))
        for k in ("sgd", "adam"):
            if k not in r:
                continue
            print(f"{ck} [{k}] value per informative group (GRPO's mean group = 1):")
            for lv, d in r[k]["by_level"].items():
                print(f"  {lv:6s} {d['informative']:4d} inf {d['zero_variance']:4d} flat  "
                      f"{d['value_per_informative_group'] or 0:7.2f} {np.round(d['ci90'], 2)}  "
                      f"per drawn {d['value_per_group_drawn']:6.2f}")  # fmt: skip
            for b, d in r[k]["by_k"].items():
                if d["groups"]:
                    print(f"  k {b:7s} {d['groups']:4d}  {d['value_per_group']:7.2f} "
                          f"{np.round(d['ci90'], 2)}")  # fmt: skip
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps({"config": args.config, "sets": args.set or [],
                                              "group_size": cfg.group_size,
                                              "seed": args.seed, "results": results}) + "\n")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
