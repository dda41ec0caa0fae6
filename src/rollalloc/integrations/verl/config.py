"""The `rollalloc:` section of the verl config (a Hydra overlay, config/rollalloc_trainer.yaml).

    rollalloc:
      strategy: pilot-commit          # any registered strategy: grpo, dapo, pilot-commit, cero, ...
      seed: 0
      reward_key: auto                # "acc" where verl's reward manager reports it, else "score"
      train_prompts: ${data.train_batch_size}
      reward_min: 0.0
      reward_max: 1.0
      pilot_commit: {n_pilot: 16, n_commit: 48, ...}   # options of the chosen strategy, by its name
      cero: {...}                                      # with "-" written "_"

A strategy's section holds fields of its config dataclass (the ones users set; any other with
`+rollalloc.<section>.<field>=...`); null means "the strategy's default". Unknown options raise
ValueError naming them (the strategy's own validation; tests/integrations/test_verl_overlay.py checks
that every key of the file is a real option).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rollalloc.allocator import Allocator, make_allocator

SHARED = ("train_prompts", "reward_min", "reward_max")
INTEGRATION_KEYS = ("strategy", "seed", "reward_key", "checkpoint")


def _plain(cfg: Any) -> dict[str, Any]:
    if cfg is None:
        return {}
    try:
        from omegaconf import DictConfig, OmegaConf

        if isinstance(cfg, DictConfig):
            return OmegaConf.to_container(cfg, resolve=True)  # type: ignore[return-value]
    except ImportError:  # pragma: no cover
        pass
    if isinstance(cfg, Mapping):
        return dict(cfg)
    raise ValueError(f"rollalloc config must be a mapping, got {type(cfg).__name__}")


def section_name(strategy: str) -> str:
    """The config section of a strategy: "pilot-commit" -> "pilot_commit"."""
    return strategy.replace("-", "_")


def strategy_options(cfg: Any) -> tuple[str, int, dict[str, Any]]:
    """(strategy, seed, options for make_allocator) from the `rollalloc:` section."""
    c = _plain(cfg)
    strategy = c.get("strategy")
    if not strategy:
        raise ValueError("rollalloc.strategy is not set (e.g. rollalloc.strategy=pilot-commit)")
    seed = c.get("seed", 0)
    seed = 0 if seed is None else int(seed)
    options = {k: c[k] for k in SHARED if c.get(k) is not None}
    section = c.get(section_name(strategy)) or {}
    if not isinstance(section, Mapping):
        raise ValueError(f"rollalloc.{section_name(strategy)} must be a mapping of options")
    options.update({k: v for k, v in section.items() if v is not None})
    # the mapping every trainer shares; verl trains a constant batch (no short steps)
    from rollalloc.allocator import get_strategy

    options = get_strategy(strategy).Config.options_for_group_size(
        c.get("group_size"),  # e.g. ${actor_rollout_ref.rollout.n}; None: the section's sizes
        train_prompts=options.pop("train_prompts", None),
        constant_batch=True,
        **options,
    )
    return strategy, seed, options


def allocator_from_config(cfg: Any, num_prompts: int) -> Allocator:
    """The allocator the `rollalloc:` section describes, over a pool of `num_prompts` prompts."""
    strategy, seed, options = strategy_options(cfg)
    try:
        return make_allocator(strategy, num_prompts=num_prompts, seed=seed, **options)
    except ValueError as e:
        raise ValueError(f"rollalloc config ({strategy}): {e}") from e


def reward_key(cfg: Any) -> str:
    return str(_plain(cfg).get("reward_key") or "auto")
