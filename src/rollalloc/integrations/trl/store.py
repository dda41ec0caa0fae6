"""The rollouts behind the allocator's handles, as TRL produced them, kept until a TrainBatch frees them.

The allocator holds only integer handles (DESIGN.md); the adapter owns what they name. A Pilot-Commit
pilot survives in the replay buffer for up to `max_off_steps` steps, and across a checkpoint, so the
store keeps everything TRL needs to train on it later without generating it again:

    handle -> prompt id (dataset index), prompt token ids, completion token ids, decoded completion,
              tool mask (multi-turn `env_mask` of a rollout_func) or None,
              sampling log-probs per completion token (vLLM) or None,
              rewards per reward function (F,), policy version (global step it was generated at),
              extra columns reward functions logged for it (`log_extra`)

Old log-probs of the training policy are *not* stored: TRL recomputes them with the current policy
when the batch is assembled, which is what the reference Pilot-Commit does for stale pilots.

On disk (`save` / `load`): numpy arrays (`rollouts.npz`, loaded with allow_pickle=False) for the token
ids, log-probs and rewards, flat with offsets, and JSON (`rollouts.json`) for the decoded completions
and extra columns. Never pickle.
"""

from __future__ import annotations

import json
import os
import zipfile
from dataclasses import dataclass, field
from typing import Any

import numpy as np

STORE_FORMAT = "rollalloc.trl.rollouts/1"
NPZ_KEYS = (
    "handles",
    "prompt_id",
    "policy_version",
    "prompt_tok",
    "prompt_off",
    "compl_tok",
    "compl_off",
    "has_tool_mask",
    "tool_mask",
    "has_logps",
    "logps",
    "rewards_per_func",
)
"""The arrays of rollouts.npz."""


@dataclass
class StoredRollout:
    prompt_id: int
    prompt_ids: list[int]
    completion_ids: list[int]
    completion: Any  # str, or a list of message dicts for conversational prompts
    rewards_per_func: np.ndarray  # (F,) float32, NaN where a reward function returned None
    policy_version: int
    tool_mask: list[int] | None = None  # (len(completion_ids),)
    sampling_logps: list[float] | None = None  # (len(completion_ids),)
    extra: dict[str, Any] = field(default_factory=dict)  # log_extra columns of this rollout


class RolloutStore:
    """handle -> StoredRollout for every rollout the allocator may still refer to
    (rollalloc.store.RolloutStore; `save` / `load` for a checkpoint)."""

    def __init__(self, num_reward_funcs: int) -> None:
        self.num_reward_funcs = int(num_reward_funcs)
        self._rollouts: dict[int, StoredRollout] = {}
        self.next_handle = 0

    def __len__(self) -> int:
        return len(self._rollouts)

    def __contains__(self, handle: int) -> bool:
        return int(handle) in self._rollouts

    def live_handles(self) -> np.ndarray:
        return np.array(sorted(self._rollouts), dtype=np.int64)

    def add(self, rollouts: list[StoredRollout]) -> np.ndarray:
        """Store rollouts under fresh handles, returned in the same order: shape (R,)."""
        handles = np.arange(self.next_handle, self.next_handle + len(rollouts), dtype=np.int64)
        for h, r in zip(handles.tolist(), rollouts):
            if r.rewards_per_func.shape != (self.num_reward_funcs,):
                raise ValueError(
                    f"RolloutStore.add: rewards_per_func has shape {r.rewards_per_func.shape}, "
                    f"expected ({self.num_reward_funcs},)"
                )
            self._rollouts[h] = r
        self.next_handle += len(rollouts)
        return handles

    def get(self, handles: np.ndarray) -> list[StoredRollout]:
        missing = [int(h) for h in np.asarray(handles).reshape(-1) if int(h) not in self._rollouts]
        if missing:
            raise KeyError(
                f"RolloutStore: the allocator refers to handles that are not stored: {missing[:10]}"
                + (f" (+{len(missing) - 10} more)" if len(missing) > 10 else "")
            )
        return [self._rollouts[int(h)] for h in np.asarray(handles).reshape(-1)]

    def release(self, handles: np.ndarray) -> None:
        """Forget handles the allocator no longer refers to (unknown handles are ignored)."""
        for h in np.asarray(handles).reshape(-1).tolist():
            self._rollouts.pop(int(h), None)

    # ---------------------------------------------------------------- save / load (no pickle)

    def save(self, directory: str) -> None:
        os.makedirs(directory, exist_ok=True)
        hs = sorted(self._rollouts)
        rs = [self._rollouts[h] for h in hs]

        def flat_int(seqs: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
            lengths = np.array([len(s) for s in seqs], dtype=np.int64)
            offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)  # (N+1,)
            values = np.fromiter(
                (t for s in seqs for t in s), dtype=np.int64, count=int(offsets[-1])
            )
            return values, offsets

        for h, r in zip(hs, rs):
            for name, arr in (("tool_mask", r.tool_mask), ("sampling_logps", r.sampling_logps)):
                if arr is not None and len(arr) != len(r.completion_ids):
                    raise ValueError(
                        f"RolloutStore.save: handle {h}: {name} has {len(arr)} entries for "
                        f"{len(r.completion_ids)} completion tokens"
                    )
        prompt_tok, prompt_off = flat_int([r.prompt_ids for r in rs])
        compl_tok, compl_off = flat_int([r.completion_ids for r in rs])
        # tool mask and sampling log-probs share the completion offsets; rows without them are flagged
        has_tool_mask = np.array([r.tool_mask is not None for r in rs], dtype=bool)
        tool_mask = np.concatenate(
            [
                np.asarray(
                    r.tool_mask if r.tool_mask is not None else [1] * len(r.completion_ids),
                    dtype=np.int8,
                )
                for r in rs
            ]
            or [np.zeros(0, dtype=np.int8)]
        )
        has_logps = np.array([r.sampling_logps is not None for r in rs], dtype=bool)
        logps = np.concatenate(
            [
                np.asarray(
                    [np.nan if x is None else x for x in r.sampling_logps]
                    if r.sampling_logps is not None
                    else [np.nan] * len(r.completion_ids),
                    dtype=np.float64,
                )
                for r in rs
            ]
            or [np.zeros(0, dtype=np.float64)]
        )
        rewards = (
            np.stack([r.rewards_per_func for r in rs]).astype(np.float32)
            if rs
            else np.zeros((0, self.num_reward_funcs), dtype=np.float32)
        )
        np.savez(  # the keys are NPZ_KEYS
            os.path.join(directory, "rollouts.npz"),
            handles=np.array(hs, dtype=np.int64),
            prompt_id=np.array([r.prompt_id for r in rs], dtype=np.int64),
            policy_version=np.array([r.policy_version for r in rs], dtype=np.int64),
            prompt_tok=prompt_tok,
            prompt_off=prompt_off,
            compl_tok=compl_tok,
            compl_off=compl_off,
            has_tool_mask=has_tool_mask,
            tool_mask=tool_mask,
            has_logps=has_logps,
            logps=logps,
            rewards_per_func=rewards,
        )
        meta = {
            "format": STORE_FORMAT,
            "next_handle": self.next_handle,
            "num_reward_funcs": self.num_reward_funcs,
            "completions": [r.completion for r in rs],
            "extra": [r.extra for r in rs],
        }
        with open(os.path.join(directory, "rollouts.json"), "w") as f:
            json.dump(meta, f)

    @classmethod
    def load(cls, directory: str) -> RolloutStore:
        meta_path = os.path.join(directory, "rollouts.json")
        try:
            with open(meta_path) as f:
                meta = json.load(f)
        except json.JSONDecodeError as e:
            raise ValueError(
                f"RolloutStore.load: {meta_path} is damaged (line {e.lineno}: {e.msg})"
            ) from None
        if not isinstance(meta, dict):
            raise ValueError(f"RolloutStore.load: {meta_path} is damaged (not a JSON object)")
        if meta.get("format") != STORE_FORMAT:
            raise ValueError(
                f"RolloutStore.load: {directory} holds format {meta.get('format')!r}, expected {STORE_FORMAT!r}"
            )
        npz_path = os.path.join(directory, "rollouts.npz")
        if not os.path.isfile(npz_path):
            raise FileNotFoundError(f"RolloutStore.load: {npz_path} is missing")
        try:
            with np.load(npz_path, allow_pickle=False) as z:
                a = {k: z[k] for k in z.files}
        except (zipfile.BadZipFile, OSError, ValueError, EOFError) as e:
            raise ValueError(
                f"RolloutStore.load: {npz_path} is damaged ({type(e).__name__}: {e})"
            ) from None
        missing = sorted(set(NPZ_KEYS) - set(a))
        if missing:
            raise ValueError(f"RolloutStore.load: {npz_path} is damaged (no arrays {missing})")
        store = cls(meta["num_reward_funcs"])
        store.next_handle = int(meta["next_handle"])
        po, co = a["prompt_off"], a["compl_off"]
        for i, h in enumerate(a["handles"].tolist()):
            cs, ce = int(co[i]), int(co[i + 1])
            store._rollouts[h] = StoredRollout(
                prompt_id=int(a["prompt_id"][i]),
                prompt_ids=a["prompt_tok"][po[i] : po[i + 1]].tolist(),
                completion_ids=a["compl_tok"][cs:ce].tolist(),
                completion=meta["completions"][i],
                rewards_per_func=a["rewards_per_func"][i].copy(),
                policy_version=int(a["policy_version"][i]),
                tool_mask=a["tool_mask"][cs:ce].tolist() if a["has_tool_mask"][i] else None,
                sampling_logps=a["logps"][cs:ce].tolist() if a["has_logps"][i] else None,
                extra=meta["extra"][i],
            )
        if store._rollouts and max(store._rollouts) >= store.next_handle:
            raise ValueError(
                "RolloutStore.load: a stored handle is >= next_handle; the checkpoint is corrupt"
            )
        return store
