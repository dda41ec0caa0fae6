"""Run any rollalloc strategy inside verl (https://github.com/volcengine/verl), without forking it.

Install with `pip install rollalloc[verl]` (tested against verl 0.9.1). See docs/verl.md.

    python -m rollalloc.integrations.verl.main \\
        rollalloc.strategy=pilot-commit rollalloc.pilot_commit.n_pilot=16 ...   # + verl's own options

The pieces, usable on their own:

    RolloutStore                verl rollouts (DataProto rows) behind rollalloc's integer handles
    build_generation_batch      a Request -> the DataProto verl's rollout workers generate
    rollout_rewards             a generated batch -> one reward per rollout for `tell`
    assemble_train_batch        a TrainBatch -> the ragged DataProto verl trains on (uid per group)
    rollalloc_metrics           StepStats -> `rollalloc/...` metrics for verl's logger
    RollallocRayPPOTrainer      verl's RayPPOTrainer whose generation step is driven by ask/tell

Without a GPU (docs/verl.md, "verl end to end on CPUs"): `cpu_platform` (verl platform "cpu": gloo),
`hf_rollout` (rollout backend "hf_cpu": an HF model in one Ray actor), both registered through the
`verl.plugins` entry points, and `python -m rollalloc.integrations.verl.cpu_run`.
"""

from __future__ import annotations

try:
    import verl  # noqa: F401
except ImportError as e:  # pragma: no cover - exercised only without verl
    raise ImportError(
        "rollalloc.integrations.verl needs verl: pip install 'rollalloc[verl]' (verl>=0.9,<0.10)"
    ) from e

from rollalloc.integrations.verl.adapter import (
    assemble_train_batch,
    build_generation_batch,
    rollalloc_metrics,
    rollout_rewards,
)
from rollalloc.integrations.verl.config import allocator_from_config, strategy_options
from rollalloc.integrations.verl.store import RolloutStore

__all__ = [
    "RolloutStore",
    "allocator_from_config",
    "assemble_train_batch",
    "build_generation_batch",
    "rollalloc_metrics",
    "rollout_rewards",
    "strategy_options",
    "RollallocRayPPOTrainer",
]


def __getattr__(name: str):
    # The trainer imports Ray and verl's worker stack: load it only when asked for.
    if name == "RollallocRayPPOTrainer":
        from rollalloc.integrations.verl.trainer import RollallocRayPPOTrainer

        return RollallocRayPPOTrainer
    raise AttributeError(name)
