"""Prompt sources and verifiers for the trainer.

A Task is a train pool and a held-out eval set (columns: at least `prompt` and `answer`) and reward
functions. A reward function is any callable over completions and dataset columns, as in TRL:

    def reward(completions: list[str], *, prompt: list[str], answer: list[str], **columns) -> list[float]

Several reward functions are summed. Model outputs are untrusted: verifiers parse, never evaluate.

    load_task("arith")                                   built-in mixed-difficulty arithmetic
    load_task("reasoning-gym:chain_sum", {"min_terms": 2, ...})
    load_task("data/train.jsonl", {"eval_path": "data/test.jsonl"})   prompt/answer + math-verify
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

logger = logging.getLogger("rollalloc.tasks")

RewardFunc = Callable[..., Sequence[float | None]]


class RewardFunctionError(RuntimeError):
    """A reward function is broken (not merely fed a hostile completion): it raised on every
    completion of a batch, returned the wrong number of values or a non-finite one, or hung."""


def _func_name(func: RewardFunc) -> str:
    return getattr(func, "__name__", None) or type(func).__name__


def _call_with_timeout(func: RewardFunc, timeout_s: float | None, *args, **kwargs):
    """func(*args, **kwargs), or RewardFunctionError after `timeout_s` seconds.

    Python cannot kill a thread, so a hung call is left behind in a daemon thread (it cannot keep
    the process alive) and the run stops with an error naming the function; the last checkpoint
    is untouched. Reward functions that parse untrusted text should bound themselves (see
    tasks/safe_parse.py, tasks/files.py) so this never fires."""
    if timeout_s is None:
        return func(*args, **kwargs)
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = func(*args, **kwargs)
        except BaseException as e:  # re-raised in the caller's thread
            box["error"] = e

    t = threading.Thread(target=target, name=f"reward:{_func_name(func)}", daemon=True)
    t.start()
    t.join(timeout_s)
    if t.is_alive():
        raise RewardFunctionError(
            f"reward function {_func_name(func)} did not return within {timeout_s} s "
            "(Task.reward_timeout_s)"
        )
    if "error" in box:
        raise box["error"]
    return box["value"]


@dataclass
class Task:
    name: str
    train: dict[str, list[Any]]
    """Columns of the training prompt pool; prompt id i is row i."""
    eval: dict[str, list[Any]]
    """Columns of the fixed held-out evaluation set."""
    reward_funcs: list[RewardFunc]
    config: dict[str, Any] = field(default_factory=dict)
    sft: dict[str, list[Any]] | None = None
    """Columns (prompt, answer) of warm-start examples, disjoint from the pool and the eval set
    (None: the task has none). Real pipelines fine-tune on other data than their RL prompts; a
    warm start on the pool itself lets a small model memorise it (docs/testbed.md)."""
    answer_is_completion: bool = False
    """The `answer` column is the one completion the verifier accepts (whitespace aside), so the
    evaluator may compute the exact expected accuracy by teacher forcing (eval_metric='exact')."""
    reward_timeout_s: float | None = 300.0
    """Longest one reward-function call may take before the run stops with RewardFunctionError."""
    reward_failures: int = 0
    """Completions scored 0 because a reward function raised on them (cumulative, this process)."""

    def __post_init__(self) -> None:
        splits = [("train", self.train), ("eval", self.eval)]
        if self.sft is not None:
            splits.append(("sft", self.sft))
        for split, cols in splits:
            for key in ("prompt", "answer"):
                if key not in cols:
                    raise ValueError(f"task {self.name}: {split} split has no {key!r} column")
            lens = {k: len(v) for k, v in cols.items()}
            if len(set(lens.values())) != 1:
                raise ValueError(f"task {self.name}: {split} columns differ in length: {lens}")
            if lens["prompt"] == 0:
                raise ValueError(f"task {self.name}: the {split} split is empty (no prompts)")
            for i, prompt in enumerate(cols["prompt"]):
                if not isinstance(prompt, str) or not prompt.strip():
                    raise ValueError(
                        f"task {self.name}: {split} row {i} has an empty or non-text prompt "
                        f"({prompt!r})"
                    )
            if "id" in cols:
                seen: dict[Any, int] = {}
                for i, ident in enumerate(cols["id"]):
                    if ident in seen:
                        raise ValueError(
                            f"task {self.name}: {split} rows {seen[ident]} and {i} have the "
                            f"same id {ident!r}"
                        )
                    seen[ident] = i
        if not self.reward_funcs:
            raise ValueError(f"task {self.name}: no reward function")

    @property
    def num_train(self) -> int:
        return len(self.train["prompt"])

    @property
    def num_eval(self) -> int:
        return len(self.eval["prompt"])

    def rows(self, split: str, indices: Sequence[int]) -> dict[str, list[Any]]:
        cols = self.train if split == "train" else self.eval
        return {k: [v[i] for i in indices] for k, v in cols.items()}

    def _values(self, func: RewardFunc, completions: list[str], columns: dict[str, list[Any]]):
        values = _call_with_timeout(func, self.reward_timeout_s, list(completions), **columns)
        try:
            n = len(values)
        except TypeError:
            raise RewardFunctionError(
                f"reward function {_func_name(func)} returned {type(values).__name__}, "
                "not a list of numbers"
            ) from None
        if n != len(completions):
            raise RewardFunctionError(
                f"reward function {_func_name(func)} returned {n} values for "
                f"{len(completions)} completions"
            )
        try:
            return np.array([np.nan if v is None else float(v) for v in values]), [
                v is None for v in values
            ]
        except (TypeError, ValueError) as e:
            raise RewardFunctionError(
                f"reward function {_func_name(func)} returned a non-number ({e})"
            ) from None

    def score(self, completions: list[str], split: str, indices: Sequence[int]) -> np.ndarray:
        """Summed reward of each completion of row `indices[j]`: shape (len(completions),).

        A reward function that raises is retried one completion at a time; the completions it
        still raises on score 0 from it, are counted in `reward_failures` and logged. If it raises
        on every completion, it is broken: RewardFunctionError. None counts as 0 (TRL's "not
        applicable"); NaN/inf, a wrong number of values or a hang raise RewardFunctionError."""
        columns = self.rows(split, indices)
        total = np.zeros(len(completions))
        for func in self.reward_funcs:
            try:
                values, is_none = self._values(func, completions, columns)
            except RewardFunctionError:
                raise
            except Exception as batch_error:
                values, is_none = self._score_one_by_one(func, completions, columns, batch_error)
            bad = np.flatnonzero(~np.isfinite(values) & ~np.array(is_none, dtype=bool))
            if len(bad):
                j = int(bad[0])
                raise RewardFunctionError(
                    f"reward function {_func_name(func)} returned {values[j]} (not finite) for "
                    f"completion {j} ({completions[j][:80]!r}) of {split} row {indices[j]}"
                )
            total += np.nan_to_num(values, nan=0.0)
        return total

    def _score_one_by_one(self, func, completions, columns, batch_error: Exception):
        values = np.zeros(len(completions))
        is_none = [False] * len(completions)
        failed = []
        for j in range(len(completions)):
            one = {k: [v[j]] for k, v in columns.items()}
            try:
                v, n = self._values(func, [completions[j]], one)
                values[j], is_none[j] = v[0], n[0]
            except RewardFunctionError:
                raise
            except Exception:
                failed.append(j)  # scored 0
        if len(failed) == len(completions):
            raise RewardFunctionError(
                f"reward function {_func_name(func)} raised on every completion of the batch: "
                f"{type(batch_error).__name__}: {batch_error}"
            ) from batch_error
        self.reward_failures += len(failed)
        logger.warning(
            "reward function %s raised on %d of %d completions (%s: %s); they score 0",
            _func_name(func),
            len(failed),
            len(completions),
            type(batch_error).__name__,
            batch_error,
        )
        return values, is_none


def load_task(spec: str, config: dict[str, Any] | None = None, *, seed: int = 0) -> Task:
    """The task named by `spec`: `arith`, `reasoning-gym:NAME` or a .jsonl/.json/.parquet path."""
    config = dict(config or {})
    if spec == "arith":
        from rollalloc.tasks.arith import make_arith_task

        return make_arith_task(config, seed=seed)
    if spec.startswith("reasoning-gym:"):
        from rollalloc.tasks.rgym import make_reasoning_gym_task

        return make_reasoning_gym_task(spec.split(":", 1)[1], config, seed=seed)
    if spec.endswith((".jsonl", ".json", ".parquet")):
        from rollalloc.tasks.files import make_file_task

        return make_file_task(spec, config, seed=seed)
    raise ValueError(
        f"unknown task {spec!r}: use 'arith', 'reasoning-gym:NAME' or a .jsonl/.parquet file"
    )


__all__ = [
    "RewardFunc",
    "RewardFunctionError",
    "Task",
    "load_task",
    "part_seed",
    "pool_subset",
    "restrict_pool",
    "run_pool",
]


def restrict_pool(
    task: Task, levels: list[str] | None, size: int | None = None, seed: int = 0
) -> Task:
    """The task with its training pool cut to the prompts of `levels` (TrainConfig.pool_levels),
    then to a random `size` of them drawn with `seed` (TrainConfig.pool_size; the pool's order
    kept); None: no cut. Held-out set, warm-start data and rewards unchanged. Prompt ids are
    re-numbered 0..N'-1."""
    if levels is None and size is None:
        return task
    keep = list(range(task.num_train))
    if levels is not None:
        if "level" not in task.train:
            raise ValueError(f"pool_levels: task {task.name} has no `level` column in its pool")
        have = sorted(set(task.train["level"]))
        unknown = sorted(set(levels) - set(have))
        if unknown:
            raise ValueError(f"pool_levels: unknown levels {unknown}; the pool has {have}")
        wanted = set(levels)
        keep = [i for i in keep if task.train["level"][i] in wanted]
    if size is not None:
        if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 1:
            raise ValueError(f"pool_size must be an integer >= 1, got {size!r}")
        if size > len(keep):
            raise ValueError(
                f"pool_size {size} exceeds the {len(keep)} pool prompts"
                + (f" of pool_levels {levels}" if levels is not None else "")
            )
        rng = np.random.default_rng([int(seed), 0x9001])  # one subset per data_seed
        keep = [keep[i] for i in np.sort(rng.choice(len(keep), size=size, replace=False))]
    return pool_subset(task, keep)


def pool_subset(task: Task, keep: Any) -> Task:
    """The task with its training pool cut to the prompts `keep` (indices, in the pool's order)."""
    train = {k: [v[int(i)] for i in keep] for k, v in task.train.items()}
    return replace(task, train=train)


def share_quota(levels: Sequence[Any], size: int) -> dict[Any, int]:
    """How many of `size` prompts each value of a column (a level, an answer) keeps to hold its
    share of the pool: the floors of the shares, plus one for the largest remainders (ties: the
    value seen first)."""
    if not 0 <= size <= len(levels):
        raise ValueError(f"share_quota: size {size} must lie in [0, {len(levels)}] (the prompts)")
    names, counts = np.unique(np.asarray(levels, dtype=object), return_counts=True)
    first = {lvl: i for i, lvl in reversed(list(enumerate(levels)))}
    total = int(counts.sum())
    quota, rem = np.divmod(counts * size, total)  # integers: exact remainders, exact ties
    rank = sorted(range(len(names)), key=lambda j: (-rem[j], first[names[j]]))
    for j in rank[: size - int(quota.sum())]:
        quota[j] += 1
    return {names[j]: int(quota[j]) for j in range(len(names))}


def pick_strata(pick: str) -> str | None:
    """The column whose shares a TrainConfig.pool_pick keeps: 'mid-level' -> 'level', 'mid-answer'
    -> 'answer'; 'mid' and 'random' -> None."""
    return pick.partition("-")[2] or None


def nearest_half(p: Any, size: int, strata: Sequence[Any] | None = None) -> np.ndarray:
    """Indices, in pool order, of the `size` prompts whose pass rate p (one per prompt) is nearest
    1/2 (ties: pool order); with `strata` (one value per prompt) the same within each value, each
    keeping its share of the pool (share_quota). The trainer's pool_pick and the simulator's
    SimPolicy.nearest_half both choose with it."""
    order = np.argsort(np.abs(np.asarray(p, dtype=float) - 0.5), kind="stable")
    if strata is None:
        return np.sort(order[:size])
    quota = share_quota(list(strata), size)
    s = np.asarray(strata, dtype=object)[order]
    return np.sort(np.concatenate([order[s == v][:n] for v, n in quota.items()]))


def part_seed(data_seed: int, pool_seed: int | None) -> int:
    """The seed of pool_size's random part (TrainConfig.pool_seed; None: data_seed)."""
    return data_seed if pool_seed is None else pool_seed


def run_pool(config: dict[str, Any], part: list[int] | None = None) -> Task:
    """The task a run trained on, from its TrainConfig mapping (run.json's `config`): its task,
    task_config and data_seed, the pool cut to pool_levels and pool_size (drawn with pool_seed)
    as the trainer cuts it. A part the policy chose (pool_pick='mid') is run.json's `pool_part`:
    pass it as `part`."""
    seed = config.get("data_seed", 0)
    task = load_task(config["task"], config.get("task_config"), seed=seed)
    if config.get("pool_pick", "random") != "random":
        if part is None:
            raise ValueError(
                f"pool_pick={config['pool_pick']!r}: the policy chose the part; pass run.json's "
                "pool_part to run_pool"
            )
        return pool_subset(restrict_pool(task, config.get("pool_levels")), part)
    cut = part_seed(seed, config.get("pool_seed"))
    return restrict_pool(task, config.get("pool_levels"), config.get("pool_size"), cut)
