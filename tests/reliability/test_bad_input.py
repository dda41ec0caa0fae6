"""Bad input catalogue: each case must fail with an error naming the problem (or take the
documented fallback), and the CLI must exit non-zero without losing what was saved
(docs/reliability.md). One row per case; the table is the catalogue."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from rollalloc.allocator import MaxRoundsError, PoolExhaustedError, make_allocator
from rollalloc.tasks import RewardFunctionError, Task, load_task
from rollalloc.train.config import SMOKE_TESTBED
from rollalloc.types import Outcome

ROOT = Path(__file__).resolve().parents[2]

# ------------------------------------------------------------------ dataset files


def _jsonl(rows) -> bytes:
    return b"".join(json.dumps(r).encode() + b"\n" for r in rows)


GOOD = [{"prompt": f"{i}+1=", "answer": str(i + 1)} for i in range(4)]

FILE_CASES = [
    # (id, file name, bytes, error type, message pattern)
    (
        "missing-column",
        "t.jsonl",
        _jsonl(GOOD[:2] + [{"prompt": "1+1="}]),
        ValueError,
        r"row 2 does not have the columns",
    ),
    (
        "no-answer-column",
        "t.jsonl",
        _jsonl([{"prompt": "1="}] * 3),
        ValueError,
        r"no 'answer' column",
    ),
    (
        "empty-prompt",
        "t.jsonl",
        _jsonl(GOOD + [{"prompt": "", "answer": "0"}]),
        ValueError,
        r"empty or non-text prompt",
    ),
    (
        "blank-prompt",
        "t.jsonl",
        _jsonl(GOOD + [{"prompt": "  \n", "answer": "0"}]),
        ValueError,
        r"empty or non-text prompt",
    ),
    (
        "number-prompt",
        "t.jsonl",
        _jsonl(GOOD + [{"prompt": 12, "answer": "0"}]),
        ValueError,
        r"non-text prompt \(12\)",
    ),
    (
        "non-utf8",
        "t.jsonl",
        _jsonl(GOOD) + b'{"prompt": "\xff\xfe", "answer": "1"}\n',
        ValueError,
        r"line 5 is not UTF-8",
    ),
    ("bad-json-line", "t.jsonl", _jsonl(GOOD) + b"{not json\n", ValueError, r"line 5 is not JSON"),
    (
        "duplicate-ids",
        "t.jsonl",
        _jsonl([{**r, "id": i % 3} for i, r in enumerate(GOOD * 2)]),
        ValueError,
        r"same id",
    ),
    ("empty-file", "t.jsonl", b"\n\n", ValueError, r"no rows"),
    ("json-not-list", "t.json", b'{"prompt": "1="}', ValueError, r"must hold a list"),
    ("json-broken", "t.json", b"[{", ValueError, r"t.json: not JSON"),
    ("row-not-object", "t.jsonl", _jsonl(GOOD) + b"[1, 2]\n", ValueError, r"row 4"),
]


@pytest.mark.parametrize(
    "name,data,err,pattern", [c[1:] for c in FILE_CASES], ids=[c[0] for c in FILE_CASES]
)
def test_bad_dataset_file(tmp_path, name, data, err, pattern):
    path = tmp_path / name
    path.write_bytes(data)
    with pytest.raises(err, match=pattern):
        load_task(str(path), {"eval_fraction": 0.25})


def _reward(completions, **_):
    return [0.0] * len(completions)


TASK_CASES = [
    (
        "missing-file",
        lambda tmp: load_task(str(tmp / "nope.jsonl")),
        FileNotFoundError,
        r"nope.jsonl not found",
    ),
    (
        "unknown-task",
        lambda tmp: load_task("nosuch-task"),
        ValueError,
        r"unknown task 'nosuch-task'",
    ),
    (
        "arith-unknown-option",
        lambda tmp: load_task("arith", {"termz": [2]}),
        ValueError,
        r"unknown config field.*termz",
    ),
    (
        "empty-pool",
        lambda tmp: Task(
            "t", {"prompt": [], "answer": []}, {"prompt": ["1="], "answer": ["1"]}, [_reward]
        ),
        ValueError,
        r"train split is empty",
    ),
    (
        "ragged-columns",
        lambda tmp: Task(
            "t",
            {"prompt": ["1=", "2="], "answer": ["1"]},
            {"prompt": ["1="], "answer": ["1"]},
            [_reward],
        ),
        ValueError,
        r"columns differ in length",
    ),
    (
        "no-reward-function",
        lambda tmp: Task(
            "t", {"prompt": ["1="], "answer": ["1"]}, {"prompt": ["1="], "answer": ["1"]}, []
        ),
        ValueError,
        r"no reward function",
    ),
]


@pytest.mark.parametrize(
    "make,err,pattern", [c[1:] for c in TASK_CASES], ids=[c[0] for c in TASK_CASES]
)
def test_bad_task(tmp_path, make, err, pattern):
    with pytest.raises(err, match=pattern):
        make(tmp_path)


# ------------------------------------------------------------------ reward functions


def raises_on_x(completions, **_):
    if any("x" in c for c in completions):
        raise ValueError("cannot parse x")
    return [1.0] * len(completions)


def always_raises(completions, **_):
    raise KeyError("bug")


def returns_nan(completions, **_):
    return [float("nan")] * len(completions)


def returns_too_few(completions, **_):
    return [1.0] * (len(completions) - 1)


def returns_text(completions, **_):
    return ["yes"] * len(completions)


def returns_scalar(completions, **_):
    return 1.0


def hangs(completions, **_):
    time.sleep(30)


def returns_none(completions, **_):
    return [None] * len(completions)


def _task(func, timeout=5.0) -> Task:
    cols = {"prompt": ["a=", "b=", "c="], "answer": ["1", "2", "3"]}
    return Task("t", cols, cols, [func], reward_timeout_s=timeout)


REWARD_CASES = [
    ("raises-on-one", raises_on_x, None, None),  # fallback: that completion scores 0, counted
    ("raises-always", always_raises, RewardFunctionError, r"always_raises raised on every"),
    ("nan", returns_nan, RewardFunctionError, r"returns_nan returned nan \(not finite\)"),
    ("wrong-count", returns_too_few, RewardFunctionError, r"returned 2 values for 3 completions"),
    ("non-number", returns_text, RewardFunctionError, r"returns_text returned a non-number"),
    ("scalar", returns_scalar, RewardFunctionError, r"returned float, not a list"),
    ("hangs", hangs, RewardFunctionError, r"hangs did not return within 0.3 s"),
    ("none-is-zero", returns_none, None, None),
]


@pytest.mark.parametrize(
    "func,err,pattern", [c[1:] for c in REWARD_CASES], ids=[c[0] for c in REWARD_CASES]
)
def test_bad_reward_function(func, err, pattern):
    task = _task(func, timeout=0.3)
    completions = ["1", "x", "3"]
    if err is None:
        scores = task.score(completions, "train", [0, 1, 2])
        if func is raises_on_x:
            assert scores.tolist() == [1.0, 0.0, 1.0] and task.reward_failures == 1
        else:
            assert scores.tolist() == [0.0, 0.0, 0.0] and task.reward_failures == 0
        return
    t0 = time.perf_counter()
    with pytest.raises(err, match=pattern):
        task.score(completions, "train", [0, 1, 2])
    assert time.perf_counter() - t0 < 5


# ------------------------------------------------------------------ strategies and tell()

ALLOCATOR_CASES = [
    ("empty-pool", "grpo", {"num_prompts": 0}, r"num_prompts must be >= 1 \(the pool is empty\)"),
    ("negative-n", "grpo", {"n": -4}, r"\bn must be an integer >= "),
    ("zero-train-prompts", "grpo", {"train_prompts": 0}, r"train_prompts must be"),
    ("p-band-empty", "pilot-commit", {"p_lower": 0.6, "p_upper": 0.6}, r"leave no band"),
    ("p-out-of-range", "pilot-commit", {"p_lower": 1.5}, r"p_lower must be a number in \[0"),
    ("unknown-option", "grpo", {"n_rollouts": 4}, r"n_rollouts"),
    ("unknown-strategy", "no-such-strategy", {}, r"unknown strategy 'no-such-strategy'"),
    ("wrong-type", "grpo", {"n": "eight"}, r"\bn must be an integer"),
    ("bad-choice", "pilot-commit", {"buffer_sampling": "best"}, r"buffer_sampling must be one of"),
    ("gen-prompts-too-big", "pilot-commit", {"gen_prompts": 1000}, r"gen_prompts=1000 exceeds"),
]


@pytest.mark.parametrize(
    "strategy,opts,pattern", [c[1:] for c in ALLOCATOR_CASES], ids=[c[0] for c in ALLOCATOR_CASES]
)
def test_bad_strategy_options(strategy, opts, pattern):
    kwargs = {"num_prompts": 16, "train_prompts": 2, **opts}
    with pytest.raises(ValueError, match=pattern):
        make_allocator(strategy, **kwargs)


def _outcome(request, handles=None, rewards=None, n=None):
    pids = request.expand()
    n = len(pids) if n is None else n
    return Outcome(
        prompt_ids=pids[:n],
        handles=np.arange(n) if handles is None else handles,
        rewards=np.zeros(n) if rewards is None else rewards,
        tokens=np.ones(n, dtype=np.int64),
        policy_version=0,
    )


TELL_CASES = [
    ("too-few-rollouts", lambda r: _outcome(r, n=r.total - 1), r"asked for \d+ rollouts, got"),
    (
        "duplicate-handles",
        lambda r: _outcome(r, handles=np.zeros(r.total, dtype=np.int64)),
        r"handles must be unique",
    ),
    (
        "nan-reward",
        lambda r: _outcome(r, rewards=np.r_[np.nan, np.zeros(r.total - 1)]),
        r"not finite",
    ),
    ("float-handles", lambda r: _outcome(r, handles=np.arange(r.total) + 0.5), r"must be integers"),
    ("not-an-outcome", lambda r: {"rewards": [1.0]}, r"expected an Outcome"),
]


@pytest.mark.parametrize(
    "make,pattern", [c[1:] for c in TELL_CASES], ids=[c[0] for c in TELL_CASES]
)
def test_bad_tell_leaves_state_unchanged(make, pattern):
    alloc = make_allocator("grpo", num_prompts=16, train_prompts=2, n=4)
    request = alloc.ask()
    with pytest.raises(ValueError, match=pattern):
        alloc.tell(make(request))
    alloc.tell(_outcome(request))  # the request is still pending and can be answered properly
    with pytest.raises(ValueError, match="no request is pending"):
        alloc.tell(_outcome(request))


def test_reused_handle_is_refused():
    alloc = make_allocator("pilot-commit", num_prompts=16, train_prompts=2, n_pilot=2, n_commit=2)
    request = alloc.ask()
    alloc.tell(_outcome(request, rewards=np.tile([0.0, 1.0], request.total // 2)))
    live = alloc.state_dict()["live"]  # the pilots Pilot-Commit buffered (acc 0.5)
    assert len(live), "the pilot should have buffered its groups"
    held = int(live[0])
    request = alloc.ask()
    with pytest.raises(ValueError, match=f"handle {held} is still held"):
        alloc.tell(_outcome(request, handles=held + np.arange(request.total)))


def test_pool_where_every_prompt_is_evicted():
    alloc = make_allocator(
        "pilot-commit", num_prompts=6, train_prompts=2, n_pilot=2, n_commit=2, on_max_rounds="train"
    )
    with pytest.raises((PoolExhaustedError, MaxRoundsError)) as e:
        handle = 0
        for _ in range(100):
            request = alloc.ask()
            if request is None:
                alloc.batch().release()
                continue
            n = request.total
            alloc.tell(_outcome(request, handles=handle + np.arange(n), rewards=np.ones(n)))
            handle += n
    assert isinstance(e.value, PoolExhaustedError)
    assert "every prompt of the pool of 6 is evicted" in str(e.value)


# ------------------------------------------------------------------ config and CLI


def _cli(*args, cwd=None, timeout=120):
    return subprocess.run(
        [sys.executable, "-m", "rollalloc.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=timeout,
    )


CLI_CASES = [
    (
        "budget-below-one-step",
        ["train", "--budget-rollouts", "10"],
        r"budget_rollouts=10 is smaller than one step",
    ),
    (
        "unknown-config-field",
        ["train", "--max-steps", "1", "--set", "lerning_rate=1"],
        r"lerning_rate: unknown field",
    ),
    (
        "missing-task-file",
        ["train", "--max-steps", "1", "--task", "nope.jsonl"],
        r"nope.jsonl not found",
    ),
    ("missing-config", ["train", "--config", "nope.yaml"], r"config file nope.yaml not found"),
    (
        "bad-task-config",
        ["train", "--max-steps", "1", "--task-config", "[1]"],
        r"must be a JSON object",
    ),
]


@pytest.mark.parametrize("args,pattern", [c[1:] for c in CLI_CASES], ids=[c[0] for c in CLI_CASES])
def test_cli_bad_input_exits_2(tmp_path, args, pattern):
    r = _cli(*args, "--out", str(tmp_path / "run"), cwd=tmp_path)
    assert r.returncode == 2, r.stderr[-2000:]
    assert "Traceback" not in r.stderr
    assert pytest.importorskip("re").search(pattern, r.stderr), r.stderr[-2000:]


def test_cli_maps_rollalloc_errors_to_exit_2(monkeypatch, capsys):
    import rollalloc.train.cli as train_cli
    from rollalloc.cli import main

    for err in (
        PoolExhaustedError("pool gone"),
        MaxRoundsError("rounds"),
        RewardFunctionError("rf"),
    ):

        def boom(args, err=err):
            raise err

        monkeypatch.setattr(train_cli, "cmd_train", boom)
        assert main(["train"]) == 2
        assert str(err) in capsys.readouterr().err


@pytest.fixture(scope="module")
def saved_run(tmp_path_factory):
    """A finished one-step tiny run (its checkpoint is what the next cases must not lose)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("fi", ROOT / "benchmarks/fault_injection.py")
    fi = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fi)
    work = tmp_path_factory.mktemp("saved")
    config = fi.write_config(work, max_steps=1)
    r = _cli("train", "--config", str(config), "--out", str(work / "run"), "--no-progress")
    assert r.returncode == 0, r.stderr[-2000:]
    return config, work / "run"


def _snapshot(run: Path) -> dict[str, bytes]:
    return {str(p.relative_to(run)): p.read_bytes() for p in sorted(run.rglob("*")) if p.is_file()}


def test_resume_with_another_strategy_is_refused(saved_run):
    config, run = saved_run
    before = _snapshot(run)
    r = _cli(
        "train",
        "--config",
        str(config),
        "--out",
        str(run),
        "--resume",
        "--strategy",
        "dapo",
        "--no-progress",
    )
    assert r.returncode == 2 and "another configuration (differs in: strategy" in r.stderr, r.stderr
    assert _snapshot(run) == before  # nothing saved was lost or changed


def test_resume_from_another_format_version_is_refused(saved_run, tmp_path):
    import shutil

    config, run = saved_run
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    (ckpt,) = (copy / "checkpoints").glob("step-*")
    manifest = json.loads((ckpt / "manifest.json").read_text())
    manifest["version"] = 99
    (ckpt / "manifest.json").write_text(json.dumps(manifest))
    before = _snapshot(copy)
    r = _cli("train", "--config", str(config), "--out", str(copy), "--resume", "--no-progress")
    assert r.returncode == 2, r.stderr
    assert "format version 99 is not supported" in r.stdout + r.stderr
    assert "no readable checkpoint" in r.stderr
    assert _snapshot(copy) == before


# ------------------------------------------------------------------ issue 14: checked up front
# Each case runs the CLI in-process (rollalloc.cli.main) against inputs made in a temporary
# directory: exit code 2, an error naming the input, no traceback, and nothing in the directory
# written, changed or removed. None of them may reach the warm start or a simulation.

SMOKE = {**SMOKE_TESTBED, "max_steps": 1}


def _files(tmp: Path, **files: str | bytes) -> None:
    for name, data in files.items():
        p = tmp / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data if isinstance(data, bytes) else data.encode())


def _smoke(tmp: Path, **over) -> str:
    cfg = {**SMOKE, "cache_dir": str(tmp / "cache"), **over}
    (tmp / "smoke.json").write_text(json.dumps(cfg))
    return str(tmp / "smoke.json")


def _task_file(tmp: Path, prompts: list[str], name: str = "t.jsonl") -> str:
    rows = [{"prompt": p, "answer": "1"} for p in prompts]
    (tmp / name).write_bytes(_jsonl(rows))
    return str(tmp / name)


def _report_dir(tmp: Path) -> Path:
    """A small finished simulate report to break."""
    from rollalloc.cli import main

    out = tmp / "rep"
    argv = ["simulate", "--preset", "uniform", "--seeds", "0", "--budget-rollouts", "2048"]
    argv += ["--train-prompts", "16", "--group-size", "8", "--eval-points", "8"]
    assert main(argv + ["--strategies", "grpo", "--out", str(out), "--no-progress"]) == 0
    return out


def _break_line(path: Path, line: int, text: str) -> None:
    lines = path.read_text().splitlines(keepends=True)
    lines[line - 1] = text + "\n"
    path.write_text("".join(lines))


SIM = ["simulate", "--preset", "uniform", "--seeds", "0", "--no-progress"]
SIM_SMALL = SIM + ["--budget-rollouts", "4096", "--train-prompts", "16", "--group-size", "8"]


def _preset(tmp: Path, weights: list[float]) -> str:
    hist = [[k / len(weights), (k + 1) / len(weights), w] for k, w in enumerate(weights)]
    (tmp / "pool.json").write_text(json.dumps({"num_prompts": 100, "pass_rate_histogram": hist}))
    return str(tmp / "pool.json")


def _cuda_absent() -> bool:
    import torch

    return not torch.cuda.is_available()


# (id, what the input is, setup(tmp) -> argv, error pattern)
UPFRONT_CASES = [
    # ---- run directories are never overwritten
    (
        "train-out-not-empty",
        "train --out DIR where DIR already holds a run, without --resume",
        lambda t: (
            _files(t, **{"run/steps.jsonl": "{}\n"}),
            ["train", "--config", _smoke(t), "--out", str(t / "run")],
        )[1],
        r"--out .*run already holds a run.*--resume, or give a fresh --out",
    ),
    (
        "train-default-out-second-run",
        "a second bare `train` (default --out runs/train already holds the first run)",
        lambda t: (_files(t, **{"runs/train/run.json": "{}"}), ["train", "--config", _smoke(t)])[1],
        r"--out runs/train already holds a run.*--resume",
    ),
    (
        "train-out-is-file",
        "train --out pointing at a file",
        lambda t: (_files(t, f="x"), ["train", "--config", _smoke(t), "--out", str(t / "f")])[1],
        r"--out .*f is a file, not a directory",
    ),
    (
        "compare-out-not-empty",
        "compare --out DIR that holds a previous comparison, without --resume",
        lambda t: (
            _files(t, **{"c/summary.json": "{}"}),
            ["compare", "--config", _smoke(t), "--strategies", "grpo", "--out", str(t / "c")],
        )[1],
        r"--out .*c already holds a run.*--resume",
    ),
    (
        "compare-out-is-file",
        "compare --out pointing at a file",
        lambda t: (
            _files(t, f="x"),
            ["compare", "--config", _smoke(t), "--strategies", "grpo", "--out", str(t / "f")],
        )[1],
        r"is a file, not a directory",
    ),
    (
        "simulate-out-not-empty",
        "simulate --out DIR that holds a report",
        lambda t: (_files(t, **{"s/summary.json": "{}"}), SIM_SMALL + ["--out", str(t / "s")])[1],
        r"already holds a run.*fresh --out",
    ),
    (
        "simulate-out-is-file",
        "simulate --out FILE",
        lambda t: (_files(t, f="x"), SIM_SMALL + ["--out", str(t / "f")])[1],
        r"--out .*f is a file, not a directory",
    ),
    # ---- config files
    (
        "train-yaml-syntax-error",
        "train --config with a YAML syntax error on line 2",
        lambda t: (
            _files(t, **{"c.yaml": "max_steps: 1\nlearner: {lr: [1\n"}),
            ["train", "--config", str(t / "c.yaml")],
        )[1],
        r"c\.yaml: line \d+, column \d+: not valid YAML",
    ),
    (
        "train-json-syntax-error",
        "train --config with a JSON syntax error on line 2",
        lambda t: (
            _files(t, **{"c.json": '{"max_steps": 1,\n "seed": }\n'}),
            ["train", "--config", str(t / "c.json")],
        )[1],
        r"c\.json: line 2, column \d+: not JSON",
    ),
    (
        "train-config-not-mapping",
        "train --config holding a list",
        lambda t: (_files(t, **{"c.yaml": "- 1\n- 2\n"}), ["train", "--config", str(t / "c.yaml")])[
            1
        ],
        r"c\.yaml: a config file must hold a mapping",
    ),
    (
        "train-config-is-directory",
        "train --config naming a directory",
        lambda t: (_files(t, **{"d/x": ""}), ["train", "--config", str(t / "d")])[1],
        r"config file .*d is a directory",
    ),
    (
        "train-config-not-utf8",
        "train --config that is not UTF-8",
        lambda t: (
            _files(t, **{"c.yaml": b"seed: \xff\n"}),
            ["train", "--config", str(t / "c.yaml")],
        )[1],
        r"c\.yaml is not UTF-8",
    ),
    (
        "simulate-yaml-syntax-error",
        "simulate --config with a YAML syntax error",
        lambda t: (
            _files(t, **{"s.yaml": "seeds: [0, 1\npreset: uniform\n"}),
            SIM + ["--config", str(t / "s.yaml"), "--out", str(t / "o")],
        )[1],
        r"s\.yaml: line \d+, column \d+: not valid YAML",
    ),
    (
        "simulate-yaml-unknown-key",
        "simulate --config with a key simulate does not know",
        lambda t: (
            _files(t, **{"s.yaml": "sedes: [0]\n"}),
            SIM + ["--config", str(t / "s.yaml"), "--out", str(t / "o")],
        )[1],
        r"unknown key\(s\) \['sedes'\]",
    ),
    (
        "train-set-bad-yaml",
        "train --set with a value that is not YAML",
        lambda t: ["train", "--config", _smoke(t), "--out", str(t / "r"), "--set", "learner.lr=[1"],
        r"--set 'learner.lr=\[1': the value is not valid YAML",
    ),
    (
        "train-set-no-equals",
        "train --set without KEY=VALUE",
        lambda t: ["train", "--config", _smoke(t), "--out", str(t / "r"), "--set", "seed"],
        r"--set 'seed': expected KEY=VALUE",
    ),
    (
        "train-set-empty-key",
        "train --set with an empty key part",
        lambda t: ["train", "--config", _smoke(t), "--out", str(t / "r"), "--set", "learner.=1"],
        r"--set 'learner.=1': empty key",
    ),
    (
        "train-task-config-not-json",
        "train --task-config that is not JSON",
        lambda t: ["train", "--config", _smoke(t), "--out", str(t / "r"), "--task-config", "{"],
        r"--task-config '\{': not JSON",
    ),
    # ---- devices
    (
        "train-device-garbage",
        "train --device that is not a torch device",
        lambda t: ["train", "--config", _smoke(t), "--out", str(t / "r"), "--device", "gpu0"],
        r"device 'gpu0' is not a torch device",
    ),
    (
        "train-device-cuda-on-cpu-torch",
        "train --device cuda with a CPU-only torch (skipped where CUDA exists)",
        lambda t: (
            ["train", "--config", _smoke(t), "--out", str(t / "r"), "--device", "cuda"]
            if _cuda_absent()
            else pytest.skip("CUDA is available here")
        ),
        r"device 'cuda': this torch .* has no usable CUDA device; use --device cpu",
    ),
    (
        "train-device-tpu",
        "train --device of a type rollalloc does not run on",
        lambda t: ["train", "--config", _smoke(t), "--out", str(t / "r"), "--device", "meta"],
        r"device 'meta': use cpu or cuda",
    ),
    # ---- strategies and their options, before the warm start
    (
        "train-unknown-strategy",
        "train --strategy that is not registered",
        lambda t: ["train", "--config", _smoke(t), "--out", str(t / "r"), "--strategy", "foo"],
        r"unknown strategy 'foo'",
    ),
    (
        "train-unknown-strategy-option",
        "train --set strategy_config.bogus=1",
        lambda t: [
            "train",
            "--config",
            _smoke(t),
            "--out",
            str(t / "r"),
            "--set",
            "strategy_config.bogus=1",
        ],
        r"unknown option\(s\) \['bogus'\]",
    ),
    (
        "train-bad-strategy-value",
        "train --set strategy_config.reward_max=-1 (below reward_min)",
        lambda t: [
            "train",
            "--config",
            _smoke(t),
            "--out",
            str(t / "r"),
            "--set",
            "strategy_config.reward_max=-1",
        ],
        r"reward_min=0.0 must be below reward_max=-1",
    ),
    (
        "train-n-pilot-over-group",
        "train pilot-commit with n_pilot=12 and --group-size 8 (a group of 18)",
        lambda t: [
            "train",
            "--config",
            _smoke(t),
            "--out",
            str(t / "r"),
            "--strategy",
            "pilot-commit",
            "--group-size",
            "8",
            "--set",
            "strategy_config.n_pilot=12",
        ],
        r"n_pilot=12 contradicts group_size=8",
    ),
    (
        "train-n-conflicts-group",
        "train grpo with strategy_config.n=1 (a group of one: zero advantages)",
        lambda t: [
            "train",
            "--config",
            _smoke(t),
            "--out",
            str(t / "r"),
            "--set",
            "strategy_config.n=1",
        ],
        r"n=1 contradicts group_size=8",
    ),
    (
        "train-group-size-1",
        "train --group-size 1",
        lambda t: ["train", "--config", _smoke(t), "--out", str(t / "r"), "--group-size", "1"],
        r"group_size must be an integer >= 2",
    ),
    (
        "train-prompts-exceed-pool",
        "train --train-prompts larger than the task's pool (96), found before the warm start",
        lambda t: ["train", "--config", _smoke(t), "--out", str(t / "r"), "--train-prompts", "200"],
        r"train_prompts=200 exceeds the pool of \d+ prompts",
    ),
    (
        "compare-unknown-strategy",
        "compare --strategies grpo,foo (fails before grpo trains)",
        lambda t: [
            "compare",
            "--config",
            _smoke(t),
            "--strategies",
            "grpo,foo",
            "--out",
            str(t / "c"),
        ],
        r"unknown strategy 'foo'",
    ),
    (
        "compare-strategy-bad-option",
        "compare with a strategy option only one strategy knows",
        lambda t: [
            "compare",
            "--config",
            _smoke(t),
            "--strategies",
            "grpo,dapo",
            "--set",
            "strategy_config.gen_prompts=8",
            "--out",
            str(t / "c"),
        ],
        r"grpo: unknown option\(s\) \['gen_prompts'\]",
    ),
    (
        "compare-no-baseline",
        "compare without grpo (the baseline)",
        lambda t: ["compare", "--config", _smoke(t), "--strategies", "dapo", "--out", str(t / "c")],
        r"must include grpo",
    ),
    (
        "compare-empty-strategies",
        "compare --strategies ,",
        lambda t: ["compare", "--config", _smoke(t), "--strategies", ",", "--out", str(t / "c")],
        r"--strategies ',': no names given",
    ),
    (
        "compare-duplicate-strategy",
        "compare --strategies grpo,grpo",
        lambda t: [
            "compare",
            "--config",
            _smoke(t),
            "--strategies",
            "grpo,grpo",
            "--out",
            str(t / "c"),
        ],
        r"grpo given twice",
    ),
    (
        "compare-empty-seeds",
        "compare --seeds ,",
        lambda t: [
            "compare",
            "--config",
            _smoke(t),
            "--strategies",
            "grpo",
            "--seeds",
            ",",
            "--out",
            str(t / "c"),
        ],
        r"--seeds ',': no seeds given",
    ),
    (
        "compare-seed-not-integer",
        "compare --seeds 0,x",
        lambda t: [
            "compare",
            "--config",
            _smoke(t),
            "--strategies",
            "grpo",
            "--seeds",
            "0,x",
            "--out",
            str(t / "c"),
        ],
        r"--seeds: 'x' is not an integer",
    ),
    (
        "compare-duplicate-seed",
        "compare --seeds 0,0",
        lambda t: [
            "compare",
            "--config",
            _smoke(t),
            "--strategies",
            "grpo",
            "--seeds",
            "0,0",
            "--out",
            str(t / "c"),
        ],
        r"seed\(s\) \[0\] given twice",
    ),
    (
        "compare-empty-seed",
        "compare --seeds 0,,1",
        lambda t: [
            "compare",
            "--config",
            _smoke(t),
            "--strategies",
            "grpo",
            "--seeds",
            "0,,1",
            "--out",
            str(t / "c"),
        ],
        r"--seeds '0,,1': an empty item between commas",
    ),
    (
        "compare-reversed-seed-range",
        "compare --seeds 5-2",
        lambda t: [
            "compare",
            "--config",
            _smoke(t),
            "--strategies",
            "grpo",
            "--seeds",
            "5-2",
            "--out",
            str(t / "c"),
        ],
        r"--seeds: '5-2' is not a range of seeds \(e.g. --seeds 0-9\)",
    ),
    (
        "compare-negative-seed",
        "compare --seeds -1",
        lambda t: [
            "compare",
            "--config",
            _smoke(t),
            "--strategies",
            "grpo",
            "--seeds=-1",
            "--out",
            str(t / "c"),
        ],
        r"--seeds: -1 is negative",
    ),
    (
        "compare-workers-0",
        "compare --workers 0",
        lambda t: [
            "compare",
            "--config",
            _smoke(t),
            "--strategies",
            "grpo",
            "--workers",
            "0",
            "--out",
            str(t / "c"),
        ],
        r"--workers must be >= 1",
    ),
    (
        "compare-half-width-0",
        "compare --half-width 0",
        lambda t: [
            "compare",
            "--config",
            _smoke(t),
            "--strategies",
            "grpo,dapo",
            "--seeds",
            "0,1,2",
            "--half-width",
            "0",
            "--out",
            str(t / "c"),
        ],
        r"--half-width must be > 0, got 0",
    ),
    (
        "compare-max-seeds-below-first-round",
        "compare --seeds 0,1,2 --half-width 0.1 --max-seeds 2",
        lambda t: [
            "compare",
            "--config",
            _smoke(t),
            "--strategies",
            "grpo,dapo",
            "--seeds",
            "0,1,2",
            "--half-width",
            "0.1",
            "--max-seeds",
            "2",
            "--out",
            str(t / "c"),
        ],
        r"--max-seeds 2 is below the 3 seeds of the first round",
    ),
    (
        "compare-max-seeds-alone",
        "compare --max-seeds without --half-width",
        lambda t: [
            "compare",
            "--config",
            _smoke(t),
            "--strategies",
            "grpo,dapo",
            "--max-seeds",
            "10",
            "--out",
            str(t / "c"),
        ],
        r"--max-seeds is a setting of --half-width",
    ),
    (
        "compare-half-width-two-seeds",
        "compare --half-width 0.1 --seeds 0,1",
        lambda t: [
            "compare",
            "--config",
            _smoke(t),
            "--strategies",
            "grpo,dapo",
            "--seeds",
            "0,1",
            "--half-width",
            "0.1",
            "--out",
            str(t / "c"),
        ],
        r"the first round \(--seeds\) needs at least 3 seeds, got 2",
    ),
    (
        "compare-half-width-grpo-alone",
        "compare --half-width 0.1 --strategies grpo",
        lambda t: [
            "compare",
            "--config",
            _smoke(t),
            "--strategies",
            "grpo",
            "--seeds",
            "0,1,2",
            "--half-width",
            "0.1",
            "--out",
            str(t / "c"),
        ],
        r"give a strategy besides grpo",
    ),
    (
        "compare-no-budget",
        "compare without --budget-rollouts",
        lambda t: ["compare", "--strategies", "grpo", "--out", str(t / "c")],
        r"compare: give --budget-rollouts",
    ),
    # ---- task files: bounded, before the warm start
    (
        "task-20MB-prompt",
        "a JSONL task with a 20 MB prompt (limit max_prompt_chars, default 8192)",
        lambda t: [
            "train",
            "--config",
            _smoke(t, task_config={}),
            "--out",
            str(t / "r"),
            "--task",
            _task_file(t, ["1+1=", "x" * 20_000_000, "2+2=", "3+3="]),
        ],
        r"row 1 has a prompt of 20,000,000 characters, more than max_prompt_chars=8,192",
    ),
    (
        "task-prompt-too-long-for-tiny",
        "a 2 kB prompt for the tiny model (its context is tiny.max_positions)",
        lambda t: [
            "train",
            "--config",
            _smoke(t, task_config={}),
            "--out",
            str(t / "r"),
            "--task",
            _task_file(t, ["1+1=", "2" * 2000, "2+2=", "3+3=", "4+4="] * 4),
            "--task-config",
            '{"eval_fraction": 0.2}',
        ],
        r"has a prompt of 2000 characters; with max_new_tokens=4 it does not fit the tiny model",
    ),
    (
        "task-file-over-max-file-mb",
        "a task file larger than max_file_mb",
        lambda t: [
            "train",
            "--config",
            _smoke(t, task_config={}),
            "--out",
            str(t / "r"),
            "--task",
            _task_file(t, ["1+1="] * 2000),
            "--task-config",
            '{"max_file_mb": 0.01}',
        ],
        r"MB exceeds max_file_mb=0.01",
    ),
    (
        "task-unknown-file-option",
        "a task file with an option files do not have",
        lambda t: [
            "train",
            "--config",
            _smoke(t, task_config={}),
            "--out",
            str(t / "r"),
            "--task",
            _task_file(t, ["1+1="] * 8),
            "--task-config",
            '{"max_prompt_len": 10}',
        ],
        r"unknown task option\(s\) \['max_prompt_len'\]",
    ),
    (
        "task-eval-fraction-out-of-range",
        "a task file with eval_fraction 2",
        lambda t: [
            "train",
            "--config",
            _smoke(t, task_config={}),
            "--out",
            str(t / "r"),
            "--task",
            _task_file(t, ["1+1="] * 8),
            "--task-config",
            '{"eval_fraction": 2}',
        ],
        r"eval_fraction must be in \(0, 1\), got 2",
    ),
    (
        "task-max-prompt-chars-zero",
        "a task file with max_prompt_chars 0",
        lambda t: [
            "train",
            "--config",
            _smoke(t, task_config={}),
            "--out",
            str(t / "r"),
            "--task",
            _task_file(t, ["1+1="] * 8),
            "--task-config",
            '{"max_prompt_chars": 0}',
        ],
        r"max_prompt_chars must be a positive number, got 0",
    ),
    # ---- simulate settings
    (
        "simulate-fraction-2",
        "simulate --fraction 2",
        lambda t: SIM_SMALL + ["--fraction", "2", "--out", str(t / "o")],
        r"--fraction 2.0: must be in \(0, 1\]",
    ),
    (
        "simulate-fraction-0",
        "simulate --fraction 0",
        lambda t: SIM_SMALL + ["--fraction", "0", "--out", str(t / "o")],
        r"--fraction 0.0: must be in \(0, 1\]",
    ),
    (
        "simulate-fraction-nan",
        "simulate --fraction nan",
        lambda t: SIM_SMALL + ["--fraction", "nan", "--out", str(t / "o")],
        r"--fraction nan: must be in \(0, 1\]",
    ),
    (
        "simulate-empty-seeds",
        "simulate --seeds ,",
        lambda t: SIM_SMALL + ["--seeds", ",", "--out", str(t / "o")],
        r"no seeds given",
    ),
    (
        "simulate-empty-strategies",
        "simulate --strategies ,",
        lambda t: SIM_SMALL + ["--strategies", ",", "--out", str(t / "o")],
        r"--strategies \[\]: no names given",
    ),
    (
        "simulate-budget-below-one-evaluation",
        "simulate --budget-rollouts 10 (less than one step of 128 x 16)",
        lambda t: SIM + ["--budget-rollouts", "10", "--out", str(t / "o")],
        r"budget_rollouts=10 cannot reach one evaluation: the minimum is 2,048 rollouts",
    ),
    (
        "simulate-budget-below-eval-interval",
        "simulate --budget-rollouts smaller than --eval-every-rollouts",
        lambda t: SIM_SMALL + ["--eval-every-rollouts", "10000", "--out", str(t / "o")],
        r"budget_rollouts=4,096 cannot reach one evaluation: the minimum is 10,000",
    ),
    (
        "simulate-n-pilot-over-group",
        "simulate --set pilot-commit.n_pilot=12 --group-size 8 (a group of 18)",
        lambda t: (
            SIM_SMALL
            + [
                "--strategies",
                "grpo,pilot-commit",
                "--set",
                "pilot-commit.n_pilot=12",
                "--out",
                str(t / "o"),
            ]
        ),
        r"n_pilot=12 contradicts group_size=8",
    ),
    (
        "simulate-group-size-1",
        "simulate --group-size 1",
        lambda t: SIM + ["--budget-rollouts", "4096", "--group-size", "1", "--out", str(t / "o")],
        r"group_size must be >= 2",
    ),
    (
        "simulate-unknown-strategy",
        "simulate --strategies grpo,foo",
        lambda t: SIM_SMALL + ["--strategies", "grpo,foo", "--out", str(t / "o")],
        r"unknown strategy 'foo'",
    ),
    (
        "simulate-baseline-not-run",
        "simulate --baseline dapo without dapo in --strategies",
        lambda t: SIM_SMALL + ["--strategies", "grpo", "--baseline", "dapo", "--out", str(t / "o")],
        r"the baseline 'dapo' must be one of --strategies",
    ),
    (
        "simulate-options-for-absent-strategy",
        "simulate --set dapo.n=8 when dapo does not run",
        lambda t: (
            SIM_SMALL
            + ["--strategies", "grpo", "--set", "dapo.gen_prompts=8", "--out", str(t / "o")]
        ),
        r"options for strategies not in the run: \['dapo'\]",
    ),
    (
        "simulate-unknown-sim-field",
        "simulate --set sim.bogus=1",
        lambda t: (
            SIM_SMALL + ["--strategies", "grpo", "--set", "sim.bogus=1", "--out", str(t / "o")]
        ),
        r"SimConfig: unknown field\(s\) \['bogus'\]",
    ),
    (
        "simulate-train-prompts-exceed-pool",
        "simulate --train-prompts larger than the preset's pool",
        lambda t: (
            SIM
            + [
                "--budget-rollouts",
                "100000",
                "--preset",
                _preset(t, [1.0]),
                "--train-prompts",
                "200",
                "--group-size",
                "8",
                "--strategies",
                "grpo",
                "--out",
                str(t / "o"),
            ]
        ),
        r"train_prompts=200 exceeds the pool of 100 prompts",
    ),
    (
        "preset-shares-sum-0.6",
        "a preset histogram whose shares sum to 0.6",
        lambda t: (
            SIM_SMALL
            + [
                "--preset",
                _preset(t, [0.2, 0.2, 0.2]),
                "--strategies",
                "grpo",
                "--out",
                str(t / "o"),
            ]
        ),
        r"pass_rate_histogram weights sum to 0.6, not 1",
    ),
    (
        "preset-weight-not-number",
        "a preset histogram bin with a text weight",
        lambda t: (
            _files(
                t,
                **{
                    "p.json": json.dumps(
                        {"num_prompts": 10, "pass_rate_histogram": [[0, 1, "all"]]}
                    )
                },
            ),
            SIM_SMALL + ["--preset", str(t / "p.json"), "--out", str(t / "o")],
        )[1],
        r"pass_rate_histogram\[0\] = \[0, 1, 'all'\]: low, high and weight must be numbers",
    ),
    (
        "preset-unknown",
        "simulate --preset that is neither built in nor a file",
        lambda t: SIM_SMALL + ["--preset", "dapo18k", "--out", str(t / "o")],
        r"unknown simulator preset 'dapo18k'",
    ),
    # ---- report on broken files (names the file and the line; nothing rewritten)
    (
        "report-summary-broken-json",
        "report DIR whose summary.json is cut off",
        lambda t: (
            _report_dir(t),
            (t / "rep/summary.json").write_text('{"schema": "x",\n "kind": '),
            ["report", str(t / "rep")],
        )[2],
        r"summary\.json: line 2: not JSON",
    ),
    (
        "report-steps-broken-json",
        "report DIR whose steps.jsonl has a broken line 2",
        lambda t: (
            _report_dir(t),
            _break_line(t / "rep/steps.jsonl", 2, '{"strategy": "grpo", '),
            ["report", str(t / "rep")],
        )[2],
        r"steps\.jsonl: line 2: not JSON",
    ),
    (
        "report-steps-not-a-record",
        "report DIR whose steps.jsonl line 1 has no strategy",
        lambda t: (
            _report_dir(t),
            _break_line(t / "rep/steps.jsonl", 1, '{"seed": 0}'),
            ["report", str(t / "rep")],
        )[2],
        r"steps\.jsonl: line 1: not a step record",
    ),
    (
        "report-curves-broken",
        "report DIR whose curves.csv has text in a number column",
        lambda t: (
            _report_dir(t),
            _break_line(t / "rep/curves.csv", 3, "grpo,zero,1,1,1,1,1,0.5"),
            ["report", str(t / "rep")],
        )[2],
        r"curves\.csv: line 3: not a curves row",
    ),
    (
        "report-summary-wrong-schema",
        "report DIR whose summary.json is of another schema",
        lambda t: (
            _report_dir(t),
            (t / "rep/summary.json").write_text('{"schema": "other/2"}'),
            ["report", str(t / "rep")],
        )[2],
        r"schema is 'other/2', expected 'rollalloc.summary/1' or 'rollalloc.summary/2'",
    ),
    (
        "report-summary-bad-bootstrap",
        "report DIR whose summary.json (schema /2) has a non-number bootstrap setting",
        lambda t: (
            _report_dir(t),
            (t / "rep/summary.json").write_text(
                '{"schema": "rollalloc.summary/2", "kind": "simulate", "task": "u", "seeds": [0], '
                '"budget_rollouts": 1, "target": {"baseline": "grpo", "fraction": 0.9}, '
                '"bootstrap": {"resamples": "many"}}'
            ),
            ["report", str(t / "rep")],
        )[2],
        r"summary\.json: key 'bootstrap' has a non-number",
    ),
    (
        "report-summary-missing-key",
        "report DIR whose summary.json lacks `target`",
        lambda t: (
            _report_dir(t),
            (t / "rep/summary.json").write_text(
                '{"schema": "rollalloc.summary/1", "kind": "simulate", "task": "u", "seeds": [0], "budget_rollouts": 1}'
            ),
            ["report", str(t / "rep")],
        )[2],
        r"summary\.json: key 'target' missing",
    ),
    (
        "report-not-a-report",
        "report on a directory without summary.json",
        lambda t: (_files(t, **{"d/x": ""}), ["report", str(t / "d")])[1],
        r"summary\.json does not exist: not a report directory",
    ),
]


def _tree(root: Path) -> dict[str, bytes | None]:
    """Every path under root: file bytes, None for a directory."""
    return {
        str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None)
        for p in sorted(root.rglob("*"))
    }


@pytest.mark.parametrize(
    "setup,pattern", [c[2:] for c in UPFRONT_CASES], ids=[c[0] for c in UPFRONT_CASES]
)
def test_refused_up_front(tmp_path, monkeypatch, capsys, setup, pattern):
    import re

    from rollalloc.cli import main

    monkeypatch.chdir(tmp_path)
    argv = setup(tmp_path)
    capsys.readouterr()
    before = _tree(tmp_path)
    # none of these may reach the warm start or a simulation
    import rollalloc.sim.run
    import rollalloc.train.warmstart

    def reached(*a, **k):
        raise AssertionError("expensive work started before the input was checked")

    monkeypatch.setattr(rollalloc.train.warmstart, "warm_start", reached)
    monkeypatch.setattr(rollalloc.sim.run, "simulate", reached)
    t0 = time.perf_counter()
    rc = main(argv)
    err = capsys.readouterr().err
    assert rc == 2, err
    assert "Traceback" not in err
    assert re.search(pattern, err), err
    assert time.perf_counter() - t0 < 30
    assert _tree(tmp_path) == before  # nothing written, changed or lost


# ---- library calls (not through the CLI)


def _corrupt_store(t: Path) -> Path:
    from rollalloc.integrations.trl.store import RolloutStore

    store = RolloutStore(1)
    store.save(str(t))
    npz = t / "rollouts.npz"
    npz.write_bytes(npz.read_bytes()[: len(npz.read_bytes()) // 2])
    return t


def _save_state_onto_dir(t: Path):
    from rollalloc.state import save_state

    (t / "state").mkdir()
    save_state(t / "state", {"a": 1})


def _save_state_under_file(t: Path):
    from rollalloc.state import save_state

    (t / "f").write_text("x")
    save_state(t / "f" / "s.npz", {"a": 1})


def _store_broken_json(t: Path):
    from rollalloc.integrations.trl.store import RolloutStore

    RolloutStore(1).save(str(t))
    (t / "rollouts.json").write_text('{"format": ')
    RolloutStore.load(str(t))


def _store_missing_npz(t: Path):
    from rollalloc.integrations.trl.store import RolloutStore

    RolloutStore(1).save(str(t))
    (t / "rollouts.npz").unlink()
    RolloutStore.load(str(t))


def _trl_broken_meta(t: Path):
    from rollalloc.integrations.trl.trainer import load_rollalloc_state

    (t / "meta.json").write_text('{"format": ')
    load_rollalloc_state(str(t), trainer=None)  # refused before the trainer is looked at


def _advantages(rewards):
    from rollalloc.advantages import group_advantages

    return lambda t: group_advantages(np.array(rewards), np.array([2, 2]))


def _preset_dict(hist):
    from rollalloc.sim.policy import preset_from_dict

    return lambda t: preset_from_dict({"num_prompts": 10, "pass_rate_histogram": hist}, "t")


# (id, what, call(tmp), error type, pattern)
API_CASES = [
    (
        "save-state-onto-directory",
        "save_state(path) where path is a directory",
        _save_state_onto_dir,
        ValueError,
        r"cannot write .*state: it is a directory",
    ),
    (
        "save-state-under-a-file",
        "save_state(path) whose parent is a file",
        _save_state_under_file,
        ValueError,
        r"f is a file, not a directory",
    ),
    (
        "group-advantages-nan",
        "group_advantages on a NaN reward",
        _advantages([0.0, 1.0, 1.0, np.nan]),
        ValueError,
        r"reward nan at row 3 is not finite",
    ),
    (
        "group-advantages-inf",
        "group_advantages on an infinite reward",
        _advantages([np.inf, 1.0, 1.0, 0.0]),
        ValueError,
        r"reward inf at row 0 is not finite",
    ),
    (
        "grpo-n-1",
        "make_allocator('grpo', n=1): every advantage would be zero",
        lambda t: make_allocator("grpo", num_prompts=8, train_prompts=2, n=1),
        ValueError,
        r"\bn must be an integer >= 2, got 1",
    ),
    (
        "trl-resume-corrupted-rollouts-npz",
        "TRL resume (RolloutStore.load) with a truncated rollouts.npz",
        lambda t: __import__(
            "rollalloc.integrations.trl.store"
        ).integrations.trl.store.RolloutStore.load(str(_corrupt_store(t))),
        ValueError,
        r"rollouts\.npz is damaged",
    ),
    (
        "trl-resume-missing-rollouts-npz",
        "TRL resume with rollouts.npz deleted",
        _store_missing_npz,
        FileNotFoundError,
        r"rollouts\.npz is missing",
    ),
    (
        "trl-resume-broken-rollouts-json",
        "TRL resume with a cut-off rollouts.json",
        _store_broken_json,
        ValueError,
        r"rollouts\.json is damaged \(line 1",
    ),
    (
        "trl-resume-broken-meta-json",
        "TRL resume (load_rollalloc_state) with a cut-off meta.json",
        _trl_broken_meta,
        ValueError,
        r"meta\.json: damaged, not JSON",
    ),
    (
        "preset-shares-sum-1.4",
        "preset_from_dict with shares summing to 1.4",
        _preset_dict([[0, 0.5, 0.7], [0.5, 1, 0.7]]),
        ValueError,
        r"weights sum to 1.4, not 1",
    ),
]


@pytest.mark.parametrize(
    "call,err,pattern", [c[2:] for c in API_CASES], ids=[c[0] for c in API_CASES]
)
def test_bad_library_call(tmp_path, call, err, pattern):
    with pytest.raises(err, match=pattern):
        call(tmp_path)
    assert not [p for p in tmp_path.rglob("*") if ".tmp" in p.name]  # no temporary file left


# ---- reports that must not contradict themselves


def test_wall_time_to_target_agrees_with_rollouts_to_target():
    """Wall seconds and tokens to target are those spent when the target was reached in rollouts:
    a strategy that never reached it has no time, one that did always has one, even when its seeds
    end at very different wall times (the old per-axis curves said the opposite)."""
    from rollalloc.report.summary import ReportInputs, build_summary

    x = np.arange(0, 11) * 100.0

    def run(acc, sec_per_rollout):
        return {
            "evals": [
                {"cum_rollouts": int(r), "cum_tokens": int(r) * 10, "wall_s": r * s, "accuracy": a}
                for r, a, s in zip(x, acc, sec_per_rollout)
            ],
            "steps": [],
        }

    rising, flat = np.linspace(0.1, 0.9, 11), np.full(11, 0.1)
    runs = {
        "grpo": {0: run(rising, [1.0] * 11), 1: run(rising, [0.01] * 11)},  # seeds 100x apart
        "slow": {0: run(flat, [0.001] * 11), 1: run(flat, [0.001] * 11)},
    }
    summary, _ = build_summary(
        ReportInputs(
            kind="t", task="t", seeds=[0, 1], budget_rollouts=900, runs=runs, strategy_configs={}
        )
    )
    g, s = summary["strategies"]["grpo"], summary["strategies"]["slow"]
    assert g["rollouts_to_target"] is not None and g["wall_s_to_target"] is not None
    assert g["wall_s_to_target"] == pytest.approx(g["rollouts_to_target"] * (1.0 + 0.01) / 2)
    assert g["tokens_to_target"] == 10 * g["rollouts_to_target"]
    assert s["rollouts_to_target"] is None and s["wall_s_to_target"] is None
    assert g["budget_overshoot_rollouts"] == 100 and s["budget_overshoot_rollouts"] == 100


def test_tables_show_overshoot_and_only_columns_of_strategies_that_ran(tmp_path, capsys):
    from rollalloc.cli import main
    from rollalloc.train.compare import speedup_table

    out = tmp_path / "s"
    argv = SIM + ["--budget-rollouts", "3000", "--train-prompts", "16", "--group-size", "8"]
    assert main(argv + ["--strategies", "grpo,pilot-commit", "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert "vs dapo" not in err and "vs oracle" not in err and "speedup vs grpo" in err
    assert "of 3,000 (+" in err  # the last step overshoots the budget, and the table says so
    summary = json.loads((out / "summary.json").read_text())
    assert summary["strategies"]["grpo"]["budget_overshoot_rollouts"] > 0
    page = (out / "report.html").read_text()
    assert "vs oracle" not in page and "of 3,000" in page
    assert "of 3,000 (+" in speedup_table(summary)


# ------------------------------------------------------------------ the catalogue in the docs

CATALOGUE_START = "<!-- catalogue:start (generated by tests/reliability/test_bad_input.py) -->"
CATALOGUE_END = "<!-- catalogue:end -->"
SINGLE_CASES = [
    (
        "tell-reused-handle",
        "tell() with a handle the allocator still holds",
        "ValueError: handle N is still held",
    ),
    (
        "pool-all-evicted",
        "every prompt of the pool evicted",
        "PoolExhaustedError: every prompt of the pool of N is evicted",
    ),
    (
        "cli-maps-errors",
        "PoolExhaustedError / MaxRoundsError / RewardFunctionError in a command",
        "exit 2, the message, no traceback",
    ),
    (
        "resume-other-strategy",
        "train --resume with another --strategy",
        "exit 2: another configuration (differs in: strategy); run directory byte-identical",
    ),
    (
        "resume-other-format",
        "train --resume onto a checkpoint of format version 99",
        "exit 2: format version 99 is not supported; no readable checkpoint; byte-identical",
    ),
]


def _expect(err, pattern) -> str:
    if err is None:
        return "fallback (documented above)"
    name = err if isinstance(err, str) else err.__name__
    return f"{name}: `{pattern}`".replace("|", "\\|")


def catalogue_rows() -> list[tuple[str, str, str, str]]:
    """(group, id, input, outcome) of every case of this file."""
    rows = []
    rows += [
        ("data file", c[0], f"`{c[1]}`: {c[0].replace('-', ' ')}", _expect(c[3], c[4]))
        for c in FILE_CASES
    ]
    rows += [("task", c[0], c[0].replace("-", " "), _expect(c[2], c[3])) for c in TASK_CASES]
    rows += [("reward function", c[0], c[1].__name__, _expect(c[2], c[3])) for c in REWARD_CASES]
    rows += [
        ("strategy options", c[0], f"`{c[1]}` {c[2]}", _expect(ValueError, c[3]))
        for c in ALLOCATOR_CASES
    ]
    rows += [
        ("tell()", c[0], c[0].replace("-", " "), _expect(ValueError, c[2])) for c in TELL_CASES
    ]
    rows += [
        ("CLI (subprocess)", c[0], f"`rollalloc {' '.join(c[1])}`", _expect("exit 2", c[2]))
        for c in CLI_CASES
    ]
    rows += [("CLI, checked up front", c[0], c[1], _expect("exit 2", c[3])) for c in UPFRONT_CASES]
    rows += [("library call", c[0], c[1], _expect(c[3], c[4])) for c in API_CASES]
    rows += [("single tests", c[0], c[1], c[2]) for c in SINGLE_CASES]
    return rows


def catalogue_markdown() -> str:
    rows = catalogue_rows()
    lines = [
        CATALOGUE_START,
        f"{len(rows)} bad inputs. Regenerate with `python tests/reliability/test_bad_input.py`.",
        "",
        "| # | group | case | input | outcome |",
        "|---|---|---|---|---|",
    ]
    for k, (group, ident, what, outcome) in enumerate(rows, 1):
        what = what.replace("|", "\\|").replace("\n", " ")
        lines.append(f"| {k} | {group} | `{ident}` | {what} | {outcome} |")
    return "\n".join(lines + [CATALOGUE_END])


def test_catalogue_in_docs_is_current():
    doc = (ROOT / "docs/reliability.md").read_text()
    assert CATALOGUE_START in doc and CATALOGUE_END in doc
    current = doc[doc.index(CATALOGUE_START) : doc.index(CATALOGUE_END) + len(CATALOGUE_END)]
    assert current == catalogue_markdown(), "run: python tests/reliability/test_bad_input.py"
    assert len(catalogue_rows()) >= 80


if __name__ == "__main__":  # rewrite the catalogue in docs/reliability.md
    path = ROOT / "docs/reliability.md"
    doc = path.read_text()
    i, j = doc.index(CATALOGUE_START), doc.index(CATALOGUE_END) + len(CATALOGUE_END)
    path.write_text(doc[:i] + catalogue_markdown() + doc[j:])
    print(f"{path}: {len(catalogue_rows())} cases")


def test_seed_ranges_expand_to_the_listed_seeds():
    from rollalloc.preflight import parse_seeds

    assert parse_seeds("0-3,7,10-11") == [0, 1, 2, 3, 7, 10, 11]
    assert parse_seeds("4-4") == [4]
    with pytest.raises(ValueError, match=r"seed\(s\) \[2\] given twice"):
        parse_seeds("0-3,2")
    with pytest.raises(ValueError, match="is not a range of seeds"):
        parse_seeds("1-x")
