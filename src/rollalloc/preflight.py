"""Checks that run before any expensive work (warm start, model load, simulation), one function per
fact, shared by `rollalloc train`, `compare`, `simulate` and `report` (docs/reliability.md).

    check_out_dir(out, resume=..., command=...)   a run directory is never overwritten
    read_config_file(path)                         YAML/JSON; a syntax error names file and line
    parse_seeds(text) / parse_names(text)          "--seeds ," and "--strategies ," are refused
    check_strategy(name, opts, num_prompts)        unknown names / options / values, with the pool
    check_fraction(f), check_budget(...)           target fraction in (0, 1]; budget reaches an eval

Everything here raises ValueError (or FileNotFoundError) naming the input; the CLI maps those to
exit code 2 without a traceback. numpy-only: no torch import.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any


def check_out_dir(out: str | Path, *, resume: bool, command: str) -> Path:
    """`out` may be created (or, with `resume`, continued); an existing non-empty directory without
    `resume`, or a path that is a file, is refused before anything is written."""
    path = Path(out)
    if path.exists() and not path.is_dir():
        raise ValueError(f"--out {path} is a file, not a directory")
    if path.is_dir() and not resume and any(path.iterdir()):
        if command == "simulate":
            hint = "simulations are not resumable: give a fresh --out (or delete it)"
        else:
            hint = "continue it with --resume, or give a fresh --out"
        raise ValueError(f"--out {path} already holds a run (it is not empty); {hint}")
    return path


def read_config_file(path: str | Path) -> Any:
    """The data of a YAML (.yaml/.yml) or JSON config file; a syntax error names file and line."""
    import yaml

    p = Path(path)
    if p.exists() and not p.is_file():
        raise ValueError(f"config file {p} is a directory")
    if not p.is_file():
        raise FileNotFoundError(f"config file {p} not found")
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"config file {p} is not UTF-8 text ({e.reason})") from None
    if p.suffix in (".yaml", ".yml"):
        try:
            return yaml.safe_load(text)
        except yaml.YAMLError as e:
            mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
            where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
            problem = getattr(e, "problem", None) or str(e).splitlines()[0]
            raise ValueError(f"{p}: {where}not valid YAML ({problem})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"{p}: line {e.lineno}, column {e.colno}: not JSON ({e.msg})") from None


def parse_names(text: str | list[str], what: str = "--strategies") -> list[str]:
    """Comma-separated names: none, or a repeated one, is refused."""
    names = text if isinstance(text, list) else [t.strip() for t in text.split(",") if t.strip()]
    if not names:
        raise ValueError(f"{what} {text!r}: no names given")
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ValueError(f"{what}: {', '.join(dup)} given twice")
    return names


def parse_seeds(text: str | list[int], what: str = "--seeds") -> list[int]:
    """Comma-separated integer seeds or inclusive ranges (0-4,9): none, a non-integer, a reversed
    range or a repeated seed is refused."""
    if isinstance(text, list):
        items: list[Any] = text
    else:
        items = [t.strip() for t in str(text).split(",")]
        if "" in items and any(items):
            raise ValueError(f"{what} {text!r}: an empty item between commas (e.g. {what} 0,1,2)")
        items = [t for t in items if t]
    if not items:
        raise ValueError(f"{what} {text!r}: no seeds given (e.g. {what} 0,1,2)")
    seeds = []
    for t in items:
        if isinstance(t, str) and "-" in t.lstrip("-"):  # an inclusive range, 0-9
            lo, _, hi = t.partition("-")
            if not (lo.strip().isdigit() and hi.strip().isdigit()) or int(lo) > int(hi):
                raise ValueError(f"{what}: {t!r} is not a range of seeds (e.g. {what} 0-9)")
            seeds.extend(range(int(lo), int(hi) + 1))
            continue
        try:
            if isinstance(t, bool) or (isinstance(t, float) and not t.is_integer()):
                raise ValueError
            seeds.append(int(t))
        except (TypeError, ValueError):
            raise ValueError(f"{what}: {t!r} is not an integer") from None
        if seeds[-1] < 0:
            raise ValueError(f"{what}: {seeds[-1]} is negative")
    dup = sorted({s for s in seeds if seeds.count(s) > 1})
    if dup:
        raise ValueError(f"{what}: seed(s) {dup} given twice")
    return seeds


ORACLES = ("oracle", "oracle-greedy")
"""Strategies that rollalloc.sim.oracle registers (they read the true success probabilities)."""


def load_strategy(name: str) -> Any:
    """The class registered as `name`; the oracles' module is imported first when they are asked
    for (the core never imports the simulator on its own)."""
    from rollalloc.allocator import get_strategy

    if name in ORACLES:
        import rollalloc.sim.oracle  # noqa: F401  (registers the oracles)
    return get_strategy(name)


def check_strategy(name: str, options: dict[str, Any], num_prompts: int | None = None) -> Any:
    """The strategy's config built from `options` (unknown name, option or value: ValueError);
    with `num_prompts`, also the checks that need the pool size (train_prompts, gen_prompts)."""
    cls = load_strategy(name)
    cfg = cls.make_config(**options)
    try:
        cfg.validate(num_prompts if num_prompts is not None else 2**62)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{name}: {e}") from None
    return cfg


def check_fraction(fraction: Any) -> float:
    """The target fraction of the report: a number in (0, 1]."""
    ok = isinstance(fraction, (int, float)) and not isinstance(fraction, bool)
    if not ok or not math.isfinite(fraction) or not 0.0 < fraction <= 1.0:
        raise ValueError(
            f"--fraction {fraction!r}: must be in (0, 1] (target = acc0 + fraction x "
            "(peak of the baseline - acc0))"
        )
    return float(fraction)


def check_budget(budget_rollouts: int, *, step_rollouts: int, eval_every_rollouts: int) -> None:
    """A budget that cannot reach one evaluation after the initial one is refused, naming the
    minimum: one step's rollouts (train_prompts x group_size) and one evaluation interval."""
    minimum = max(step_rollouts, eval_every_rollouts)
    if budget_rollouts < minimum:
        raise ValueError(
            f"budget_rollouts={budget_rollouts:,} cannot reach one evaluation: the minimum is "
            f"{minimum:,} rollouts (one step = train_prompts x group_size = {step_rollouts:,}; "
            f"one evaluation interval = {eval_every_rollouts:,})"
        )
