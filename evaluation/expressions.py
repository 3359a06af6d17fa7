"""Derived metrics: small arithmetic expressions over a dataset's metrics, never `eval`.

An expression is parsed with `ast` and only numbers, metric names, + - * / (and unary -),
parentheses and the functions in FUNCTIONS are accepted. It is evaluated over numpy arrays,
so the same expression combines point values (shape ()) and bootstrap samples (shape (B,)).
An undefined input (NaN) makes the result undefined; so does a division by zero.
"""

from __future__ import annotations

import ast
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache

import numpy as np


def _hmean(*values: np.ndarray) -> np.ndarray:
    """Harmonic mean: 0 when any value is 0, undefined (NaN) when any value is negative."""
    v = np.stack(np.broadcast_arrays(*values))
    with np.errstate(invalid="ignore", divide="ignore"):
        inv = (1.0 / np.where(v > 0, v, 1.0)).sum(axis=0)
        out = np.where((v > 0).all(axis=0), len(values) / inv, 0.0)
    return np.where(np.isnan(v).any(axis=0) | (v < 0).any(axis=0), np.nan, out)


def _mean(*values: np.ndarray) -> np.ndarray:
    return np.stack(np.broadcast_arrays(*values)).mean(axis=0)


def _min(*values: np.ndarray) -> np.ndarray:
    return np.stack(np.broadcast_arrays(*values)).min(axis=0)


def _max(*values: np.ndarray) -> np.ndarray:
    return np.stack(np.broadcast_arrays(*values)).max(axis=0)


FUNCTIONS: dict[str, Callable[..., np.ndarray]] = {
    "hmean": _hmean, "mean": _mean, "min": _min, "max": _max,
}
"""The functions an expression may call, each over one or more arguments."""


def _divide(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(b != 0, a / np.where(b != 0, b, 1.0), np.nan)


_BINARY: dict[type, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    ast.Add: np.add, ast.Sub: np.subtract, ast.Mult: np.multiply, ast.Div: _divide,
}


@dataclass(frozen=True)
class Expression:
    """A checked expression: its text and the metric names it reads, in order of appearance."""

    text: str
    names: tuple[str, ...]

    def evaluate(self, values: Mapping[str, np.ndarray | float]) -> np.ndarray:
        """The expression's value, given a value (or samples) for each name it reads."""
        tree = _parse(self.text)
        return np.asarray(_eval(tree.body, values), dtype=np.float64)


# a definition's formula is short; a longer text could only exhaust the parser's recursion
MAX_LENGTH = 300


# CPython 3.11's AST conversion counts its recursion depth in state the threads share: two
# threads parsing at once can raise SystemError ("AST constructor recursion depth mismatch"),
# so parses of definition expressions take turns (semboard.hostcache.arrays guards np.load's).
_PARSING = threading.Lock()


@lru_cache(maxsize=256)
def _parse(text: str) -> ast.Expression:
    if len(text) > MAX_LENGTH:
        raise ValueError(f"expression is {len(text)} characters long (at most {MAX_LENGTH})")
    try:
        with _PARSING:
            return ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        raise ValueError(f"expression {text!r} is not valid: {exc.msg}") from None


def _check(node: ast.AST, text: str, names: list[str]) -> None:
    """Refuse every node outside the small language; collect the names read."""
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, int | float):
            raise ValueError(f"expression {text!r}: only numbers are allowed as constants "
                             f"({node.value!r})")
    elif isinstance(node, ast.Name):
        if node.id in FUNCTIONS:
            raise ValueError(f"expression {text!r}: {node.id} is a function; call it")
        names.append(node.id)
    elif isinstance(node, ast.BinOp):
        if type(node.op) not in _BINARY:
            raise ValueError(f"expression {text!r}: only + - * / are allowed")
        _check(node.left, text, names)
        _check(node.right, text, names)
    elif isinstance(node, ast.UnaryOp):
        if not isinstance(node.op, ast.USub | ast.UAdd):
            raise ValueError(f"expression {text!r}: only + - * / are allowed")
        _check(node.operand, text, names)
    elif isinstance(node, ast.Call):
        if not isinstance(node.func, ast.Name) or node.func.id not in FUNCTIONS:
            raise ValueError(f"expression {text!r}: the only functions are "
                             f"{', '.join(FUNCTIONS)}")
        if node.keywords or not node.args:
            raise ValueError(f"expression {text!r}: {node.func.id} takes one or more "
                             "arguments, without names")
        for arg in node.args:
            _check(arg, text, names)
    else:
        raise ValueError(f"expression {text!r}: {type(node).__name__.lower()} is not allowed "
                         "(numbers, metric names, + - * /, parentheses and "
                         f"{', '.join(FUNCTIONS)} only)")


@lru_cache(maxsize=256)
def parse_expression(text: str) -> Expression:
    """A checked expression; ValueError says what in the text is not allowed."""
    tree = _parse(text)
    names: list[str] = []
    _check(tree.body, text, names)
    return Expression(text.strip(), tuple(dict.fromkeys(names)))


def _eval(node: ast.AST, values: Mapping[str, np.ndarray | float]) -> np.ndarray:
    if isinstance(node, ast.Constant):
        assert isinstance(node.value, int | float)  # _check allowed nothing else
        return np.asarray(float(node.value))
    if isinstance(node, ast.Name):
        return np.asarray(values[node.id], dtype=np.float64)
    if isinstance(node, ast.BinOp):
        return _BINARY[type(node.op)](_eval(node.left, values), _eval(node.right, values))
    if isinstance(node, ast.UnaryOp):
        operand = _eval(node.operand, values)
        return -operand if isinstance(node.op, ast.USub) else operand
    assert isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
    return FUNCTIONS[node.func.id](*(_eval(a, values) for a in node.args))
