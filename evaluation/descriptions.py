"""System-description questions a task definition declares, and checking a run's answers.

The TOML key is `[[system_description.questions]]`: the top-level `description` key is already
the task's own text, and TOML cannot make one key both a string and a table.
"""

from __future__ import annotations

import functools
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from evaluation.issues import Issue, TaskDefinitionError

if TYPE_CHECKING:
    from evaluation.taskdef import TaskDefinition

KINDS = ("choices", "text")
MAX_TEXT = 2000
MAX_DESCRIPTION = 20000


@dataclass(frozen=True)
class Question:
    """One question: a checkbox list (`choices`) or a short text (`text`)."""

    key: str
    label: str
    kind: str
    options: tuple[str, ...] = ()
    required: bool = False

    def to_json(self) -> dict[str, Any]:
        """JSON form."""
        return {"key": self.key, "label": self.label, "kind": self.kind,
                "options": list(self.options), "required": self.required}


def parse_questions(doc: Mapping[str, Any], source: str) -> tuple[Question, ...]:
    """The questions of a parsed definition document; TaskDefinitionError names what is wrong."""
    table = doc.get("system_description", {})
    if not isinstance(table, dict):
        raise TaskDefinitionError(f"{source}: system_description must be a table")
    raw = table.get("questions", [])
    if not isinstance(raw, list):
        raise TaskDefinitionError(f"{source}: system_description.questions must be [[tables]]")
    found: list[Question] = []
    for n, item in enumerate(raw, start=1):
        where = f"{source}: system_description.questions #{n}"
        if not isinstance(item, dict):
            raise TaskDefinitionError(f"{where} must be a table")
        key = item.get("key")
        if not isinstance(key, str) or not re.fullmatch(r"[a-z][a-z0-9_]*", key):
            raise TaskDefinitionError(f"{where}: key must be a lower-case identifier")
        if key in {"description", "name", "files", "phase"} or key in {q.key for q in found}:
            raise TaskDefinitionError(f"{where}: key {key!r} is reserved or used twice")
        kind = item.get("kind", "choices")
        if kind not in KINDS:
            raise TaskDefinitionError(f"{where}: kind must be one of {list(KINDS)}")
        options = item.get("options", [])
        if not isinstance(options, list) or not all(isinstance(o, str) and o for o in options):
            raise TaskDefinitionError(f"{where}: options must be a list of strings")
        if kind == "choices" and (not options or len(set(options)) != len(options)):
            raise TaskDefinitionError(f"{where}: a choices question needs distinct options")
        label = item.get("label", key)
        required = item.get("required", False)
        if not isinstance(label, str) or not isinstance(required, bool):
            raise TaskDefinitionError(f"{where}: label is a string and required a boolean")
        found.append(Question(key, label, kind, tuple(options), required))
    return tuple(found)


@functools.lru_cache(maxsize=64)
def questions(definition: TaskDefinition) -> tuple[Question, ...]:
    """The definition's questions (read from its kept text; the definition was checked on load)."""
    return parse_questions(tomllib.loads(definition.text), definition.name)


def check_answers(
    definition: TaskDefinition, description: str, given: Mapping[str, Any]
) -> tuple[dict[str, Any], list[Issue]]:
    """Normalised answers ({key: [options]} or {key: text}) and every problem with them.

    `given` maps a question key to a list of strings or one string; for choices a string may
    list options separated by commas or new lines (as a CLI or a multipart field gives them).
    Unknown keys are problems too, so a typo is never silently dropped.
    """
    issues: list[Issue] = []
    answers: dict[str, Any] = {}
    if len(description) > MAX_DESCRIPTION:
        issues.append(Issue("description", None,
                            f"the description has more than {MAX_DESCRIPTION} characters",
                            "description"))
    known = {q.key: q for q in questions(definition)}
    for key in given:
        if key not in known:
            issues.append(Issue("description", None, f"{key!r} is not a question of "
                                f"{definition.name} (questions: {', '.join(known) or 'none'})",
                                "description"))
    for question in known.values():
        value = given.get(question.key)
        if question.kind == "choices":
            items = [value] if isinstance(value, str) else list(value or [])
            picked: list[str] = []
            for item in items:
                for part in re.split(r"[,\n]", str(item)):
                    part = part.strip()
                    if part and part not in picked:
                        picked.append(part)
            wrong = [p for p in picked if p not in question.options]
            if wrong:
                issues.append(Issue("description", None,
                                    f"{question.key}: {', '.join(map(repr, wrong))} not among "
                                    f"the options ({', '.join(question.options)})",
                                    "description"))
            picked = [o for o in question.options if o in picked]  # definition order
            if picked:
                answers[question.key] = picked
        else:
            if isinstance(value, list):
                value = "\n".join(str(v) for v in value)
            text = str(value or "").strip()
            if len(text) > MAX_TEXT:
                issues.append(Issue("description", None,
                                    f"{question.key}: more than {MAX_TEXT} characters",
                                    "description"))
            if text:
                answers[question.key] = text
        if question.required and question.key not in answers:
            issues.append(Issue("description", None, f"{question.key}: an answer is required",
                                "description"))
    return answers, issues
