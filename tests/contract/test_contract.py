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
CASES.append(("grpo", {"small_every": 3}))  # GRPO with a one-prompt step after every 3 full ones
# posterior-signal's ranking mode with a filled window (the paper testbed's best configuration
# without strata; strata need a column, tested in tests/strategies/test_posterior_signal_strata.py)
CASES.append(("posterior-signal", {"select": "top", "fill": True, "explore": "mean", "n_probe": 0}))
# likelihood-rank with its look round (two requests a step, looks held between them)
CASES.append(("likelihood-rank", {"probe": 1, "window": 2.0, "unseen": "wrong"}))
# likelihood-rank with a window filled to B groups with variance in expectation (at most 4 x B)
CASES.append(("likelihood-rank", {"fill": True, "window": 4.0, "unseen": "wrong"}))
SUFFIX = {"cero": "-faithful", "posterior-signal": "-top-fill", "grpo": "-small-steps"}
IDS = [
    name + (SUFFIX.get(name) or ("-probe" if cfg.get("probe") else "-fill") if cfg else "")
    for name, cfg in CASES
]

contract_case = strategy_cases(*CASES, ids=IDS)


def test_registry_is_covered():
    assert {"grpo", "dapo", "pilot-commit", "cero", "oracle"} <= {n for n, _ in CASES}
