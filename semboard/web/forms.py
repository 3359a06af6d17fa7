"""Flask-WTF forms of the HTML pages (every form carries a CSRF token)."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable
from typing import Any

from flask_wtf import FlaskForm
from flask_wtf.file import FileField, MultipleFileField
from wtforms import (
    BooleanField,
    DateTimeLocalField,
    HiddenField,
    IntegerField,
    PasswordField,
    SelectField,
    StringField,
    SubmitField,
    TextAreaField,
)
from wtforms.validators import (
    AnyOf,
    DataRequired,
    EqualTo,
    InputRequired,
    Length,
    NumberRange,
    Optional,
    Regexp,
    ValidationError,
)

try:  # WTForms 3.3 deprecates (value, label) tuples in favour of SelectChoice
    from wtforms.fields.choices import SelectChoice
except ImportError:  # pragma: no cover - older WTForms
    SelectChoice = None


def options(pairs: Iterable[tuple[Any, str]]) -> list[Any]:
    """Select options from (value, label) pairs, in the form the installed WTForms prefers."""
    if SelectChoice is None:
        return list(pairs)
    return [SelectChoice(value=value, label=label) for value, label in pairs]


# A light shape check only: the accounts service owns the real rules.
EMAIL_SHAPE = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
# The first format renders the field: with seconds, so a 23:59:59 close survives an edit.
UTC_FORMATS = ["%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M:%S", "%Y-%m-%d %H:%M"]
# Browsers offer seconds in a datetime-local input only with a step below a minute.
SECONDS = {"step": "1"}

PHASE_KINDS = options([
    ("trial", "Trial"),
    ("development", "Development"),
    ("evaluation", "Evaluation"),
    ("post-evaluation", "Post-evaluation"),
])
LATE_POLICIES = options([("reject", "Reject late runs"), ("flag", "Accept and flag late (*)")])
VISIBILITIES = options([
    ("public", "Public"),
    ("hidden", "Hidden until published"),
    ("organisers", "Organisers only"),
])


def email_shape(form: FlaskForm, field: StringField) -> None:
    """Reject values that cannot be an e-mail address."""
    if field.data and not EMAIL_SHAPE.match(field.data.strip()):
        raise ValidationError("Enter an e-mail address such as name@example.org.")


class RegisterForm(FlaskForm):
    """Create an account."""

    email = StringField("E-mail", validators=[DataRequired(), Length(max=254), email_shape])
    display_name = StringField("Display name", validators=[DataRequired(), Length(max=80)])
    password = PasswordField(
        "Password",
        validators=[DataRequired(), Length(min=8, max=200, message="At least 8 characters.")],
    )
    confirm = PasswordField(
        "Repeat password", validators=[DataRequired(), EqualTo("password", "Passwords differ.")]
    )
    submit = SubmitField("Create account")


class LoginForm(FlaskForm):
    """Log in with e-mail and password."""

    email = StringField("E-mail", validators=[DataRequired(), Length(max=254)])
    password = PasswordField("Password", validators=[DataRequired()])
    next = HiddenField()
    submit = SubmitField("Log in")


class ActionForm(FlaskForm):
    """A bare POST button (log out, revoke, publish ...): only the CSRF token."""


class TokenForm(FlaskForm):
    """Create an API token."""

    name = StringField("Token name", validators=[DataRequired(), Length(max=80)])
    submit = SubmitField("Create token")


class WorkerTokenForm(FlaskForm):
    """Issue a remote model worker's token for one task's model queue (site admins)."""

    task = SelectField("Task (its model queue)", validators=[DataRequired()])
    name = StringField("Worker name", validators=[DataRequired(), Length(max=120)])
    reason = StringField("Reason (kept in the audit log)", validators=[Length(max=500)])
    submit = SubmitField("Issue token")


class TeamCreateForm(FlaskForm):
    """Create a team for a task (the creator becomes its captain)."""

    name = StringField("Team name", validators=[DataRequired(), Length(max=80)])
    affiliation = StringField("Affiliation", validators=[Optional(), Length(max=200)])
    submit = SubmitField("Create team")


class TeamJoinForm(FlaskForm):
    """Join a team with its captain's invite code."""

    invite_code = StringField("Invite code", validators=[DataRequired(), Length(max=64)])
    submit = SubmitField("Join team")


class UploadRunForm(FlaskForm):
    """Upload a run: a name and its files (one per dataset, or one zip)."""

    phase = SelectField("Phase", validators=[DataRequired()])
    # The submissions service owns the naming rules (a {run} task reads the name from the file
    # names, so it may be left empty); the form only bounds the length.
    name = StringField("Run name", validators=[Optional(), Length(max=100)])
    files = MultipleFileField("Run files")
    # one key per rendered form: a form sent twice (a double click, a retried POST) makes one run
    upload_key = HiddenField(default=lambda: uuid.uuid4().hex)
    submit = SubmitField("Upload run")


class UploadModelForm(FlaskForm):
    """Upload a sentence encoder (the model track): a zip of its Hugging Face folder."""

    phase = SelectField("Phase", validators=[DataRequired()])
    name = StringField("Run name", validators=[Optional(), Length(max=100)])
    model_name = StringField("Model name", validators=[Optional(), Length(max=120)])
    file = FileField("Model (.zip of the folder)")
    prompt = StringField("Prefix before every text", validators=[Optional(), Length(max=200)])
    prompt_name = StringField("Or the folder's prompt by name",
                              validators=[Optional(), Length(max=200)])
    pooling = SelectField("Pooling", validators=[Optional()])
    # encoding settings: checked against the phase's limits by the service (one home), so the
    # form keeps them as text and refusals name the phase's limit
    max_seq_length = StringField("Maximum sequence length (tokens)",
                                 validators=[Optional(), Length(max=12)])
    batch_tokens = StringField("Tokens per batch", validators=[Optional(), Length(max=12)])
    dtype = SelectField("dtype", validators=[Optional()])
    publish = BooleanField("Publish the model's files with its run")
    submit = SubmitField("Upload model")


class PublishModelForm(FlaskForm):
    """Publish ("1") or withdraw ("0") a model's files (a button on the team and run pages)."""

    publish = HiddenField(validators=[AnyOf(("0", "1"))])


class LoadTaskForm(FlaskForm):
    """Load a task from a shipped definition or an uploaded TOML file."""

    shipped = SelectField("Shipped definition", validators=[Optional()])
    definition = FileField("…or upload a TOML definition")
    submit = SubmitField("Load task")


class PhaseForm(FlaskForm):
    """Add or edit a phase of a task."""

    slug = StringField(
        "Slug",
        validators=[DataRequired(), Length(max=40),
                    Regexp(r"^[a-z0-9][a-z0-9-]*$",
                           message="Lower-case letters, digits and dashes.")],
    )
    name = StringField("Name", validators=[DataRequired(), Length(max=120)])
    kind = SelectField("Kind", choices=PHASE_KINDS)
    opens_at = DateTimeLocalField("Opens (UTC)", format=UTC_FORMATS, validators=[InputRequired()],
                                  render_kw=SECONDS)
    closes_at = DateTimeLocalField("Closes (UTC)", format=UTC_FORMATS,
                                   validators=[InputRequired()], render_kw=SECONDS)
    team_window_hours = IntegerField(
        "Per-team window (hours)", validators=[Optional(), NumberRange(min=1, max=10000)]
    )
    max_runs = IntegerField(
        "Max runs per team", validators=[InputRequired(), NumberRange(min=1, max=1000)]
    )
    late_policy = SelectField("Late policy", choices=LATE_POLICIES)
    visibility = SelectField("Leaderboard visibility", choices=VISIBILITIES)
    track = SelectField("Track", validators=[Optional()])
    split = SelectField("Split", validators=[Optional()])
    max_per_day = IntegerField(
        "Uploads per team per day", validators=[Optional(), NumberRange(min=1, max=10000)]
    )
    accepts = SelectField("Teams submit", choices=options([
        ("runs", "Runs (files of scores)"), ("models", "Models (an encoder the site runs)"),
        ("both", "Runs or models")]), default="runs")
    # checked by the service (baselines.models.settings.EncodingRules), JSON here
    model_settings = TextAreaField("Models' encoding rules (JSON)",
                                   validators=[Optional(), Length(max=2000)])
    # services.runs.request_scoring: at most the site's limit counts; empty: the site's
    score_in_request_pairs = IntegerField(
        "Score in the upload request up to (lines)", validators=[Optional(), NumberRange(min=1)]
    )
    submit = SubmitField("Save phase")

    def validate_closes_at(self, field: DateTimeLocalField) -> None:
        """A phase must close after it opens."""
        if self.opens_at.data and field.data and field.data <= self.opens_at.data:
            raise ValidationError("Must be after the opening time.")


class DataUploadForm(FlaskForm):
    """Upload inputs or gold for one dataset."""

    kind = SelectField("What", choices=options([("inputs", "Inputs"), ("gold", "Gold")]))
    dataset = SelectField("Dataset", validators=[DataRequired()])
    split = SelectField("Split", validators=[Optional()])
    file = FileField("File")
    submit = SubmitField("Upload")


class ReferenceFileForm(FlaskForm):
    """Add the organisers' own output file(s) as an unranked baseline row."""

    phase = SelectField("Phase", validators=[DataRequired()])
    # the row takes the name its files carry; a name is needed where they carry none
    name = StringField("Row name (where the file names carry none)",
                       validators=[Optional(), Length(max=100)])
    provenance = StringField("Where the files come from",
                             validators=[Optional(), Length(max=500)])
    files = MultipleFileField("Output files (or one zip)")
    submit = SubmitField("Add as a baseline row")


class GrantForm(FlaskForm):
    """Grant a team a post-deadline fix (†)."""

    team = SelectField("Team", coerce=int)
    phase = SelectField("Phase")
    reason = TextAreaField("Reason", validators=[DataRequired(), Length(max=1000)])
    until = DateTimeLocalField(
        "Fix allowed until (UTC)", format=UTC_FORMATS, validators=[InputRequired()],
        render_kw=SECONDS,
    )
    submit = SubmitField("Grant fix")


class OrganiserForm(FlaskForm):
    """Name a user organiser of a task (site admins only)."""

    task = SelectField("Task")
    email = StringField("User e-mail", validators=[DataRequired(), Length(max=254)])
    submit = SubmitField("Name organiser")


class AccountStateForm(FlaskForm):
    """Deactivate or reactivate an account by e-mail (site admins only)."""

    email = StringField("User e-mail", validators=[DataRequired(), Length(max=254)])
    # the button pressed: "0" deactivates, "1" reactivates
    active = StringField("Active", default="0")
