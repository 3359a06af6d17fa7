"""Model-track API (on the /api/v1 blueprint): upload an encoder, follow its job, get its zip."""

from __future__ import annotations

from typing import Any

from flask import current_app, jsonify, request, url_for

from semboard.api.routes import _require_user, bp
from semboard.clock import request_now
from semboard.db import get_session
from semboard.errors import InvalidData
from semboard.jobs.models import dispatch_model
from semboard.services import models, tasks, teams
from semboard.storage import get_storage
from semboard.web.files import attachment, client_filename


@bp.post("/tasks/<task_name>/models")
def submit_model(task_name: str) -> Any:
    """Upload a model (multipart: file = a zip of the Hugging Face folder; optional name,
    phase, prompt, pooling); 202 with the model's status URL once checked and queued."""
    user = _require_user()
    # a model is far larger than a run: web.hardening gives this route its own body limit
    session = get_session()
    now = request_now()
    task = tasks.get_task(session, task_name)
    team = teams.require_team(session, task=task, user=user)
    upload = request.files.get("file")
    if upload is None:
        raise InvalidData("send the model as the multipart field 'file' (a .zip)")
    phase = tasks.phase_for_submission(session, task, now=now, slug=request.form.get("phase"))
    row = models.submit_model(
        session, get_storage(), team=team, phase=phase, user=user, archive=upload.read(),
        filename=client_filename(upload.filename) or "model.zip", now=now,
        name=request.form.get("name", ""), prompt=request.form.get("prompt") or None,
        pooling=request.form.get("pooling") or None)
    dispatch_model(current_app._get_current_object(), row.id)  # type: ignore[attr-defined]
    status_url = url_for("api.show_model", model_id=row.id)
    return jsonify(models.model_json(session, row) | {"status_url": status_url}), 202, \
        {"Location": status_url}


@bp.get("/models/<int:model_id>")
def show_model(model_id: int) -> Any:
    """A model submission: state, queue position, reason of a failure, the run it produced."""
    session = get_session()
    row = models.get_model(session, model_id=model_id, viewer=_require_user())
    return jsonify(models.model_json(session, row))


@bp.get("/models/<int:model_id>/archive")
def model_archive(model_id: int) -> Any:
    """The uploaded zip, for the team and the task's organisers."""
    name, data = models.archive_bytes(get_session(), get_storage(), model_id=model_id,
                                      viewer=_require_user())
    return attachment(data, name, mimetype="application/zip")
