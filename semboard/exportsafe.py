"""Cells of the CSV and LaTeX files the site serves, made inert whatever names users chose."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Sequence
from typing import Any

# OWASP "CSV injection": a cell starting with one of these runs as a formula in a spreadsheet.
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")

_LATEX = {
    "\\": r"\textbackslash{}",
    "{": r"\{",
    "}": r"\}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "<": r"\textless{}",
    ">": r"\textgreater{}",
    "|": r"\textbar{}",
    "\n": " ",
    "\r": " ",
    "†": r"\dag{}",
    "‡": r"\ddag{}",
}


def csv_cell(value: Any) -> Any:
    """A text cell that would start a formula gets a leading apostrophe; numbers stay numbers."""
    if isinstance(value, str) and value.startswith(_FORMULA_START):
        return "'" + value
    return value


def csv_text(header: Sequence[Any], rows: Iterable[Sequence[Any]]) -> str:
    """CSV text with every cell neutralised (None becomes an empty cell)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([csv_cell(h) for h in header])
    for row in rows:
        writer.writerow(["" if v is None else csv_cell(v) for v in row])
    return out.getvalue()


def latex_escape(text: str) -> str:
    """Text typeset literally: every LaTeX special character escaped (one pass, no re-escaping)."""
    return "".join(_LATEX.get(char, char) for char in text)
