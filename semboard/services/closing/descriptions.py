"""System descriptions of runs: free text plus answers to the definition's questions."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy.orm import Session

from evaluation.descriptions import check_answers
from evaluation.descriptions import questions as declared
from semboard.errors import Forbidden, InvalidData
from semboard.models import Phase, Run, Task, Team, User
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


def check(task: Task, description: str, given: Mapping[str, Any]) -> dict[str, Any]:
    """Normalised answers, or InvalidData listing every problem (nothing is stored)."""
    answers, issues = check_answers(definitions.definition(task), description, given)
    if issues:
        raise InvalidData("the system description has %(problems)s problem(s)", issues,
                          problems=len(issues))
    return answers


def check_upload(session: Session, *, team: Team, phase: Phase, user: User | None, name: str,
                 files: Mapping[str, bytes], description: str, given: Mapping[str, Any],
                 now: datetime) -> dict[str, Any]:
    """Check an upload's description; a refusal is logged like any rejected upload (commits)."""
    try:
        return check(phase.task, description, given)
    except InvalidData as err:
        # the submissions service's own refusal path: only the upload-log row is kept
        raise admission.refuse(session, err, team=team, phase=phase, user=user, name=name,
                                  files=files, now=now) from None


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
    apply(run, description, check(run.task, description, given))
    session.flush()
    return run


def to_json(run: Run) -> dict[str, Any]:
    """The description as the API, exports and the bundle show it."""
    return {"text": run.description or "", "answers": dict(run.answers or {})}
