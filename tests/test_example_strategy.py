"""examples/strategy_evict_solved.py (the strategy of docs/strategies.md) passes the contract suite
shipped as rollalloc.testing.contract, imported the way a user's own test file does."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from rollalloc.testing.contract import *  # noqa: F403  (the contract tests)
from rollalloc.testing.contract import strategy_cases

_path = Path(__file__).resolve().parents[1] / "examples" / "strategy_evict_solved.py"
_spec = importlib.util.spec_from_file_location("strategy_evict_solved", _path)
example = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = example  # dataclasses look their module up
_spec.loader.exec_module(example)

contract_case = strategy_cases(example.EvictSolved)


def test_it_evicts_solved_prompts():
    from rollalloc.state import EVICTED
    from rollalloc.testing import BernoulliPool, drive

    alloc = example.EvictSolved(100, seed=0, train_prompts=10, n=4)
    drive(alloc, BernoulliPool.mixed(100, seed=0, solved=0.3, hopeless=0.0), 10)
    assert (alloc.table.status == EVICTED).sum() >= 20
