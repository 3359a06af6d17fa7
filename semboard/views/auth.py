"""Register, log in, log out, and the profile page with API tokens."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from flask import flash, redirect, render_template, request, url_for
from flask_babel import gettext as _
from flask_login import login_required

from semboard.errors import RateLimited
from semboard.i18n.pages import current_language
from semboard.mail.delivery import mail_available
from semboard.models import User
from semboard.services.people import account_links, accounts, teams
from semboard.services.tasks import access, tasks
from semboard.views.common import (
    bp,
    client_address,
    committed,
    db,
    limits,
    log_in,
    log_out,
    login_or_redirect,
    me,
    now,
)
from semboard.web.forms import ActionForm, LoginForm, RegisterForm, TokenForm
from semboard.web.hardening import bad_character

# Registrations from one client address are counted over this window.


def safe_next(target: str | None) -> str | None:
    """Only same-site paths are followed after log-in (no open redirect, no header injection)."""
    if not target or len(target) > 2000 or bad_character(target, line_breaks=False):
        return None
    if "\\" in target or any(c.isspace() for c in target):
        return None  # browsers read "/\\evil" as "//evil"
    parts = urlsplit(target)
    if parts.scheme or parts.netloc or not target.startswith("/") or target.startswith("//"):
        return None
    return target


@bp.route("/register", methods=["GET", "POST"])
def register() -> Any:
    """Create an account and log in."""
    if me() is not None:
        return redirect(url_for("web.tasks"))
    form = RegisterForm()
    if form.validate_on_submit():
        by_mail = mail_available()
        with committed() as done:
            account_links.count_registration(db(), address=client_address(), limits=limits(),
                                             now=now())
            user = account_links.register(
                db(), email=form.email.data, password=form.password.data,
                display_name=form.display_name.data.strip(), by_mail=by_mail, now=now(),
                language=current_language())
        if done and user is None:
            # the same answer whether or not the address had an account: the mail says which
            flash(_("Check your e-mail: we sent a message to finish creating your account. "
                    "Then log in."), "success")
            return redirect(url_for("web.login"))
        if done and user is not None:
            log_in(user)
            flash(_("Welcome, %(name)s! Pick a task to join a team.", name=user.display_name),
                  "success")
            return redirect(url_for("web.tasks"))
    return render_template("auth/register.html", form=form), 200 if request.method == "GET" else 422


@bp.route("/login", methods=["GET", "POST"])
def login() -> Any:
    """Log in (failed attempts slow further ones down; see accounts.check_throttle)."""
    form = LoginForm()
    if request.method == "GET":
        form.next.data = safe_next(request.args.get("next")) or ""
    if form.validate_on_submit():
        with committed() as done:
            user = accounts.authenticate(
                db(), email=form.email.data, password=form.password.data, now=now(),
                remote_addr=client_address(), limits=limits(),
            )
        if done:
            log_in(user)
            flash(_("Logged in as %(name)s.", name=user.display_name), "success")
            return redirect(safe_next(form.next.data) or url_for("web.tasks"))
        if isinstance(done.error, RateLimited):
            return render_template("auth/login.html", form=form), 429
    status = 200 if request.method == "GET" else 422
    return render_template("auth/login.html", form=form), status


@bp.post("/logout")
def logout() -> Any:
    """Log out (POST with CSRF, so no link can log anyone out); the session ends on the server."""
    if ActionForm().validate_on_submit():
        log_out()
        flash(_("Logged out."), "info")
    return redirect(url_for("web.tasks"))


def _profile_page(user: User, form: TokenForm, new_token: str | None = None) -> str:
    """The profile page: teams, organised tasks, tokens (a new one's plaintext shown once)."""
    session = db()
    return render_template(
        "auth/profile.html",
        user=user,
        tokens=accounts.list_api_tokens(session, user=user),
        teams=teams.teams_of_user(session, user=user),
        organised=[t for t in tasks.list_tasks(session)
                   if access.can_manage_task(session, user, t)],
        form=form,
        action=ActionForm(),
        new_token=new_token,
    )


@bp.get("/profile")
@login_required
def profile() -> Any:
    """The user's teams and API tokens."""
    return _profile_page(login_or_redirect(), TokenForm())


@bp.post("/profile/tokens")
@login_required
def create_token() -> Any:
    """Create an API token; its plaintext is shown on this response only."""
    user = login_or_redirect()
    form = TokenForm()
    new_token = None
    if form.validate_on_submit():
        with committed() as done:
            new_token = accounts.create_api_token(db(), user=user, name=form.name.data.strip(),
                                                  now=now())
        if done:
            flash(_("Token created. Copy it now: it will not be shown again."), "success")
            form = TokenForm(formdata=None)
    # The secret must not linger in caches.
    return (_profile_page(user, form, new_token), 201 if new_token else 422,
            {"Cache-Control": "no-store"})


@bp.post("/profile/tokens/<int:token_id>/revoke")
@login_required
def revoke_token(token_id: int) -> Any:
    """Revoke one of the user's tokens."""
    if ActionForm().validate_on_submit():
        with committed() as done:
            accounts.revoke_api_token(db(), user=login_or_redirect(), token_id=token_id,
                                      now=now())
        if done:
            flash(_("Token revoked."), "success")
    return redirect(url_for("web.profile") + "#tokens")
