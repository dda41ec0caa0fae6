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
