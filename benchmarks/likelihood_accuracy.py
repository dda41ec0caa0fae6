"""How close does a group's estimate of p come to the exact pass rate? (docs/likelihood-rank.md)

    python benchmarks/likelihood_accuracy.py --config configs/testbed.yaml --prompts 1024 --n 8

At the warm start every run of the config begins from (or at a checkpoint, `--checkpoint DIR`),
`--prompts` pool prompts each get a group of `--n` rollouts from the trainer's own Sampler, and
each estimate of p is compared with the exact pass rate by teacher forcing (P(answer + EOS),
tasks whose answer is the completion):

    rate         (s + 1) / (n + 2), what the rewards alone say
    mass+rate    rollalloc.likelihood, unseen="rate": m_c + u (s + 1) / (n + 2)
    mass+wrong   rollalloc.likelihood, unseen="wrong": m_c if s > 0, else E[p | p <= u, missed]

and, for the look rule of likelihood-rank, `--look K`: the same from the first K rollouts only.
Reported: mean |p_hat - p|, mean |S(p_hat) - S(p)| (S the expected GRPO signal of a group of n),
the correlation of the two S, and the capture of the knows-p choice in random windows of 80 of
which 64 are kept (as estimate_capture.py: 0 the first 64, 1 the best 64 by exact p).
"""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", default="configs/testbed.yaml")
    ap.add_argument("--prompts", type=int, default=1024)
    ap.add_argument("--n", type=int, default=8)
    ap.add_argument("--look", type=int, default=0, help="also the estimates from K rollouts")
    ap.add_argument("--checkpoint", default=None, help="a training checkpoint directory")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    if a.prompts < 80 or a.n < 1 or not (0 <= a.look <= a.n):
        ap.error("--prompts >= 80, --n >= 1 and 0 <= --look <= --n")

    import torch

    from rollalloc.likelihood import pass_rate_estimate, sampled_mass
    from rollalloc.strategies.posterior_signal import signal_table
    from rollalloc.train.config import config_from_dict, load_config, merge
    from rollalloc.train.evaluator import exact_pass_rates
    from rollalloc.train.trainer import build_parts
    from rollalloc.types import Request

    over = {"strategy": "grpo", "seed": a.seed, "threads": a.threads, "budget_rollouts": 8192}
    cfg = config_from_dict(merge(load_config(a.config), over))
    parts = build_parts(cfg, log=None)
    if a.checkpoint:
        from safetensors.torch import load_file

        parts.model.load_state_dict(load_file(f"{a.checkpoint}/model.safetensors"), strict=False)
    rng = np.random.default_rng(a.seed)
    N, n = min(a.prompts, parts.task.num_train), a.n
    ids = rng.choice(parts.task.num_train, N, replace=False)
    p = exact_pass_rates(
        parts.model,
        parts.tokenizer,
        [parts.task.train["prompt"][i] for i in ids],
        [parts.task.train["answer"][i] for i in ids],
        temperature=cfg.temperature,
    )
    torch.manual_seed(a.seed)
    out = parts.sampler.generate(Request(0, 0, ids, np.full(N, n), ("rollout",) * N))
    grid = np.linspace(0.0, 1.0, 1025)
    S_n = signal_table(max(n, 2), grid)[max(n, 2)]

    def S(q):
        return np.interp(q, grid, S_n)

    def estimates(k: int) -> dict[str, np.ndarray]:
        rows = (np.arange(N)[:, None] * n + np.arange(k)[None, :]).reshape(-1)  # first k of each
        x = out.rewards[rows]
        m_c, m_w = sampled_mass(np.full(N, k), out.completion_key[rows], out.logprob[rows], x)
        s = x.reshape(N, k).sum(1)
        kk = np.full(N, float(k))
        return {
            f"rate ({k})": (s + 1) / (k + 2),
            f"mass+rate ({k})": pass_rate_estimate(m_c, m_w, s, kk, "rate"),
            f"mass+wrong ({k})": pass_rate_estimate(m_c, m_w, s, kk, "wrong"),
        }

    est = estimates(n) | (estimates(a.look) if a.look and a.look != n else {})
    wins = [rng.choice(N, 80, replace=False) for _ in range(400)]
    Sp = S(p)
    rows = []
    for name, e in est.items():
        got, best, base = 0.0, 0.0, 0.0
        for c in wins:
            best += np.sort(Sp[c])[-64:].sum()
            base += Sp[c][:64].sum()
            got += Sp[c][np.argsort(-S(e)[c], kind="stable")[:64]].sum()
        rows.append(
            {
                "estimate": name,
                "mae_p": float(np.mean(np.abs(e - p))),
                "mae_S": float(np.mean(np.abs(S(e) - Sp))),
                "corr_S": float(np.corrcoef(S(e), Sp)[0, 1]),
                "capture": float((got - base) / (best - base)),
            }
        )
    m_c, m_w = sampled_mass(np.full(N, n), out.completion_key, out.logprob, out.rewards)
    head = {
        "prompts": N,
        "n": n,
        "mean_exact_p": float(p.mean()),
        "mean_coverage": float(np.mean(m_c + m_w)),
        "bound_violation": float(max(np.max(m_c - p), np.max(p - (1 - m_w)), 0.0)),
    }
    if a.json:
        json.dump({**head, "rows": rows}, sys.stdout, indent=1)
        print()
        return 0
    print(
        f"{N} prompts, groups of {n}: exact p mean {head['mean_exact_p']:.3f}, sampled mass "
        f"m_c + m_w mean {head['mean_coverage']:.3f}, largest bound violation "
        f"{head['bound_violation']:.1e} (other correct spellings than answer + EOS, or rounding)"
    )
    print(f"{'estimate':18s} {'|p_hat-p|':>9s} {'|dS|':>7s} {'corr S':>7s} {'capture':>8s}")
    for r in rows:
        print(
            f"{r['estimate']:18s} {r['mae_p']:9.4f} {r['mae_S']:7.4f} {r['corr_S']:7.3f} "
            f"{r['capture']:8.3f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
