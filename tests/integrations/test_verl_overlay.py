"""The verl overlay (config/rollalloc_trainer.yaml) names only real options: every key of a
strategy's section is a field of that strategy's config dataclass, so setting a listed key never
fails as "unknown" (a CERO key, `max_rounds`, outlived the option once). Runs without verl: the file
is plain YAML read here, the fields come from the registry."""

from __future__ import annotations

import dataclasses
import importlib.util
from pathlib import Path

import pytest
import yaml

from rollalloc.allocator import AllocatorConfig
from rollalloc.registry import available_strategies, get_strategy

# the package itself imports verl; its location does not
PACKAGE = Path(importlib.util.find_spec("rollalloc.integrations.verl").origin).parent
SECTION = yaml.safe_load((PACKAGE / "config" / "rollalloc_trainer.yaml").read_text())["rollalloc"]
SHARED = {f.name for f in dataclasses.fields(AllocatorConfig)}
# docs/verl.md, "Configuration (Hydra overlay)": the keys that are not a strategy's section
TOP = {"strategy", "seed", "reward_key", "train_prompts", "reward_min", "reward_max", "checkpoint"}


def _section(strategy: str) -> str:
    return strategy.replace("-", "_")  # "pilot-commit" -> rollalloc.pilot_commit


def test_every_top_level_key_is_an_integration_key_a_shared_option_or_a_section():
    sections = {_section(s) for s in available_strategies()}
    for key, value in SECTION.items():
        if isinstance(value, dict):
            assert key in sections, f"rollalloc.{key}: no registered strategy has this section"
        else:
            assert key in TOP, key


@pytest.mark.parametrize(
    "strategy", [s for s in available_strategies() if _section(s) in SECTION]
)  # the others' options are set with +rollalloc.<section>.<option>
def test_a_strategys_section_lists_only_its_own_options(strategy):
    section = SECTION[_section(strategy)]
    fields = {f.name for f in dataclasses.fields(get_strategy(strategy).Config)} - SHARED
    assert set(section) <= fields, sorted(set(section) - fields)


def test_likelihood_rank_lists_every_option_of_the_paper_configuration():
    # the configuration docs/likelihood-rank.md recommends must be settable without a "+"
    assert {"unseen", "strata", "quota", "fill", "window", "probe"} <= set(
        SECTION["likelihood_rank"]
    )


def _config_module():
    """rollalloc/integrations/verl/config.py, loaded alone (the package imports verl)."""
    spec = importlib.util.spec_from_file_location("verl_config", PACKAGE / "config.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_pilot_commit_without_eviction_is_settable_in_the_overlay():
    # a null in a section means the strategy's default, so exclude_threshold=null keeps eviction
    # (1.0); evict=false is how the overlay switches it off (docs/testbed.md, "Eviction switched
    # off"); the allocator built from it never marks a prompt
    cfg = _config_module()
    base = {"strategy": "pilot-commit", "train_prompts": 4, "group_size": 8}
    _, _, nulled = cfg.strategy_options({**base, "pilot_commit": {"exclude_threshold": None}})
    assert "exclude_threshold" not in nulled or nulled["exclude_threshold"] == 1.0
    listed = {**base, "group_size": 64, "pilot_commit": {**SECTION["pilot_commit"], "evict": False}}
    _, _, off = cfg.strategy_options(listed)  # the overlay's section as shipped, evict set off
    assert off["evict"] is False and off["n_pilot"] == 16 and off["exclude_threshold"] == 1.0
    alloc = cfg.allocator_from_config({**base, "pilot_commit": {"evict": False}}, 40)
    assert alloc.config.evict is False and alloc.config.exclude_threshold == 1.0
