"""Board breakdowns: which per-group columns a board page shows (exports keep them all).

Scoring keys a plain genre by its name (``sts/MSRpar/pearson``) and a group of a declared
breakdown as ``<breakdown>=<group>`` (``stsb/year=2014/pearson``); a board page shows the
groups of one breakdown at a time, chosen with ``?breakdown=NAME`` (or none).
"""

from __future__ import annotations

from typing import Any

from evaluation.taskdef import TaskDefinition

NONE = "none"
# the breakdown a plain genre (inputs.genre = "id_prefix" / "column") belongs to
PLAIN = "genre"


def declared(definition: TaskDefinition) -> list[str]:
    """The task's breakdowns in declaration order: "genre" for plain genres, then the others."""
    names: list[str] = []
    for spec in definition.datasets:
        own = ([PLAIN] if spec.inputs.genre != "none" else []) + list(spec.inputs.breakdowns)
        names += [n for n in own if n not in names]
    return names


def of_column(column: Any) -> str | None:
    """The breakdown a board column belongs to; None for aggregate and dataset columns."""
    if column.kind != "genre":
        return None
    parts = column.key.split("/")
    if len(parts) != 3:
        return None
    group = parts[1]
    return group.split("=", 1)[0] if "=" in group else PLAIN


def group_name(column: Any) -> str:
    """A per-group column's group without its breakdown (``year=2014`` → ``2014``)."""
    group = column.key.split("/")[1]
    return group.split("=", 1)[1] if "=" in group else group


def chosen(requested: str | None, names: list[str]) -> str:
    """The breakdown to show: the requested one when the task has it, else the first declared.

    The first declared breakdown is the default, so a task with one kind of genre shows its
    genre columns as before; "none" shows no per-group column.
    """
    if requested == NONE or (requested and requested in names):
        return requested
    return names[0] if names else NONE


def by_key(columns: list[Any]) -> dict[str, str]:
    """Each per-group column's breakdown by column key (looked up once per table cell)."""
    return {c.key: b for c in columns if (b := of_column(c)) is not None}
