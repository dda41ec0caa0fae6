"""Verifiers on honest and hostile completions: hostile text scores 0 and executes nothing."""

from __future__ import annotations

import builtins
import contextlib
import os
import time
from fractions import Fraction

import pytest

from rollalloc.tasks import load_task
from rollalloc.tasks.arith import arith_reward
from rollalloc.tasks.safe_parse import parse_number, safe_eval

HOSTILE = [
    "9" * 100_000,  # a huge number
    "1" + "0" * 40,
    "1e999999999",
    "2**2**2**2**2**32",
    "9" * 25 + "*" + "9" * 25 + "*" + "9" * 25,
    "(" * 5000 + "1" + ")" * 5000,
    "-" * 10_000 + "1",
    "__import__('os').system('touch /tmp/pwned')",
    "exec('raise SystemExit')",
    "lambda: 1",
    "\x00\xff garbage \u202e",
    "import os; os.remove('x')",
    "",
    "   ",
    "11; 12",
    "0x10",
    "1/0",
]


@contextlib.contextmanager
def no_exec():
    """Fail if anything calls eval/exec/os.system while the block runs (model text is scored)."""
    calls = []

    def trap(name):
        def f(*a, **k):
            calls.append(name)
            raise AssertionError(f"{name} called while scoring")

        return f

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(builtins, "eval", trap("eval"))
        mp.setattr(builtins, "exec", trap("exec"))
        mp.setattr(os, "system", trap("os.system"))
        yield calls
    assert calls == []


def test_parse_number_exact_and_bounded():
    assert parse_number(" -12 ") == -12
    assert parse_number("3.50") == Fraction(7, 2)
    for bad in ["12abc", "1e5", "0x10", "", "--1", "1 2", "9" * 31, None, 12]:
        assert parse_number(bad) is None


def test_safe_eval_grammar():
    assert safe_eval("7+4-0-3=") == 8
    assert safe_eval("2*(3+4)/7") == 2
    assert safe_eval("-(-(2))") == 2
    assert safe_eval("1/0") is None
    assert safe_eval("2**3") is None  # no powers in the grammar
    assert safe_eval("(" * 17 + "1" + ")" * 17) is None  # deeper than MAX_DEPTH
    assert safe_eval("9" * 20 + "*" + "9" * 20) is None  # magnitude bound


@pytest.mark.parametrize("text", HOSTILE)
def test_hostile_completions_score_zero_fast(text):
    t0 = time.perf_counter()
    with no_exec():
        assert safe_eval(text) is None
        assert arith_reward([text], answer=["11"]) == [0.0]
    assert time.perf_counter() - t0 < 1.0


def test_arith_reward_exact_match():
    assert arith_reward(["11", " 11\n", "011", "11.0", "-11", "1 1", "11x"], answer=["11"] * 7) == [
        1.0,
        1.0,
        1.0,
        1.0,
        0.0,
        0.0,
        0.0,
    ]


def test_reasoning_gym_binary_and_hostile():
    task = load_task(
        "reasoning-gym:chain_sum",
        {
            "num_train": 8,
            "num_eval": 4,
            "min_terms": 2,
            "max_terms": 3,
            "min_digits": 1,
            "max_digits": 1,
        },
    )
    reward = task.reward_funcs[0]
    row = task.rows("train", [0])
    with no_exec():
        right = reward([row["answer"][0]], **row)
        # a near miss gets partial credit from score_answer (e.g. 0.67), which must not count
        wrong = reward([row["answer"][0] + "0"], **row)
        hostile = reward(HOSTILE, **{k: v * len(HOSTILE) for k, v in row.items()})
    assert right == [1.0] and wrong == [0.0]
    assert hostile == [0.0] * len(HOSTILE)
    assert set(task.eval["prompt"]).isdisjoint(task.train["prompt"])
