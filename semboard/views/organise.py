"""Organiser pages (per task) and the site admin page."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from flask import abort, current_app, flash, redirect, render_template, request, url_for
from flask_babel import gettext as _
from flask_babel import ngettext

from evaluation import list_tasks
from semboard.errors import Forbidden, InvalidData
from semboard.i18n.pages import words
from semboard.i18n.vocabulary import word as say_word
from semboard.jobs import baselines as baseline_jobs
from semboard.jobs import models as model_jobs
from semboard.jobs import scoring as scoring_jobs
from semboard.models import ModelSubmission, Phase, Task, User
from semboard.services.data import gold, inputs
from semboard.services.models import model_workers
from semboard.services.models import models as model_services
from semboard.services.people import accounts, grants, teams
from semboard.services.runs import primary as primary_runs
from semboard.services.runs import request_scoring, submissions
from semboard.services.tasks import definitions, splits, tasks
from semboard.views.common import (
    admin_required,
    bp,
    committed,
    db,
    load_phase,
    load_task,
    login_or_redirect,
    now,
    organiser_action,
    require_organiser,
    sentence,
    storage,
)
from semboard.web.files import uploaded_files
from semboard.web.forms import (
    AccountStateForm,
    ActionForm,
    DataUploadForm,
    GrantForm,
    LoadTaskForm,
    OrganiserForm,
    PhaseForm,
    ReferenceFileForm,
    options,
)

# Rows per page of the organiser's run lists and upload log.
LIST_PAGE = 100

def _utc(value: datetime | None) -> datetime | None:
    """Form datetimes are typed in UTC."""
    return value.replace(tzinfo=UTC) if value is not None else None


def _track_choices(task: Task) -> list[tuple[str, str]]:
    definition = definitions.definition(task)
    return [("", _("All datasets"))] + [(t, t) for t in definition.tracks]


def _grant_form(task: Task) -> GrantForm:
    form = GrantForm(prefix="grant")
    # The Baselines team has no deadlines, so it never needs a fix.
    form.team.choices = options([(t.id, t.name) for t in teams.list_teams(db(), task=task)
                                 if not t.is_baseline])
    form.phase.choices = options([(p.slug, p.name) for p in tasks.phases(db(), task)])
    return form


def _data_form(task: Task) -> DataUploadForm:
    form = DataUploadForm(prefix="data")
    form.dataset.choices = options([(d, d) for d in definitions.definition(task).dataset_names])
    form.split.choices = options(_split_choices(task))
    return form


def _reference_form(task: Task) -> ReferenceFileForm:
    form = ReferenceFileForm(prefix="reference")
    form.phase.choices = options([(p.slug, p.name) for p in tasks.phases(db(), task)])
    return form


def _split_choices(task: Task) -> list[tuple[str, str]]:
    definition = definitions.definition(task)
    return [(name, name + (" (default)" if name == definition.default_split else "")
             + (", public gold" if split.gold_public else ""))
            for name, split in definition.splits.items()]


def _overview(task: Task, **forms: Any) -> str:
    session = db()
    phases = tasks.phases(session, task)
    context: dict[str, Any] = {
        "task": task,
        "definition": definitions.definition(task),
        "phases": phases,
        "phase_names": {p.id: p.name for p in phases},
        "input_files": inputs.current_inputs(session, task=task),
        "gold_files": gold.current_gold(session, task=task),
        "teams": teams.list_teams(session, task=task),
        "models": (models := model_services.task_models_queued(session, task=task)),
        "waiting": model_workers.waiting(session, [row for row, _ in models], now=now()),
        "grants": grants.grants(session, task=task),
        "organisers": tasks.organisers(session, task=task),
        "data_issues": [],
        "data_form": _data_form(task),
        "reference_form": _reference_form(task),
        "reference_issues": [],
        "split_files": {
            name: (inputs.current_inputs(session, task=task, split=name),
                   gold.current_gold(session, task=task, split=name))
            for name in definitions.definition(task).splits
        },
        "split_info": splits.splits_json(session, task=task),
        "grant_form": _grant_form(task),
        "action": ActionForm(),
    }
    context.update(forms)
    return render_template("organiser/task.html", **context)


@bp.get("/tasks/<task_name>/organise")
def organise(task_name: str) -> Any:
    """Everything an organiser runs: phases, data, release/publish/rescore, teams, grants."""
    task = load_task(task_name)
    require_organiser(task)
    return _overview(task)


def _phase_form_page(task: Task, phase: Phase | None) -> Any:
    user = require_organiser(task)
    session = db()
    form = PhaseForm(obj=phase if request.method == "GET" else None)
    form.track.choices = options(_track_choices(task))
    form.split.choices = options(_split_choices(task))
    if request.method == "GET" and phase is not None:
        form.track.data = phase.track or ""
        form.model_settings.data = (json.dumps(phase.model_settings)
                                    if phase.model_settings else "")
    if request.method == "GET" and phase is None:
        form.split.data = definitions.definition(task).default_split
    if form.validate_on_submit():
        values = {
            "slug": form.slug.data, "name": form.name.data.strip(), "kind": form.kind.data,
            "opens_at": _utc(form.opens_at.data), "closes_at": _utc(form.closes_at.data),
            "team_window_hours": form.team_window_hours.data or None,
            "max_runs": form.max_runs.data, "late_policy": form.late_policy.data,
            "visibility": form.visibility.data, "track": form.track.data or None,
            "split": form.split.data or None, "max_per_day": form.max_per_day.data or None,
            "accepts": form.accepts.data or "runs",
            "entry_deadline": _utc(form.entry_deadline.data),
        }
        try:
            values["model_settings"] = json.loads(form.model_settings.data or "null")
        except json.JSONDecodeError as err:
            form.model_settings.errors = [_("not JSON: %(error)s", error=err)]
        else:
            with committed() as done:
                if phase is None:
                    phase = tasks.add_phase(session, task, now=now(), **values)
                else:
                    tasks.update_phase(session, phase, **values)
                request_scoring.set_limit(session, phase=phase, user=user,
                                          pairs=form.score_in_request_pairs.data, now=now())
            if done:
                flash(_("Phase %(phase)s saved.", phase=phase.name), "success")
                return redirect(url_for("web.organise", task_name=task.name) + "#phases")
    status = 200 if request.method == "GET" else 422
    return render_template(
        "organiser/phase.html", task=task, phase=phase, form=form,
        site_request_limit=scoring_jobs.site_request_limit(current_app),
        scored_in_request_up_to=(scoring_jobs.request_limit(current_app, phase)
                                 if phase is not None else None)), status


@bp.route("/tasks/<task_name>/organise/phases/new", methods=["GET", "POST"])
def new_phase(task_name: str) -> Any:
    """Add a phase."""
    return _phase_form_page(load_task(task_name), None)


@bp.route("/tasks/<task_name>/organise/phases/<phase_slug>", methods=["GET", "POST"])
def edit_phase(task_name: str, phase_slug: str) -> Any:
    """Edit a phase."""
    task = load_task(task_name)
    require_organiser(task)
    return _phase_form_page(task, load_phase(task, phase_slug))


@bp.post("/tasks/<task_name>/organise/data")
def upload_data(task_name: str) -> Any:
    """Upload one dataset's inputs or gold (checked against the definition)."""
    task = load_task(task_name)
    user = require_organiser(task)
    session = db()
    form = _data_form(task)
    issues: list[Any] = []
    if form.validate_on_submit():
        files = uploaded_files([form.file.data] if form.file.data else [])
        if not files:
            form.file.errors = [_("Choose a file to upload.")]
        else:
            (filename, data), = files.items()
            service = inputs.upload_inputs if form.kind.data == "inputs" else gold.upload_gold
            with committed() as done:
                row = service(session, storage(), task=task, dataset=form.dataset.data,
                              filename=filename, data=data, user=user, now=now(),
                              split=form.split.data or None)
            if done:
                stored = (_("Inputs of %(dataset)s stored as version %(version)s (%(items)s "
                            "items).", dataset=form.dataset.data, version=row.version,
                            items=row.n_items) if form.kind.data == "inputs" else
                          _("Gold of %(dataset)s stored as version %(version)s (%(items)s "
                            "items).", dataset=form.dataset.data, version=row.version,
                            items=row.n_items) + _rescoring(task))
                flash(stored, "success")
                return redirect(url_for("web.organise", task_name=task.name) + "#data")
            issues = done.issues
    return _overview(task, data_form=form, data_issues=issues), 422


@bp.post("/tasks/<task_name>/organise/baselines")
def add_reference(task_name: str) -> Any:
    """Add the organisers' own output file(s), as published, as an unranked baseline row."""
    task = load_task(task_name)
    user = require_organiser(task)
    form = _reference_form(task)
    issues: list[Any] = []
    if form.validate_on_submit():
        try:
            files = uploaded_files(form.files.data or [])
        except ValueError as err:
            form.files.errors = [sentence(err.args[0] if err.args else err)]
            files = {}
        if not files and not form.files.errors:
            form.files.errors = [_("Choose the output file(s) to add.")]
        if files:
            with committed() as done:
                run, queued = baseline_jobs.add_reference_files(
                    db(), storage(), current_app._get_current_object(),  # type: ignore[attr-defined]
                    task_name=task.name, files=files, now=now(), user=user,
                    phase_slug=form.phase.data, name=form.name.data or "",
                    provenance=form.provenance.data or "")
            if done:
                status = say_word(run.status, words())
                flash(_("Baseline row %(run)r added (%(status)s, scoring queued): it is shown "
                        "unranked.", run=run.name, status=status) if queued else
                      _("Baseline row %(run)r added (%(status)s): it is shown unranked.",
                        run=run.name, status=status), "success")
                return redirect(url_for("web.organise", task_name=task.name) + "#baselines")
            issues = done.issues
    return _overview(task, reference_form=form, reference_issues=issues), 422


@bp.post("/tasks/<task_name>/organise/release-gold")
def release_gold(task_name: str) -> Any:
    """Release the task's gold to everyone."""
    split = request.form.get("split") or None

    def act(task: Task, user: User) -> str:
        gold.release_gold(db(), task=task, user=user, now=now(), split=split)
        return (_("Gold of split %(split)s released: everyone can now download it.",
                  split=split) if split else
                _("Gold released: everyone can now download it."))

    return organiser_action(task_name, act, anchor="#release")


@bp.post("/tasks/<task_name>/organise/rescore")
def rescore(task_name: str) -> Any:
    """Score every run against the current gold (history kept)."""
    force = request.form.get("force") == "1"
    task = load_task(task_name)
    require_organiser(task)
    if not ActionForm().validate_on_submit():
        abort(400)
    flash(_rescoring(task, force=force).strip(), "success")
    return redirect(url_for("web.organise", task_name=task.name) + "#release")


def _rescoring(task: Task, *, force: bool = False) -> str:
    """Start rescoring the task's runs off the request (new gold, definition, or asked)."""
    app = current_app._get_current_object()  # type: ignore[attr-defined]
    db().commit()  # end this request's transaction: on SQLite it holds the write lock
    changed = scoring_jobs.schedule_rescore(app, task.id, force=force)
    if changed is not None:
        return " " + ngettext("Rescored: %(num)d run got a new score.",
                              "Rescored: %(num)d runs got a new score.", changed)
    return " " + (_("Runs are being rescored in the background (all of them); the boards "
                    "update as soon as they are done.") if force else
                  _("Runs are being rescored in the background; the boards update as soon as "
                    "they are done."))


@bp.post("/tasks/<task_name>/organise/phases/<phase_slug>/publish")
def publish(task_name: str, phase_slug: str) -> Any:
    """Publish a phase's results."""
    def act(task: Task, user: User) -> str:
        phase = tasks.get_phase(db(), task, phase_slug)
        gold.publish_results(db(), phase=phase, user=user, now=now())
        return _("Results of %(phase)s published.", phase=phase.name)

    return organiser_action(task_name, act, anchor="#phases")


@bp.post("/tasks/<task_name>/organise/models/<int:model_id>/rerun")
def rerun_model(task_name: str, model_id: int) -> Any:
    """Run a failed model again at its own upload time (its worker died, a budget too small)."""
    def act(task: Task, user: User) -> str:
        found = db().get(ModelSubmission, model_id)
        if found is None or found.task_id != task.id:
            abort(404)
        row = model_jobs.rerun_model(
            db(), current_app._get_current_object(),  # type: ignore[attr-defined]
            model_id=model_id, by=user, reason=request.form.get("reason", ""), now=now())
        return _("Model %(model)s of %(team)s is queued to run again.", model=row.name,
                 team=row.team.name)

    return organiser_action(task_name, act, anchor="#models")


@bp.post("/tasks/<task_name>/organise/models/<int:model_id>/cancel")
def cancel_model(task_name: str, model_id: int) -> Any:
    """Cancel a queued or running model (audited; a running job stops at its next beat)."""
    def act(task: Task, user: User) -> str:
        found = db().get(ModelSubmission, model_id)
        if found is None or found.task_id != task.id:
            abort(404)
        row = model_services.cancel(db(), model_id=model_id, by=user,
                                    reason=request.form.get("reason", ""), now=now())
        return _("Model %(model)s of %(team)s is cancelled.", model=row.name,
                 team=row.team.name)

    return organiser_action(task_name, act, anchor="#models")


@bp.post("/tasks/<task_name>/organise/teams/<int:team_id>/organiser-team")
def mark_team(task_name: str, team_id: int) -> Any:
    """Mark or unmark a team as including organisers (‡)."""
    def act(task: Task, user: User) -> str:
        team = teams.get_team(db(), team_id)
        if team.task_id != task.id:
            abort(404)
        value = request.form.get("value") == "1"
        grants.mark_organiser_team(db(), team=team, by=user, value=value, now=now())
        return (_("%(team)s marked ‡.", team=team.name) if value else
                _("%(team)s no longer marked ‡.", team=team.name))

    return organiser_action(task_name, act, anchor="#teams")


@bp.post("/tasks/<task_name>/organise/grants")
def grant_fix(task_name: str) -> Any:
    """Grant a team a post-deadline fix (†), with a reason."""
    task = load_task(task_name)
    user = require_organiser(task)
    session = db()
    form = _grant_form(task)
    if form.validate_on_submit():
        with committed() as done:
            team = teams.get_team(session, form.team.data)
            phase = tasks.get_phase(session, task, form.phase.data)
            if team.task_id != task.id:
                abort(404)
            until = _utc(form.until.data)
            if until is None:  # InputRequired guards this; mypy cannot know it
                raise InvalidData("a fix needs the time until which it is allowed")
            grants.grant_post_deadline_fix(session, team=team, phase=phase, by=user,
                                           reason=form.reason.data, until=until, now=now())
        if done:
            flash(_("%(team)s may fix runs of %(phase)s until %(until)s UTC (flagged †).",
                    team=team.name, phase=phase.name,
                    until=f"{_utc(form.until.data):%Y-%m-%d %H:%M}"), "success")
            return redirect(url_for("web.organise", task_name=task.name) + "#grants")
    else:
        # The form sits at the bottom of a long page: say at the top why nothing happened.
        flash(_("No fix granted: see the marked fields under Post-deadline fixes."), "error")
    return _overview(task, grant_form=form), 422


@bp.get("/tasks/<task_name>/organise/runs")
def all_runs(task_name: str) -> Any:
    """Every run of every team, replaced versions included."""
    task = load_task(task_name)
    require_organiser(task)
    session = db()
    # a page of each phase's runs: the page stays usable (and its queries flat) at 500+ runs
    page = max(1, request.args.get("page", 1, type=int) or 1)
    phases = tasks.phases(session, task)
    totals = {p.id: submissions.count_runs_for_phase(session, phase=p, include_replaced=True)
              for p in phases}
    pages = max([1] + [-(-n // LIST_PAGE) for n in totals.values()])
    page = min(page, pages)
    phase_runs = [(p, submissions.runs_for_phase(session, phase=p, include_replaced=True,
                                                 limit=LIST_PAGE, offset=(page - 1) * LIST_PAGE))
                  for p in phases]
    definition = definitions.definition(task)
    # The headline column: the first aggregate (ALL for STS 2012), when the task has one.
    primary = definition.aggregate_metrics[0] if definition.aggregate_metrics else None
    # each team's primary run in phases that rank primary runs only (two queries a phase)
    choices = {p.id: primary_runs.primary_runs(session, phase=p) for p in phases}
    return render_template("organiser/runs.html", task=task, phase_runs=phase_runs,
                           primary=primary, totals=totals, page=page, pages=pages,
                           choices=choices, fallback=primary_runs.FALLBACK)


@bp.get("/tasks/<task_name>/organise/log")
def upload_log(task_name: str) -> Any:
    """The full upload log, accepted and rejected."""
    task = load_task(task_name)
    require_organiser(task)
    page = max(1, request.args.get("page", 1, type=int) or 1)
    total = submissions.count_upload_logs(db(), task=task)
    pages = max(1, -(-total // LIST_PAGE))
    page = min(page, pages)
    logs = submissions.upload_logs(db(), task=task, limit=LIST_PAGE,
                                   offset=(page - 1) * LIST_PAGE)
    return render_template("organiser/log.html", task=task, logs=logs, total=total, page=page,
                           pages=pages)


@bp.route("/organise/load", methods=["GET", "POST"])
def load_definition() -> Any:
    """Load a task from a shipped definition or an uploaded TOML (admins; organisers reload)."""
    user = login_or_redirect()
    session = db()
    manageable = tasks.manageable_tasks(session, user)
    if not user.is_admin and not manageable:
        abort(403)
    form = LoadTaskForm()
    form.shipped.choices = options([("", "—")] + [(name, name) for name in list_tasks()])
    if form.validate_on_submit():
        upload = form.definition.data
        with committed() as done:
            definition = tasks.read_definition(
                data=upload.read() if upload and getattr(upload, "filename", "") else None,
                filename=getattr(upload, "filename", "") or "", shipped=form.shipped.data or "")
            task = tasks.load_definition(session, definition, user=user, now=now())
        if done:
            # a changed definition can move numbers: out-of-date scores are redone
            flash(_("Task %(task)s loaded.", task=task.name) + _rescoring(task), "success")
            return redirect(url_for("web.organise", task_name=task.name))
        if isinstance(done.error, Forbidden):
            return render_template("organiser/load.html", form=form, manageable=manageable,
                                   is_admin=user.is_admin), 403
    status = 200 if request.method == "GET" else 422
    return render_template("organiser/load.html", form=form, manageable=manageable,
                           is_admin=user.is_admin), status


@bp.route("/admin", methods=["GET", "POST"])
@admin_required
def admin() -> Any:
    """Site admin: name (or remove) the organisers of each task."""
    session = db()
    form = OrganiserForm()
    all_tasks = tasks.list_tasks(session)
    form.task.choices = options([(t.name, t.title) for t in all_tasks])
    status = 200 if request.method == "GET" else 422
    if form.validate_on_submit():
        with committed() as done:
            task = tasks.get_task(session, form.task.data)
            user = accounts.require_user(session, form.email.data.strip().lower())
            tasks.add_organiser(session, task=task, user=user, now=now())
        if done:
            flash(_("%(name)s now organises %(task)s.", name=user.display_name, task=task.name),
                  "success")
            return redirect(url_for("web.admin"))
    rows = [(t, tasks.organisers(session, task=t)) for t in all_tasks]
    return render_template("admin/index.html", form=form, rows=rows, action=ActionForm(),
                           account_form=AccountStateForm(formdata=None)), status


@bp.post("/admin/accounts")
@admin_required
def set_account_state() -> Any:
    """Deactivate (sessions end, tokens revoked) or reactivate an account."""
    form = AccountStateForm()
    if form.validate_on_submit():
        active = form.active.data == "1"
        with committed() as done:
            user = accounts.require_user(db(), form.email.data.strip().lower())
            if user.id == login_or_redirect().id and not active:
                raise InvalidData("you cannot deactivate your own account here")
            accounts.set_active(db(), user=user, active=active, now=now())
        if done:
            flash(_("%(email)s is active again.", email=user.email) if active else
                  _("%(email)s is deactivated.", email=user.email), "success")
    else:
        flash(_("Give the account's e-mail."), "error")
    return redirect(url_for("web.admin") + "#accounts")


@bp.post("/admin/tasks/<task_name>/organisers/<int:user_id>/remove")
@admin_required
def remove_organiser(task_name: str, user_id: int) -> Any:
    """Remove an organiser from a task."""
    if not ActionForm().validate_on_submit():
        abort(400)
    session = db()
    task = load_task(task_name)
    user = accounts.get_user(session, user_id)
    if user is None:
        abort(404)
    tasks.remove_organiser(session, task=task, user=user)
    session.commit()
    flash(_("%(name)s no longer organises %(task)s.", name=user.display_name, task=task.name),
          "success")
    return redirect(url_for("web.admin"))

