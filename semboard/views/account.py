"""Account pages: verify e-mail, forgotten password and reset, settings, team management."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from flask import flash, redirect, render_template, request, url_for
from flask_login import login_required, login_user

from semboard.errors import DomainError
from semboard.mail.delivery import mail_available
from semboard.services import account_links, ratelimit, team_rules, teams
from semboard.views.common import bp, committed, db, flash_error, login_or_redirect, me, now
from semboard.web.account_forms import (
    ChangeEmailForm,
    ChangePasswordForm,
    ForgotPasswordForm,
    NotificationsForm,
    ResetPasswordForm,
)
from semboard.web.forms import ActionForm

RESETS_PER_HOUR = 3


@bp.route("/forgot-password", methods=["GET", "POST"])
def forgot_password() -> Any:
    """Ask for a reset link (the answer never reveals whether the account exists)."""
    form = ForgotPasswordForm()
    available = mail_available()
    if available and form.validate_on_submit():
        email = form.email.data.strip().lower()
        with committed() as done:
            if ratelimit.hit(db(), key=f"reset:{email}", limit=RESETS_PER_HOUR,
                             per=timedelta(hours=1), now=now()):
                account_links.request_reset(db(), email=email, now=now())
        if done:
            flash("If an account uses that address, a reset link is on its way.", "info")
            return redirect(url_for("web.login"))
    status = 200 if request.method == "GET" or not available else 422
    return render_template("auth/forgot_password.html", form=form, available=available), status


@bp.route("/reset-password/<token>", methods=["GET", "POST"])
def reset_password(token: str) -> Any:
    """Choose a new password from an e-mailed link (single use, expiring)."""
    form = ResetPasswordForm()
    try:
        account_links.check_reset_token(db(), token=token, now=now())
    except DomainError as err:
        return render_template("auth/reset_password.html", form=None, problem=str(err)), 410
    if form.validate_on_submit():
        with committed() as done:
            user = account_links.reset_password(db(), token=token, password=form.password.data,
                                                now=now())
        if done:
            login_user(user)
            flash("Your password is changed and you are logged in.", "success")
            return redirect(url_for("web.profile"))
    status = 200 if request.method == "GET" else 422
    return (render_template("auth/reset_password.html", form=form, problem=None), status,
            {"Referrer-Policy": "no-referrer"})


@bp.get("/verify-email/<token>")
def verify_email_link(token: str) -> Any:
    """Show a confirm button (a GET never writes; mail scanners follow links)."""
    return render_template("auth/verify_email.html", token=token, action=ActionForm())


@bp.post("/verify-email/<token>")
def verify_email(token: str) -> Any:
    """Confirm the address of an e-mailed link."""
    if ActionForm().validate_on_submit():
        with committed() as done:
            account_links.verify_email(db(), token=token, now=now())
        if done:
            flash("Your e-mail address is confirmed.", "success")
    return redirect(url_for("web.account_settings") if me() else url_for("web.login"))


def _settings_page(**forms: Any) -> Any:
    user = me()
    assert user is not None
    notifications = forms.get("notifications") or NotificationsForm(
        formdata=None, data={k: getattr(user, k) for k in account_links.NOTIFICATION_SWITCHES})
    return render_template(
        "auth/account_settings.html", user=user, mail=mail_available(),
        password_form=forms.get("password") or ChangePasswordForm(formdata=None),
        email_form=forms.get("email") or ChangeEmailForm(formdata=None),
        notifications_form=notifications, action=ActionForm(),
    )


@bp.get("/profile/account")
@login_required
def account_settings() -> Any:
    """Password, e-mail and notification settings."""
    return _settings_page()


@bp.post("/profile/password")
@login_required
def change_password() -> Any:
    """Change the password."""
    form = ChangePasswordForm()
    if form.validate_on_submit():
        with committed() as done:
            account_links.change_password(db(), user=login_or_redirect(), current=form.current.data,
                                          new=form.password.data)
        if done:
            flash("Password changed.", "success")
            return redirect(url_for("web.account_settings"))
    return _settings_page(password=form), 422


@bp.post("/profile/email")
@login_required
def change_email() -> Any:
    """Change the e-mail address (a confirmation link goes to the new one)."""
    form = ChangeEmailForm()
    if form.validate_on_submit():
        with committed() as done:
            account_links.change_email(db(), user=login_or_redirect(), password=form.password.data,
                                       email=form.email.data, now=now())
        if done:
            flash("E-mail changed." + (" Confirm it with the link we sent."
                                       if mail_available() else ""), "success")
            return redirect(url_for("web.account_settings"))
    return _settings_page(email=form), 422


@bp.post("/profile/notifications")
@login_required
def save_notifications() -> Any:
    """Switch notification kinds on or off."""
    form = NotificationsForm()
    if form.validate_on_submit():
        with committed() as done:
            account_links.set_notifications(
                db(), user=login_or_redirect(), **{k: getattr(form, k).data
                                    for k in account_links.NOTIFICATION_SWITCHES})
        if done:
            flash("Notifications saved.", "success")
            return redirect(url_for("web.account_settings"))
    return _settings_page(notifications=form), 422


@bp.post("/profile/verify")
@login_required
def resend_verification() -> Any:
    """Send a new confirmation link."""
    if ActionForm().validate_on_submit() and mail_available():
        with committed() as done:
            account_links.send_verification(db(), user=login_or_redirect(), now=now())
        if done:
            flash("A confirmation link is on its way.", "info")
    return redirect(url_for("web.account_settings"))


# ----------------------------------------------------------------------------- team management


def _team_action(team_id: int, action: str) -> Any:
    user = login_or_redirect()
    team = teams.get_team(db(), team_id)
    with committed() as done:
        if action == "leave":
            team_rules.leave(db(), team=team, user=user, now=now())
        elif action == "code":
            team_rules.regenerate_invite_code(db(), team=team, captain=user, now=now())
        else:
            member_id = int(request.form.get("user_id", "0") or 0)
            if action == "remove":
                team_rules.remove_member(db(), team=team, captain=user, user_id=member_id,
                                         now=now())
            else:
                team_rules.transfer_captaincy(db(), team=team, captain=user, user_id=member_id,
                                              now=now())
    return done


@bp.post("/teams/<int:team_id>/manage/<action>")
@login_required
def manage_team(team_id: int, action: str) -> Any:
    """Leave, new invite code, remove a member, hand over the captaincy (CSRF-protected)."""
    if action not in ("leave", "code", "remove", "captain"):
        return redirect(url_for("web.team", team_id=team_id))
    if not ActionForm().validate_on_submit():
        flash_error(DomainError("the form expired; try again"))
        return redirect(url_for("web.team", team_id=team_id))
    try:
        done = _team_action(team_id, action)
    except (DomainError, ValueError) as err:
        flash_error(err if isinstance(err, DomainError) else DomainError("bad member"))
        return redirect(url_for("web.profile"))
    messages = {"leave": "You left the team.", "code": "New invite code made.",
                "remove": "Member removed.", "captain": "Captaincy handed over."}
    if done:
        flash(messages[action], "success")
    if done and action == "leave":
        return redirect(url_for("web.profile"))
    return redirect(url_for("web.team", team_id=team_id))
