"""Flask-WTF forms of the HTML pages (every form carries a CSRF token)."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable
from typing import Any

from flask_babel import get_translations
from flask_babel import lazy_gettext as _l
from flask_wtf import FlaskForm as WTFForm
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

from semboard.i18n.languages import N_, N_plural

try:  # WTForms 3.3 deprecates (value, label) tuples in favour of SelectChoice
    from wtforms.fields.choices import SelectChoice
except ImportError:  # pragma: no cover - older WTForms
    SelectChoice = None


def options(pairs: Iterable[tuple[Any, str]]) -> list[Any]:
    """Select options from (value, label) pairs, in the form the installed WTForms prefers."""
    if SelectChoice is None:
        return list(pairs)
    return [SelectChoice(value=value, label=label) for value, label in pairs]


class _Translations:
    """WTForms' own messages ("This field is required.") through the site's catalogue, in the
    reader's language (WTForms fills in their values itself)."""

    def gettext(self, string: str) -> str:
        return str(get_translations().ugettext(string))

    def ngettext(self, singular: str, plural: str, n: int) -> str:
        return str(get_translations().ungettext(singular, plural, n))


_TRANSLATIONS = _Translations()


class Form(WTFForm):
    """Every form of the site: Flask-WTF's, its WTForms messages in the reader's language."""

    class Meta(WTFForm.Meta):
        def get_translations(self, form: Any) -> _Translations:
            return _TRANSLATIONS


FlaskForm = Form

# WTForms' messages the site's fields can show (their text is WTForms'): in the catalogues.
WTFORMS_MESSAGES = (
    N_("This field is required."), N_("Not a valid choice."), N_("Not a valid integer value."),
    N_("Not a valid datetime value."), N_("Number must be at least %(min)s."),
    N_("Number must be at most %(max)s."), N_("Number must be between %(min)s and %(max)s."),
    N_("Invalid input."), N_("Invalid value, must be one of: %(values)s."),
    N_("Field must be between %(min)d and %(max)d characters long."),
    N_("Invalid Choice: could not coerce."),
)
WTFORMS_PLURALS = (
    N_plural("Field cannot be longer than %(max)d character.",
             "Field cannot be longer than %(max)d characters."),
    N_plural("Field must be at least %(min)d character long.",
             "Field must be at least %(min)d characters long."),
)


# A light shape check only: the accounts service owns the real rules.
EMAIL_SHAPE = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
# The first format renders the field: with seconds, so a 23:59:59 close survives an edit.
UTC_FORMATS = ["%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M:%S", "%Y-%m-%d %H:%M"]
# Browsers offer seconds in a datetime-local input only with a step below a minute.
SECONDS = {"step": "1"}

PHASE_KINDS = options([
    ("trial", _l("Trial")),
    ("development", _l("Development")),
    ("evaluation", _l("Evaluation")),
    ("post-evaluation", _l("Post-evaluation")),
])
LATE_POLICIES = options([("reject", _l("Reject late runs")),
                         ("flag", _l("Accept and flag late (*)"))])
VISIBILITIES = options([
    ("public", _l("Public")),
    ("hidden", _l("Hidden until published")),
    ("organisers", _l("Organisers only")),
])


def email_shape(form: FlaskForm, field: StringField) -> None:
    """Reject values that cannot be an e-mail address."""
    if field.data and not EMAIL_SHAPE.match(field.data.strip()):
        raise ValidationError(_l("Enter an e-mail address such as name@example.org."))


class RegisterForm(FlaskForm):
    """Create an account."""

    email = StringField(_l("E-mail"), validators=[DataRequired(), Length(max=254), email_shape])
    display_name = StringField(_l("Display name"), validators=[DataRequired(), Length(max=80)])
    password = PasswordField(
        _l("Password"),
        validators=[DataRequired(), Length(min=8, max=200, message=_l("At least 8 characters."))],
    )
    confirm = PasswordField(
        _l("Repeat password"),
        validators=[DataRequired(), EqualTo("password", _l("Passwords differ."))],
    )
    submit = SubmitField(_l("Create account"))


class LoginForm(FlaskForm):
    """Log in with e-mail and password."""

    email = StringField(_l("E-mail"), validators=[DataRequired(), Length(max=254)])
    password = PasswordField(_l("Password"), validators=[DataRequired()])
    next = HiddenField()
    submit = SubmitField(_l("Log in"))


class ActionForm(FlaskForm):
    """A bare POST button (log out, revoke, publish ...): only the CSRF token."""


class TokenForm(FlaskForm):
    """Create an API token."""

    name = StringField(_l("Token name"), validators=[DataRequired(), Length(max=80)])
    submit = SubmitField(_l("Create token"))


class WorkerTokenForm(FlaskForm):
    """Issue a remote model worker's token for one task's model queue (site admins)."""

    task = SelectField(_l("Task (its model queue)"), validators=[DataRequired()])
    name = StringField(_l("Worker name"), validators=[DataRequired(), Length(max=120)])
    reason = StringField(_l("Reason (kept in the audit log)"), validators=[Length(max=500)])
    submit = SubmitField(_l("Issue token"))


class TeamCreateForm(FlaskForm):
    """Create a team for a task (the creator becomes its captain)."""

    name = StringField(_l("Team name"), validators=[DataRequired(), Length(max=80)])
    affiliation = StringField(_l("Affiliation"), validators=[Optional(), Length(max=200)])
    submit = SubmitField(_l("Create team"))


class TeamJoinForm(FlaskForm):
    """Join a team with its captain's invite code."""

    invite_code = StringField(_l("Invite code"), validators=[DataRequired(), Length(max=64)])
    submit = SubmitField(_l("Join team"))


class UploadRunForm(FlaskForm):
    """Upload a run: a name and its files (one per dataset, or one zip)."""

    phase = SelectField(_l("Phase"), validators=[DataRequired()])
    # The submissions service owns the naming rules (a {run} task reads the name from the file
    # names, so it may be left empty); the form only bounds the length.
    name = StringField(_l("Run name"), validators=[Optional(), Length(max=100)])
    files = MultipleFileField(_l("Run files"))
    # one key per rendered form: a form sent twice (a double click, a retried POST) makes one run
    upload_key = HiddenField(default=lambda: uuid.uuid4().hex)
    submit = SubmitField(_l("Upload run"))


class UploadModelForm(FlaskForm):
    """Upload a sentence encoder (the model track): a zip of its Hugging Face folder."""

    phase = SelectField(_l("Phase"), validators=[DataRequired()])
    name = StringField(_l("Run name"), validators=[Optional(), Length(max=100)])
    model_name = StringField(_l("Model name"), validators=[Optional(), Length(max=120)])
    file = FileField(_l("Model (.zip of the folder)"))
    prompt = StringField(_l("Prefix before every text"),
                         validators=[Optional(), Length(max=2000)])
    prompt_name = StringField(_l("Or the folder's prompt by name"),
                              validators=[Optional(), Length(max=200)])
    pooling = SelectField(_l("Pooling"), validators=[Optional()])
    # encoding settings: checked against the phase's limits by the service (one home), so the
    # form keeps them as text and refusals name the phase's limit
    max_seq_length = StringField(_l("Maximum sequence length (tokens)"),
                                 validators=[Optional(), Length(max=12)])
    batch_tokens = StringField(_l("Tokens per batch"), validators=[Optional(), Length(max=12)])
    dtype = SelectField(_l("dtype"), validators=[Optional()])
    # the training-data declaration's text (bounded by the service: 4,000 characters); its
    # answers are the definition's questions' fields, training_<key>
    training_data = TextAreaField(_l("What the model was trained on"),
                                  validators=[Optional(), Length(max=4000)])
    publish = BooleanField(_l("Publish the model's files with its run"))
    submit = SubmitField(_l("Upload model"))


class PublishModelForm(FlaskForm):
    """Publish ("1") or withdraw ("0") a model's files (a button on the team and run pages)."""

    publish = HiddenField(validators=[AnyOf(("0", "1"))])


class LoadTaskForm(FlaskForm):
    """Load a task from a shipped definition or an uploaded TOML file."""

    shipped = SelectField(_l("Shipped definition"), validators=[Optional()])
    definition = FileField(_l("…or upload a TOML definition"))
    submit = SubmitField(_l("Load task"))


class PhaseForm(FlaskForm):
    """Add or edit a phase of a task."""

    slug = StringField(
        _l("Slug"),
        validators=[DataRequired(), Length(max=40),
                    Regexp(r"^[a-z0-9][a-z0-9-]*$",
                           message=_l("Lower-case letters, digits and dashes."))],
    )
    name = StringField(_l("Name"), validators=[DataRequired(), Length(max=120)])
    kind = SelectField(_l("Kind"), choices=PHASE_KINDS)
    opens_at = DateTimeLocalField(_l("Opens (UTC)"), format=UTC_FORMATS,
                                  validators=[InputRequired()],
                                  render_kw=SECONDS)
    closes_at = DateTimeLocalField(_l("Closes (UTC)"), format=UTC_FORMATS,
                                   validators=[InputRequired()], render_kw=SECONDS)
    team_window_hours = IntegerField(
        _l("Per-team window (hours)"), validators=[Optional(), NumberRange(min=1, max=10000)]
    )
    # services.tasks.participation: teams formed and terms accepted by then (issue 44)
    entry_deadline = DateTimeLocalField(_l("Entry deadline (UTC)"), format=UTC_FORMATS,
                                        validators=[Optional()], render_kw=SECONDS)
    max_runs = IntegerField(
        _l("Max runs per team"), validators=[InputRequired(), NumberRange(min=1, max=1000)]
    )
    late_policy = SelectField(_l("Late policy"), choices=LATE_POLICIES)
    visibility = SelectField(_l("Leaderboard visibility"), choices=VISIBILITIES)
    track = SelectField(_l("Track"), validators=[Optional()])
    split = SelectField(_l("Split"), validators=[Optional()])
    max_per_day = IntegerField(
        _l("Uploads per team per day"), validators=[Optional(), NumberRange(min=1, max=10000)]
    )
    accepts = SelectField(_l("Teams submit"), choices=options([
        ("runs", _l("Runs (files of scores)")), ("models", _l("Models (an encoder the site runs)")),
        ("both", _l("Runs or models"))]), default="runs")
    # checked by the service (baselines.models.settings.EncodingRules), JSON here
    model_settings = TextAreaField(_l("Models' encoding rules (JSON)"),
                                   validators=[Optional(), Length(max=2000)])
    # services.runs.request_scoring: at most the site's limit counts; empty: the site's
    score_in_request_pairs = IntegerField(
        _l("Score in the upload request up to (lines)"), validators=[Optional(), NumberRange(min=1)]
    )
    submit = SubmitField(_l("Save phase"))

    def validate_closes_at(self, field: DateTimeLocalField) -> None:
        """A phase must close after it opens."""
        if self.opens_at.data and field.data and field.data <= self.opens_at.data:
            raise ValidationError(_l("Must be after the opening time."))


class DataUploadForm(FlaskForm):
    """Upload inputs or gold for one dataset."""

    kind = SelectField(_l("What"),
                       choices=options([("inputs", _l("Inputs")), ("gold", _l("Gold"))]))
    dataset = SelectField(_l("Dataset"), validators=[DataRequired()])
    split = SelectField(_l("Split"), validators=[Optional()])
    file = FileField(_l("File"))
    submit = SubmitField(_l("Upload"))


class ReferenceFileForm(FlaskForm):
    """Add the organisers' own output file(s) as an unranked baseline row."""

    phase = SelectField(_l("Phase"), validators=[DataRequired()])
    # the row takes the name its files carry; a name is needed where they carry none
    name = StringField(_l("Row name (where the file names carry none)"),
                       validators=[Optional(), Length(max=100)])
    provenance = StringField(_l("Where the files come from"),
                             validators=[Optional(), Length(max=500)])
    files = MultipleFileField(_l("Output files (or one zip)"))
    submit = SubmitField(_l("Add as a baseline row"))


class GrantForm(FlaskForm):
    """Grant a team a post-deadline fix (†)."""

    team = SelectField(_l("Team"), coerce=int)
    phase = SelectField(_l("Phase"))
    reason = TextAreaField(_l("Reason"), validators=[DataRequired(), Length(max=1000)])
    until = DateTimeLocalField(
        _l("Fix allowed until (UTC)"), format=UTC_FORMATS, validators=[InputRequired()],
        render_kw=SECONDS,
    )
    submit = SubmitField(_l("Grant fix"))


class OrganiserForm(FlaskForm):
    """Name a user organiser of a task (site admins only)."""

    task = SelectField(_l("Task"))
    email = StringField(_l("User e-mail"), validators=[DataRequired(), Length(max=254)])
    submit = SubmitField(_l("Name organiser"))


class AccountStateForm(FlaskForm):
    """Deactivate or reactivate an account by e-mail (site admins only)."""

    email = StringField(_l("User e-mail"), validators=[DataRequired(), Length(max=254)])
    # the button pressed: "0" deactivates, "1" reactivates
    active = StringField(_l("Active"), default="0")
