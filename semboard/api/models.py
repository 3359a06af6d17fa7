"""Model-track API (on the /api/v1 blueprint): upload an encoder in one request or in parts,
follow its job, publish or download its files."""

from __future__ import annotations

import json
from typing import Any

from flask import Flask, Response, current_app, jsonify, request, url_for

from semboard.api.routes import bp, require_token_user, token_user
from semboard.clock import request_now
from semboard.db import get_session
from semboard.errors import Conflict, InvalidData
from semboard.jobs import models as model_jobs
from semboard.models import ModelSubmission
from semboard.services.models import model_exports, model_uploads, model_workers, models
from semboard.services.people import teams
from semboard.services.runs import submissions
from semboard.services.tasks import tasks
from semboard.storage import get_storage
from semboard.web.files import (
    client_filename,
    content_range,
    disposition,
    part_bytes,
    upload_on_disk,
)

# an upload's encoding settings (baselines.models.settings: checked by the service)
ENCODING_FIELDS = ("max_seq_length", "batch_tokens", "dtype")


def _queued(row: ModelSubmission) -> Any:
    """202 with the model's state and where to follow it (its job was dispatched)."""
    status_url = url_for("api.show_model", model_id=row.id)
    return jsonify(models.model_json(get_session(), row, now=request_now())
                   | {"status_url": status_url}), 202, \
        {"Location": status_url}


def _app() -> Flask:
    return current_app._get_current_object()  # type: ignore[attr-defined,no-any-return]


def _training(text: Any, answers: Any) -> Any:
    """A training-data declaration from a request: its text, and its answers as a JSON object
    (a multipart field holds it as text); checked by the service."""
    if isinstance(answers, str):
        try:
            answers = json.loads(answers) if answers.strip() else None
        except ValueError:
            raise InvalidData("training_answers: give a JSON object, e.g. "
                              '{"test_data": "no"}') from None
    if isinstance(text, dict):  # JSON: {"text": ..., "answers": {...}}
        return text
    if answers is None:
        return text
    return {"text": text or "", "answers": answers}


def _flag(value: Any) -> bool:
    """A yes/no field from a form ("1", "true", "yes", "on") or JSON (true)."""
    return value is True or str(value).strip().lower() in ("1", "true", "yes", "on")


@bp.get("/tasks/<task_name>/models")
def list_models(task_name: str) -> Any:
    """My team's models in the task, newest first, with state and queue position."""
    user = require_token_user()
    session = get_session()
    team = teams.require_team(session, task=tasks.get_task(session, task_name), user=user)
    rows = models.team_models_queued(session, team=team)
    now = request_now()
    waiting = model_workers.waiting(session, [row for row, _ in rows], now=now)
    return jsonify({"task": task_name, "team": team.name, "models": [
        models.model_json(session, row, now=now, position=position, waiting=waiting)
        for row, position in rows]})


@bp.post("/tasks/<task_name>/models")
def submit_model(task_name: str) -> Any:
    """Upload a model in one request (multipart: file = a zip of the Hugging Face folder;
    optional name, phase, prompt, prompt_name, pooling, publish, model_name, the encoding's
    max_seq_length, batch_tokens, dtype, and the training-data declaration: training_data
    (text) and training_answers (a JSON object)); 202 once checked and queued."""
    user = require_token_user()
    # a model is far larger than a run: web.hardening gives this route its own body limit
    session = get_session()
    now = request_now()
    task = tasks.get_task(session, task_name)
    team = teams.require_team(session, task=task, user=user)
    upload = request.files.get("file")
    if upload is None:
        raise InvalidData("send the model as the multipart field 'file' (a .zip)")
    phase = tasks.phase_for_submission(session, task, now=now, slug=request.form.get("phase"))
    upload_key = submissions.client_key(request.headers.get("Idempotency-Key"))
    try:
        with upload_on_disk(upload) as archive:
            row = model_jobs.accept_model(
                session, get_storage(), _app(), team=team, phase=phase, user=user,
                archive=archive, filename=client_filename(upload.filename) or "model.zip",
                now=now, name=request.form.get("name", ""),
                prompt=request.form.get("prompt") or None,
                prompt_name=request.form.get("prompt_name") or None,
                pooling=request.form.get("pooling") or None,
                publish=_flag(request.form.get("publish", "")),
                model_name=request.form.get("model_name") or None,
                encoding={key: request.form.get(key) for key in ENCODING_FIELDS},
                upload_key=upload_key,
                training_data=_training(request.form.get("training_data"),
                                        request.form.get("training_answers")))
    except models.Replayed as replay:
        # a retry of an upload that was accepted: the same model, no second slot
        answer = models.model_json(session, replay.row, now=now) | {
            "status_url": url_for("api.show_model", model_id=replay.row.id)}
        return jsonify(answer), 200, {"Idempotent-Replayed": "true"}
    return _queued(row)


def _upload_answer(row: Any, status: int = 200) -> Any:
    url = url_for("api.model_upload", upload_id=row.id)
    return jsonify(model_uploads.upload_json(row, part_bytes=part_bytes()) | {
        "upload_url": url, "finish_url": url_for("api.finish_model_upload", upload_id=row.id)
    }), status, {"Location": url}


@bp.post("/tasks/<task_name>/model-uploads")
def start_model_upload(task_name: str) -> Any:
    """Start a model upload in parts (JSON: size, filename, sha256 and the model's name, phase,
    prompt, prompt_name, pooling, publish, max_seq_length, batch_tokens, dtype, training_data
    (a text, or {"text", "answers"}) and training_answers); 201 with where to send the parts
    and how big they may be."""
    user = require_token_user()
    session = get_session()
    now = request_now()
    body = request.get_json(silent=True)
    if not isinstance(body, dict):
        raise InvalidData("send a JSON object: {\"size\": bytes, \"filename\": \"model.zip\", "
                          "...}")
    task = tasks.get_task(session, task_name)
    team = teams.require_team(session, task=task, user=user)
    phase = tasks.phase_for_submission(session, task, now=now, slug=_text(body, "phase"))
    row = model_uploads.start(
        session, get_storage(), team=team, phase=phase, user=user,
        filename=client_filename(_text(body, "filename")) or "model.zip",
        size=body.get("size"),  # checked by the service
        sha256_hex=_text(body, "sha256"), now=now,
        max_bytes=int(current_app.config["SEMBOARD_MODEL_MAX_BYTES"]),
        name=_text(body, "name") or "", prompt=_text(body, "prompt"),
        prompt_name=_text(body, "prompt_name"),
        pooling=_text(body, "pooling"), publish=_flag(body.get("publish", False)),
        model_name=_text(body, "model_name"),
        encoding={key: body.get(key) for key in ENCODING_FIELDS},
        training_data=_training(body.get("training_data"), body.get("training_answers")))
    return _upload_answer(row, 201)


def _text(body: dict[str, Any], key: str) -> str | None:
    value = body.get(key)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise InvalidData(f"{key}: give a string")
    return value


# One rule for the three methods: with a rule per method, werkzeug answers an id out of range
# with 405 (the other rules' methods) instead of 404.
@bp.route("/model-uploads/<int:upload_id>", methods=["GET", "PUT", "DELETE"])
def model_upload(upload_id: int) -> Any:
    """GET: how much arrived (where to resume); PUT: the next part; DELETE: cancel."""
    if request.method == "PUT":
        return _put_part(upload_id)
    if request.method == "DELETE":
        model_uploads.cancel(get_session(), get_storage(), upload_id=upload_id,
                             user=require_token_user())
        return "", 204
    row = model_uploads.get_upload(get_session(), upload_id=upload_id, user=require_token_user())
    return _upload_answer(row)


def _put_part(upload_id: int) -> Any:
    """One part, in order: the body is its bytes, `Content-Range: bytes START-END/SIZE`;
    409 (with next_offset) when START is not where the upload stands."""
    user = require_token_user()
    session = get_session()
    model_uploads.get_upload(session, upload_id=upload_id, user=user)  # 404 before anything
    start, data = content_range()
    try:
        row = model_uploads.put_part(session, get_storage(), upload_id=upload_id, user=user,
                                     offset=start, data=data, now=request_now())
    except Conflict as err:
        row = model_uploads.get_upload(session, upload_id=upload_id, user=user)
        return jsonify(model_uploads.upload_json(row, part_bytes=part_bytes())
                       | {"error": err.message}), 409
    return _upload_answer(row)


@bp.post("/model-uploads/<int:upload_id>/finish")
def finish_model_upload(upload_id: int) -> Any:
    """Every part arrived: join, check and queue the model; 202 as for a one-request upload."""
    user = require_token_user()
    row = model_jobs.accept_model_upload(get_session(), get_storage(), _app(),
                                         upload_id=upload_id, user=user, now=request_now())
    return _queued(row)


@bp.get("/models/<int:model_id>")
def show_model(model_id: int) -> Any:
    """A model submission: state, queue position, reason of a failure, the run it produced."""
    session = get_session()
    row = models.get_model(session, model_id=model_id, viewer=require_token_user())
    return jsonify(models.model_json(session, row, now=request_now()))


@bp.post("/models/<int:model_id>/publish")
def publish_model(model_id: int) -> Any:
    """The team publishes its model's files with its run (JSON {"publish": false} withdraws)."""
    session = get_session()
    body = request.get_json(silent=True)
    publish = _flag(body.get("publish", True)) if isinstance(body, dict) else True
    row = models.set_published(session, model_id=model_id, user=require_token_user(),
                               publish=publish, now=request_now())
    return jsonify(models.model_json(session, row, now=request_now()))


@bp.get("/models/<int:model_id>/archive")
def model_archive(model_id: int) -> Any:
    """The uploaded zip: the team and the organisers; anyone who sees the run once published."""
    name, key = models.archive_download(get_session(), model_id=model_id, viewer=token_user())
    return Response(get_storage().stream(key), mimetype="application/zip",
                    headers=disposition(name))



@bp.get("/runs/<int:run_id>/exports/<kind>")
def model_run_export(run_id: int, kind: str) -> Any:
    """A model run's results for others' tools: `mteb` (an MTEB TaskResult), `every-eval-ever`
    (an Every Eval Ever record) or `model-index` (YAML for a model card); 404 for a run that is
    not a model's or whose scores the caller may not see."""
    facts = model_exports.run_facts(
        get_session(), viewer=token_user(), run_id=run_id, kind=kind,
        site_name=str(current_app.config.get("SEMBOARD_SITE_NAME", "semboard")),
        run_url=lambda i: url_for("web.run", run_id=i, _external=True))
    body, mimetype = model_exports.render(facts, kind, now=request_now())
    return Response(body, mimetype=mimetype)
