"""The GRPO/DAPO policy loss on ragged groups, nanoGPT-style: one function, shapes in comments.

    ratio_t  = exp(clamp(logp_t - old_logp_t, -20, 20))      per completion token t
    l_t      = max(-A * ratio_t, -A * clip(ratio_t, 1 - eps_low, 1 + eps_high))
    l_t      = min(l_t, -A * c)            if A < 0 (dual clip, c = clip_ratio_c = 3)
    loss     = sum_t l_t * mask_t / number of completion tokens in the batch        (token-mean)

with A the group-normalised advantage of the token's rollout (rollalloc.advantages), asymmetric
clipping eps_low=0.2, eps_high=0.28 (DAPO's clip-higher) and, optionally, beta * k3-KL to a reference
policy. The dual clip and the log-ratio clamp are verl's (`compute_policy_loss_vanilla` in
verl/trainer/ppo/core_algos.py; dual-clip PPO, arXiv:1912.09729): a token with A < 0 whose ratio
exceeds c contributes the constant -A * c (no gradient) instead of -A * ratio, so one very stale or
unlikely token cannot dominate the update; `clip_ratio_c=None` turns it off. `old_logp` is the log-prob of the policy that *generated* the token (behaviour log-probs
recorded at sampling) by default, so a rollout generated several updates ago (a buffered
Pilot-Commit pilot) is importance-corrected; the Pilot-Commit reference implementation instead
recomputes old log-probs with the current policy just before the update, which makes every rollout
look on-policy (`old_logprobs="recompute"` reproduces that).
"""

from __future__ import annotations

import torch


def token_logprobs(logits: torch.Tensor, targets: torch.Tensor, temperature: float) -> torch.Tensor:
    """Log-prob of each target under softmax(logits / T): (B, T, V), (B, T) -> (B, T)."""
    logp = torch.log_softmax(logits.float() / temperature, dim=-1)  # (B, T, V)
    return logp.gather(-1, targets.unsqueeze(-1)).squeeze(-1)  # (B, T)


def policy_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    clip_low: float = 0.2,
    clip_high: float = 0.28,
    num_tokens: float | None = None,
    ref_logp: torch.Tensor | None = None,
    kl_coef: float = 0.0,
    clip_ratio_c: float | None = 3.0,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Clipped surrogate, token-mean over `num_tokens` (default: mask.sum()).

    logp, old_logp, ref_logp: (B, T) log-probs of the completion tokens; advantages: (B,);
    mask: (B, T) 1.0 on completion tokens. `num_tokens` lets a caller that leaves rollouts out of
    the forward pass (zero advantage, no KL: their gradient is exactly zero) keep the denominator of
    the whole mini-batch. `clip_ratio_c` (> 1) caps the loss of negative-advantage tokens at
    -A * clip_ratio_c (verl's dual clip); None leaves them unbounded.
    """
    if clip_ratio_c is not None and not clip_ratio_c > 1.0:
        raise ValueError(f"clip_ratio_c must be > 1 (or None: no dual clip), got {clip_ratio_c}")
    mask = mask.float()  # (B, T)
    denom = mask.sum() if num_tokens is None else torch.as_tensor(float(num_tokens))
    denom = torch.clamp(denom, min=1.0)
    log_ratio = logp - old_logp  # (B, T)
    # clamped before exp as in verl: exp(+-20) stays finite, so a capped token's zero gradient
    # is 0 and not 0 * inf = nan
    ratio = torch.exp(torch.clamp(log_ratio, min=-20.0, max=20.0))  # (B, T)
    adv = advantages[:, None].to(logp.dtype)  # (B, 1)
    pg_unclipped = -adv * ratio  # (B, T)
    pg_clipped = -adv * torch.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high)  # (B, T)
    per_token = torch.maximum(pg_unclipped, pg_clipped)  # (B, T) the pessimistic bound
    dual = torch.zeros_like(per_token, dtype=torch.bool)  # (B, T) where the dual clip binds
    if clip_ratio_c is not None:
        pg_dual = -adv * clip_ratio_c  # (B, 1)
        dual = (adv < 0) & (per_token > pg_dual)  # (B, T)
        per_token = torch.where(adv < 0, torch.minimum(per_token, pg_dual), per_token)  # (B, T)
    kl = torch.zeros_like(per_token)
    if ref_logp is not None and kl_coef > 0:
        d = ref_logp - logp  # (B, T)
        kl = torch.exp(d) - d - 1.0  # (B, T) k3 estimator of KL(pi || ref), >= 0
        per_token = per_token + kl_coef * kl
    loss = (per_token * mask).sum() / denom  # () token-mean over the batch
    with torch.no_grad():
        n = torch.clamp(mask.sum(), min=1.0)
        stats = {
            # the clip is active where the clipped term is the max: ratio below 1-eps for A<0 ...
            "clip_frac_low": (((ratio < 1 - clip_low) & (adv < 0)).float() * mask).sum() / n,
            # ... and above 1+eps for A>0
            "clip_frac_high": (((ratio > 1 + clip_high) & (adv > 0)).float() * mask).sum() / n,
            # ... and, for A<0, the dual clip: ratio above clip_ratio_c (verl's pg_clipfrac_lower)
            "clip_frac_dual": (dual.float() * mask).sum() / n,
            "approx_kl": ((-log_ratio) * mask).sum() / n,  # KL(old || new) estimate
            "ratio_mean": (ratio * mask).sum() / n,
            "kl_ref": (kl * mask).sum() / n,
        }
    return loss, stats
