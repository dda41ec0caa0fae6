"""The contract every registered strategy passes (DESIGN.md, "The ask/tell contract").

The suite is shipped as `rollalloc.testing.contract` (a user's strategy runs it with one import,
docs/strategies.md); here it runs over the whole registry, so a strategy is tested the moment it
registers, plus CERO's faithful variable-batch mode.
"""

from __future__ import annotations

import rollalloc.sim  # noqa: F401  (registers the simulator's oracle)
from rollalloc.allocator import available_strategies
from rollalloc.testing.contract import *  # noqa: F403  (the contract tests)
from rollalloc.testing.contract import strategy_cases

CASES = [(name, {}) for name in available_strategies()]
CASES.append(("cero", {"fixed_batch": False}))  # CERO's faithful, variable-batch mode
IDS = [name + ("-faithful" if cfg else "") for name, cfg in CASES]

contract_case = strategy_cases(*CASES, ids=IDS)


def test_registry_is_covered():
    assert {"grpo", "dapo", "pilot-commit", "cero", "oracle"} <= {n for n, _ in CASES}
