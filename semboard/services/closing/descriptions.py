"""System descriptions of runs: free text plus answers to the definition's questions (checked
by admission.described, at upload and at every edit)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from evaluation.descriptions import questions as declared
from semboard.errors import Forbidden
from semboard.models import Run, Task, User
from semboard.services.runs import admission
from semboard.services.tasks import access, definitions

if TYPE_CHECKING:
    from evaluation.descriptions import Question


def questions(task: Task) -> tuple[Question, ...]:
    """The questions of the task's definition."""
    return declared(definitions.definition(task))


def given_from_form(task: Task, form: Any) -> dict[str, Any]:
    """The answers in a multipart/form body: one field per question (repeated for choices)."""
    given: dict[str, Any] = {}
    for question in questions(task):
        values = [v for v in form.getlist(question.key) if str(v).strip()]
        if values:
            given[question.key] = values
    return given


def apply(run: Run, description: str, answers: dict[str, Any]) -> None:
    """Store checked text and answers on a run (flushed by the caller's commit)."""
    run.description = description.strip()
    run.answers = dict(answers)


def editable(run: Run, now: datetime) -> bool:
    """A description can be edited until the run's phase closes; then it is frozen."""
    return run.is_current and run.phase.state(now) != "closed"


def edit(session: Any, *, run: Run, user: User | None, description: str,
         given: Mapping[str, Any], now: datetime) -> Run:
    """The team (or an organiser) edits a current run's description before the phase closes."""
    if user is not None and not (access.is_member(session, user, run.team_id)
                                 or access.is_organiser(session, user, run.task)):
        raise Forbidden("only the run's team may edit its description")
    if not editable(run, now):
        raise (Forbidden("the phase has closed: the description is frozen") if run.is_current
               else Forbidden("a replaced run's description is frozen"))
    apply(run, description, admission.described(run.phase, description, given))
    session.flush()
    return run


def to_json(run: Run) -> dict[str, Any]:
    """The description as the API, exports and the bundle show it."""
    return {"text": run.description or "", "answers": dict(run.answers or {})}
