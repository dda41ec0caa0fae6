"""Group size -> strategy options: one mapping (AllocatorConfig.options_for_group_size), and train,
compare, simulate, verl and TRL all build the same options from it."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

import rollalloc.sim  # noqa: F401  (registers the oracle)
from rollalloc.allocator import available_strategies, get_strategy
from rollalloc.sim.run import strategy_options as simulate_options
from rollalloc.train.compare import run_config
from rollalloc.train.config import TrainConfig

SIZES = (4, 8, 16, 24, 64)
SRC = Path(__file__).resolve().parents[1] / "src" / "rollalloc"


def verl_options(section: dict) -> dict:
    """verl's mapping (integrations/verl/config.py), loaded without verl installed."""
    spec = importlib.util.spec_from_file_location(
        "_verl_config", SRC / "integrations" / "verl" / "config.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.strategy_options(section)[2]


def five(strategy: str, g: int, tmp_path: Path, **user) -> dict[str, dict]:
    cfg = TrainConfig(strategy=strategy, group_size=g, train_prompts=8, strategy_config=user)
    base = {"group_size": g, "train_prompts": 8, "max_steps": 1, "strategy_config": user}
    section = {"strategy": strategy, "group_size": g, "train_prompts": 8}
    section[strategy.replace("-", "_")] = user  # verl's section of the strategy
    return {
        "train": cfg.strategy_options(),
        "compare": run_config(base, strategy, 0, tmp_path).strategy_options(),
        "simulate": simulate_options(strategy, train_prompts=8, group_size=g, options=user),
        "verl": verl_options(section),
        "trl": cfg.strategy_options(constant_batch=True),  # integrations/trl/testbed.py
    }


@pytest.mark.parametrize("strategy", available_strategies())
def test_train_compare_simulate_verl_trl_agree(strategy, tmp_path):
    split_of = get_strategy(strategy).Config.group_split
    for g in SIZES:
        got = five(strategy, g, tmp_path)
        split = split_of(g)
        assert split or strategy.startswith("oracle"), f"{strategy} has no group size"
        assert not split or sum(split.values()) == g
        for where, opts in got.items():
            assert opts["train_prompts"] == 8, where
            assert {k: opts[k] for k in split} == split, (where, g, opts)
        # the options the real trainer wires from the live policy (the oracles' success_prob) are
        # there under train and compare; simulate wires its own inside the run
        wired = set(getattr(get_strategy(strategy), "trainer_options", lambda _: {})(None))
        for where in ("train", "compare", "trl"):
            assert wired <= set(got[where]), (where, wired)
            got[where] = {k: v for k, v in got[where].items() if k not in wired}
        # the flexible trainers alike, the constant-batch ones alike
        assert got["train"] == got["compare"] == got["simulate"], g
        assert got["verl"] == got["trl"], g
        if "on_max_rounds" in got["train"]:
            assert (
                got["train"]["on_max_rounds"] == "train" and got["trl"]["on_max_rounds"] == "error"
            )
        if strategy == "cero":
            assert got["trl"]["fixed_batch"] is True and "fixed_batch" not in got["train"]


def test_reference_splits():
    pc = get_strategy("pilot-commit").Config.group_split
    assert pc(64) == {"n_pilot": 16, "n_commit": 48} and pc(128) == {"n_pilot": 32, "n_commit": 96}
    assert pc(8) == {"n_pilot": 2, "n_commit": 6}
    assert get_strategy("speed-rl").Config.group_split(24) == {"n_screen": 4, "n_continue": 20}
    assert get_strategy("cero").Config.group_split(16) == {"n_max": 16}
    for s in ("grpo", "dapo", "greso", "mopps", "knapsack"):
        assert get_strategy(s).Config.group_split(16) == {"n": 16}


def test_greso_follows_the_group_size_under_train():
    """The bug: `rollalloc train --strategy greso --group-size 16` kept greso's own n = 8."""
    assert TrainConfig(strategy="greso", group_size=16).strategy_options()["n"] == 16


def test_user_option_wins_or_is_refused(tmp_path):
    got = five("pilot-commit", 16, tmp_path, n_pilot=4, p_lower=0.25)
    for opts in got.values():
        assert (opts["n_pilot"], opts["n_commit"], opts["p_lower"]) == (4, 12, 0.25)
    got = five("pilot-commit", 16, tmp_path, n_commit=10)
    assert all((o["n_pilot"], o["n_commit"]) == (6, 10) for o in got.values())
    options = get_strategy("pilot-commit").Config.options_for_group_size
    with pytest.raises(ValueError, match=r"n_pilot=4 \+ n_commit=4 = 8 contradicts group_size=16"):
        options(16, train_prompts=8, constant_batch=False, n_pilot=4, n_commit=4)
    with pytest.raises(ValueError, match=r"n_pilot=20 contradicts group_size=16.*n_commit=-4"):
        options(16, train_prompts=8, constant_batch=False, n_pilot=20)
    with pytest.raises(ValueError, match="n=8 contradicts group_size=16"):
        TrainConfig(strategy="greso", group_size=16, strategy_config={"n": 8}).strategy_options()
    with pytest.raises(ValueError, match="on_max_rounds='train'.*constant"):
        options(16, train_prompts=8, constant_batch=True, on_max_rounds="train")
    with pytest.raises(ValueError, match="fixed_batch=False.*constant"):
        get_strategy("cero").Config.options_for_group_size(
            16, train_prompts=8, constant_batch=True, fixed_batch=False
        )
    with pytest.raises(ValueError, match="group_size must be an integer >= 2"):
        options(1, train_prompts=8, constant_batch=False)
    # an explicit on_max_rounds wins where the batch may be short
    assert (
        options(8, train_prompts=8, constant_batch=False, on_max_rounds="error")["on_max_rounds"]
        == "error"
    )


def test_pilot_fraction_ablation_knob():
    cfg = TrainConfig(strategy="pilot-commit", group_size=8, pilot_fraction=0.5)
    assert (cfg.strategy_options()["n_pilot"], cfg.strategy_options()["n_commit"]) == (4, 4)


def test_core_does_not_import_the_simulator():
    code = (
        "import sys, rollalloc; a = rollalloc.make_allocator('grpo', 10, train_prompts=2); "
        "sim = sorted(m for m in sys.modules if m.startswith('rollalloc.sim')); "
        "assert not sim, sim; assert 'oracle' not in rollalloc.available_strategies(); "
        "import rollalloc.sim; assert 'oracle' in rollalloc.available_strategies()"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
