"""loop.Learner: one GRPO update per TrainBatch (mini-batches, AdamW, grad clipping, warmup).

A TrainBatch's groups become one tensor batch (ragged groups back to back, see rollalloc.types);
each row is prompt + completion, right-padded:

    row r:  [ p p p p c c c EOS pad pad ]      p prompt tokens, c completion tokens
    mask:   [ . . . 1 1 1 1  .   .      ]      on the positions whose *next* token is a completion
                                               token (the targets are ids shifted by one)

That is the generic path (`pack`, `_logp`: any Hugging Face causal LM). A Qwen2 policy (the
built-in tiny one) takes the fast path, `model.Qwen2Runner.completion_logprobs` on `layout`: each
distinct prompt of the mini-batch is run once, completions without padding attend to it; the
log-probs come out aligned with the completion tokens, (B, Cmax), and `policy_loss` is the same
function on them (equal loss and gradients: tests/train/test_fastpath.py).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np
import torch

from rollalloc.advantages import group_advantages_torch
from rollalloc.train.loss import policy_loss, token_logprobs
from rollalloc.train.model import Qwen2Runner, fast_path_supported
from rollalloc.types import TrainBatch


@dataclass
class LearnerConfig:
    """Optimiser and loss of the GRPO update."""

    lr: float = 2e-5
    """AdamW learning rate (after warmup)."""
    weight_decay: float = 0.0
    """AdamW weight decay."""
    warmup_steps: int = 0
    """Optimiser steps of linear warmup from 0 to `lr`."""
    max_grad_norm: float = 1.0
    """Clip the global gradient norm to this (0: no clipping)."""
    num_minibatches: int = 4
    """Optimiser steps per TrainBatch (each on a random 1/num_minibatches of the rollouts, one
    pass): more updates per rollout at the same compute; the clip becomes active."""
    clip_low: float = 0.2
    """Lower clip of the importance ratio: 1 - clip_low."""
    clip_high: float = 0.28
    """Upper clip of the importance ratio: 1 + clip_high (DAPO's clip-higher)."""
    clip_ratio_c: float | None = 3.0
    """Dual clip (verl's default 3.0): a token with a negative advantage contributes at most
    -A * clip_ratio_c, so a ratio above clip_ratio_c (a stale pilot, an unlikely token) adds no
    gradient. Must be > 1; null turns the dual clip off."""
    kl_coef: float = 0.0
    """Weight of the k3 KL to the initial (reference) policy; 0 turns it off."""
    normalize_std: bool = True
    """Divide advantages by the group std (GRPO); False is Dr. GRPO's mean-centring only."""
    old_logprobs: str = "behaviour"
    """'behaviour': importance ratios against the log-probs recorded at sampling (corrects stale
    buffered rollouts); 'recompute': against the current policy before the update, as the
    Pilot-Commit reference implementation does (no correction)."""
    temperature: float = 1.0
    """Sampling temperature; log-probs are of softmax(logits / temperature). The trainer sets it
    from TrainConfig.temperature."""
    skip_zero_advantage: bool = True
    """Leave rollouts with advantage 0 out of the forward pass when nothing else needs them (no KL,
    behaviour log-probs): exact, their gradient is 0 and their tokens stay in the denominator."""

    def __post_init__(self) -> None:
        c = self.clip_ratio_c
        if c is not None and (isinstance(c, bool) or not isinstance(c, (int, float)) or not c > 1):
            raise ValueError(f"clip_ratio_c must be > 1 (or null: no dual clip), got {c!r}")


def pack(
    store, handles: np.ndarray
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Rows prompt+completion, right-padded: ids (B, L), attention (B, L), target mask and behaviour
    log-probs aligned with the shifted targets (B, L-1)."""
    rows = store.get(handles)
    L = max(len(r.prompt_tokens) + len(r.completion_tokens) for r in rows)
    B = len(rows)
    ids = torch.zeros((B, L), dtype=torch.long)
    attn = torch.zeros((B, L), dtype=torch.long)
    mask = torch.zeros((B, L - 1))
    old = torch.zeros((B, L - 1))
    for i, r in enumerate(rows):
        P, C = len(r.prompt_tokens), len(r.completion_tokens)
        ids[i, :P] = torch.from_numpy(r.prompt_tokens)
        ids[i, P : P + C] = torch.from_numpy(r.completion_tokens)
        attn[i, : P + C] = 1
        mask[i, P - 1 : P + C - 1] = 1.0  # position t predicts token t+1
        old[i, P - 1 : P + C - 1] = torch.from_numpy(r.logprobs)
    return ids, attn, mask, old


def layout(store, handles: np.ndarray) -> tuple[list, np.ndarray, list, torch.Tensor]:
    """The prefix-shared layout of `Qwen2Runner.completion_logprobs`: the distinct prompts (G), the
    (R,) prompt index of each rollout, the R completion token arrays, and the behaviour log-probs
    (R, Cmax) aligned with the completion tokens (0 past a rollout's end)."""
    rows = store.get(handles)
    keys: dict[bytes, int] = {}
    prompts: list = []
    group = np.empty(len(rows), dtype=np.int64)
    for i, r in enumerate(rows):
        key = r.prompt_tokens.tobytes()
        if key not in keys:
            keys[key] = len(prompts)
            prompts.append(r.prompt_tokens)
        group[i] = keys[key]
    completions = [r.completion_tokens for r in rows]
    cmax = max([1] + [len(c) for c in completions])
    old = np.zeros((len(rows), cmax), dtype=np.float32)
    for i, r in enumerate(rows):
        old[i, : len(r.logprobs)] = r.logprobs
    return prompts, group, completions, torch.from_numpy(old)


class GRPOLearner:
    """Updates `model` on the rollouts the Sampler added to `store` (the trainer's
    rollalloc.train.sampler.RolloutStore) under a TrainBatch's handles.

    `version` counts the updates: the policy version the trainer hands to generation
    (`Sampler.sync_weights`) after each one; the learner itself never touches the Sampler."""

    def __init__(
        self, model, store, cfg: LearnerConfig, *, seed: int = 0, fast: bool = True
    ) -> None:
        if cfg.old_logprobs not in ("behaviour", "recompute"):
            raise ValueError(
                f"old_logprobs must be 'behaviour' or 'recompute', got {cfg.old_logprobs!r}"
            )
        if cfg.num_minibatches < 1:
            raise ValueError(f"num_minibatches must be >= 1, got {cfg.num_minibatches}")
        self.model = model
        self.store = store
        self.cfg = cfg
        self.optimizer = torch.optim.AdamW(
            model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay, betas=(0.9, 0.999)
        )
        warm = max(0, cfg.warmup_steps)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda s: min(1.0, (s + 1) / warm) if warm else 1.0
        )
        self.generator = torch.Generator().manual_seed(seed)  # mini-batch shuffles
        self.ref_model = None
        if cfg.kl_coef > 0:
            self.ref_model = copy.deepcopy(model).eval()
            for p in self.ref_model.parameters():
                p.requires_grad_(False)
        self.version = 0
        # a Qwen2 policy: prefix-shared forward without padding (model.Qwen2Runner); the same
        # log-probs, loss and gradients as `_logp` on padded rows (tests/train/test_fastpath.py)
        self.runner = self.ref_runner = None
        if fast and fast_path_supported(model):
            self.runner = Qwen2Runner(model)
            if self.ref_model is not None:
                self.ref_runner = Qwen2Runner(self.ref_model)

    def _logp(self, model, ids: torch.Tensor, attn: torch.Tensor) -> torch.Tensor:
        logits = model(input_ids=ids, attention_mask=attn).logits  # (B, L, V)
        return token_logprobs(logits[:, :-1], ids[:, 1:], self.cfg.temperature)  # (B, L-1)

    def update(self, batch: TrainBatch) -> dict[str, float]:
        cfg, store = self.cfg, self.store
        device = next(self.model.parameters()).device
        R = batch.num_rollouts
        if R == 0:  # a step that trains nothing (CERO's faithful mode can select no prompt)
            return {"loss": 0.0, "active_rollouts": 0.0}
        rewards = torch.as_tensor(batch.rewards, dtype=torch.float32)  # (R,)
        adv = group_advantages_torch(
            rewards, batch.group_sizes, normalize_std=cfg.normalize_std
        )  # (R,)
        rows = store.get(batch.handles)
        lengths = np.array([len(r.completion_tokens) for r in rows])  # (R,)
        versions = np.array([r.policy_version for r in rows])  # (R,)
        needs_all = cfg.kl_coef > 0 or not cfg.skip_zero_advantage
        old_recomputed = None
        if cfg.old_logprobs == "recompute" and R:
            # the reference implementation's choice: old log-probs from the current policy
            with torch.no_grad():
                self.model.eval()
                if self.runner is not None:
                    prompts, group, comps, _ = layout(store, batch.handles)
                    old_recomputed = self.runner.completion_logprobs(
                        prompts, group, comps, cfg.temperature
                    )[0].cpu()  # (R, Cmax)
                else:
                    ids, attn, _, _ = pack(store, batch.handles)
                    old_recomputed = self._logp(
                        self.model, ids.to(device), attn.to(device)
                    ).cpu()  # (R, L-1)
        self.model.train()
        perm = torch.randperm(R, generator=self.generator).numpy()  # (R,)
        sums: dict[str, float] = {}
        total_loss, n_active, grad_norms = 0.0, 0, []
        for mb in np.array_split(perm, cfg.num_minibatches):
            num_tokens = float(lengths[mb].sum())  # denominator: every token of the mini-batch
            active = mb if needs_all else mb[(adv[mb] != 0).numpy()]
            self.optimizer.zero_grad(set_to_none=False)
            if len(active) and self.runner is not None:
                # (B, Cmax) log-probs, mask and old log-probs, aligned with completion tokens
                prompts, group, comps, old = layout(store, batch.handles[active])
                logp, mask = self.runner.completion_logprobs(prompts, group, comps, cfg.temperature)
                if old_recomputed is not None:
                    old = old_recomputed[active][:, : mask.shape[1]]
                old = old.to(device)
                ref = None
                if self.ref_runner is not None:
                    with torch.no_grad():
                        ref = self.ref_runner.completion_logprobs(
                            prompts, group, comps, cfg.temperature
                        )[0]
            elif len(active):
                ids, attn, mask, old = pack(
                    store, batch.handles[active]
                )  # (B, L) (B, L) (B, L-1) (B, L-1)
                if old_recomputed is not None:
                    L1 = mask.shape[1]
                    old = old_recomputed[active][:, :L1]
                ids, attn, mask, old = (
                    ids.to(device),
                    attn.to(device),
                    mask.to(device),
                    old.to(device),
                )
                logp = self._logp(self.model, ids, attn)  # (B, L-1)
                ref = None
                if self.ref_model is not None:
                    with torch.no_grad():
                        ref = self._logp(self.ref_model, ids, attn)  # (B, L-1)
            if len(active):
                loss, stats = policy_loss(
                    logp,
                    old,
                    adv[active].to(device),
                    mask,
                    clip_low=cfg.clip_low,
                    clip_high=cfg.clip_high,
                    num_tokens=num_tokens,
                    ref_logp=ref,
                    kl_coef=cfg.kl_coef,
                    clip_ratio_c=cfg.clip_ratio_c,
                )
                loss.backward()
                total_loss += loss.item()
                w = float(mask.sum())
                for k, v in stats.items():
                    sums[k] = sums.get(k, 0.0) + float(v) * w
                n_active += len(active)
            if cfg.max_grad_norm > 0:
                gn = torch.nn.utils.clip_grad_norm_(self.model.parameters(), cfg.max_grad_norm)
                grad_norms.append(float(gn))
            self.optimizer.step()
            self.scheduler.step()
        self.version += 1  # the trainer hands the new policy to generation (Sampler.sync_weights)
        active_tokens = max(
            1.0, sum(float(lengths[i]) for i in range(R) if needs_all or adv[i] != 0)
        )
        out = {k: v / active_tokens for k, v in sums.items()}
        out.update(
            loss=total_loss / cfg.num_minibatches,
            grad_norm=float(np.mean(grad_norms)) if grad_norms else 0.0,
            lr=float(self.scheduler.get_last_lr()[0]),
            active_rollouts=float(n_active),
            mean_completion_tokens=float(lengths.mean()) if R else 0.0,
            stale_rollouts=float((versions < self.version - 1).sum()),
            reward_mean=float(rewards.mean()) if R else 0.0,
        )
        return out

    def state_dict(self) -> dict:
        return {
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "generator": self.generator.get_state(),
            "version": self.version,
        }

    def load_state_dict(self, s: dict) -> None:
        self.optimizer.load_state_dict(s["optimizer"])
        self.scheduler.load_state_dict(s["scheduler"])
        self.generator.set_state(s["generator"])
        self.version = int(s["version"])
