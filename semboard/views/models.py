"""Model-track pages: a team uploads an encoder; the team page lists its models' state."""

from __future__ import annotations

from typing import Any

from flask import (
    Response,
    abort,
    current_app,
    flash,
    jsonify,
    redirect,
    render_template,
    request,
    url_for,
)
from flask_babel import gettext as _
from flask_login import login_required

from baselines.models.check import POOLING_MODES
from baselines.models.settings import DTYPES
from evaluation.descriptions import questions as declared_questions
from evaluation.descriptions import training_data_required
from semboard.errors import Conflict, DomainError, InvalidData, PhaseNotOpen
from semboard.i18n.languages import N_
from semboard.i18n.pages import say
from semboard.jobs import models as model_jobs
from semboard.services.models import model_exports, model_uploads
from semboard.services.models import models as model_services
from semboard.services.runs import admission
from semboard.services.tasks import definitions, terms
from semboard.views import participation as participation_views
from semboard.views.common import (
    bp,
    db,
    flash_error,
    login_or_redirect,
    me,
    now,
    storage,
    uploading_team,
)
from semboard.web.files import (
    client_filename,
    content_range,
    disposition,
    part_bytes,
    upload_on_disk,
)
from semboard.web.forms import PublishModelForm, UploadModelForm, options


@bp.route("/tasks/<task_name>/submit-model", methods=["GET", "POST"])
@login_required
def upload_model(task_name: str) -> Any:
    """Upload a model: checked at once (every problem listed), then queued for the site's job.

    With scripts the page sends the zip in parts (the routes below); this plain form post is
    what a browser without them does.
    """
    session, task, user, team = uploading_team(task_name, N_("a model"))
    phases, form = _model_form(session, task, team)
    issues: list[Any] = []
    status = 200
    if form.validate_on_submit():
        upload = form.file.data
        phase = next((p for p in phases if p.slug == form.phase.data), None)
        if upload is None or not getattr(upload, "filename", ""):
            form.file.errors = [_("Choose the .zip of your model's folder.")]
        elif phase is not None:
            try:
                with upload_on_disk(upload) as archive:
                    row = model_jobs.accept_model(
                        session, storage(), current_app._get_current_object(),  # type: ignore[attr-defined]
                        team=team, phase=phase, user=user, archive=archive,
                        filename=client_filename(upload.filename), now=now(),
                        name=form.name.data or "", prompt=form.prompt.data or None,
                        prompt_name=form.prompt_name.data or None,
                        pooling=form.pooling.data or None, publish=bool(form.publish.data),
                        model_name=form.model_name.data or None,
                        encoding=_encoding(form), training_data=_training(task, form))
            except DomainError as err:
                flash_error(err)
                if isinstance(err, terms.TermsRequired):  # the phase's own terms
                    return participation_views.to_terms(task)
                issues = err.issues
            else:
                flash(_("Model %(name)s accepted (digest %(digest)s); it is queued and runs on "
                        "the site's hardware. %(note)s", name=row.name, digest=row.digest[:12],
                        note=say(model_services.prompt_note(row.description or {}))),
                      "success")
                return redirect(url_for("web.team", team_id=team.id, _anchor="team-models"))
        status = 422
    elif form.is_submitted():
        status = 422
    definition = definitions.definition(task)
    return render_template("runs/upload_model.html", task=task, team=team, form=form,
                           phases=phases, issues=issues,
                           training_questions=training_questions(definition),
                           training_required=training_data_required(definition),
                           encoding_rules={p.slug: model_services.encoding_rules(p)
                                           for p in phases},
                           max_bytes=current_app.config["SEMBOARD_MODEL_MAX_BYTES"]), status


def _model_form(session: Any, task: Any, team: Any) -> tuple[list[Any], UploadModelForm]:
    """The phases that take the team's models now, and the upload form offering them."""
    phases = [p for p in admission.offered_phases(session, task=task, team=team, now=now())
              if p.accepts in model_services.ACCEPTING_PHASES]
    form = UploadModelForm()
    form.phase.choices = options([(p.slug, p.name) for p in phases])
    form.pooling.choices = options([("", _("As the folder says")),
                                    *((m, m) for m in POOLING_MODES)])
    form.dtype.choices = options([("", _("The phase's default")), *((d, d) for d in DTYPES)])
    return phases, form


def training_questions(definition: Any) -> Any:
    """The definition's training-data questions."""
    return declared_questions(definition, "training_data")


def _training(task: Any, form: UploadModelForm) -> dict[str, Any]:
    """The training-data declaration the form gives: its text and one field per question of
    the definition's [training_data] (training_<key>; checked by the service)."""
    answers = {}
    for question in training_questions(definitions.definition(task)):
        values = [v for v in request.form.getlist(f"training_{question.key}") if v.strip()]
        if values:
            answers[question.key] = values if question.kind == "choices" else values[0]
    return {"text": form.training_data.data or "", "answers": answers}


def _encoding(form: UploadModelForm) -> dict[str, Any]:
    """The encoding settings the form asks (checked by the service against the phase)."""
    return {"max_seq_length": form.max_seq_length.data, "batch_tokens": form.batch_tokens.data,
            "dtype": form.dtype.data}


def _upload_answer(row: Any, status: int = 200) -> Any:
    return jsonify(model_uploads.upload_json(row, part_bytes=part_bytes()) | {
        "upload_url": url_for("web.model_upload_part", upload_id=row.id),
        "finish_url": url_for("web.finish_model_upload_page", upload_id=row.id)}), status


# The page's upload in parts: the same service as the API's, with the browser's session and
# CSRF token; answers are JSON (the script asks for JSON, so refusals come back as JSON too).
@bp.post("/tasks/<task_name>/submit-model/parts")
@login_required
def start_model_upload_page(task_name: str) -> Any:
    """Start an upload in parts from the form's fields and the file's size and name."""
    session, task, user, team = uploading_team(task_name, N_("a model"))
    phases, form = _model_form(session, task, team)
    if not form.validate_on_submit():
        problems = "; ".join(f"{name}: {' '.join(map(str, errors))}"
                             for name, errors in form.errors.items())
        raise InvalidData("the form has problems: %(problems)s", problems=problems)
    phase = next((p for p in phases if p.slug == form.phase.data), None)
    if phase is None:
        raise PhaseNotOpen("phase %(data)r takes no models of your team now", data=form.phase.data)
    size = request.form.get("size", "")
    row = model_uploads.start(
        session, storage(), team=team, phase=phase, user=user,
        filename=client_filename(request.form.get("filename")) or "model.zip",
        size=int(size) if size.isdigit() and len(size) < 16 else 0, now=now(),
        max_bytes=int(current_app.config["SEMBOARD_MODEL_MAX_BYTES"]),
        name=form.name.data or "", prompt=form.prompt.data or None,
        prompt_name=form.prompt_name.data or None,
        pooling=form.pooling.data or None, publish=bool(form.publish.data),
        model_name=form.model_name.data or None, encoding=_encoding(form),
        training_data=_training(task, form))
    return _upload_answer(row, 201)


@bp.route("/model-uploads/<int:upload_id>", methods=["GET", "PUT"])
@login_required
def model_upload_part(upload_id: int) -> Any:
    """GET: how much arrived; PUT: the next part (Content-Range), 409 when out of place."""
    session, user = db(), login_or_redirect()
    row = model_uploads.get_upload(session, upload_id=upload_id, user=user)
    if request.method == "PUT":
        start, data = content_range()
        try:
            row = model_uploads.put_part(session, storage(), upload_id=upload_id, user=user,
                                         offset=start, data=data, now=now())
        except Conflict as err:
            session.refresh(row)
            return jsonify(model_uploads.upload_json(row, part_bytes=part_bytes())
                           | {"error": say(err)}), 409
    return _upload_answer(row)


@bp.post("/model-uploads/<int:upload_id>/finish")
@login_required
def finish_model_upload_page(upload_id: int) -> Any:
    """Every part arrived: check and queue the model; where to go next (the team page)."""
    row = model_jobs.accept_model_upload(
        db(), storage(), current_app._get_current_object(),  # type: ignore[attr-defined]
        upload_id=upload_id, user=login_or_redirect(), now=now())
    flash(_("Model %(name)s accepted (digest %(digest)s); it is queued and runs on the site's "
            "hardware.", name=row.name, digest=row.digest[:12]), "success")
    return jsonify({"model_id": row.id, "status": row.status,
                    "redirect": url_for("web.team", team_id=row.team_id, _anchor="team-models")}
                   ), 202


@bp.post("/models/<int:model_id>/publish")
@login_required
def publish_model(model_id: int) -> Any:
    """A team member publishes (or withdraws) the model's files with its run."""
    form = PublishModelForm()
    if not form.validate_on_submit():
        abort(400)
    publish = form.publish.data == "1"
    try:
        row = model_services.set_published(db(), model_id=model_id, user=me(), publish=publish,
                                           now=now())
    except DomainError as err:
        flash_error(err)
        return redirect(url_for("web.tasks"))
    flash(_("The files of model %(name)s are now published with its run.", name=row.name)
          if publish else _("The files of model %(name)s are private to your team again.",
                            name=row.name), "success")
    if row.run_id is not None:
        return redirect(url_for("web.run", run_id=row.run_id, _anchor="model-meta"))
    return redirect(url_for("web.team", team_id=row.team_id, _anchor="team-models"))


@bp.get("/models/<int:model_id>/archive")
def model_archive(model_id: int) -> Any:
    """A model's zip: its team and the organisers; anyone who sees its run once published."""
    try:
        name, key = model_services.archive_download(db(), model_id=model_id, viewer=me())
    except DomainError:
        abort(404)
    return Response(storage().stream(key), mimetype="application/zip",
                    headers=disposition(name))


@bp.get("/runs/<int:run_id>/exports/<kind>")
def model_run_export(run_id: int, kind: str) -> Any:
    """A model run's MTEB TaskResult, Every Eval Ever record or model-index block (the run
    page's links; the API serves the same at /api/v1/runs/<id>/exports/<kind>)."""
    facts = model_exports.run_facts(
        db(), viewer=me(), run_id=run_id, kind=kind,
        site_name=str(current_app.config.get("SEMBOARD_SITE_NAME", "semboard")),
        run_url=lambda i: url_for("web.run", run_id=i, _external=True))
    body, mimetype = model_exports.render(facts, kind, now=now())
    return Response(body, mimetype=mimetype)
