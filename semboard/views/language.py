"""The reader's language: the footer's chooser (any visitor) and the account's setting."""

from __future__ import annotations

from typing import Any

from flask import abort, current_app, flash, redirect, request, url_for
from flask_babel import gettext as _
from flask_babel import refresh
from flask_login import login_required

from semboard.extensions import csrf
from semboard.i18n.languages import COOKIE, COOKIE_MAX_AGE, known
from semboard.services.people import accounts
from semboard.views.account import settings_page
from semboard.views.auth import safe_next
from semboard.views.common import bp, committed, db, login_or_redirect, me
from semboard.web.account_forms import LanguageForm
from semboard.web.forms import ActionForm


def _remember(response: Any, code: str) -> Any:
    """The chooser's cookie: a year, this site only, never read by scripts."""
    response.set_cookie(COOKIE, code, max_age=COOKIE_MAX_AGE, samesite="Lax", httponly=True,
                        secure=bool(current_app.config.get("SESSION_COOKIE_SECURE")))
    return response


@bp.post("/language")
@csrf.exempt  # checked below for a signed-in visitor only (see the docstring)
def choose_language() -> Any:
    """The footer's chooser (works logged out): a cookie, and the account's language when
    someone is logged in; then back to the page it was sent from. Only a signed-in visitor's
    post (it writes the account) carries the session's CSRF token: a visitor's sets no more
    than their own cookie, and their pages carry no token, so a page kept for every visitor
    (views/boards' _PAGES, a shared cache) never hands one visitor's token to another."""
    code = known(request.form.get("language"))
    user = me()
    if code is None or code != request.form["language"]:
        abort(400)
    if user is not None and not ActionForm().validate_on_submit():
        abort(400)
    if user is not None:
        with committed():
            accounts.set_language(db(), user=user, language=code)
    back = safe_next(request.form.get("next")) or url_for("web.tasks")
    return _remember(redirect(back), code)


@bp.post("/profile/language")
@login_required
def save_language() -> Any:
    """The account's language ("" : each browser's own choice)."""
    form = LanguageForm()
    if form.validate_on_submit():
        with committed() as done:
            accounts.set_language(db(), user=login_or_redirect(), language=form.language.data)
        if done:
            refresh()  # this answer's message in the language just chosen
            flash(_("Language saved."), "success")
            response = redirect(url_for("web.account_settings"))
            return _remember(response, form.language.data) if form.language.data else response
    return settings_page(language=form), 422
