"""Model-track pages: a team uploads an encoder; the team page lists its models' state."""

from __future__ import annotations

from typing import Any

from flask import current_app, flash, redirect, render_template, url_for
from flask_login import login_required

from baselines.models.check import POOLING_MODES
from semboard.errors import DomainError
from semboard.jobs.models import dispatch_model
from semboard.services import models as model_services
from semboard.services import submissions, teams
from semboard.views.common import bp, db, flash_error, load_task, login_or_redirect, now, storage
from semboard.web.files import client_filename
from semboard.web.forms import UploadModelForm, options


@bp.route("/tasks/<task_name>/submit-model", methods=["GET", "POST"])
@login_required
def upload_model(task_name: str) -> Any:
    """Upload a model: checked at once (every problem listed), then queued for the site's job."""
    session = db()
    task = load_task(task_name)
    user = login_or_redirect()
    team = teams.team_for_user(session, task=task, user=user)
    if team is None:
        flash("Create or join a team for this task before uploading a model.", "error")
        return redirect(url_for("web.task", task_name=task.name))
    phases = [p for p in submissions.offered_phases(session, task=task, team=team, now=now())
              if p.accepts in model_services.ACCEPTING_PHASES]
    form = UploadModelForm()
    form.phase.choices = options([(p.slug, p.name) for p in phases])
    form.pooling.choices = options([("", "As the folder says"), *((m, m) for m in POOLING_MODES)])
    issues: list[Any] = []
    status = 200
    if form.validate_on_submit():
        upload = form.file.data
        phase = next((p for p in phases if p.slug == form.phase.data), None)
        if upload is None or not getattr(upload, "filename", ""):
            form.file.errors = ["Choose the .zip of your model's folder."]
        elif phase is not None:
            try:
                row = model_services.submit_model(
                    session, storage(), team=team, phase=phase, user=user,
                    archive=upload.read(), filename=client_filename(upload.filename), now=now(),
                    name=form.name.data or "", prompt=form.prompt.data or None,
                    pooling=form.pooling.data or None)
            except DomainError as err:
                flash_error(err)
                issues = err.issues
            else:
                dispatch_model(current_app._get_current_object(), row.id)  # type: ignore[attr-defined]
                flash(f"Model {row.name} accepted (digest {row.digest[:12]}); it is queued and "
                      "runs on the site's hardware.", "success")
                return redirect(url_for("web.team", team_id=team.id, _anchor="team-models"))
        status = 422
    elif form.is_submitted():
        status = 422
    return render_template("runs/upload_model.html", task=task, team=team, form=form,
                           phases=phases, issues=issues), status


