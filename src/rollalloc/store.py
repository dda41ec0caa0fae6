"""The rollouts behind the allocator's handles: one protocol for every backend's store.

The allocator holds integer handles only (DESIGN.md); a store holds what they name. The trainer (our
own, the simulator's run, the verl and TRL trainers) builds one store and hands it to the Sampler,
which adds every generated rollout to it, and to the Learner, which reads a TrainBatch's rollouts
from it; the loop releases the handles a TrainBatch gives back.

    handles = store.add(rollouts)      a batch of R rollouts -> (R,) int64 fresh handles, in order
    rows    = store.get(handles)       the rollouts behind `handles`, in that order
    store.release(handles)             forget them (the allocator no longer refers to them)
    len(store)                         rollouts stored (live handles)
    store.live_handles()               their handles, sorted (R,) int64

What "a batch of rollouts" is stays the backend's: a list of `Rollout` (our trainer,
`rollalloc.train.sampler`), columns of prompt ids, rewards, tokens and policy versions (the
simulator, `rollalloc.sim.roles`), a list of `StoredRollout` (TRL), a verl `DataProto` (verl).
Handles are issued in increasing order and never reused. A store that outlives a checkpoint saves
itself in its backend's checkpoint format: `state_dict` / `load_state_dict` (our trainer: arrays in
the trainer's checkpoint), `save(directory)` / `load(directory)` (TRL, verl); the simulator's runs
are not checkpointed.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class RolloutStore(Protocol):
    """Rollouts by integer handle, from generation until the allocator releases them."""

    def add(self, rollouts: Any) -> np.ndarray:
        """Store a batch of rollouts under fresh handles; returns them, (R,) int64, in order."""
        ...

    def get(self, handles: np.ndarray) -> Any:
        """The rollouts behind `handles` (R,), in that order; an unknown handle raises."""
        ...

    def release(self, handles: np.ndarray) -> None:
        """Forget `handles`: the allocator trained or discarded their rollouts."""
        ...

    def live_handles(self) -> np.ndarray:
        """The handles stored, sorted: (N,) int64."""
        ...

    def __len__(self) -> int:
        """Rollouts stored (live handles)."""
        ...
