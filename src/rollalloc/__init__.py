"""rollalloc: which prompts get how many rollouts in group-based RL post-training.

alloc = make_allocator("pilot-commit", num_prompts=N, seed=0, train_prompts=128)
while (request := alloc.ask()) is not None:      # prompt ids x rollouts, one generation pass
    alloc.tell(Outcome(prompt_ids, handles, rewards))
batch = alloc.batch()                            # ragged groups of rollout handles to train on
"""

from rollalloc.advantages import group_advantages
from rollalloc.allocator import (
    Allocator,
    AllocatorConfig,
    MaxRoundsError,
    PoolExhaustedError,
    available_strategies,
    get_strategy,
    make_allocator,
    register,
)
from rollalloc.loop import run
from rollalloc.state import load_state, save_state
from rollalloc.store import RolloutStore
from rollalloc.types import Outcome, Request, StepStats, TrainBatch

__version__ = "0.1.0"

__all__ = [
    "Allocator",
    "AllocatorConfig",
    "MaxRoundsError",
    "Outcome",
    "PoolExhaustedError",
    "Request",
    "RolloutStore",
    "StepStats",
    "TrainBatch",
    "available_strategies",
    "get_strategy",
    "group_advantages",
    "load_state",
    "make_allocator",
    "register",
    "run",
    "save_state",
    "__version__",
]
