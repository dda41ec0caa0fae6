"""verl custom reward function for rollalloc's `arith` task (reward.custom_reward_function.path).

verl's reward manager calls `compute_score(data_source, solution_str, ground_truth, extra_info)` per
rollout; the score is rollalloc's own verifier (`rollalloc.tasks.arith.arith_reward`: 1.0 for the
exact integer answer, else 0.0), reported as `score` and `acc` (what `rollalloc.reward_key=auto`
reads)."""

from __future__ import annotations

from typing import Any


def compute_score(
    data_source: str, solution_str: str, ground_truth: str, extra_info: Any = None, **_: Any
) -> dict[str, float]:
    from rollalloc.tasks.arith import arith_reward

    r = float(arith_reward([solution_str], answer=[str(ground_truth)])[0])
    return {"score": r, "acc": r}
