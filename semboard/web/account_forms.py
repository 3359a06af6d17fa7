"""Forms of the account pages: forgotten password, reset, new password or e-mail, switches."""

from __future__ import annotations

from flask_wtf import FlaskForm
from wtforms import BooleanField, PasswordField, StringField, SubmitField
from wtforms.validators import DataRequired, EqualTo, Length

from semboard.web.forms import email_shape

_NEW_PASSWORD = [DataRequired(), Length(min=8, max=200, message="At least 8 characters.")]


class ForgotPasswordForm(FlaskForm):
    """Ask for a reset link."""

    email = StringField("E-mail", validators=[DataRequired(), Length(max=254), email_shape])
    submit = SubmitField("Send me a reset link")


class ResetPasswordForm(FlaskForm):
    """Choose a new password from a reset link."""

    password = PasswordField("New password", validators=_NEW_PASSWORD)
    confirm = PasswordField("Repeat new password",
                            validators=[DataRequired(), EqualTo("password", "Passwords differ.")])
    submit = SubmitField("Set password")


class ChangePasswordForm(FlaskForm):
    """A new password, given the current one."""

    current = PasswordField("Current password", validators=[DataRequired()])
    password = PasswordField("New password", validators=_NEW_PASSWORD)
    confirm = PasswordField("Repeat new password",
                            validators=[DataRequired(), EqualTo("password", "Passwords differ.")])
    submit = SubmitField("Change password")


class ChangeEmailForm(FlaskForm):
    """A new e-mail address, given the password."""

    email = StringField("New e-mail", validators=[DataRequired(), Length(max=254), email_shape])
    password = PasswordField("Password", validators=[DataRequired()])
    submit = SubmitField("Change e-mail")


class NotificationsForm(FlaskForm):
    """Which notifications to receive."""

    notify_runs = BooleanField("A run of my team was scored or rejected")
    notify_deadlines = BooleanField("My team's deadline is 24 hours away")
    notify_gold = BooleanField("The gold of a task I take part in is released")
    notify_results = BooleanField("Results of a phase are published")
    submit = SubmitField("Save notifications")


class DeleteAccountForm(FlaskForm):
    """Delete my account, given my password."""

    password = PasswordField("Password", validators=[DataRequired()])
    submit = SubmitField("Delete my account")
