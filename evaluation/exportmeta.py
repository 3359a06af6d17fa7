"""What a task definition tells outside tools about itself: `[exports]`.

    [exports]
    mteb_task = "STS12"          # MTEB's own name for this task, where MTEB has it
    languages = ["eng-Latn"]     # ISO 639-3 language and ISO 15924 script of its texts

An MTEB TaskResult is read by `mteb` under its task's name and counts only subsets whose
languages it knows: without them `mteb` gives NaN for a run. A definition without `[exports]`
exports under its own name, its texts' language undetermined (`und-Zyyy`).
"""

from __future__ import annotations

import functools
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from evaluation.issues import TaskDefinitionError

if TYPE_CHECKING:
    from evaluation.taskdef import TaskDefinition

UNDETERMINED = ("und-Zyyy",)  # ISO 639-3 "undetermined", ISO 15924 "common"
_LANGUAGE = re.compile(r"^[a-z]{3}-[A-Z][a-z]{3}$")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,99}$")


@dataclass(frozen=True)
class Exports:
    """The definition's `[exports]`: MTEB's name for the task (None: none) and its languages."""

    mteb_task: str | None = None
    languages: tuple[str, ...] = UNDETERMINED


def parse_exports(doc: Mapping[str, Any], source: str) -> Exports:
    """`[exports]` of a parsed definition document; TaskDefinitionError names what is wrong."""
    table = doc.get("exports", {})
    if not isinstance(table, dict):
        raise TaskDefinitionError(f"{source}: exports must be a table")
    unknown = sorted(set(table) - {"mteb_task", "languages"})
    if unknown:
        raise TaskDefinitionError(f"{source}: unknown key exports.{unknown[0]} (allowed: "
                                  "mteb_task, languages)")
    task = table.get("mteb_task")
    if task is not None and (not isinstance(task, str) or not _NAME.match(task)):
        raise TaskDefinitionError(f"{source}: exports.mteb_task must be a task name such as "
                                  "\"STS12\"")
    languages = table.get("languages", list(UNDETERMINED))
    if not isinstance(languages, list) or not languages or not all(
            isinstance(x, str) and _LANGUAGE.match(x) for x in languages):
        raise TaskDefinitionError(f"{source}: exports.languages must list codes such as "
                                  "\"eng-Latn\" (ISO 639-3 language, ISO 15924 script)")
    return Exports(task, tuple(languages))


@functools.lru_cache(maxsize=64)
def exports(definition: TaskDefinition) -> Exports:
    """The definition's `[exports]` (read from its kept text; checked when it was loaded)."""
    return parse_exports(tomllib.loads(definition.text), definition.name)
