"""Account pages: verify e-mail, forgotten password and reset, settings, team management."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from flask import flash, redirect, render_template, request, url_for
from flask_babel import gettext as _
from flask_babel import ngettext
from flask_login import login_required

from semboard.errors import DomainError
from semboard.mail.delivery import mail_available
from semboard.services.people import account_links, accounts, ratelimit, team_rules, teams
from semboard.views.common import (
    bp,
    client_address,
    committed,
    current_session_key,
    db,
    flash_error,
    limits,
    log_in,
    log_out,
    login_or_redirect,
    me,
    now,
    sentence,
)
from semboard.web.account_forms import (
    ChangeEmailForm,
    ChangePasswordForm,
    DeleteAccountForm,
    ForgotPasswordForm,
    LanguageForm,
    NotificationsForm,
    ResetPasswordForm,
)
from semboard.web.forms import ActionForm
from semboard.web.hardening import bounded_id

RESET_WINDOW = timedelta(hours=1)


def _reset_allowed(email: str) -> bool:
    """Count a reset request for this address and from this client (both limited)."""
    session, rules, at = db(), limits(), now()
    by_address = ratelimit.hit(session, key=f"reset-addr:{client_address() or 'unknown'}",
                               limit=rules.reset_requests_per_address_per_hour, per=RESET_WINDOW,
                               now=at)
    return by_address and ratelimit.hit(session, key=f"reset:{email}",
                                        limit=rules.resets_per_hour, per=RESET_WINDOW, now=at)


@bp.route("/forgot-password", methods=["GET", "POST"])
def forgot_password() -> Any:
    """Ask for a reset link (the answer never reveals whether the account exists)."""
    form = ForgotPasswordForm()
    available = mail_available()
    if available and form.validate_on_submit():
        email = form.email.data.strip().lower()
        with committed() as done:
            # over a limit the answer is the same: it must not tell which addresses are known
            if _reset_allowed(email):
                account_links.request_reset(db(), email=email, now=now())
        if done:
            flash(_("If an account uses that address, a reset link is on its way."), "info")
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
        return render_template("auth/reset_password.html", form=None, problem=sentence(err)), 410
    if form.validate_on_submit():
        with committed() as done:
            user = account_links.reset_password(db(), token=token, password=form.password.data,
                                                now=now())
        if done:
            log_in(user)
            flash(_("Your password is changed, every other session and API token ended, and "
                    "you are logged in."), "success")
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
            flash(_("Your e-mail address is confirmed."), "success")
    return redirect(url_for("web.account_settings") if me() else url_for("web.login"))


def settings_page(**forms: Any) -> Any:
    """The account settings page, with the forms given (refused ones show their errors)."""
    user = me()
    assert user is not None
    notifications = forms.get("notifications") or NotificationsForm(
        formdata=None, data={k: getattr(user, k) for k in account_links.NOTIFICATION_SWITCHES})
    return render_template(
        "auth/account_settings.html", user=user, mail=mail_available(),
        password_form=forms.get("password") or ChangePasswordForm(formdata=None),
        email_form=forms.get("email") or ChangeEmailForm(formdata=None),
        notifications_form=notifications, action=ActionForm(),
        language_form=forms.get("language") or LanguageForm(
            formdata=None, data={"language": user.language or ""}),
        delete_form=forms.get("delete") or DeleteAccountForm(formdata=None),
    )


@bp.get("/profile/account")
@login_required
def account_settings() -> Any:
    """Password, e-mail and notification settings."""
    return settings_page()


@bp.post("/profile/password")
@login_required
def change_password() -> Any:
    """Change the password."""
    form = ChangePasswordForm()
    if form.validate_on_submit():
        with committed() as done:
            account_links.change_password(
                db(), user=login_or_redirect(), current=form.current.data, new=form.password.data,
                now=now(), keep_session=current_session_key(), remote_addr=client_address(),
                limits=limits())
        if done:
            flash(_("Password changed; your other sessions are logged out."), "success")
            return redirect(url_for("web.account_settings"))
    return settings_page(password=form), 422


@bp.post("/profile/email")
@login_required
def change_email() -> Any:
    """Change the e-mail address (a confirmation link goes to the new one)."""
    form = ChangeEmailForm()
    if form.validate_on_submit():
        with committed() as done:
            account_links.change_email(db(), user=login_or_redirect(), password=form.password.data,
                                       email=form.email.data, now=now(),
                                       remote_addr=client_address(), limits=limits())
        if done:
            flash(_("E-mail changed. Confirm it with the link we sent.") if mail_available()
                  else _("E-mail changed."), "success")
            return redirect(url_for("web.account_settings"))
    return settings_page(email=form), 422


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
            flash(_("Notifications saved."), "success")
            return redirect(url_for("web.account_settings"))
    return settings_page(notifications=form), 422


@bp.post("/profile/verify")
@login_required
def resend_verification() -> Any:
    """Send a new confirmation link."""
    if ActionForm().validate_on_submit() and mail_available():
        with committed() as done:
            account_links.send_verification(db(), user=login_or_redirect(), now=now())
        if done:
            flash(_("A confirmation link is on its way."), "info")
    return redirect(url_for("web.account_settings"))


@bp.post("/profile/sessions/end")
@login_required
def end_other_sessions() -> Any:
    """Log out everywhere else: every other log-in session of the account ends."""
    if ActionForm().validate_on_submit():
        with committed() as done:
            ended = accounts.end_sessions(db(), user=login_or_redirect(),
                                          keep=current_session_key())
        if done:
            flash(ngettext("Logged out everywhere else (%(num)d other session ended).",
                           "Logged out everywhere else (%(num)d other sessions ended).", ended),
                  "success")
    return redirect(url_for("web.account_settings"))


@bp.post("/profile/delete")
@login_required
def delete_account() -> Any:
    """Delete my account, given my password: runs stay on the boards under their team."""
    user = login_or_redirect()
    form = DeleteAccountForm()
    if form.validate_on_submit():
        with committed() as done:
            accounts.verify_password(db(), user=user, password=form.password.data, now=now(),
                                     remote_addr=client_address(), limits=limits())
            accounts.delete_account(db(), user=user, now=now())
        if done:
            log_out()
            flash(_("Your account is deleted. Your team's runs stay on the boards."), "info")
            return redirect(url_for("web.tasks"))
    return settings_page(delete=form), 422


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
            member_id = bounded_id(request.form.get("user_id", ""), "user_id")
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
    messages = {"leave": _("You left the team."), "code": _("New invite code made."),
                "remove": _("Member removed."), "captain": _("Captaincy handed over.")}
    if done:
        flash(messages[action], "success")
    if done and action == "leave":
        return redirect(url_for("web.profile"))
    return redirect(url_for("web.team", team_id=team_id))
