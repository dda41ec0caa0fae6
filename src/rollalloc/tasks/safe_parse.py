"""Bounded parsing of numbers and arithmetic in untrusted text (model completions, data files).

Nothing here calls `eval`/`exec`: a small recursive-descent parser over `+ - * / ( )`, integers and
decimals, with hard limits on input length, digits per number, nesting depth and result magnitude.
Anything outside the grammar or the limits gives `None`, which a verifier scores 0.
"""

from __future__ import annotations

import re
from fractions import Fraction

MAX_TEXT = 256
"""Longest expression (characters) the parser looks at."""
MAX_DIGITS = 30
"""Most digits in one number literal (integer and fraction part together)."""
MAX_DEPTH = 16
"""Deepest nesting of parentheses / unary signs."""
MAX_ABS = 10**30
"""Largest magnitude of any intermediate result."""

# re.ASCII: `\d` is 0-9 only; unicode digits ("٣", full-width "１") are not the ASCII answer
_NUMBER = re.compile(r"[+-]?(\d+)(?:\.(\d+))?", re.ASCII)
_TOKEN = re.compile(r"\s*(?:(\d+(?:\.\d+)?)|([-+*/()]))", re.ASCII)


def parse_number(text: str, max_digits: int = MAX_DIGITS) -> Fraction | None:
    """The number that `text` is, exactly (`" -12 "`, `"3.50"`), or None.

    Whole-string match only: `"12abc"`, `"1e5"`, `"0x10"` and numbers longer than `max_digits`
    digits are None.
    """
    if not isinstance(text, str) or len(text) > max_digits + 8:
        return None
    m = _NUMBER.fullmatch(text.strip())
    if m is None:
        return None
    int_part, frac_part = m.group(1), m.group(2) or ""
    if len(int_part) + len(frac_part) > max_digits:
        return None
    return Fraction(m.group(0).strip())


class _Parser:
    def __init__(self, text: str, max_digits: int, max_depth: int, max_abs: int) -> None:
        self.tokens: list[str] = []
        pos = 0
        text = text.strip()
        while pos < len(text):
            m = _TOKEN.match(text, pos)
            if m is None or m.end() == pos:
                raise ValueError("bad token")
            tok = m.group(1) or m.group(2)
            if m.group(1) and len(tok.replace(".", "")) > max_digits:
                raise ValueError("number too long")
            self.tokens.append(tok)
            pos = m.end()
            while pos < len(text) and text[pos].isspace():
                pos += 1
        self.i = 0
        self.max_depth = max_depth
        self.max_abs = max_abs

    def peek(self) -> str | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def take(self) -> str:
        tok = self.tokens[self.i]
        self.i += 1
        return tok

    def check(self, value: Fraction) -> Fraction:
        if abs(value) > self.max_abs:
            raise ValueError("magnitude")
        return value

    def expr(self, depth: int) -> Fraction:  # expr := term (('+'|'-') term)*
        value = self.term(depth)
        while self.peek() in ("+", "-"):
            op = self.take()
            rhs = self.term(depth)
            value = self.check(value + rhs if op == "+" else value - rhs)
        return value

    def term(self, depth: int) -> Fraction:  # term := unary (('*'|'/') unary)*
        value = self.unary(depth)
        while self.peek() in ("*", "/"):
            op = self.take()
            rhs = self.unary(depth)
            if op == "/" and rhs == 0:
                raise ValueError("division by zero")
            value = self.check(value * rhs if op == "*" else value / rhs)
        return value

    def unary(self, depth: int) -> Fraction:  # unary := ('+'|'-') unary | atom
        if depth > self.max_depth:
            raise ValueError("too deep")
        if self.peek() in ("+", "-"):
            sign = -1 if self.take() == "-" else 1
            return sign * self.unary(depth + 1)
        return self.atom(depth)

    def atom(self, depth: int) -> Fraction:  # atom := number | '(' expr ')'
        tok = self.peek()
        if tok is None:
            raise ValueError("unexpected end")
        self.take()
        if tok == "(":
            value = self.expr(depth + 1)
            if self.peek() != ")":
                raise ValueError("unbalanced")
            self.take()
            return value
        if tok[0].isdigit():
            return self.check(Fraction(tok))
        raise ValueError(f"unexpected {tok!r}")


def safe_eval(
    text: str,
    *,
    max_text: int = MAX_TEXT,
    max_digits: int = MAX_DIGITS,
    max_depth: int = MAX_DEPTH,
    max_abs: int = MAX_ABS,
) -> Fraction | None:
    """Exact value of an arithmetic expression over `+ - * / ( )` and decimals, or None.

    A trailing `=` is ignored (`"7+4-0="` is 11). No names, calls, powers or attribute access exist
    in the grammar, so nothing in `text` can run.
    """
    if not isinstance(text, str) or len(text) > max_text:
        return None
    text = text.strip()
    if text.endswith("="):
        text = text[:-1]
    try:
        p = _Parser(text, max_digits, max_depth, max_abs)
        if not p.tokens:
            return None
        value = p.expr(0)
        if p.peek() is not None:
            return None
        return value
    except (ValueError, ZeroDivisionError, RecursionError, IndexError):
        return None
