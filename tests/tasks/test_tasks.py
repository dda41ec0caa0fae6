"""Task loading: the arith generator, local JSONL/JSON/Parquet files, math-verify scoring."""

from __future__ import annotations

import json
import time

import pytest

from rollalloc.tasks import load_task
from rollalloc.tasks.files import MathVerifyReward


def _chain_value(prompt: str) -> int:
    # an independent plain loop over the digits and signs, no parser
    body = prompt.rstrip("=")
    total, sign, i = 0, 1, 0
    while i < len(body):
        ch = body[i]
        if ch in "+-":
            sign = 1 if ch == "+" else -1
        else:
            total += sign * int(ch)
        i += 1
    return total


def test_arith_task_deterministic_disjoint_and_correct():
    cfg = {"num_train": 300, "num_eval": 100, "terms": [2, 3, 5], "weights": [1, 1, 2]}
    a, b = load_task("arith", cfg, seed=3), load_task("arith", cfg, seed=3)
    assert a.train == b.train and a.eval == b.eval
    assert a.train != load_task("arith", cfg, seed=4).train
    assert set(a.eval["prompt"]).isdisjoint(a.train["prompt"])
    for p, ans, t in zip(a.train["prompt"], a.train["answer"], a.train["terms"]):
        assert int(ans) == _chain_value(p)
        assert p.count("+") + p.count("-") == t - 1
    assert a.score(a.train["answer"][:5], "train", range(5)).tolist() == [1.0] * 5
    with pytest.raises(ValueError, match="unknown config"):
        load_task("arith", {"term": [2]})


def test_arith_eval_weights_leave_a_pool_level_out_of_the_benchmark():
    cfg = {"num_train": 400, "num_eval": 100, "terms": [2, 3], "digits": [1, 3]}
    t = load_task("arith", {**cfg, "eval_weights": [1, 0]}, seed=1)
    assert set(t.eval["level"]) == {"2x1d"}
    assert {"2x1d", "3x3d"} <= set(t.train["level"])
    assert set(t.eval["prompt"]).isdisjoint(t.train["prompt"])
    with pytest.raises(ValueError, match="eval_weights"):
        load_task("arith", {**cfg, "eval_weights": [0, 0]})


ROWS = [
    {"prompt": "What is 1/2 as a decimal?", "answer": "0.5"},
    {"prompt": "2+2?", "answer": "4"},
    {"prompt": "x if 2x=6", "answer": "3"},
    {"prompt": "half", "answer": "\\frac{1}{2}"},
]


def _write(tmp_path, fmt):
    if fmt == "jsonl":
        p = tmp_path / "d.jsonl"
        p.write_text("\n".join(json.dumps(r) for r in ROWS) + "\n")
    elif fmt == "json":
        p = tmp_path / "d.json"
        p.write_text(json.dumps(ROWS))
    else:
        import pyarrow as pa
        import pyarrow.parquet as pq

        p = tmp_path / "d.parquet"
        pq.write_table(pa.Table.from_pylist(ROWS), p)
    return p


@pytest.mark.parametrize("fmt", ["jsonl", "json", "parquet"])
def test_file_tasks_load(tmp_path, fmt):
    path = _write(tmp_path, fmt)
    task = load_task(str(path), {"eval_fraction": 0.25}, seed=0)
    assert task.num_train == 3 and task.num_eval == 1
    assert sorted(task.train["prompt"] + task.eval["prompt"]) == sorted(r["prompt"] for r in ROWS)


def test_file_task_errors(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"question": "q", "answer": "1"}) + "\n")
    with pytest.raises(ValueError, match="prompt"):
        load_task(str(bad))
    with pytest.raises(FileNotFoundError):
        load_task(str(tmp_path / "missing.jsonl"))


def test_math_verify_reward_and_hostile(tmp_path):
    path = _write(tmp_path, "jsonl")
    task = load_task(str(path), {"eval_path": str(path), "timeout_s": 20})
    reward = task.reward_funcs[0]
    try:
        got = reward(
            ["\\boxed{\\frac{1}{2}}", "$0.5$", "5", "9" * 100_000, "__import__('os').system('x')"],
            answer=["0.5", "\\frac{1}{2}", "4", "4", "4"],
        )
        assert got == [1.0, 1.0, 0.0, 0.0, 0.0]
    finally:
        reward.close()


def hanging_verify(gold: str, pred: str, timeout: int) -> float:
    if pred == "hang":
        time.sleep(600)
    return float(gold == pred)


def test_stuck_verification_times_out_and_pool_is_replaced():
    reward = MathVerifyReward(timeout_s=1.0, verify_fn=hanging_verify)
    try:
        t0 = time.perf_counter()
        got = reward(["4", "hang", "5", "4"], answer=["4", "4", "5", "5"])
        assert got == [1.0, 0.0, 1.0, 0.0]
        assert time.perf_counter() - t0 < 30
    finally:
        reward.close()
