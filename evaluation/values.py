"""Field values of run and gold lines: splitting a line, booleans and tuples of annotator votes."""

from __future__ import annotations

import re
from collections.abc import Sequence

# a "(3, 2)" tuple is one field even where whitespace separates fields
_WHITESPACE_FIELD = re.compile(r"\([^()]*\)|[^\s()]+")
_TRUE = frozenset({"true", "yes", "1"})
_FALSE = frozenset({"false", "no", "0"})
_VOTES = re.compile(r"^\(\s*([^()]*?)\s*\)$")


def split_fields(line: str, delimiter: str) -> list[str]:
    """The fields of one line: TAB-separated, or separated by runs of whitespace."""
    if delimiter == "tab":
        return [f.strip() for f in line.rstrip("\r\n").split("\t")]
    return _WHITESPACE_FIELD.findall(line)


def parse_boolean(token: str) -> float | None:
    """1.0 for true/yes/1, 0.0 for false/no/0 (any case), None for anything else."""
    t = token.strip().casefold()
    if t in _TRUE:
        return 1.0
    if t in _FALSE:
        return 0.0
    return None


def parse_votes(token: str) -> tuple[float, ...] | None:
    """The numbers of a "(3, 2)" tuple, None when the token is not one."""
    m = _VOTES.match(token.strip())
    if m is None:
        return None
    parts = [p.strip() for p in m.group(1).split(",")]
    try:
        values = tuple(float(p) for p in parts if p)
    except ValueError:
        return None
    if not values or len(values) != len(parts) or any(v != v or v in (float("inf"),
                                                                        float("-inf"))
                                                      for v in values):
        return None
    return values


def reduce_votes(votes: Sequence[float], rule: str) -> float:
    """One gold value from a vote tuple.

    `positive_share` and `majority` read the tuple as (positive votes, negative votes), as
    the paraphrase releases write "(3, 2)": the share is 3/5, the majority 1 (0 when the
    negatives win, 0.5 on a tie). `mean` reads it as each annotator's score and averages.
    """
    if rule == "mean":
        return sum(votes) / len(votes)
    if len(votes) != 2:
        raise ValueError(f"{rule} needs (positive, negative) vote counts, not {len(votes)} values")
    pos, neg = votes
    if rule == "positive_share":
        return pos / (pos + neg) if pos + neg > 0 else float("nan")
    return 1.0 if pos > neg else 0.0 if pos < neg else 0.5
