"""Participant pages: tasks, teams, downloads, run uploads, run pages."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from flask import abort, current_app, flash, redirect, render_template, request, url_for
from flask_babel import gettext as _
from flask_login import login_required

from evaluation.descriptions import questions as declared_questions
from semboard.errors import DomainError
from semboard.i18n.languages import N_
from semboard.i18n.pages import words
from semboard.i18n.vocabulary import word as say_word
from semboard.jobs.scoring import accept_run
from semboard.models import Phase, Run, Task, Team
from semboard.services.closing import descriptions
from semboard.services.data import gold, inputs
from semboard.services.models import model_facts, model_workers
from semboard.services.models import models as model_services
from semboard.services.people import teams, windows
from semboard.services.runs import admission, submissions
from semboard.services.tasks import access, definitions, participation, splits, tasks, terms
from semboard.timefmt import clock_text
from semboard.views import participation as participation_views
from semboard.views import primary as primary_views
from semboard.views import reveal as reveal_views
from semboard.views.common import (
    bp,
    committed,
    db,
    flash_error,
    load_phase,
    load_task,
    login_or_redirect,
    me,
    now,
    sentence,
    storage,
    uploading_team,
    visible_run,
)
from semboard.web.files import attachment, uploaded_files
from semboard.web.forms import ActionForm, TeamCreateForm, TeamJoinForm, UploadRunForm, options


def _phase_state(phase: Phase) -> str:
    """upcoming, open or closed (at the current time)."""
    return phase.state(now())


@bp.get("/tasks", endpoint="tasks")
def tasks_index() -> Any:
    """Every task with its phases."""
    session = db()
    user = me()
    rows = [(task, tasks.phases(session, task))
            for task in participation.listed(session, tasks.list_tasks(session), user=user)]
    visible = {p.id for _, phases in rows for p in phases
               if access.can_view_leaderboard(session, user, p)}
    return render_template("tasks/index.html", rows=rows, phase_state=_phase_state,
                           visible=visible)


# The home page is the list of tasks.
bp.add_url_rule("/", endpoint="home", view_func=tasks_index)


@bp.get("/tasks/<task_name>")
def task(task_name: str) -> Any:
    """A task: description, datasets, phases with countdowns, the user's team and downloads."""
    return _task_page(load_task(task_name))


def _task_page(task: Task, *, create_form: TeamCreateForm | None = None,
               join_form: TeamJoinForm | None = None) -> str:
    """The task page; a refused team form comes back filled in, with its errors."""
    session = db()
    user = me()
    definition = definitions.definition(task)
    phases = tasks.phases(session, task)
    team = teams.team_for_user(session, task=task, user=user) if user else None
    started = {}
    deadlines = {}
    rooms = {}
    if team is not None:
        for phase in phases:
            started[phase.id] = windows.team_window(session, team=team, phase=phase)
            deadlines[phase.id] = windows.team_deadline(session, team=team, phase=phase)
            rooms[phase.id] = admission.room(session, team=team, phase=phase, now=now())
    is_organiser = access.is_organiser(session, user, task)
    # Open windowed phases where the team must start its window before it may download.
    to_start = {p.id for p in phases if team is not None and not team.is_baseline
                and p.team_window_hours and _phase_state(p) == "open" and started[p.id] is None}
    # Inputs are offered for the open phases, else for the last phase that opened; a split's
    # inputs only through its own phases, and windowed inputs only where the window starts.
    serving = [p for p in phases if is_organiser
               or windows.window_phase_for(session, phase=p, user=user, now=now()) is None]
    download_phases = [p for p in serving if _phase_state(p) == "open"]
    if not download_phases:
        download_phases = [p for p in serving if _phase_state(p) == "closed"][-1:]
    split_info = splits.splits_json(session, task=task)
    split_sections = [
        {"name": name, "info": info,
         "definition": definition.for_split(name),
         "inputs": inputs.current_inputs(session, task=task, split=name),
         "gold": gold.current_gold(session, task=task, split=name),
         "phases": [p for p in download_phases if p.split == name],
         "can_download_gold": info["gold_public"] or is_organiser}
        for name, info in split_info.items() if name != definition.default_split
    ]
    return render_template(
        "tasks/show.html",
        task=task,
        definition=definition,
        phases=phases,
        phase_state=_phase_state,
        team=team,
        windows=started,
        to_start=to_start,
        deadlines=deadlines,
        rooms=rooms,
        input_files=inputs.current_inputs(session, task=task),
        gold_files=gold.current_gold(session, task=task),
        # offered once public; the download asks the read rule (terms, a team...)
        can_download_gold=access.gold_is_public(session, task=task) or is_organiser,
        can_see_board={p.id: access.can_view_leaderboard(session, user, p) for p in phases},
        is_organiser=is_organiser,
        download_phases=[p for p in download_phases if p.split == definition.default_split],
        split_sections=split_sections,
        create_form=create_form or TeamCreateForm(formdata=None),
        join_form=join_form or TeamJoinForm(formdata=None),
        **participation_views.task_page_extras(task),
    )


def _team_form(task: Task, form: TeamCreateForm | TeamJoinForm,
               act: Callable[[], Team], success: str) -> Any:
    """Create or join a team; on success go to its page, else show the task page again."""
    if form.validate_on_submit():
        with committed() as done:
            participation.require_domain(db(), task=task, user=login_or_redirect())
            team = act()
        if done:
            flash(_(success, team=team.name), "success")
            return redirect(url_for("web.team", team_id=team.id))
    forms = ({"create_form": form} if isinstance(form, TeamCreateForm)
             else {"join_form": form})
    return _task_page(task, **forms), 422


@bp.post("/tasks/<task_name>/teams")
@login_required
def create_team(task_name: str) -> Any:
    """Create a team (the creator is its captain)."""
    task = load_task(task_name)
    form = TeamCreateForm()
    return _team_form(
        task, form,
        lambda: teams.create_team(db(), task=task, captain=login_or_redirect(),
                                  name=form.name.data.strip(),
                                  affiliation=(form.affiliation.data or "").strip(), now=now()),
        N_("Team %(team)s created. Share its invite code with your team mates."),
    )


@bp.post("/tasks/<task_name>/teams/join")
@login_required
def join_team(task_name: str) -> Any:
    """Join a team with its invite code."""
    task = load_task(task_name)
    form = TeamJoinForm()
    return _team_form(
        task, form,
        lambda: teams.join_team(db(), task=task, user=login_or_redirect(),
                                invite_code=form.invite_code.data.strip(), now=now()),
        N_("You joined %(team)s."),
    )


@bp.get("/teams/<int:team_id>")
@login_required
def team(team_id: int) -> Any:
    """A team: members, invite code (captain), runs and upload attempts (members, organisers)."""
    session = db()
    user = me()
    try:
        team = teams.get_team(session, team_id)
    except DomainError:
        abort(404)
    organiser = access.is_organiser(session, user, team.task)
    if not (organiser or access.is_member(session, user, team.id)):
        # Other teams' pages do not exist for outsiders.
        abort(404)
    return render_template(
        "teams/show.html",
        team=team,
        is_captain=user is not None and team.captain_id == user.id,
        is_organiser=organiser,
        is_member=access.is_member(session, user, team.id),
        show_invite_code=access.can_see_invite_code(session, user, team),
        runs=submissions.runs_for_team(session, team=team, include_replaced=True),
        logs=submissions.upload_logs(session, task=team.task, team=team)[:50],
        models=(models := model_services.team_models_queued(session, team=team)),
        waiting=model_workers.waiting(session, [row for row, _ in models], now=now()),
        phase_status=admission.team_phase_status(
            session, team=team, phases=tasks.phases(session, team.task), now=now()),
        primary_phases=primary_views.team_primary(team),
        final_phases=reveal_views.team_finals(team),
    )


@bp.post("/tasks/<task_name>/phases/<phase_slug>/window")
@login_required
def start_window(task_name: str, phase_slug: str) -> Any:
    """Start the team's window in a windowed phase (the explicit start; downloads never do)."""
    task = load_task(task_name)
    phase = load_phase(task, phase_slug)
    back = redirect(url_for("web.task", task_name=task.name, _anchor="phases"))
    if not ActionForm().validate_on_submit():
        flash_error(DomainError("the form expired; try again"))
        return back
    with committed() as done:
        _team, window, started = windows.start_team_window(
            db(), phase=phase, user=login_or_redirect(), now=now())
    if done:
        flash(_("Your team's %(hours)s-hour window in %(phase)s started; it ends %(ends)s UTC.",
                hours=phase.team_window_hours, phase=phase.name, ends=clock_text(window.ends_at))
              if started else
              _("Your team's %(hours)s-hour window in %(phase)s had already started; it ends "
                "%(ends)s UTC.", hours=phase.team_window_hours, phase=phase.name,
                ends=clock_text(window.ends_at)), "success")
    return back


@bp.get("/tasks/<task_name>/phases/<phase_slug>/inputs/<dataset>")
@login_required
def download_inputs(task_name: str, phase_slug: str, dataset: str) -> Any:
    """A dataset's inputs (read only: a windowed phase needs the team's window started)."""
    task = load_task(task_name)
    phase = load_phase(task, phase_slug)
    try:
        filename, data = inputs.download_inputs(
            db(), storage(), phase=phase, dataset=dataset, user=me(), now=now()
        )
    except terms.TermsRequired as err:
        return participation_views.terms_redirect(task, err)
    except DomainError as err:
        flash_error(err)
        return redirect(url_for("web.task", task_name=task.name))
    return attachment(data, filename)


@bp.get("/tasks/<task_name>/gold/<dataset>")
def download_gold(task_name: str, dataset: str) -> Any:
    """A dataset's gold, once released (organisers always)."""
    task = load_task(task_name)
    try:
        filename, data = gold.download_gold(db(), storage(), task=task, dataset=dataset,
                                            viewer=me(), now=now(),
                                            split=request.args.get("split") or None)
    except terms.TermsRequired as err:
        return participation_views.terms_redirect(task, err)
    except DomainError as err:
        flash_error(err)
        return redirect(url_for("web.task", task_name=task.name))
    return attachment(data, filename)


def _upload_context(task: Task, team: Team, form: UploadRunForm) -> dict[str, Any]:
    """What the upload page shows beside the form: deadlines and the room admission computes."""
    session = db()
    phases = admission.offered_phases(session, task=task, team=team, now=now())
    rooms = {p.id: admission.room(session, team=team, phase=p, now=now()) for p in phases}
    deadlines = {p.id: windows.team_deadline(session, team=team, phase=p) for p in phases}
    definition = definitions.definition(task)
    return {
        "task": task, "team": team, "form": form, "phases": phases, "rooms": rooms,
        "deadlines": deadlines, "definition": definition,
        "expected": [definition.run_filename(d) for d in definition.dataset_names],
        "expected_by_phase": {p.id: [definitions.phase_definition(p).run_filename(d)
                                     for d in definitions.phase_definition(p).dataset_names]
                              for p in phases},
        "current_runs": submissions.runs_for_team(session, team=team),
    }


def _run_notes(run: Run) -> str:
    """What the acceptance message adds: a replaced version, a late or fix flag."""
    note = _(" (replaces the earlier version of that name)") if run.replaces_id else ""
    note += _(" (late: flagged *)") if run.is_late else ""
    note += _(" (post-deadline fix: flagged †)") if run.is_fix else ""
    return note


@bp.route("/tasks/<task_name>/submit", methods=["GET", "POST"])
@login_required
def upload(task_name: str) -> Any:
    """Upload a run: a name and its files (one per dataset, or one zip)."""
    session, task, user, team = uploading_team(task_name, N_("runs"))
    form = UploadRunForm()
    opened = admission.offered_phases(session, task=task, team=team, now=now())
    # A closed phase stays listed (late policy, granted fixes) but says it is closed.
    choices = [
        (p.slug, _("%(phase)s (%(kind)s, closed)", phase=p.name, kind=say_word(p.kind, words()))
         if _phase_state(p) == "closed" else _("%(phase)s (%(kind)s)", phase=p.name,
                                                 kind=say_word(p.kind, words())))
        for p in opened]
    if sum(_phase_state(p) == "open" for p in opened) > 1:
        # Several open phases (tracks): the participant picks one, none is guessed.
        choices.insert(0, ("", _("Choose a phase (several are open)")))
    form.phase.choices = options(choices)
    if request.method == "GET" and not form.phase.data:
        with contextlib.suppress(DomainError):
            default = tasks.phase_for_submission(session, task, now=now())
            if default in opened:
                form.phase.data = default.slug
    issues: list[Any] = []
    status = 200
    if form.validate_on_submit():
        try:
            files = uploaded_files(form.files.data or [])
        except ValueError as err:
            files = None
            form.files.errors = [sentence(err.args[0] if err.args else err)]
        if files == {}:
            form.files.errors = [_("Choose the run's files (one per dataset) or one zip.")]
        if files:
            phase = load_phase(task, form.phase.data)
            try:
                with committed() as done:
                    run, queued = accept_run(
                        session, storage(), current_app._get_current_object(),  # type: ignore[attr-defined]
                        team=team, phase=phase, user=user, name=(form.name.data or "").strip(),
                        files=files, now=now(), description=request.form.get("description", ""),
                        given=descriptions.given_from_form(task, request.form),
                        upload_key=_form_key(form.upload_key.data))
            except submissions.Replayed as replay:  # the same form sent again: its first run
                flash(_("Run %(run)s was already received from this form.",
                        run=replay.run.name), "success")
                return redirect(url_for("web.run", run_id=replay.run.id))
            if done and queued:  # stored and valid; a queue worker scores it
                flash(_("Run %(run)s accepted%(notes)s; it is being scored.", run=run.name,
                        notes=_run_notes(run)), "success")
                return redirect(url_for("web.run", run_id=run.id))
            if done:
                flash(_("Run %(run)s accepted%(notes)s.", run=run.name, notes=_run_notes(run)),
                      "success")
                return redirect(url_for("web.run", run_id=run.id))
            if isinstance(done.error, terms.TermsRequired):  # the phase's own terms (flashed)
                return participation_views.to_terms(task)
            issues = done.issues
        status = 422
    elif request.method == "POST":
        status = 422
    return render_template("runs/upload.html", issues=issues,
                           **_upload_context(task, team, form)), status


def _form_key(given: str | None) -> str | None:
    """The upload form's own key; a form altered to carry a bad one just has none."""
    try:
        return submissions.client_key(given)
    except DomainError:
        return None


@bp.get("/runs/<int:run_id>")
def run(run_id: int) -> Any:
    """A run: status, issues, digests, scores when visible, history of replaced versions."""
    session = db()
    user = me()
    run = visible_run(run_id)  # someone else's run looks like a missing one
    show_scores = access.can_view_scores(session, user, run.phase)
    member = access.is_member(session, user, run.team_id)
    organiser = access.is_organiser(session, user, run.task)
    history: list[Any] = []
    if member or organiser:
        history = [r for r in submissions.runs_for_team(session, team=run.team, phase=run.phase,
                                                        include_replaced=True)
                   if r.name == run.name and r.id != run.id]
    record = run.current_score
    model = model_services.model_of_run(session, run)
    return render_template(
        "runs/show.html",
        run=run,
        facts=model_facts.run_model_facts(run.meta, model)
        if (run.meta or {}).get("system") == "model" else None,
        training_labels={q.key: q.label for q in declared_questions(
            definitions.definition(run.task), "training_data")},
        model=model if model is not None and model_services.can_download(session, user, model)
        else None,
        can_publish=member,
        definition=definitions.definition(run.task),
        record=record if show_scores else None,
        scored_hidden=record is not None and not show_scores,
        history=history,
        score_history=run.scores if show_scores else [],
        show_private=member or organiser,
    )
