"""One configuration grammar for train, compare and simulate (rollalloc.settings)."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from rollalloc.cli import build_parser, main
from rollalloc.settings import apply_sets, field_docs, parse_set
from rollalloc.sim.cli import FLAGS, SimulateConfig, check_strategies, resolve_settings
from rollalloc.sim.run import strategy_options as sim_strategy_options
from rollalloc.train.cli import TRAIN_FLAGS, _base_from_args
from rollalloc.train.compare import run_config
from rollalloc.train.config import TrainConfig, config_from_dict

SIM = ["simulate", "--preset", "uniform", "--budget-rollouts", "4096", "--out", "o"]
SIM += ["--train-prompts", "16", "--group-size", "8", "--strategies", "grpo,pilot-commit"]
TRAIN = ["--max-steps", "1", "--train-prompts", "16", "--group-size", "8"]


def parse(argv: list[str]):
    return build_parser().parse_args(argv)


def test_parse_set_paths_and_yaml_values():
    assert parse_set("learner.lr=0.001") == (("learner", "lr"), 0.001)
    assert parse_set("options.pilot-commit.n_pilot=4") == (
        ("options", "pilot-commit", "n_pilot"),
        4,
    )
    assert parse_set("learner.clip_ratio_c=null") == (("learner", "clip_ratio_c"), None)
    assert parse_set("task_config.terms=[2, 3]") == (("task_config", "terms"), [2, 3])
    assert parse_set("strategy=dapo") == (("strategy",), "dapo")
    assert parse_set("a.b=x=y") == (("a", "b"), "x=y")  # the first = splits
    for bad, message in (
        ("seed", r"--set 'seed': expected KEY=VALUE"),
        ("learner.=1", r"--set 'learner.=1': empty key"),
        ("learner.lr=[1", r"--set 'learner.lr=\[1': the value is not valid YAML"),
    ):
        with pytest.raises(ValueError, match=message):
            parse_set(bad)


def test_the_same_options_in_train_compare_and_simulate():
    """`--set options.pilot-commit.n_pilot=4` gives pilot-commit the same allocator options in all
    three commands, and train's `strategy_config.n_pilot=4` is the same run."""
    opt = ["--set", "options.pilot-commit.n_pilot=4", "--set", "options.pilot-commit.p_lower=0.1"]
    train = config_from_dict(
        _base_from_args(parse(["train", "--strategy", "pilot-commit"] + TRAIN + opt))
    )
    assert train.strategy_config == {"n_pilot": 4, "p_lower": 0.1}
    old_spelling = ["--set", "strategy_config.n_pilot=4", "--set", "strategy_config.p_lower=0.1"]
    same = config_from_dict(
        _base_from_args(parse(["train", "--strategy", "pilot-commit"] + TRAIN + old_spelling))
    )
    assert same.to_dict() == train.to_dict()

    args = parse(["compare", "--strategies", "grpo,pilot-commit", "--out", "o"] + TRAIN + opt)
    base = _base_from_args(args)
    compared = run_config(base, "pilot-commit", 0, Path("o"))
    assert run_config(base, "grpo", 0, Path("o")).strategy_config == {}  # grpo has no n_pilot

    st = resolve_settings(parse(SIM + opt))
    check_strategies(st)
    simulated = sim_strategy_options(
        "pilot-commit", train_prompts=16, group_size=8, options=st["options"]["pilot-commit"]
    )
    assert train.strategy_options() == compared.strategy_options() == simulated
    assert simulated["n_pilot"] == 4 and simulated["n_commit"] == 4 and simulated["p_lower"] == 0.1


def test_simulate_old_strategy_form_is_an_alias_with_a_note(capsys):
    new = resolve_settings(parse(SIM + ["--set", "options.pilot-commit.n_pilot=4"]))
    old = resolve_settings(parse(SIM + ["--set", "pilot-commit.n_pilot=4"]))
    assert old == new and new["options"] == {"pilot-commit": {"n_pilot": 4}}
    err = capsys.readouterr().err
    assert "STRATEGY.KEY form is deprecated; write --set options.pilot-commit.n_pilot=4" in err


@pytest.mark.parametrize(
    "argv, message",
    [
        (["train", "--set", "learner.lrr=1"], r"--set 'learner.lrr=1': learner.lrr: unknown field"),
        (["train", "--set", "lerning_rate=1"], r"lerning_rate: unknown field \(known: task, "),
        (["train", "--set", "grpo.n=4"], r"a strategy's options are set as options.grpo.KEY"),
        (["train", "--set", "seed.x=1"], r"--set 'seed.x=1': seed is not a mapping"),
        (["train", "--set", "options.dapo.n=4"], r"train: options for strategies not in the run"),
        (["train", "--set", "options.grpo=4"], r"options.grpo must be a mapping"),
        (
            ["train", "--strategy", "dapo", "--set", "options.dapo.bogus=1"],
            r"unknown option\(s\) \['bogus'\]",
        ),
        (SIM + ["--set", "budget=4"], r"budget: unknown field \(known: strategies, preset"),
        (SIM + ["--set", "sim.x.y=1"], r"SimConfig: unknown field"),
        (
            SIM + ["--set", "options.cero.eta=1"],
            r"options for strategies not in the run: \['cero'\]",
        ),
        (SIM + ["--set", "options.grpo.bogus=1"], r"unknown option\(s\) \['bogus'\]"),
        (SIM + ["--set", "baseline.x=1"], r"baseline is not a mapping"),
    ],
)
def test_errors_name_the_problem(argv, message, capsys, tmp_path, monkeypatch):
    import rollalloc.train.trainer

    def reached(*a, **k):  # a check that let the command through must not train for minutes
        raise AssertionError("the command passed its checks")

    monkeypatch.setattr(rollalloc.train.trainer, "train", reached)
    out = str(tmp_path / "never-written")
    argv = [out if a == "o" else a for a in argv]
    argv = argv + (TRAIN + ["--out", out] if argv[0] == "train" else [])
    assert main(argv) == 2
    assert re.search(message, capsys.readouterr().err)


def test_compare_refuses_options_of_a_strategy_it_does_not_run(tmp_path, capsys):
    argv = ["compare", "--strategies", "grpo", "--out", str(tmp_path / "c"), "--set"]
    assert main(argv + ["options.dapo.n=4"] + TRAIN) == 2
    assert "compare: options for strategies not in the run: ['dapo']" in capsys.readouterr().err
    assert not (tmp_path / "c").exists()


def test_set_into_a_yaml_options_mapping(tmp_path):
    cfg = tmp_path / "t.yaml"
    cfg.write_text("strategy: dapo\noptions:\n  dapo: {gen_prompts: 24}\nmax_steps: 1\n")
    args = parse(["train", "--config", str(cfg), "--set", "options.dapo.max_rounds=3"])
    assert config_from_dict(_base_from_args(args)).strategy_config == {
        "gen_prompts": 24,
        "max_rounds": 3,
    }
    d = {"options": None}  # `options:` with nothing under it
    assert apply_sets(d, ["options.dapo.n=4"], TrainConfig) == {"options": {"dapo": {"n": 4}}}


def test_flags_are_derived_from_the_dataclasses():
    """Each flag's help is its field's docstring and default: a field has one home."""
    parsers = build_parser()._subparsers._group_actions[0].choices  # {command: its parser}
    for command, cls, names in (
        ("train", TrainConfig, (*TRAIN_FLAGS, "strategy", "seed", "out")),
        ("compare", TrainConfig, TRAIN_FLAGS),
        ("simulate", SimulateConfig, FLAGS),
    ):
        actions = {a.dest: a for a in parsers[command]._actions}
        docs = field_docs(cls)
        fields = {f.name: f for f in dataclasses.fields(cls)}
        for name in names:
            a, default = actions[name], fields[name].default
            assert a.option_strings == ["--" + name.replace("_", "-")]
            assert " ".join(docs[name][1].split()) in a.help, (command, name)
            assert a.default is None  # a flag not given leaves the config file's value
            if isinstance(default, (int, float, str)) and not isinstance(default, bool):
                assert f"(default: {default})" in a.help.replace(",", ""), (command, name)
    # every simulate setting but the two mappings is a flag
    assert set(FLAGS) == {f.name for f in dataclasses.fields(SimulateConfig)} - {"options", "sim"}
