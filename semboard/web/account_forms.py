"""Forms of the account pages: forgotten password, reset, new password or e-mail, switches."""

from __future__ import annotations

from flask_babel import lazy_gettext as _l
from wtforms import BooleanField, PasswordField, SelectField, StringField, SubmitField
from wtforms.validators import DataRequired, EqualTo, Length

from semboard.i18n.languages import LANGUAGES
from semboard.web.forms import Form as FlaskForm
from semboard.web.forms import email_shape, options

_NEW_PASSWORD = [DataRequired(), Length(min=8, max=200, message=_l("At least 8 characters."))]


class ForgotPasswordForm(FlaskForm):
    """Ask for a reset link."""

    email = StringField(_l("E-mail"), validators=[DataRequired(), Length(max=254), email_shape])
    submit = SubmitField(_l("Send me a reset link"))


class ResetPasswordForm(FlaskForm):
    """Choose a new password from a reset link."""

    password = PasswordField(_l("New password"), validators=_NEW_PASSWORD)
    confirm = PasswordField(_l("Repeat new password"), validators=[
        DataRequired(), EqualTo("password", _l("Passwords differ."))])
    submit = SubmitField(_l("Set password"))


class ChangePasswordForm(FlaskForm):
    """A new password, given the current one."""

    current = PasswordField(_l("Current password"), validators=[DataRequired()])
    password = PasswordField(_l("New password"), validators=_NEW_PASSWORD)
    confirm = PasswordField(_l("Repeat new password"), validators=[
        DataRequired(), EqualTo("password", _l("Passwords differ."))])
    submit = SubmitField(_l("Change password"))


class ChangeEmailForm(FlaskForm):
    """A new e-mail address, given the password."""

    email = StringField(_l("New e-mail"),
                        validators=[DataRequired(), Length(max=254), email_shape])
    password = PasswordField(_l("Password"), validators=[DataRequired()])
    submit = SubmitField(_l("Change e-mail"))


class NotificationsForm(FlaskForm):
    """Which notifications to receive."""

    notify_runs = BooleanField(_l("A run of my team was scored or rejected"))
    notify_deadlines = BooleanField(_l("My team's deadline is 24 hours away"))
    notify_gold = BooleanField(_l("The gold of a task I take part in is released"))
    notify_results = BooleanField(_l("Results of a phase are published"))
    submit = SubmitField(_l("Save notifications"))


class DeleteAccountForm(FlaskForm):
    """Delete my account, given my password."""

    password = PasswordField(_l("Password"), validators=[DataRequired()])
    submit = SubmitField(_l("Delete my account"))


class LanguageForm(FlaskForm):
    """The account's language (empty: each browser's own, by cookie or Accept-Language)."""

    language = SelectField(_l("Language of pages and e-mail"), choices=options(
        [("", _l("Automatic (this browser's choice)")),
         *((code, name) for code, (name, _) in LANGUAGES.items())]))
    submit = SubmitField(_l("Save language"))
