"""The web blueprint and what every page module shares (session, storage, clock, filters)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from functools import wraps
from typing import Any, TypeVar

from flask import Blueprint, abort, current_app, flash, g, redirect, request, session, url_for
from flask_babel import gettext as _
from flask_babel import ngettext
from flask_login import current_user, login_user, logout_user
from sqlalchemy.orm import Session

from semboard.clock import request_now
from semboard.config import Limits
from semboard.db import get_session
from semboard.errors import DomainError, said_again
from semboard.i18n.catalogues import native_digits
from semboard.i18n.pages import current_language, say, sentence
from semboard.models import Phase, Run, Task, Team, User
from semboard.services.people import accounts, teams
from semboard.services.runs import submissions
from semboard.services.tasks import access, participation, tasks, terms, translations
from semboard.storage import Storage, get_storage
from semboard.timefmt import clock_text
from semboard.web.forms import ActionForm

bp = Blueprint("web", __name__)

F = TypeVar("F", bound=Callable[..., Any])


def db() -> Session:
    """The request's database session."""
    return get_session()


def storage() -> Storage:
    """The app's file storage."""
    return get_storage()


def now() -> datetime:
    """The current time (UTC-aware), from the app's clock."""
    return request_now()


def me() -> User | None:
    """The logged-in user, or None."""
    return access.viewer(current_user)


def login_or_redirect() -> User:
    """The current user, or stop here with a redirect to the log-in page."""
    user = me()
    if user is None:
        abort(current_app.login_manager.unauthorized())  # type: ignore[attr-defined]
    return user


# The session cookie's key of the server-side log-in session (semboard.models.LoginSession).
SESSION_KEY = "login_key"


def uploading_team(task_name: str, what: str) -> tuple[Session, Task, User, Team]:
    """An upload page's session, task, user and team; back to the task page, saying why, when
    the user has no team there (what: "runs", "a model": a msgid)."""
    session = db()
    task = load_task(task_name)
    user = login_or_redirect()
    team = teams.team_for_user(session, task=task, user=user)
    if team is None:
        flash(_("Create or join a team for this task before uploading %(what)s.",
                what=_(what)), "error")
        abort(redirect(url_for("web.task", task_name=task.name)))
    try:  # terms accepted, domain and team approval: the page is not served otherwise (an
        # upload itself is admitted with its phase's own terms: services.runs.admission)
        participation.require_participant(session, task=task, user=user, team=team, now=now())
    except terms.TermsRequired as err:
        flash(sentence(say(err)), "error")
        abort(redirect(url_for("web.terms_page", task_name=task.name, next=request.path)))
    except DomainError as err:
        flash(sentence(say(err)), "error")
        abort(redirect(url_for("web.task", task_name=task.name)))
    return session, task, user, team


def limits() -> Limits:
    """The app's throttles (defaults, or SEMBOARD_* settings)."""
    return Limits.from_config(current_app.config)


def client_address() -> str | None:
    """The client's address (behind SEMBOARD_TRUSTED_PROXIES proxies, the one they saw)."""
    return request.remote_addr


def log_in(user: User) -> None:
    """Start a log-in session for user (committed) and put its key in the session cookie."""
    key = accounts.start_session(db(), user=user, now=now())
    db().commit()
    login_user(user)
    session[SESSION_KEY] = key


def log_out() -> None:
    """End this browser's log-in session on the server, then in the cookie."""
    key = session.pop(SESSION_KEY, None)
    if key:
        accounts.end_session(db(), key=key)
        db().commit()
    logout_user()


def current_session_key() -> str | None:
    """This browser's log-in session key, if any."""
    key = session.get(SESSION_KEY)
    return key if isinstance(key, str) else None


def flash_error(err: DomainError) -> None:
    """Show a service's refusal to the user."""
    flash(sentence(say(err)), "error")


class Outcome:
    """What `committed()` reports: whether the block's service calls went through."""
    def __init__(self) -> None:
        self.ok = False
        self.error: DomainError | None = None

    def __bool__(self) -> bool:
        return self.ok

    @property
    def issues(self) -> list[Any]:
        """The refusal's issues (a rejected run's or data file's problems), else none."""
        return list(getattr(self.error, "issues", None) or [])


@contextmanager
def committed() -> Iterator[Outcome]:
    """Commit what the block did; on a service refusal roll back and flash it instead."""
    outcome = Outcome()
    session = db()
    try:
        yield outcome
        session.commit()
    except DomainError as err:
        session.rollback()
        flash_error(err)
        outcome.error = err
    else:
        outcome.ok = True


def load_task(name: str) -> Task:
    """The task or a 404 page (the one the unlisted-task check found for this address, when it
    names it: one query, not two, for every task page)."""
    found = g.get("address_task")
    if found is None or found.name != name:
        try:
            found = tasks.get_task(db(), name)
        except DomainError:
            abort(404)
    # the organisers may ask for scores in the reader's own digits (score_digits = "native")
    g.native_digits = translations.digits_native(found)
    return found


def load_phase(task: Task, slug: str) -> Phase:
    """The task's phase of that slug or a 404 page."""
    try:
        return tasks.get_phase(db(), task, slug)
    except DomainError:
        abort(404)


def require_organiser(task: Task) -> User:
    """The current user if they organise the task, else 403 (404 would hide nothing here)."""
    user = login_or_redirect()
    if not access.can_manage_task(db(), user, task):
        abort(403)
    return user


def organiser_action(task_name: str, act: Callable[[Task, User], str], *,
                     endpoint: str = "web.organise", anchor: str = "") -> Any:
    """An organiser's POST button: check CSRF, run it, commit, say what happened, go back."""

    task = load_task(task_name)
    user = require_organiser(task)
    if not ActionForm().validate_on_submit():
        abort(400)
    with committed() as done:
        message = act(task, user)
    if done:
        flash(message, "success")
    return redirect(url_for(endpoint, task_name=task.name) + anchor)


def visible_run(run_id: int) -> Run:
    """The run if this viewer may see it; else 404, as for a run that does not exist."""
    try:
        return submissions.visible_run(db(), viewer=me(), run_id=run_id, now=now())
    except DomainError:
        abort(404)


def admin_required(view: F) -> F:
    """Only site admins."""
    @wraps(view)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        user = login_or_redirect()
        if not user.is_admin:
            abort(403)
        return view(*args, **kwargs)

    return wrapped  # type: ignore[return-value]


# ---------------------------------------------------------------------------
# Template filters: every time on the site is shown in UTC.


def _aware(value: datetime) -> datetime:
    return value if value.tzinfo else value.replace(tzinfo=UTC)


bp.add_app_template_filter(sentence, "sentence")


@bp.app_template_filter("utc")
def utc_filter(value: datetime | str | None) -> str:
    """`2012-05-01 14:00 UTC`, with seconds when they are not zero (a 23:59:59 deadline).

    Also takes ISO 8601 text (a time read back from a stored board's JSON)."""
    if value is None:
        return "—"
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return clock_text(_aware(value).astimezone(UTC)) + " UTC"


@bp.app_template_filter("isoutc")
def isoutc_filter(value: datetime | None) -> str:
    """ISO 8601 with a Z, what the countdown script and <time> read."""
    if value is None:
        return ""
    return _aware(value).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def describe_delta(seconds: float) -> str:
    """A short human duration: '3 days 4 hours', '12 minutes'."""
    s = int(abs(seconds))
    days, s = divmod(s, 86400)
    hours, s = divmod(s, 3600)
    minutes, s = divmod(s, 60)

    def day(n: int) -> str:
        return ngettext("%(num)d day", "%(num)d days", n)

    def hour(n: int) -> str:
        return ngettext("%(num)d hour", "%(num)d hours", n)

    def minute(n: int) -> str:
        return ngettext("%(num)d minute", "%(num)d minutes", n)

    if days:
        return _("%(days)s %(hours)s", days=day(days), hours=hour(hours))
    if hours:
        return _("%(hours)s %(minutes)s", hours=hour(hours), minutes=minute(minutes))
    if minutes:
        return minute(minutes)
    return ngettext("%(num)d second", "%(num)d seconds", s)


@bp.app_template_filter("relative")
def relative_filter(value: datetime | None) -> str:
    """'in 3 days 4 hours' or '2 hours 5 minutes ago' (what pages show without JavaScript)."""
    if value is None:
        return ""
    delta = (_aware(value) - now()).total_seconds()
    text = describe_delta(delta)
    return _("in %(time)s", time=text) if delta >= 0 else _("%(time)s ago", time=text)


@bp.app_template_filter("metric")
def metric_filter(value: float | None, digits: int = 4) -> str:
    """A metric value with fixed digits, or a dash when undefined."""
    if value is None:
        return "—"
    return score_text(f"{value:.{digits}f}")


def score_text(text: str) -> str:
    """A score as pages write it: ASCII digits and '.', whatever the language (papers compare
    them), unless the task's organisers asked for the reader's own digits."""
    return native_digits(text, current_language()) if g.get("native_digits") else text


@bp.app_template_filter("filesize")
def filesize_filter(size: int | None) -> str:
    """Bytes as B/KB/MB."""
    if size is None:
        return "—"
    if size < 1024:
        return f"{size} B"
    if size < 1024 * 1024:
        return f"{size / 1024:.1f} KB"
    return f"{size / 1024 / 1024:.1f} MB"


@bp.app_context_processor
def _globals() -> dict[str, Any]:
    return {"now_utc": now}


# ---------------------------------------------------------------------------
# A task's texts, the site's stored words and a run's problems in the reader's language.


@bp.app_template_global()
def task_title(task: Task) -> str:
    """The task's title in the reader's language (else its own)."""
    return translations.task_title(task, current_language())


@bp.app_template_global()
def task_description(task: Task) -> str:
    """The task's description in the reader's language (else its own)."""
    return translations.task_description(task, current_language())


@bp.app_template_global()
def terms_text(version: Any) -> translations.Shown:
    """A terms version in the reader's language (else its own), with the language shown."""
    return translations.terms_text(version, _task_of(version), current_language())


@bp.app_template_global()
def announcement_text(row: Any) -> translations.Shown:
    """An announcement's title and body in the reader's language (else as written)."""
    return translations.announcement_text(row, _task_of(row), current_language())


def _task_of(row: Any) -> Task:
    """The task a terms version or announcement belongs to (from the session's identity map)."""
    task = db().get(Task, row.task_id)
    assert task is not None
    return task


@bp.app_template_global()
def logged(entry: Any) -> str:
    """An upload log entry's message in the reader's language (as written where it was not
    recorded as words of the site's)."""
    return say(said_again(entry.said) if entry.said else entry.message)


@bp.app_template_global()
def issue_text(issue: Any) -> str:
    """A problem's message (an evaluation.Issue or its stored dict) in the reader's language."""
    message = issue.get("message") if isinstance(issue, dict) else issue.message
    return str(message or "")


# Pages load only this site's own script and styles; frames and foreign form targets are refused.
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'self'; object-src 'none'"
)


@bp.after_app_request
def _security_headers(response: Any) -> Any:
    """Hardening headers on every page outside the JSON API."""
    if request.path.startswith("/api/"):
        return response
    response.headers.setdefault("X-Content-Type-Options", "nosniff")
    response.headers.setdefault("X-Frame-Options", "DENY")
    response.headers.setdefault("Referrer-Policy", "same-origin")
    if response.mimetype == "text/html":
        response.headers.setdefault("Content-Security-Policy", CONTENT_SECURITY_POLICY)
    return response
