"""rollalloc inside TRL: `RollallocGRPOTrainer`, a `GRPOTrainer` whose rollouts an allocator decides.

    pip install 'rollalloc[trl]'

    from rollalloc.allocator import make_allocator
    from rollalloc.integrations.trl import RollallocGRPOTrainer

    allocator = make_allocator("pilot-commit", num_prompts=len(ds), seed=0,
                               train_prompts=8, n_pilot=2, n_commit=6)
    args = GRPOConfig(..., num_generations=8, per_device_train_batch_size=64)  # 8 groups x 8
    trainer = RollallocGRPOTrainer(model=model, reward_funcs=reward, args=args, train_dataset=ds,
                                   processing_class=tokenizer, allocator=allocator)
    trainer.train()

The design (which TRL methods are overridden and why) is the docstring of `.trainer`; the user guide
is docs/trl.md. Importing this package without trl installed raises an ImportError that says so.
"""

from __future__ import annotations

try:
    import trl as _trl  # noqa: F401
except ImportError as e:  # pragma: no cover - exercised only without trl
    raise ImportError(
        "rollalloc.integrations.trl needs TRL (tested with trl 1.16): pip install 'rollalloc[trl]'"
    ) from e

from rollalloc.integrations.trl.store import RolloutStore, StoredRollout
from rollalloc.integrations.trl.trainer import (
    RollallocGRPOTrainer,
    load_rollalloc_state,
    save_rollalloc_state,
)

__all__ = [
    "RollallocGRPOTrainer",
    "RolloutStore",
    "StoredRollout",
    "load_rollalloc_state",
    "save_rollalloc_state",
]
