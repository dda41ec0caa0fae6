"""Checks for a config's fields: each raises ValueError naming the field and what it must be.

A strategy's `Config.validate` calls them (and so may yours, docs/strategies.md):

    positive_int(self, "n", 2)              an integer >= 2 (bools refused)
    in_range(self, "p_lower", 0.0, 1.0)     a number in [0, 1]
    one_of(self, "explore", ("ucb", "mean"))
    boolean(self, "resize")                 True or False
"""

from __future__ import annotations

from typing import Any

import numpy as np


def positive_int(cfg: Any, field: str, minimum: int = 1) -> None:
    """`cfg.field` is an integer >= `minimum`."""
    v = getattr(cfg, field)
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < minimum:
        raise ValueError(f"{field} must be an integer >= {minimum}, got {v!r}")


def in_range(cfg: Any, field: str, lo: float, hi: float) -> None:
    """`cfg.field` is a number in [lo, hi]."""
    v = getattr(cfg, field)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not (lo <= v <= hi):
        raise ValueError(f"{field} must be a number in [{lo}, {hi}], got {v!r}")


def one_of(cfg: Any, field: str, choices: tuple[str, ...]) -> None:
    """`cfg.field` is one of `choices`."""
    v = getattr(cfg, field)
    if v not in choices:
        raise ValueError(f"{field} must be one of {list(choices)}, got {v!r}")


def boolean(cfg: Any, field: str) -> None:
    """`cfg.field` is True or False."""
    v = getattr(cfg, field)
    if not isinstance(v, bool):
        raise ValueError(f"{field} must be True or False, got {v!r}")
