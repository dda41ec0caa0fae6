"""Integrations with training frameworks (verl, TRL) and what they share."""

from __future__ import annotations

from typing import Any


def allocator_batch_shape(allocator: Any) -> tuple[int, int] | None:
    """(groups, rollouts per group) every step of `allocator` trains, or None if it does not say.

    The group size is the sum of the config fields the strategy's `group_split` names (GRPO's n,
    Pilot-Commit's n_pilot + n_commit, SPEED-RL's n_screen + n_continue, CERO's n_max): the one
    mapping from group size to options, read backwards. None for a strategy without a fixed group
    size or with a variable number of groups (CERO's faithful mode, fixed_batch=False; grpo with
    small_every). A strategy may declare `fixed_batch_shape` itself. TRL and verl size their
    batches from it."""
    shape = getattr(allocator, "fixed_batch_shape", None)
    if callable(shape):
        shape = shape()
    if shape is not None:
        groups, size = shape
        return int(groups), int(size)
    cfg = getattr(allocator, "config", None)
    if cfg is None or not hasattr(cfg, "train_prompts") or not hasattr(cfg, "group_split"):
        return None
    if getattr(allocator, "fixed_batch", True) is False and not hasattr(cfg, "on_max_rounds"):
        return (
            None  # fewer groups on some steps by design (CERO's faithful mode, grpo's small_every)
        )
    fields = type(cfg).group_split(2)  # the field names; their values are this config's
    if not fields or not all(hasattr(cfg, f) for f in fields):
        return None
    return int(cfg.train_prompts), int(sum(getattr(cfg, f) for f in fields))
