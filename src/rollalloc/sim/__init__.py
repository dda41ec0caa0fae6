"""The simulator: a simulated policy whose per-prompt success probabilities move as GRPO trains.

    SimPolicy (policy.py)       latent skills + memorisation -> p_i; held-out accuracy
    SimSampler / SimLearner /
    SimEvaluator (roles.py)     the Sampler / Learner / Evaluator that `rollalloc.loop.run` drives
    Oracle (oracle.py)          registered strategy "oracle": sees the true p_i (the ceiling)
    simulate (run.py)           strategies x seeds through the driver loop
    presets/*.json              pools: dapo17k, deepmath, uniform (add a JSON file to add one)

Equations, assumptions and their sources: docs/simulator.md.
"""

from rollalloc.sim import oracle  # noqa: F401  (registers the "oracle" strategy)
from rollalloc.sim.policy import Preset, SimConfig, SimPolicy, available_presets, load_preset
from rollalloc.sim.roles import (
    SimEvaluator,
    SimLearner,
    SimSampler,
    expected_group_signal,
    group_signal,
)

__all__ = [
    "Preset",
    "SimConfig",
    "SimEvaluator",
    "SimLearner",
    "SimPolicy",
    "SimSampler",
    "available_presets",
    "expected_group_signal",
    "group_signal",
    "load_preset",
]
