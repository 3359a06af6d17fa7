"""The worker API (/api/v1/worker): remote model workers with a worker token (no account).

A GPU host holding only a token for one task's model queue claims a model, downloads the
job's inputs and model files, beats its progress and posts the run (or its failure); the site
ends the job as it ends its own (jobs.remote_models). Every route needs the token; a revoked
or unknown one is a 401 saying so.
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Flask, Response, current_app, g, jsonify, request, url_for
from werkzeug.exceptions import Unauthorized

from semboard.api.participant import request_body
from semboard.clock import request_now
from semboard.db import get_session
from semboard.errors import InvalidData
from semboard.jobs import remote_models
from semboard.models import WorkerToken
from semboard.services.models import worker_tokens
from semboard.storage import get_storage
from semboard.web.files import attachment, disposition, uploaded_files
from semboard.web.hardening import bounded_id

bp = Blueprint("worker_api", __name__, url_prefix="/api/v1/worker")


def _app() -> Flask:
    return current_app._get_current_object()  # type: ignore[attr-defined,no-any-return]


@bp.before_request
def _authenticate() -> None:
    """Every route needs `Authorization: Bearer sbw_...` (a worker token)."""
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthorized("the worker API needs a worker token: 'Authorization: Bearer sbw_...'")
    g.worker_token = worker_tokens.authenticate(get_session(), token.strip())


@bp.after_request
def _challenge(response: Response) -> Response:
    """Every 401 says how to authenticate (RFC 6750)."""
    if response.status_code == 401 and "WWW-Authenticate" not in response.headers:
        response.headers["WWW-Authenticate"] = 'Bearer realm="semboard-worker"'
    return response


def _token() -> WorkerToken:
    return g.worker_token  # type: ignore[no-any-return]


def _attempt(raw: Any) -> int:
    return bounded_id(raw, "attempt")


@bp.get("/me")
def who_am_i() -> Any:
    """The token: its name and the queue it serves."""
    token = _token()
    return jsonify({"name": token.name, "task": token.task.name, "queue": "models",
                    "prefix": token.prefix})


@bp.post("/claim")
def claim() -> Any:
    """Take the next model of the token's task queue that this worker can run (JSON, optional:
    {"capabilities": {"device", "dtypes", "memory_bytes", "gpu_memory_bytes",
    "max_seq_length", "gpu"}}; none declared: a CPU in float32): 200 with the job's
    description (and where to fetch and post), 204 when nothing it can run waits."""
    session, app = get_session(), _app()
    token = _token()
    body = request.get_json(silent=True) if request.content_length else None
    row = remote_models.claim(session, get_storage(), app, token, now=request_now(),
                              caps=remote_models.capabilities(body))
    if row is None:
        return "", 204
    job = remote_models.describe(session, app, row)
    session.commit()
    model_id, attempt = row.id, row.attempts
    job["urls"] = {
        "model": url_for("worker_api.model_archive", model_id=model_id, attempt=attempt),
        "inputs": {i["dataset"]: url_for("worker_api.job_input", model_id=model_id,
                                         dataset=i["dataset"], attempt=attempt)
                   for i in job["inputs"]},
        "progress": url_for("worker_api.progress", model_id=model_id),
        "result": url_for("worker_api.result", model_id=model_id),
        "failure": url_for("worker_api.failure", model_id=model_id),
    }
    return jsonify(job)


@bp.get("/jobs/<int:model_id>/model")
def model_archive(model_id: int) -> Any:
    """The claimed model's zip, as uploaded (only while this worker holds its job)."""
    session = get_session()
    row = remote_models.held_job(session, _token(), model_id,
                                 _attempt(request.args.get("attempt")))
    # nothing is held while the zip streams (minutes for a large model): on SQLite an open
    # transaction would hold the write lock for every other writer of the site
    session.rollback()
    return Response(get_storage().stream(row.storage_key), mimetype="application/zip",
                    headers=disposition(f"model-{row.id}.zip"))


@bp.get("/jobs/<int:model_id>/inputs/<dataset>")
def job_input(model_id: int, dataset: str) -> Any:
    """One input file the claimed model encodes (only while this worker holds its job)."""
    session = get_session()
    row = remote_models.input_file(session, _token(), model_id,
                                   _attempt(request.args.get("attempt")), dataset)
    session.rollback()  # as above: no transaction across the download
    return attachment(get_storage().get(row.storage_key), row.filename)


@bp.post("/jobs/<int:model_id>/progress")
def progress(model_id: int) -> Any:
    """The worker's heartbeat and progress (JSON: attempt, progress); 409 when the job is no
    longer its own (cancelled, or lost and queued again): stop encoding."""
    body = request_body()
    owned = remote_models.beat(get_session(), _token(), model_id, _attempt(body.get("attempt")),
                               body.get("progress"), now=request_now())
    if not owned:
        return jsonify({"error": f"model {model_id} is not this worker's job any more "
                                 "(cancelled, or queued again): stop encoding it",
                        "owned": False}), 409
    return jsonify({"owned": True})


@bp.post("/jobs/<int:model_id>/result")
def result(model_id: int) -> Any:
    """The encoded run (multipart: attempt, metadata = the run's facts as JSON, files = the run
    files), submitted as the site submits its own jobs' runs; the job's state. A repeated post
    answers as the first did."""
    try:
        files = uploaded_files(request.files.getlist("files"))
    except ValueError as err:
        raise InvalidData(str(err)) from None
    metadata = remote_models.parse_metadata(request.form.get("metadata", ""))
    row = remote_models.post_result(
        get_session(), get_storage(), _app(), _token(), model_id,
        _attempt(request.form.get("attempt")), files=files, metadata=metadata,
        now=request_now())
    return jsonify(remote_models.job_state(row))


@bp.post("/jobs/<int:model_id>/failure")
def failure(model_id: int) -> Any:
    """The job failed on the worker (JSON: attempt, kind, reason): the model is failed with
    that class and reason, its slot freed; the job's state. A repeated post answers as the
    first did."""
    body = request_body()
    error = remote_models.failure(body.get("kind"), body.get("reason"))
    row = remote_models.post_result(
        get_session(), get_storage(), _app(), _token(), model_id,
        _attempt(body.get("attempt")), files=None, metadata={}, error=error,
        now=request_now())
    return jsonify(remote_models.job_state(row))
