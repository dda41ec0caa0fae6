"""The registry: strategy names -> Allocator classes, and `make_allocator`.

`@register` on a strategy class makes it `make_allocator(name, ...)`, `--strategy name` and part of
the contract suite (tests/contract/). The built-in strategies register when `rollalloc.strategies`
is first imported (on the first lookup); the simulator registers its oracles when `rollalloc.sim`
is imported: the core never imports the simulator.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rollalloc.allocator import Allocator

REGISTRY: dict[str, type[Allocator]] = {}


def register(cls: type[Allocator]) -> type[Allocator]:
    """Class decorator: make a strategy available to `make_allocator` under `cls.name`."""
    if not cls.name:
        raise ValueError(f"{cls.__name__} has no name")
    if cls.name in REGISTRY and REGISTRY[cls.name] is not cls:
        raise ValueError(f"strategy name {cls.name!r} is registered already")
    REGISTRY[cls.name] = cls
    return cls


def _load_builtin() -> None:
    import rollalloc.strategies  # noqa: F401  (registers the built-in strategies)


def available_strategies() -> list[str]:
    """Registered strategy names, in registration order."""
    _load_builtin()
    return list(REGISTRY)


def get_strategy(name: str) -> type[Allocator]:
    _load_builtin()
    if name not in REGISTRY:
        raise ValueError(f"unknown strategy {name!r}; available: {', '.join(REGISTRY)}")
    return REGISTRY[name]


def make_allocator(name: str, num_prompts: int, seed: int = 0, **config: Any) -> Allocator:
    """Build the strategy registered as `name` over a pool of `num_prompts` prompts."""
    return get_strategy(name)(num_prompts, seed=seed, **config)
