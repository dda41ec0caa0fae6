"""rollalloc: which prompts get how many rollouts in group-based RL post-training."""

from rollalloc.types import Outcome, Request, StepStats, TrainBatch

__version__ = "0.1.0"

__all__ = ["Outcome", "Request", "StepStats", "TrainBatch", "__version__"]
