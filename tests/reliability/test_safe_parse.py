"""Untrusted model output: the arithmetic parser is bounded (length, digits, depth, magnitude),
ASCII-only and never evaluates; math-verify runs in a worker with a timeout, and a pathological
input scores 0 without stalling the batch."""

from __future__ import annotations

import ast
import builtins
import operator
import os
import time
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rollalloc.tasks.arith import arith_reward
from rollalloc.tasks.safe_parse import (
    MAX_ABS,
    MAX_DEPTH,
    MAX_DIGITS,
    MAX_TEXT,
    parse_number,
    safe_eval,
)

HOSTILE = {
    "huge-int": "9" * 1_000_000,
    "huge-product": "*".join(["9" * MAX_DIGITS] * 8),
    "power": "9**9**9**9",
    "exponent": "1e308*1e308",
    "deep-parens": "(" * 100_000 + "1" + ")" * 100_000,
    "deep-unary": "-" * 100_000 + "1",
    "just-past-depth": "(" * (MAX_DEPTH + 1) + "1" + ")" * (MAX_DEPTH + 1),
    "import": "__import__('os').system('touch /tmp/rollalloc-pwned')",
    "dunder": "().__class__.__bases__[0].__subclasses__()",
    "exec": "exec('import os')",
    "lambda": "(lambda: 1)()",
    "arabic-indic": "٣+٤",
    "full-width": "１２",
    "superscript": "2²",
    "devanagari": "५",
    "long-string": "1+" * 10_000 + "1",
    "long-spaces": " " * 1_000_000 + "1",
    "nul-bytes": "1\x002",
    "rtl-override": "\u202e1+1",
    "hex": "0x10",
    "scientific": "1e5",
    "div-zero": "1/(2-2)",
    "unbalanced": "((1+2)",
    "trailing": "1+",
    "empty": "",
    "not-a-string": 12,
}


@pytest.fixture
def no_exec(monkeypatch):
    calls = []

    def trap(name):
        def f(*a, **k):
            calls.append(name)
            raise AssertionError(f"{name} called while parsing model output")

        return f

    for mod, name in ((builtins, "eval"), (builtins, "exec"), (os, "system")):
        monkeypatch.setattr(mod, name, trap(name))
    yield calls
    monkeypatch.undo()
    assert calls == []


@pytest.mark.parametrize("text", list(HOSTILE.values()), ids=list(HOSTILE))
def test_hostile_text_is_none_fast_and_runs_nothing(no_exec, text):
    t0 = time.perf_counter()
    assert safe_eval(text) is None
    assert parse_number(text) is None
    assert time.perf_counter() - t0 < 0.05
    assert not os.path.exists("/tmp/rollalloc-pwned")


def test_unicode_digits_do_not_count_as_the_answer():
    assert arith_reward(["٣", "３", "3"], answer=["3", "3", "3"]) == [0.0, 0.0, 1.0]


def test_limits_are_exact_boundaries():
    assert parse_number("9" * MAX_DIGITS) == int("9" * MAX_DIGITS)
    assert parse_number("9" * (MAX_DIGITS + 1)) is None
    assert safe_eval("(" * MAX_DEPTH + "7" + ")" * MAX_DEPTH) == 7
    assert safe_eval("(" * (MAX_DEPTH + 1) + "7" + ")" * (MAX_DEPTH + 1)) is None
    big = "1" + "0" * 15
    assert safe_eval(f"{big}*{big}") == 10**30 == MAX_ABS
    assert safe_eval(f"{big}*{big}*10") is None  # magnitude bound on an intermediate result
    expr = "1+" * ((MAX_TEXT - 1) // 2) + "1"
    assert len(expr) <= MAX_TEXT and safe_eval(expr) == (MAX_TEXT - 1) // 2 + 1
    assert safe_eval("1+" * (MAX_TEXT // 2 + 1) + "1") is None


def test_repeated_division_stays_cheap():
    expr = "1" + "/7" * ((MAX_TEXT - 1) // 2)  # denominator 7^127: exact, bounded, fast
    t0 = time.perf_counter()
    assert safe_eval(expr) == Fraction(1, 7 ** ((MAX_TEXT - 1) // 2))
    assert time.perf_counter() - t0 < 0.05


# A plain reference evaluator over Python's own AST (no eval) for the same grammar.
_OPS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
}


def _reference(node):
    if isinstance(node, ast.Expression):
        return _reference(node.body)
    if isinstance(node, ast.Constant):
        return Fraction(node.value)
    if isinstance(node, ast.UnaryOp):
        v = _reference(node.operand)
        return -v if isinstance(node.op, ast.USub) else v
    return _OPS[type(node.op)](_reference(node.left), _reference(node.right))


_expr = st.recursive(
    st.integers(0, 999).map(str),
    lambda inner: st.one_of(
        st.tuples(inner, st.sampled_from("+-*/"), inner).map(lambda t: f"{t[0]}{t[1]}{t[2]}"),
        inner.map(lambda e: f"({e})"),
        inner.map(lambda e: f"-{e}"),
    ),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(_expr)
def test_matches_a_reference_evaluator_within_bounds(text):
    got = safe_eval(text)
    try:
        want = _reference(ast.parse(text, mode="eval"))
    except ZeroDivisionError:
        want = None
    if got is not None:
        assert got == want
    elif want is not None:  # refused only for a bound: nesting depth or magnitude
        depth_bound = max_parens(text) + text.count("-")  # an upper bound on the parser's depth
        assert depth_bound > MAX_DEPTH or _exceeds_intermediate(text), text


def max_parens(text):
    depth = deepest = 0
    for ch in text:
        depth += (ch == "(") - (ch == ")")
        deepest = max(deepest, depth)
    return deepest


def _exceeds_intermediate(text):
    """True if some sub-expression's value exceeds MAX_ABS (the parser checks intermediates)."""
    found = []

    def walk(node):
        v = _reference(node) if not isinstance(node, ast.Expression) else walk(node.body)
        if abs(v) > MAX_ABS:
            found.append(v)
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):
                try:
                    walk(child)
                except ZeroDivisionError:
                    pass
        return v

    try:
        walk(ast.parse(text, mode="eval"))
    except ZeroDivisionError:
        return True
    return bool(found)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("0123456789+-*/().=e_x ٣１²\x00")), max_size=400))
def test_never_raises_and_stays_fast_on_arbitrary_text(text):
    t0 = time.perf_counter()
    v = safe_eval(text)
    assert v is None or isinstance(v, Fraction)
    assert time.perf_counter() - t0 < 0.05


# ------------------------------------------------------------------ math-verify in a worker


def hang_verify(gold: str, pred: str, timeout: int = 5) -> float:
    """A verifier stuck on its input (module level: it is sent to a spawned worker)."""
    if pred == "HANG":
        time.sleep(120)
    return 1.0 if gold == pred else 0.0


def test_stuck_verification_times_out_scores_zero_and_the_batch_goes_on():
    from rollalloc.tasks.files import MathVerifyReward

    reward = MathVerifyReward(timeout_s=1.0, verify_fn=hang_verify)
    try:
        reward(["1"], answer=["1"])  # start the worker outside the timed part
        t0 = time.perf_counter()
        scores = reward(["1", "HANG", "3", "4"], answer=["1", "2", "3", "5"])
        elapsed = time.perf_counter() - t0
    finally:
        reward.close()
    assert scores == [1.0, 0.0, 1.0, 0.0]
    assert elapsed < 30  # one timeout, plus a fresh worker (spawn) for the rest


def test_pathological_latex_scores_zero_within_the_timeout():
    pytest.importorskip("math_verify")
    from rollalloc.tasks.files import MathVerifyReward

    reward = MathVerifyReward(timeout_s=2.0, max_completion_chars=4096)
    hostile = [
        "$9^{9^{9^{9^{9^{9}}}}}$",
        "$\\frac{(10^{10^{10}})!}{2}$",
        "\\boxed{" * 500 + "2" + "}" * 500,  # deep, but honest: 2 is not 1
        "x" * 5000,  # over max_completion_chars: never parsed
        "$__import__('os').system('touch /tmp/rollalloc-pwned')$",
    ]
    try:
        reward(["1"], answer=["1"])
        t0 = time.perf_counter()
        scores = reward(hostile + ["$42$"], answer=["1"] * len(hostile) + ["42"])
        elapsed = time.perf_counter() - t0
    finally:
        reward.close()
    assert scores[:-1] == [0.0] * len(hostile) and scores[-1] == 1.0
    assert elapsed < 60
    assert not os.path.exists("/tmp/rollalloc-pwned")
