"""Questions and answers of a task: the list (FAQ first) and the form to ask, one question with
its replies, and the organisers' moderation (publish, FAQ, hide, lock)."""

from __future__ import annotations

from typing import Any

from flask import abort, redirect, render_template, request, url_for
from flask_login import login_required

from semboard.errors import DomainError
from semboard.services.people import questions
from semboard.services.tasks import access
from semboard.views.common import (
    bp,
    committed,
    db,
    limits,
    load_task,
    login_or_redirect,
    me,
    now,
)
from semboard.web.forms import ActionForm


@bp.get("/tasks/<task_name>/questions")
def questions_page(task_name: str) -> Any:
    """The questions this visitor may read, FAQ first, and the form to ask one."""
    task = load_task(task_name)
    user = me()
    rows = questions.visible(db(), task=task, user=user)
    return render_template(
        "tasks/questions.html", task=task, rows=rows,
        refusal=questions.refusal(db(), task=task, user=user),
        is_organiser=access.is_organiser(db(), user, task), form={})


@bp.post("/tasks/<task_name>/questions")
@login_required
def ask_question(task_name: str) -> Any:
    """Ask the organisers (public, or private to them)."""
    task = load_task(task_name)
    user = login_or_redirect()
    if not ActionForm().validate_on_submit():
        abort(400)
    row = None
    with committed() as done:
        row = questions.ask(db(), task=task, user=user, title=request.form.get("title", ""),
                            body=request.form.get("body", ""),
                            visibility=request.form.get("visibility", "public"), now=now(),
                            limits=limits())
    if done and row is not None:
        return redirect(url_for("web.question_page", task_name=task.name, question_id=row.id))
    # refused: the form comes back with what was typed and the reason flashed
    return render_template(
        "tasks/questions.html", task=task, rows=questions.visible(db(), task=task, user=user),
        refusal=questions.refusal(db(), task=task, user=user),
        is_organiser=access.is_organiser(db(), user, task), form=request.form), 422


def _question(task: Any, question_id: int) -> Any:
    try:
        return questions.get(db(), task=task, question_id=question_id, user=me())
    except DomainError:
        abort(404)


@bp.get("/tasks/<task_name>/questions/<int:question_id>")
def question_page(task_name: str, question_id: int) -> Any:
    """One question, its replies and (who may) the reply form."""
    task = load_task(task_name)
    row = _question(task, question_id)
    user = me()
    organiser = access.is_organiser(db(), user, task)
    can_reply = user is not None and questions.refusal(db(), task=task, user=user) is None and (
        organiser or (row.locked_at is None and (row.visibility == "public"
                                                 or row.user_id == user.id)))
    return render_template("tasks/question.html", task=task, row=row,
                           replies=questions.replies(db(), question=row, user=user),
                           is_organiser=organiser, can_reply=can_reply,
                           read_by_all=questions.is_read_by_all(row))


@bp.post("/tasks/<task_name>/questions/<int:question_id>/replies")
@login_required
def reply_question(task_name: str, question_id: int) -> Any:
    """Answer (organisers) or reply."""
    task = load_task(task_name)
    row = _question(task, question_id)
    if not ActionForm().validate_on_submit():
        abort(400)
    with committed():
        questions.reply(db(), question=row, user=login_or_redirect(),
                        body=request.form.get("body", ""), now=now(), limits=limits())
    return redirect(url_for("web.question_page", task_name=task.name, question_id=row.id,
                            _anchor="replies"))


@bp.post("/tasks/<task_name>/questions/<int:question_id>/moderate")
@login_required
def moderate_question(task_name: str, question_id: int) -> Any:
    """Organisers: publish, FAQ, hide, lock (or undo)."""
    task = load_task(task_name)
    row = _question(task, question_id)
    if not access.is_organiser(db(), login_or_redirect(), task):
        abort(403)
    if not ActionForm().validate_on_submit():
        abort(400)
    with committed():
        questions.moderate(db(), question=row, user=me(), action=request.form.get("action", ""),
                           now=now())
    return redirect(url_for("web.question_page", task_name=task.name, question_id=row.id))


@bp.post("/tasks/<task_name>/questions/<int:question_id>/replies/<int:reply_id>/hide")
@login_required
def hide_question_reply(task_name: str, question_id: int, reply_id: int) -> Any:
    """Organisers: hide a reply (hidden=0 shows it again)."""
    task = load_task(task_name)
    row = _question(task, question_id)
    if not access.is_organiser(db(), login_or_redirect(), task):
        abort(403)
    if not ActionForm().validate_on_submit():
        abort(400)
    with committed():
        questions.hide_reply(db(), task=task, reply_id=reply_id, user=me(),
                             hidden=request.form.get("hidden", "1") != "0", now=now())
    return redirect(url_for("web.question_page", task_name=task.name, question_id=row.id,
                            _anchor="replies"))
