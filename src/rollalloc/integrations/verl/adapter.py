"""DataProto glue between rollalloc's ask/tell and verl: no Ray, no workers, testable on a CPU.

One generation pass (a rollalloc Request) becomes one verl batch, one row per rollout:

    Request   prompt_ids [ p7 | p2 | p9 ]   num_rollouts [ 2 | 3 | 1 ]   phases [ commit | pilot | pilot ]
        |  prompts.sample_level_repeat(num_rollouts)      (verl's per-row repeat: ragged groups)
        v
    DataProto rows  p7 p7 | p2 p2 p2 | p9         rollalloc_prompt_id, rollalloc_phase per row
        |  verl generates, its reward manager scores (rm_scores, reward_extra_info["acc"], ...)
        v
    RolloutStore.add -> handles  ->  Outcome(prompt ids, handles, rewards, tokens)  ->  tell

and one training step (a TrainBatch) becomes the batch verl trains on: the rows of its handles, group
after group, each group (pilot ∪ commit of one prompt) under one `uid`, which is all verl's advantage
estimators (GRPO, RLOO, Dr. GRPO, ...) group by.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from verl import DataProto

from rollalloc.likelihood import completion_keys
from rollalloc.types import Request, StepStats, TrainBatch

PROMPT_ID = "rollalloc_prompt_id"
PHASE = "rollalloc_phase"


def build_generation_batch(request: Request, prompts: DataProto) -> DataProto:
    """The batch to generate for `request`: `prompts` (one row per request prompt, in request order)
    repeated `num_rollouts` times each, tagged with prompt id, phase and a `uid` per prompt."""
    if len(prompts) != len(request):
        raise ValueError(
            f"build_generation_batch: {len(prompts)} prompt rows for a request of {len(request)} prompts"
        )
    rows = DataProto(
        batch=prompts.batch,
        non_tensor_batch=dict(prompts.non_tensor_batch),
        meta_info=dict(prompts.meta_info),
    )
    rows.non_tensor_batch[PROMPT_ID] = request.prompt_ids.astype(np.int64)
    rows.non_tensor_batch["uid"] = np.array(
        [f"s{request.step}r{request.round}p{pid}" for pid in request.prompt_ids], dtype=object
    )
    out = rows.sample_level_repeat(request.num_rollouts)
    out.non_tensor_batch[PHASE] = request.phase_of_rollouts().astype(object)
    if len(out) != request.total:
        raise AssertionError(f"expanded {len(out)} rows for a request of {request.total} rollouts")
    return out


def rollout_rewards(batch: DataProto, reward_key: str = "auto") -> np.ndarray:
    """One reward per rollout (R,) float64 for `tell`, from what verl's reward manager wrote.

    reward_key: "score" is the sequence score (rm_scores summed over the response, what verl trains
    on); any other name is read from the reward manager's extra info (e.g. "acc", the 0/1 correctness
    of verl's math scorers, which Pilot-Commit filters on); "auto" takes "acc" where the reward
    manager reports it and "score" otherwise.
    """
    extra_keys = list(batch.meta_info.get("reward_extra_keys", []))
    if reward_key == "auto":
        reward_key = "acc" if "acc" in extra_keys or "acc" in batch.non_tensor_batch else "score"
    if reward_key == "score":
        if batch.batch is None or "rm_scores" not in batch.batch.keys():
            raise ValueError(
                "rollout_rewards: the generated batch has no 'rm_scores': verl's reward manager did "
                "not score it (check reward.* in the verl config)"
            )
        scores = batch.batch["rm_scores"].sum(dim=-1)  # (R, T) -> (R,)
        return scores.detach().to(torch.float64).cpu().numpy()
    if reward_key not in batch.non_tensor_batch:
        raise ValueError(
            f"rollout_rewards: reward key {reward_key!r} is not in the reward manager's extra info "
            f"(it reports {sorted(extra_keys)}); set rollalloc.reward_key to one of them or 'score'"
        )
    values = batch.non_tensor_batch[reward_key]
    try:
        return np.asarray([float(v) for v in values], dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise ValueError(
            f"rollout_rewards: reward_extra_info[{reward_key!r}] is not numeric ({e})"
        ) from e


def response_tokens(batch: DataProto) -> np.ndarray:
    """Generated tokens per rollout (R,) int64: the response mask's row sums."""
    if batch.batch is None:
        return np.zeros(len(batch), dtype=np.int64)
    keys = batch.batch.keys()
    if "response_mask" in keys:
        mask = batch.batch["response_mask"]
    elif "responses" in keys and "attention_mask" in keys:
        resp_len = batch.batch["responses"].shape[-1]
        mask = batch.batch["attention_mask"][:, -resp_len:]
    else:
        return np.zeros(len(batch), dtype=np.int64)
    return mask.sum(dim=-1).to(torch.int64).cpu().numpy()


def response_likelihoods(batch: DataProto) -> tuple[np.ndarray, np.ndarray] | None:
    """(logprob, completion_key), (R,) each, for Outcome: each response's summed rollout log-probs
    (`rollout_log_probs`, the inference engine's, under its response mask) and a key equal for
    equal responses; None when the rollout did not return log-probs (verl's
    `actor_rollout_ref.rollout.calculate_log_probs=True`) or where the response mask leaves
    tokens of the response out (multi-turn tool outputs, not sampled), and the allocator goes
    without."""
    if batch.batch is None or "rollout_log_probs" not in batch.batch.keys():
        return None
    lp = batch.batch["rollout_log_probs"].to(torch.float64)  # (R, T)
    resp = batch.batch["responses"]  # (R, T)
    keys = batch.batch.keys()
    mask = batch.batch["attention_mask"][:, -resp.shape[-1] :].to(torch.bool)
    if "response_mask" in keys and not torch.equal(
        batch.batch["response_mask"].to(torch.bool), mask
    ):
        return None  # multi-turn: tool output tokens were not sampled, the sum is no probability
    logprob = (lp * mask).sum(dim=-1).cpu().numpy()
    ids, m = resp.cpu().numpy(), mask.cpu().numpy()
    return logprob, completion_keys(ids[i][m[i]] for i in range(len(ids)))


def assemble_train_batch(train_batch: TrainBatch, store) -> DataProto:
    """The DataProto verl trains on for `train_batch`: its handles' rows, groups back to back, each
    group under its own `uid` (f"{step}:{group}:{prompt_id}": distinct per group even should a
    strategy train one prompt twice in a step). Checks every row belongs to its group's prompt."""
    if train_batch.num_rollouts == 0:
        raise ValueError(f"step {train_batch.step}: the allocator returned an empty training batch")
    data = store.get(train_batch.handles)
    gidx = train_batch.group_index()  # (R,)
    want = train_batch.prompt_ids[gidx]  # (R,) prompt of each rollout's group
    got = np.asarray(data.non_tensor_batch[PROMPT_ID], dtype=np.int64)
    if not np.array_equal(want, got):
        bad = int(np.flatnonzero(want != got)[0])
        raise AssertionError(
            f"step {train_batch.step}: rollout {int(train_batch.handles[bad])} is of prompt {got[bad]}, "
            f"but the allocator put it in the group of prompt {want[bad]}"
        )
    uids = np.array(
        [f"{train_batch.step}:{g}:{pid}" for g, pid in enumerate(train_batch.prompt_ids)],
        dtype=object,
    )
    data.non_tensor_batch["uid"] = uids[gidx]
    data.non_tensor_batch[PHASE] = np.asarray(train_batch.phases, dtype=object)
    return data


def rollalloc_metrics(stats: StepStats, train_batch: TrainBatch | None = None) -> dict[str, float]:
    """The step's allocation figures as flat `rollalloc/...` metrics for verl's Tracking logger."""
    m: dict[str, Any] = {
        "rollalloc/step": stats.step,
        "rollalloc/epoch": stats.epoch,
        "rollalloc/rounds": stats.rounds,
        "rollalloc/groups": stats.groups,
        "rollalloc/rollouts": stats.rollouts,
        "rollalloc/trained_rollouts": stats.trained_rollouts,
        "rollalloc/discarded_rollouts": stats.discarded_rollouts,
        "rollalloc/cum_rollouts": stats.cum_rollouts,
        "rollalloc/cum_tokens": stats.cum_tokens,
        "rollalloc/effective_prompt_ratio": stats.effective_prompt_ratio,
        "rollalloc/mean_group_reward_var": stats.mean_group_reward_var,
    }
    for phase, n in stats.rollouts_by_phase.items():
        m[f"rollalloc/rollouts_by_phase/{phase}"] = n
    for phase, n in stats.tokens_by_phase.items():
        m[f"rollalloc/tokens_by_phase/{phase}"] = n
    for decision, n in stats.decisions.items():
        m[f"rollalloc/decisions/{decision}"] = n  # kept / too_easy / too_hard / evicted / stale ...
    for key, v in stats.extra.items():
        m[f"rollalloc/{key}"] = v  # buffer_size (Pilot-Commit), mu (CERO), ...
    if train_batch is not None and train_batch.num_groups:
        m["rollalloc/group_size/mean"] = float(train_batch.group_sizes.mean())
        m["rollalloc/group_size/min"] = int(train_batch.group_sizes.min())
        m["rollalloc/group_size/max"] = int(train_batch.group_sizes.max())
        m["rollalloc/reward/mean"] = float(train_batch.rewards.mean())
    return {k: float(v) for k, v in m.items()}
