"""Strategies decide through the base class's public API and never touch its private state.

A hook gives each told group a verdict (`train` / `hold` / `discard` with a reason, `count` for
other decisions) and reads `ready`, `round`, `step_rollouts`; the base class applies the verdicts
(batch, handles, accounting). Read from the source of every registered strategy and of the example
of docs/strategies.md: a strategy that writes `self._ready`, reads `self._acc`, calls any other
`_` name of the base class but its hooks, or imports a private name of rollalloc fails here."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import numpy as np
import pytest

import rollalloc.sim  # noqa: F401  (registers the simulator's oracles)
from rollalloc.allocator import (
    STRATEGY_HOOKS,
    Allocator,
    available_strategies,
    get_strategy,
)
from rollalloc.testing import TablePool

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "strategy_evict_solved.py"


class Bare(Allocator):
    name = "bare-api-test"  # not registered: only the base class's attributes


def base_private_names() -> set[str]:
    names = set(dir(Allocator)) | set(vars(Bare(10, train_prompts=2)))
    return {n for n in names if n.startswith("_") and not n.startswith("__")} - set(STRATEGY_HOOKS)


def strategy_files() -> list[Path]:
    files = {Path(inspect.getsourcefile(get_strategy(n))) for n in available_strategies()}
    return sorted(files | {EXAMPLE})


def test_the_check_knows_the_private_state():
    private = base_private_names()
    assert {"_ready", "_acc", "_live", "_released", "_round", "_pending", "_order"} <= private
    assert {"_sync_live", "_discard_handles"} <= private
    assert not private & {"train", "hold", "discard", "count", "draw", "make_request"}
    assert len(strategy_files()) >= 10  # every built-in file, the oracles' and the example


@pytest.mark.parametrize("path", strategy_files(), ids=lambda p: p.name)
def test_a_strategy_touches_no_private_name_of_the_base_class(path):
    source = path.read_text()
    assert "self._ready" not in source and "self._acc" not in source
    private = base_private_names()
    touched = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("rollalloc"):
            bad = [a.name for a in node.names if a.name.startswith("_")]
            assert not bad, f"{path.name} imports private {bad} from {node.module}"
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "self"
            and node.attr in private
        ):
            touched.add(f"line {node.lineno}: self.{node.attr}")
    assert not touched, f"{path.name} touches the base class's private state: {sorted(touched)}"


def test_verdicts_are_applied_by_the_base_class():
    """train / discard / count on a bare allocator: the batch, the released handles, the
    accounting and StepStats.decisions follow the verdicts, in the order given."""

    class Halves(Allocator):
        name = "halves-api-test"

        def _next_request(self):
            return None if self.ready else self.make_request(self.draw(8), 3, "rollout")

        def _on_results(self, request, groups):
            assert self.round == 1 and self.step_rollouts == {"rollout": 24}
            self.count("seen", len(groups))
            self.discard(groups, "odd", where=groups.prompt_ids % 2 == 1)
            self.train([g for g in groups if g.prompt_id % 2 == 0], "even")
            self.count("nothing", 0)

    alloc = Halves(8, seed=0, train_prompts=4)
    req = alloc.ask()
    alloc.tell(TablePool({i: 1 for i in range(8)}).generate(req))
    assert [g.prompt_id for g in alloc.ready] == [i for i in req.prompt_ids.tolist() if i % 2 == 0]
    assert alloc.step_decisions == {"seen": 8, "odd": 4, "even": 4}
    assert alloc.ask() is None
    b = alloc.batch()
    assert b.prompt_ids.tolist() == [i for i in req.prompt_ids.tolist() if i % 2 == 0]
    odd_handles = [h for h, i in zip(range(24), np.repeat(req.prompt_ids, 3)) if i % 2 == 1]
    assert sorted(b.released.tolist()) == odd_handles
    assert b.stats.discarded_rollouts == 12 and b.stats.trained_rollouts == 12
    assert list(b.stats.decisions) == ["seen", "odd", "even"]
    assert alloc.cum_trained + alloc.cum_discarded == alloc.cum_rollouts == 24
    assert alloc.live_handles == 0 and alloc.ready == () and alloc.round == 0
    alloc.check_handles()
