"""Terms pages (read, accept), announcements (page, read marks, mail opt-in, one-click
unsubscribe, Atom feed) and the organisers' participation and announcement pages (send, edit,
withdraw); unlisted tasks answer only their secret link."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from flask import (
    abort,
    current_app,
    flash,
    g,
    redirect,
    render_template,
    request,
    session,
    url_for,
)
from flask_babel import gettext as _
from flask_login import login_required

from semboard.errors import DomainError
from semboard.extensions import csrf
from semboard.i18n.languages import TRANSLATED
from semboard.models import Task
from semboard.notify import unsubscribe
from semboard.services.people import account_links, teams
from semboard.services.tasks import announcements, participation, tasks, terms
from semboard.timefmt import clock_text
from semboard.views.common import (
    bp,
    committed,
    db,
    load_task,
    login_or_redirect,
    me,
    now,
    organiser_action,
    require_organiser,
    sentence,
)
from semboard.web.files import attachment
from semboard.web.forms import ActionForm

KEYS = "task_keys"  # the session cookie's secret-link keys, by task name
# Pages that read their task's phases first: the address's query reads them with the task
PHASES_FIRST = frozenset({"web.leaderboard_page"})


@bp.before_app_request
def _unlisted_tasks() -> None:
    """A page of an unlisted task is a 404 unless the visitor may find it (its secret link's
    key, here or remembered from an earlier visit, a team, an acceptance, or organising it);
    a page of a task (run, model, team) that does not exist is the same 404, before any log-in
    is asked, so the two look alike."""
    if request.blueprint != "web":
        return
    args = request.view_args or {}
    key = request.args.get("key")
    stored = session.get(KEYS)
    known: dict[str, str] = stored if isinstance(stored, dict) else {}
    name = args.get("task_name")
    remembered = known.get(name) if isinstance(name, str) else None
    task, refusal = participation.find_address(db(), args, user=me(), key=key or remembered,
                                               with_phases=request.endpoint in PHASES_FIRST)
    if refusal is not None:
        abort(404)
    if task is None:
        return
    if key and participation.can_find(db(), task=task, user=None, key=key):
        session[KEYS] = {**known, task.name: key}  # the cookie remembers the link
    g.address_task = task  # load_task's, when the view asks for it by name


def task_page_extras(task: Task) -> dict[str, Any]:
    """What the task page shows of terms, licence, citation and the latest announcements."""
    sess = db()
    user = me()
    rows = announcements.visible(sess, task=task, user=user)[:5]
    live, ahead = terms.standings(sess, task=task, user=user, now=now())
    team = teams.team_for_user(sess, task=task, user=user) if user else None
    return {"rules": participation.rules(task),
            # what a participant is told of the gate: the team's approval (and why), an
            # e-mail domain the task refuses, an entry deadline that passed (issue 44)
            "approval": participation.approval_state(sess, team=team) if team else None,
            "decision": participation.decision(sess, team=team) if team else None,
            "domain_refusal": participation.domain_refusal(task, user),
            "entry_closed": participation.entry_closed(sess, task=task, now=now()),
            "terms_pending": terms.pending(sess, task=task, user=user, now=now()),
            "terms_in_force": bool(live),
            # a change in its grace period, or one scheduled: what the notice says (issue 40)
            "terms_grace": [s for s in live if s.covered_until is not None],
            "terms_scheduled": ahead,
            "announcements": rows,
            "unread": announcements.unread_ids(sess, rows=rows, user=user)}


def terms_redirect(task: Task, err: terms.TermsRequired) -> Any:
    """Send a refused download or upload to the terms page, coming back afterwards."""
    flash(sentence(err), "error")
    return to_terms(task)


def to_terms(task: Task) -> Any:
    """To the terms page, coming back here afterwards (the refusal was said already)."""
    return redirect(url_for("web.terms_page", task_name=task.name, next=request.path))


def _safe_next(default: str) -> str:
    """A same-site path to go back to after accepting (never another host)."""
    target = request.values.get("next") or ""
    parts = urlsplit(target)
    if target.startswith("/") and not target.startswith("//") and not parts.netloc:
        return target
    return default


@bp.get("/tasks/<task_name>/terms")
def terms_page(task_name: str) -> Any:
    """The terms in force (task and phases), whether the visitor accepted them, those
    scheduled to take effect later, and the button."""
    task = load_task(task_name)
    user = me()
    live, ahead = terms.standings(db(), task=task, user=user, now=now())
    return render_template(
        "tasks/terms.html", task=task, versions=live, scheduled=ahead,
        missing=[s for s in live + ahead if not s.accepted],
        rules=participation.rules(task), refusal=participation.domain_refusal(task, user),
        mail_statement=announcements.MAIL_STATEMENT, next=_safe_next(""))


@bp.post("/tasks/<task_name>/terms")
@login_required
def accept_terms(task_name: str) -> Any:
    """Accept the terms shown (their digests come back with the form: a changed text is not
    accepted unseen)."""
    task = load_task(task_name)
    user = login_or_redirect()
    back = url_for("web.terms_page", task_name=task.name)
    if not ActionForm().validate_on_submit():
        flash(_("The form expired; try again."), "error")
        return redirect(back)
    with committed() as done:
        participation.require_domain(db(), task=task, user=user)
        digests = request.form.getlist("digest")
        terms.accept(db(), task=task, user=user, client="web", now=now(), digests=digests,
                     shown={d: request.form.get(f"language-{d}", "") for d in digests})
    if not done:
        return redirect(back)
    flash(_("You accepted the terms of %(task)s.", task=task.name), "success")
    return redirect(_safe_next(url_for("web.task", task_name=task.name)))


# ----------------------------------------------------------------------------- announcements


@bp.get("/tasks/<task_name>/announcements")
def announcements_page(task_name: str) -> Any:
    """The task's announcements this visitor may read, unread ones marked."""
    task = load_task(task_name)
    user = me()
    rows = announcements.visible(db(), task=task, user=user)
    return render_template(
        "tasks/announcements.html", task=task, rows=rows,
        unread=announcements.unread_ids(db(), rows=rows, user=user),
        revisions={r.id: announcements.revisions(db(), r) for r in rows if r.edited_at},
        opted_in=announcements.opted_in(db(), task=task, user=user))


@bp.post("/tasks/<task_name>/announcements/read")
@login_required
def mark_announcements_read(task_name: str) -> Any:
    """Mark every announcement read."""
    task = load_task(task_name)
    if not ActionForm().validate_on_submit():
        abort(400)
    with committed():
        announcements.mark_read(db(), task=task, user=login_or_redirect(), now=now())
    return redirect(url_for("web.announcements_page", task_name=task.name))


@bp.post("/tasks/<task_name>/announcements/mail")
@login_required
def announcement_mail(task_name: str) -> Any:
    """Ask for the announcements by mail (mail=on), or stop them."""
    task = load_task(task_name)
    if not ActionForm().validate_on_submit():
        abort(400)
    value = request.form.get("mail") == "on"
    with committed() as done:
        announcements.set_opt_in(db(), task=task, user=login_or_redirect(), value=value,
                                 now=now())
    if done:
        flash(_("You will get this task's announcements by e-mail.") if value else
              _("You will no longer get this task's announcements by e-mail."), "success")
    return redirect(url_for("web.announcements_page", task_name=task.name))


@bp.get("/tasks/<task_name>/announcements.atom")
def announcements_feed(task_name: str) -> Any:
    """An Atom feed of the task's announcements to all teams."""
    task = load_task(task_name)
    rows = announcements.visible(db(), task=task, user=None, public_only=True)
    body = render_template("tasks/announcements.atom", task=task, rows=rows,
                           updated=rows[0].sent_at if rows else task.updated_at)
    return body, 200, {"Content-Type": "application/atom+xml; charset=utf-8"}


# ----------------------------------------------------------------------------- organisers


@bp.get("/tasks/<task_name>/organise/participation")
def organise_participation(task_name: str) -> Any:
    """Terms (task and phases), acceptances, team approval and the secret link."""
    task = load_task(task_name)
    user = require_organiser(task)
    sess = db()
    stated = participation.rules(task)
    secret = participation.task_secret(sess, task=task)
    team_rows = [(t, participation.approval_state(sess, team=t))
                 for t in teams.list_teams(sess, task=task) if not t.is_baseline]
    return render_template(
        "organiser/participation.html", task=task, rules=stated,
        task_terms=terms.current(sess, task=task, now=now()),
        phase_terms=[(p, terms.current(sess, task=task, phase=p, now=now()))
                     for p in task.phases],
        scheduled=terms.scheduled(sess, task=task, now=now()),
        acceptances=terms.acceptances_json(sess, task=task, user=user, now=now()),
        teams=team_rows,
        secret_url=url_for("web.task", task_name=task.name, key=secret, _external=True)
        if secret else None)


def _translated_terms() -> dict[str, str]:
    """The terms form's translations: a `text-<code>` field per language the site speaks."""
    return {code: request.form.get(f"text-{code}", "") for code in TRANSLATED}


def _translated_announcement() -> dict[str, dict[str, str]]:
    """An announcement form's translations: `title-<code>` and `body-<code>` fields."""
    return {code: {"title": request.form.get(f"title-{code}", ""),
                   "body": request.form.get(f"body-{code}", "")} for code in TRANSLATED}


@bp.post("/tasks/<task_name>/organise/terms")
def organise_terms(task_name: str) -> Any:
    """Set the task's (or a phase's) terms; a changed text asks everyone to accept again."""
    def act(task: Task, user: Any) -> str:
        slug = request.form.get("phase") or None
        phase = tasks.get_phase(db(), task, slug) if slug else None
        when, grace = terms.schedule_from_form(request.form.get("effective_at"),
                                               request.form.get("grace_hours"), now=now())
        row = terms.set_terms(db(), task=task, phase=phase, text=request.form.get("text", ""),
                              user=user, now=now(), translated=_translated_terms(),
                              effective_at=when, grace_until=grace)
        if row is None or not row.text:
            return _("Terms lifted.")
        said = _("Terms saved (version %(version)s).", version=row.digest[:12])
        if row.effective_at is not None:
            said += " " + _("They take effect %(when)s UTC.",
                            when=clock_text(row.effective_at))
        if row.grace_until is not None:
            said += " " + _("Who accepted the text before may go on until %(until)s UTC.",
                            until=clock_text(row.grace_until))
        return said
    return organiser_action(task_name, act, endpoint="web.organise_participation")


@bp.get("/tasks/<task_name>/organise/acceptances.csv")
def acceptances_csv(task_name: str) -> Any:
    """Who accepted which terms version, when and from which client."""
    task = load_task(task_name)
    user = require_organiser(task)
    data = terms.acceptances_csv(db(), task=task, user=user, now=now()).encode()
    return attachment(data, f"{task.name}-acceptances.csv", mimetype="text/csv")


@bp.post("/tasks/<task_name>/organise/teams/<int:team_id>/approval")
def organise_approval(task_name: str, team_id: int) -> Any:
    """Approve (state=approved) or refuse a team."""
    def act(task: Task, user: Any) -> str:
        team = teams.get_team(db(), team_id)
        if team.task_id != task.id:
            abort(404)
        row = participation.decide(db(), team=team, state=request.form.get("state", ""),
                                   user=user, now=now(), reason=request.form.get("reason", ""))
        return (_("Team %(team)s approved.", team=team.name) if row.state == "approved" else
                _("Team %(team)s refused.", team=team.name))
    return organiser_action(task_name, act, endpoint="web.organise_participation")


@bp.post("/tasks/<task_name>/organise/secret")
def organise_secret(task_name: str) -> Any:
    """A new secret link (the old one stops working)."""
    def act(task: Task, user: Any) -> str:
        participation.new_secret(db(), task=task, user=user, now=now())
        return _("A new secret link was made; the old one no longer works.")
    return organiser_action(task_name, act, endpoint="web.organise_participation")


@bp.get("/tasks/<task_name>/organise/announcements")
def organise_announcements(task_name: str) -> Any:
    """Write an announcement; review and send the drafts the site wrote."""
    task = load_task(task_name)
    user = require_organiser(task)
    drafts = announcements.drafts(db(), task=task, user=user)
    sent = announcements.visible(db(), task=task, user=user)
    return render_template(
        "organiser/announcements.html", task=task, drafts=drafts, sent=sent,
        audience={row.id: announcements.audience(row) for row in drafts + sent},
        scores_of={row.id: announcements.score_phases(db(), row) for row in drafts},
        hidden_of={row.id: announcements.hidden_score_phases(db(), row)
                   for row in drafts + sent},
        revisions={row.id: announcements.revisions(db(), row) for row in sent
                   if row.edited_at})


@bp.post("/tasks/<task_name>/organise/announcements")
def organise_announce(task_name: str) -> Any:
    """Post an announcement (send=draft keeps it a draft)."""
    def act(task: Task, user: Any) -> str:
        slug = request.form.get("phase") or None
        row = announcements.post(
            db(), task=task, user=user, title=request.form.get("title", ""),
            body=request.form.get("body", ""), now=now(),
            phase=tasks.get_phase(db(), task, slug) if slug else None,
            send=request.form.get("send") != "draft", translated=_translated_announcement(),
            critical=request.form.get("critical") == "on")
        return (_("Announcement sent.") if row.status == "sent" else
                _("Announcement saved as a draft."))
    return organiser_action(task_name, act, endpoint="web.organise_announcements")


@bp.post("/tasks/<task_name>/organise/announcements/<int:announcement_id>/send")
def organise_send(task_name: str, announcement_id: int) -> Any:
    """Send a draft, with the organiser's edits of its title and text."""
    def act(task: Task, user: Any) -> str:
        row = announcements.get(db(), task=task, announcement_id=announcement_id)
        announcements.send_draft(db(), announcement=row, user=user, now=now(),
                                 title=request.form.get("title"), body=request.form.get("body"),
                                 translated=_translated_announcement(),
                                 critical=request.form.get("critical") == "on")
        return _("Announcement sent.")
    return organiser_action(task_name, act, endpoint="web.organise_announcements")


@bp.post("/tasks/<task_name>/organise/announcements/<int:announcement_id>/edit")
def organise_edit(task_name: str, announcement_id: int) -> Any:
    """Correct a sent announcement (its text before is kept; notify=on mails the correction)."""
    def act(task: Task, user: Any) -> str:
        row = announcements.get(db(), task=task, announcement_id=announcement_id)
        announcements.edit(db(), announcement=row, user=user, now=now(),
                           title=request.form.get("title", ""), body=request.form.get("body", ""),
                           notify=request.form.get("notify") == "on",
                           translated=_translated_announcement())
        return _("Announcement corrected; readers see that it was edited.")
    return organiser_action(task_name, act, endpoint="web.organise_announcements",
                            anchor=f"#sent-{announcement_id}")


@bp.post("/tasks/<task_name>/organise/announcements/<int:announcement_id>/withdraw")
def organise_withdraw(task_name: str, announcement_id: int) -> Any:
    """Withdraw a sent announcement (hidden from its readers, kept here)."""
    def act(task: Task, user: Any) -> str:
        row = announcements.get(db(), task=task, announcement_id=announcement_id)
        announcements.withdraw(db(), announcement=row, user=user, now=now(),
                               reason=request.form.get("reason", ""))
        return _("Announcement withdrawn.")
    return organiser_action(task_name, act, endpoint="web.organise_announcements")


# ----------------------------------------------------------------------------- unsubscribe


def _unsubscribe_link(token: str) -> tuple[int, str]:
    """The account and scope a link names, or 404 (a forged or mangled link)."""
    key = current_app.secret_key
    found = unsubscribe.read(key.decode() if isinstance(key, bytes) else key or "", token)
    if found is None:
        abort(404)
    return found


@bp.get("/unsubscribe/<token>")
def unsubscribe_page(token: str) -> Any:
    """What the link stops, and the button that stops it (a GET never writes)."""
    user_id, scope = _unsubscribe_link(token)
    try:
        _user, words = account_links.unsubscribe_scope(db(), user_id=user_id, scope=scope)
    except DomainError:
        abort(404)
    return render_template("auth/unsubscribe.html", token=token, words=words, done=False)


@bp.post("/unsubscribe/<token>")
@csrf.exempt  # RFC 8058: the mail client posts "List-Unsubscribe=One-Click", no session
def unsubscribe_now(token: str) -> Any:
    """Stop the mail the link names, in one POST without a log-in (the signed link is the
    authority)."""
    user_id, scope = _unsubscribe_link(token)
    try:
        words = account_links.unsubscribe(db(), user_id=user_id, scope=scope, now=now())
    except DomainError:
        abort(404)
    db().commit()
    return render_template("auth/unsubscribe.html", token=token, words=words, done=True)


@bp.post("/tasks/<task_name>/organise/announcements/<int:announcement_id>/delete")
def organise_discard(task_name: str, announcement_id: int) -> Any:
    """Delete a draft."""
    def act(task: Task, user: Any) -> str:
        row = announcements.get(db(), task=task, announcement_id=announcement_id)
        announcements.discard(db(), announcement=row, user=user)
        return _("Draft deleted.")
    return organiser_action(task_name, act, endpoint="web.organise_announcements")
