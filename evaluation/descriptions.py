"""Questions a task definition declares, and checking a run's answers: the system description
(`[[system_description.questions]]`) and the training-data declaration (`[training_data]`,
`required` and `[[training_data.questions]]`: what a model was trained on, and whether the
task's test data or its sources were in it).

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

KINDS = ("choices", "choice", "text")  # a checkbox list, one of the options, a short text
MAX_TEXT = 2000
MAX_DESCRIPTION = 20000
TABLES = ("system_description", "training_data")
MAX_TRAINING_TEXT = 4000  # a training-data declaration's free text


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


def parse_questions(doc: Mapping[str, Any], source: str,
                    name: str = "system_description") -> tuple[Question, ...]:
    """The questions of a parsed definition document (`name`: one of TABLES);
    TaskDefinitionError names what is wrong."""
    table = doc.get(name, {})
    if not isinstance(table, dict):
        raise TaskDefinitionError(f"{source}: {name} must be a table")
    known = ("questions", "required") if name == "training_data" else ("questions",)
    unknown = sorted(set(table) - set(known))
    if unknown:
        raise TaskDefinitionError(f"{source}: unknown key {name}.{unknown[0]} (allowed: "
                                  f"{', '.join(known)})")
    if not isinstance(table.get("required", False), bool):
        raise TaskDefinitionError(f"{source}: {name}.required must be true or false")
    raw = table.get("questions", [])
    if not isinstance(raw, list):
        raise TaskDefinitionError(f"{source}: {name}.questions must be [[tables]]")
    found: list[Question] = []
    for n, item in enumerate(raw, start=1):
        where = f"{source}: {name}.questions #{n}"
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
        if kind != "text" and (not options or len(set(options)) != len(options)):
            raise TaskDefinitionError(f"{where}: a {kind} question needs distinct options")
        label = item.get("label", key)
        required = item.get("required", False)
        if not isinstance(label, str) or not isinstance(required, bool):
            raise TaskDefinitionError(f"{where}: label is a string and required a boolean")
        found.append(Question(key, label, kind, tuple(options), required))
    return tuple(found)


@functools.lru_cache(maxsize=64)
def questions(definition: TaskDefinition, name: str = "system_description"
              ) -> tuple[Question, ...]:
    """The definition's questions (read from its kept text; the definition was checked on load)."""
    return parse_questions(tomllib.loads(definition.text), definition.name, name)


@functools.lru_cache(maxsize=64)
def training_data_required(definition: TaskDefinition) -> bool:
    """Whether a model run must declare its training data (`[training_data] required`)."""
    table = tomllib.loads(definition.text).get("training_data", {})
    return bool(table.get("required", False)) if isinstance(table, dict) else False


def _answer(question: Question, value: Any, where: str, issues: list[Issue]) -> Any:
    """One question's normalised answer (None: not answered); problems added to issues."""
    if question.kind == "text":
        if isinstance(value, list):
            value = "\n".join(str(v) for v in value)
        text = str(value or "").strip()
        if len(text) > MAX_TEXT:
            issues.append(Issue(where, None, f"{question.key}: more than {MAX_TEXT} "
                                "characters", where))
        return text or None
    items = [value] if isinstance(value, str) else list(value or [])
    picked: list[str] = []
    for item in items:
        for part in (re.split(r"[,\n]", str(item)) if question.kind == "choices"
                     else [str(item)]):
            part = part.strip()
            if part and part not in picked:
                picked.append(part)
    wrong = [p for p in picked if p not in question.options]
    if wrong:
        issues.append(Issue(where, None, f"{question.key}: {', '.join(map(repr, wrong))} not "
                            f"among the options ({', '.join(question.options)})", where))
    picked = [o for o in question.options if o in picked]  # definition order
    if question.kind == "choice":
        if len(picked) > 1:
            issues.append(Issue(where, None, f"{question.key}: give one of "
                                f"{', '.join(question.options)}", where))
        return picked[0] if picked else None
    return picked or None


def check_training_data(definition: TaskDefinition, text: str, given: Mapping[str, Any]
                        ) -> tuple[dict[str, Any] | None, list[Issue]]:
    """A training-data declaration ({"text", "answers"}; None when nothing was declared) and
    every problem with it: text bounded, answers checked against `[[training_data.questions]]`
    (unknown keys refused), the text required where `[training_data] required` says so."""
    issues: list[Issue] = []
    text = (text or "").strip()
    where = "training_data"
    if len(text) > MAX_TRAINING_TEXT:
        issues.append(Issue(where, None, f"the training-data declaration has more than "
                            f"{MAX_TRAINING_TEXT:,} characters", where))
    known = {q.key: q for q in questions(definition, where)}
    for key in given:
        if key not in known:
            issues.append(Issue(where, None, f"{str(key)[:40]!r} is not a training-data "
                                f"question of {definition.name} (questions: "
                                f"{', '.join(known) or 'none'})", where))
    answers: dict[str, Any] = {}
    for question in known.values():
        value = _answer(question, given.get(question.key), where, issues)
        if value is not None:
            answers[question.key] = value
        elif question.required:
            issues.append(Issue(where, None, f"{question.key}: an answer is required "
                                f"({question.label})", where))
    if training_data_required(definition) and not text:
        issues.append(Issue(where, None, f"{definition.name} asks every model to declare its "
                            "training data: say what it was trained on (training_data)", where))
    return ({"text": text, "answers": answers} if text or answers else None), issues


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
        value = _answer(question, given.get(question.key), "description", issues)
        if value is not None:
            answers[question.key] = value
        if question.required and question.key not in answers:
            issues.append(Issue("description", None, f"{question.key}: an answer is required",
                                "description"))
    return answers, issues


def declaration_label(declaration: Any, chars: int = 300) -> str | None:
    """A training-data declaration in one line ("Wikipedia 2023; test_data: no"), at most
    `chars` characters; None when nothing was declared."""
    if not isinstance(declaration, Mapping):
        return None
    parts = [" ".join(str(declaration.get("text") or "").split())]
    answers = declaration.get("answers")
    if isinstance(answers, Mapping):
        parts += [f"{key}: {', '.join(map(str, v)) if isinstance(v, list) else v}"
                  for key, v in sorted(answers.items())]
    label = "; ".join(p for p in parts if p)
    return (label if len(label) <= chars else label[:chars - 1] + "…") or None
