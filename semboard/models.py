"""SQLAlchemy 2 typed models of the site; integrity lives in constraints, never in config."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from typing import Any, ClassVar

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    CheckConstraint,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Text,
    UniqueConstraint,
    and_,
    event,
    false,
    text,
    true,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase, Mapped, declared_attr, mapped_column, relationship
from sqlalchemy.sql.elements import ColumnElement
from sqlalchemy.types import TypeDecorator

# Stable constraint names so alembic revisions name the same thing on every database.
NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

PHASE_KINDS = ("trial", "development", "evaluation", "post-evaluation")
LATE_POLICIES = ("reject", "flag")
VISIBILITIES = ("public", "hidden", "organisers")
RUN_STATUSES = ("received", "valid", "scored", "error")
UPLOAD_OUTCOMES = ("accepted", "rejected")
# What a phase takes: uploaded runs, encoders the site runs itself (the model track), or both.
PHASE_ACCEPTS = ("runs", "models", "both")
# Which runs a phase ranks: every run (the default), or one primary run per team (the others
# are contrastive: listed unranked).
PHASE_RANKINGS = ("every", "primary")
MODEL_STATUSES = ("queued", "running", "failed", "done")
# why a model failed, one word a client can act on (jobs.models: the failure classes)
MODEL_FAILURES = ("refused", "too_slow", "out_of_memory", "worker_lost", "cancelled", "internal")
# a model upload in parts: receiving parts, being joined and checked, and how it ended
UPLOAD_STATES = ("open", "finishing", "finished", "refused", "cancelled", "expired")
# When a phase's private scores (and a frozen board's live state) are revealed: at the phase's
# close, or when its results are published (by hand or at its publish time).
REVEALS = ("close", "publish")
# The parts of a split test set a score is computed on (evaluation.parts.SCORED_PARTS), and the
# boards stored beside a phase's live one (services.boards.reveal).
SCORE_PARTS = ("public", "private", "whole")
PART_BOARDS = ("frozen", "private", "whole", "shakeup")
# Byte counts of models pass 2 GiB: 64-bit on PostgreSQL (SQLite's INTEGER already is).
BYTES = BigInteger().with_variant(Integer(), "sqlite")


class UTCDateTime(TypeDecorator[datetime]):
    """A timezone-aware UTC datetime on every backend (SQLite drops tzinfo; this restores it)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        """Refuse naive datetimes and store UTC."""
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError(f"naive datetime {value!r}: semboard stores only UTC-aware times")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        """Return an aware UTC datetime."""
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


def _in(column: str, values: tuple[str, ...]) -> str:
    """A CHECK expression limiting a column to a fixed set of strings."""
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


class Base(DeclarativeBase):
    """Declarative base with the naming convention."""

    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map: ClassVar[dict[Any, Any]] = {
        datetime: UTCDateTime(),
        dict[str, Any]: JSON(),
        list[Any]: JSON(),
    }


class User(Base):
    """A person with an account (participant, organiser or site admin)."""

    __tablename__ = "user_account"

    id: Mapped[int] = mapped_column(primary_key=True)
    email: Mapped[str] = mapped_column(String(254), unique=True)
    display_name: Mapped[str] = mapped_column(String(120))
    password_hash: Mapped[str] = mapped_column(String(255))
    is_admin: Mapped[bool] = mapped_column(Boolean, default=False)
    is_active_account: Mapped[bool] = mapped_column(Boolean, default=True)
    created_at: Mapped[datetime]
    # Accounts and e-mail (issue 12): verification, and each notification switchable.
    email_verified_at: Mapped[datetime | None]
    notify_runs: Mapped[bool] = mapped_column(Boolean, default=True, server_default=true())
    notify_deadlines: Mapped[bool] = mapped_column(Boolean, default=True, server_default=true())
    notify_gold: Mapped[bool] = mapped_column(Boolean, default=True, server_default=true())
    notify_results: Mapped[bool] = mapped_column(Boolean, default=True, server_default=true())
    # Set when the owner deleted the account: the row stays (runs name it), its personal data goes.
    deleted_at: Mapped[datetime | None]
    # The language the account chose (issue 43): its pages and its mail; None: negotiated.
    language: Mapped[str | None] = mapped_column(String(8))

    tokens: Mapped[list[ApiToken]] = relationship(back_populates="user")

    # Flask-Login protocol (kept here so no adapter class is needed).
    @property
    def is_authenticated(self) -> bool:
        """Flask-Login: a loaded user is authenticated."""
        return True

    @property
    def is_active(self) -> bool:
        """Flask-Login: deactivated accounts cannot log in."""
        return self.is_active_account

    @property
    def is_anonymous(self) -> bool:
        """Flask-Login: never anonymous."""
        return False

    def get_id(self) -> str:
        """Flask-Login: the session identifier."""
        return str(self.id)


class ApiToken(Base):
    """An API token; only its sha256 is stored, the plaintext is shown once."""

    __tablename__ = "api_token"

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("user_account.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(120))
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    prefix: Mapped[str] = mapped_column(String(12))
    created_at: Mapped[datetime]
    last_used_at: Mapped[datetime | None]
    revoked_at: Mapped[datetime | None]

    user: Mapped[User] = relationship(back_populates="tokens")


class Task(Base):
    """A shared task loaded from its TOML definition (the text is kept, so edits never leak in)."""

    __tablename__ = "task"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(64), unique=True)
    title: Mapped[str] = mapped_column(String(255))
    description: Mapped[str] = mapped_column(Text, default="")
    definition_text: Mapped[str] = mapped_column(Text)
    definition_digest: Mapped[str] = mapped_column(String(64))
    gold_released_at: Mapped[datetime | None]
    gold_released_by_id: Mapped[int | None] = mapped_column(ForeignKey("user_account.id"))
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]

    phases: Mapped[list[Phase]] = relationship(
        back_populates="task", order_by="Phase.opens_at", cascade="all, delete-orphan"
    )
    organisers: Mapped[list[TaskOrganiser]] = relationship(
        back_populates="task", cascade="all, delete-orphan"
    )


class TaskOrganiser(Base):
    """A user named organiser of one task by a site admin."""

    __tablename__ = "task_organiser"
    __table_args__ = (UniqueConstraint("task_id", "user_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    task_id: Mapped[int] = mapped_column(ForeignKey("task.id", ondelete="CASCADE"))
    user_id: Mapped[int] = mapped_column(ForeignKey("user_account.id", ondelete="CASCADE"))
    created_at: Mapped[datetime]

    task: Mapped[Task] = relationship(back_populates="organisers")
    user: Mapped[User] = relationship()


class Phase(Base):
    """A period of a task: its kind, dates (UTC), per-team window, run limit and policies."""

    __tablename__ = "phase"
    __table_args__ = (
        UniqueConstraint("task_id", "slug"),
        CheckConstraint(_in("kind", PHASE_KINDS), name="kind"),
        CheckConstraint(_in("late_policy", LATE_POLICIES), name="late_policy"),
        CheckConstraint(_in("visibility", VISIBILITIES), name="visibility"),
        CheckConstraint("closes_at > opens_at", name="dates"),
        CheckConstraint("max_runs IS NULL OR max_runs > 0", name="max_runs"),
        CheckConstraint(
            "team_window_hours IS NULL OR team_window_hours > 0", name="team_window_hours"
        ),
        CheckConstraint("max_per_day IS NULL OR max_per_day > 0", name="max_per_day"),
        CheckConstraint(_in("accepts", PHASE_ACCEPTS), name="accepts"),
        CheckConstraint(_in("ranking", PHASE_RANKINGS), name="ranking"),
        CheckConstraint("score_in_request_pairs IS NULL OR score_in_request_pairs > 0",
                        name="score_in_request_pairs"),
        CheckConstraint(_in("reveal", REVEALS), name="reveal"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    task_id: Mapped[int] = mapped_column(ForeignKey("task.id", ondelete="CASCADE"))
    slug: Mapped[str] = mapped_column(String(64))
    name: Mapped[str] = mapped_column(String(120))
    kind: Mapped[str] = mapped_column(String(20))
    opens_at: Mapped[datetime]
    closes_at: Mapped[datetime]
    team_window_hours: Mapped[int | None] = mapped_column(Integer)
    max_runs: Mapped[int | None] = mapped_column(Integer)
    late_policy: Mapped[str] = mapped_column(String(10), default="reject")
    visibility: Mapped[str] = mapped_column(String(12), default="public")
    track: Mapped[str | None] = mapped_column(String(64))
    results_published_at: Mapped[datetime | None]
    created_at: Mapped[datetime]
    # The split whose inputs the phase serves and whose gold scores its runs.
    split: Mapped[str] = mapped_column(String(64), server_default="test")
    # Uploads (replacements included) per team in any 24 hours; None: no daily limit.
    max_per_day: Mapped[int | None] = mapped_column(Integer)
    # Scheduled publication of the board and release of the task's gold (done by the ticker).
    publish_at: Mapped[datetime | None]
    release_gold_at: Mapped[datetime | None]
    # "runs", "models" (teams upload an encoder the site runs) or "both".
    accepts: Mapped[str] = mapped_column(String(8), default="runs", server_default="runs")
    # "every" run ranked, or each team's "primary" run only (services.primary)
    ranking: Mapped[str] = mapped_column(String(8), default="every", server_default="every")
    # the organisers' defaults and limits for the models' encoding (baselines.models.settings.
    # EncodingRules: max_seq_length, batch_tokens, dtype); None: the defaults
    model_settings: Mapped[dict[str, Any] | None] = mapped_column()
    # runs of more lines are scored off the upload request (202), by the queue; None: the
    # site's SEMBOARD_SCORE_IN_REQUEST_PAIRS, which is also the most a phase can set
    # (services.runs.request_scoring)
    score_in_request_pairs: Mapped[int | None] = mapped_column(Integer)
    # the entry deadline (issue 44): after it, only teams formed, members joined and terms
    # accepted by then may upload to the phase (services.runs.admission.entry); None: no such
    # date. Before the close (services.tasks.tasks checks it: no CHECK, phase is never rebuilt)
    entry_deadline: Mapped[datetime | None]
    # the public board shows its state at this time until the reveal (organisers: live)
    freeze_at: Mapped[datetime | None]
    # when private scores and the live board are revealed: "close" or "publish" (the results'
    # publication, by hand or at publish_at); services.tasks.access.revealed
    reveal: Mapped[str] = mapped_column(String(8), default="publish", server_default="publish")

    task: Mapped[Task] = relationship(back_populates="phases")

    def state(self, now: datetime) -> str:
        """The one phase-state rule: "upcoming" before it opens, "open" until it closes, then
        "closed"."""
        if now < self.opens_at:
            return "upcoming"
        return "open" if now < self.closes_at else "closed"

    @classmethod
    def in_state(cls, state: str, now: datetime) -> ColumnElement[bool]:
        """`state(now) == state` as a SQL condition: the same rule, for queries."""
        if state == "upcoming":
            return cls.opens_at > now
        if state == "open":
            return and_(cls.opens_at <= now, cls.closes_at > now)
        if state == "closed":
            return cls.closes_at <= now
        raise ValueError(f"a phase is upcoming, open or closed, not {state!r}")


class PrimaryRun(Base):
    """The run a team marked primary in a phase ranking primary runs (one per team and phase).

    `fallback` marks a row written at the deadline for a team that chose none (its latest
    scored run, audited); a chosen run that is later replaced stays primary through its
    replacement.
    """

    __tablename__ = "primary_run"
    __table_args__ = (UniqueConstraint("team_id", "phase_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    team_id: Mapped[int] = mapped_column(ForeignKey("team.id", ondelete="CASCADE"))
    phase_id: Mapped[int] = mapped_column(ForeignKey("phase.id", ondelete="CASCADE"))
    run_id: Mapped[int] = mapped_column(ForeignKey("run.id", ondelete="CASCADE"))
    chosen_by_id: Mapped[int | None] = mapped_column(ForeignKey("user_account.id"))
    chosen_at: Mapped[datetime]
    fallback: Mapped[bool] = mapped_column(Boolean, default=False)


class Team(Base):
    """A team on one task; the captain hands out the invite code."""

    __tablename__ = "team"
    __table_args__ = (UniqueConstraint("task_id", "name"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    task_id: Mapped[int] = mapped_column(ForeignKey("task.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(120))
    affiliation: Mapped[str] = mapped_column(String(255), default="")
    invite_code: Mapped[str] = mapped_column(String(32), unique=True)
    captain_id: Mapped[int | None] = mapped_column(ForeignKey("user_account.id"))
    is_baseline: Mapped[bool] = mapped_column(Boolean, default=False)
    is_organiser_team: Mapped[bool] = mapped_column(Boolean, default=False)
    # Touched first in every submission transaction: it serialises a team's uploads.
    last_upload_at: Mapped[datetime | None]
    created_at: Mapped[datetime]
    # Set when the team was merged into another (its members and runs moved there).
    closed_at: Mapped[datetime | None]
    merged_into_id: Mapped[int | None] = mapped_column(ForeignKey("team.id"))

    task: Mapped[Task] = relationship()
    captain: Mapped[User | None] = relationship()
    members: Mapped[list[TeamMember]] = relationship(
        back_populates="team", cascade="all, delete-orphan"
    )


class TeamMember(Base):
    """Membership; task_id is repeated so one team per user per task is a constraint."""

    __tablename__ = "team_member"
    __table_args__ = (UniqueConstraint("task_id", "user_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    task_id: Mapped[int] = mapped_column(ForeignKey("task.id", ondelete="CASCADE"))
    team_id: Mapped[int] = mapped_column(ForeignKey("team.id", ondelete="CASCADE"))
    user_id: Mapped[int] = mapped_column(ForeignKey("user_account.id", ondelete="CASCADE"))
    joined_at: Mapped[datetime]

    team: Mapped[Team] = relationship(back_populates="members")
    user: Mapped[User] = relationship()


class TeamWindow(Base):
    """A team's personal window in a phase, started on request (or by its first accepted run)."""

    __tablename__ = "team_window"
    __table_args__ = (UniqueConstraint("team_id", "phase_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    team_id: Mapped[int] = mapped_column(ForeignKey("team.id", ondelete="CASCADE"))
    phase_id: Mapped[int] = mapped_column(ForeignKey("phase.id", ondelete="CASCADE"))
    started_at: Mapped[datetime]
    ends_at: Mapped[datetime]
    started_by_id: Mapped[int | None] = mapped_column(ForeignKey("user_account.id"))


class DatasetFileColumns:
    """The columns of one stored version of a dataset's file (inputs or gold)."""

    id: Mapped[int] = mapped_column(primary_key=True)
    task_id: Mapped[int] = mapped_column(ForeignKey("task.id", ondelete="CASCADE"))
    # The definition's split the file belongs to (train, dev, test...).
    split: Mapped[str] = mapped_column(String(64), server_default="test")
    dataset: Mapped[str] = mapped_column(String(120))
    version: Mapped[int] = mapped_column(Integer)
    filename: Mapped[str] = mapped_column(String(255))
    storage_key: Mapped[str] = mapped_column(String(512))
    sha256: Mapped[str] = mapped_column(String(64))
    n_items: Mapped[int] = mapped_column(Integer)
    uploaded_by_id: Mapped[int | None] = mapped_column(ForeignKey("user_account.id"))
    uploaded_at: Mapped[datetime]


class InputFile(DatasetFileColumns, Base):
    """One version of a dataset's inputs; the newest version is the one served."""

    __tablename__ = "input_file"
    __table_args__ = (UniqueConstraint("task_id", "split", "dataset", "version"),)


class GoldFile(DatasetFileColumns, Base):
    """One version of a dataset's gold; private until the task's gold is released."""

    __tablename__ = "gold_file"
    __table_args__ = (UniqueConstraint("task_id", "split", "dataset", "version"),)


class Run(Base):
    """An accepted run; replaced runs stay (is_current false) so history is kept."""

    __tablename__ = "run"
    __table_args__ = (
        CheckConstraint(_in("status", RUN_STATUSES), name="status"),
        CheckConstraint("slot IS NULL OR slot > 0", name="slot"),
        # The run limit under concurrency: at most one current run per (team, phase, slot) and
        # per (team, phase, name); slots run 1..max_runs so a full set refuses the next insert.
        Index(
            "uq_run_current_slot",
            "team_id",
            "phase_id",
            "slot",
            unique=True,
            sqlite_where=text("is_current"),
            postgresql_where=text("is_current"),
        ),
        Index(
            "uq_run_current_name",
            "team_id",
            "phase_id",
            "name",
            unique=True,
            sqlite_where=text("is_current"),
            postgresql_where=text("is_current"),
        ),
        # a retried upload (the client's Idempotency-Key) finds its run instead of a new slot
        Index("uq_run_client_key", "team_id", "client_key", unique=True,
              sqlite_where=text("client_key IS NOT NULL"),
              postgresql_where=text("client_key IS NOT NULL")),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    task_id: Mapped[int] = mapped_column(ForeignKey("task.id", ondelete="CASCADE"))
    phase_id: Mapped[int] = mapped_column(ForeignKey("phase.id", ondelete="CASCADE"))
    team_id: Mapped[int] = mapped_column(ForeignKey("team.id", ondelete="CASCADE"))
    submitted_by_id: Mapped[int | None] = mapped_column(ForeignKey("user_account.id"))
    name: Mapped[str] = mapped_column(String(120))
    slot: Mapped[int | None] = mapped_column(Integer)
    is_current: Mapped[bool] = mapped_column(Boolean, default=True)
    status: Mapped[str] = mapped_column(String(12), default="received")
    is_late: Mapped[bool] = mapped_column(Boolean, default=False)
    is_fix: Mapped[bool] = mapped_column(Boolean, default=False)
    replaces_id: Mapped[int | None] = mapped_column(ForeignKey("run.id"))
    issues: Mapped[list[Any]] = mapped_column(default=list)
    meta: Mapped[dict[str, Any]] = mapped_column(default=dict)
    submitted_at: Mapped[datetime]
    replaced_at: Mapped[datetime | None]
    # The system description: free text and answers to the definition's questions.
    description: Mapped[str] = mapped_column(Text, default="", server_default="")
    answers: Mapped[dict[str, Any]] = mapped_column(default=dict, server_default="{}")
    # the uploading client's key for this upload (Idempotency-Key), unique within the team
    client_key: Mapped[str | None] = mapped_column(String(64))

    phase: Mapped[Phase] = relationship()
    team: Mapped[Team] = relationship()
    task: Mapped[Task] = relationship()
    submitted_by: Mapped[User | None] = relationship()
    files: Mapped[list[RunFile]] = relationship(
        back_populates="run", order_by="RunFile.filename", cascade="all, delete-orphan"
    )
    scores: Mapped[list[RunScoreRecord]] = relationship(
        back_populates="run", order_by="RunScoreRecord.id", cascade="all, delete-orphan"
    )

    @property
    def current_score(self) -> RunScoreRecord | None:
        """The newest score (earlier ones are the rescoring history)."""
        return self.scores[-1] if self.scores else None


class RunFile(Base):
    """One file of a run, stored under its digest."""

    __tablename__ = "run_file"
    __table_args__ = (UniqueConstraint("run_id", "filename"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("run.id", ondelete="CASCADE"))
    filename: Mapped[str] = mapped_column(String(255))
    dataset: Mapped[str | None] = mapped_column(String(120))
    sha256: Mapped[str] = mapped_column(String(64))
    size: Mapped[int] = mapped_column(Integer)
    storage_key: Mapped[str] = mapped_column(String(512))

    run: Mapped[Run] = relationship(back_populates="files")


class RunScoreRecord(Base):
    """A run's scores against one gold version (RunScore.to_dict()); rescoring appends."""

    __tablename__ = "run_score"
    # a run's newest score found without scanning every record (boards: changed runs re-read)
    __table_args__ = (Index(None, "run_id", "id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("run.id", ondelete="CASCADE"))
    gold_digest: Mapped[str] = mapped_column(String(64))
    scores: Mapped[dict[str, Any]] = mapped_column()
    flat: Mapped[dict[str, Any]] = mapped_column()
    created_at: Mapped[datetime]
    # sha1 of scores and flat (score_digest), set on every write: a board build reads it, not
    # the texts, to know which records it has parsed already (NULL: written before 0035)
    digest: Mapped[str | None] = mapped_column(String(40), default=None)

    run: Mapped[Run] = relationship(back_populates="scores")


def score_digest(scores: Any, flat: Any) -> str:
    """The content digest of a score record (canonical JSON of its scores and flat values)."""
    text = json.dumps([scores, flat], sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha1(text.encode()).hexdigest()


@event.listens_for(RunScoreRecord, "before_insert")
@event.listens_for(RunScoreRecord, "before_update")
def _set_score_digest(_mapper: Any, _connection: Any, record: RunScoreRecord) -> None:
    record.digest = score_digest(record.scores, record.flat)


class SignificanceGroups(Base):
    """A phase board's cached significance groups, for one digest of its runs, gold and settings.

    Keyed by the digest so a new run, a rescore or new gold simply misses; `groups` maps a run id
    (as text: JSON keys) to {metric: group}.
    """

    __tablename__ = "significance_groups"
    __table_args__ = (UniqueConstraint("phase_id", "digest"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    phase_id: Mapped[int] = mapped_column(ForeignKey("phase.id", ondelete="CASCADE"))
    digest: Mapped[str] = mapped_column(String(64))
    settings: Mapped[dict[str, Any]] = mapped_column()
    groups: Mapped[dict[str, Any]] = mapped_column()
    elapsed_ms: Mapped[int] = mapped_column(Integer)
    computed_at: Mapped[datetime]


class UploadLog(Base):
    """Every upload attempt, accepted or rejected, with its issues."""

    __tablename__ = "upload_log"
    __table_args__ = (
        CheckConstraint(_in("outcome", UPLOAD_OUTCOMES), name="outcome"),
        Index(None, "team_id", "created_at"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    task_id: Mapped[int] = mapped_column(ForeignKey("task.id", ondelete="CASCADE"))
    phase_id: Mapped[int | None] = mapped_column(ForeignKey("phase.id", ondelete="CASCADE"))
    team_id: Mapped[int | None] = mapped_column(ForeignKey("team.id", ondelete="CASCADE"))
    user_id: Mapped[int | None] = mapped_column(ForeignKey("user_account.id"))
    run_id: Mapped[int | None] = mapped_column(ForeignKey("run.id"))
    run_name: Mapped[str] = mapped_column(String(255), default="")
    outcome: Mapped[str] = mapped_column(String(10))
    message: Mapped[str] = mapped_column(Text, default="")
    # the message as the site's words (errors.said: msgid and values), so a page can say it in
    # its reader's language; None for entries made before issue 43
    said: Mapped[dict[str, Any] | None]
    issues: Mapped[list[Any]] = mapped_column(default=list)
    filenames: Mapped[list[Any]] = mapped_column(default=list)
    total_bytes: Mapped[int] = mapped_column(BYTES, default=0)
    created_at: Mapped[datetime]
    # a refusal's class (admission.REFUSAL_REASONS: "invalid", "deadline", ...), for the
    # organisers' analytics; None for accepted uploads and refusals logged before issue 44
    reason: Mapped[str | None] = mapped_column(String(32))

    team: Mapped[Team | None] = relationship()
    user: Mapped[User | None] = relationship()


class Grant(Base):
    """A post-deadline fix granted to a team (†), with who granted it and why."""

    __tablename__ = "grant_fix"

    id: Mapped[int] = mapped_column(primary_key=True)
    team_id: Mapped[int] = mapped_column(ForeignKey("team.id", ondelete="CASCADE"))
    phase_id: Mapped[int] = mapped_column(ForeignKey("phase.id", ondelete="CASCADE"))
    granted_by_id: Mapped[int | None] = mapped_column(ForeignKey("user_account.id"))
    reason: Mapped[str] = mapped_column(Text)
    until: Mapped[datetime]
    created_at: Mapped[datetime]

    team: Mapped[Team] = relationship()
    granted_by: Mapped[User | None] = relationship()


class RateLimitEvent(Base):
    """One counted event for a rate-limit key (in the database so every worker sees it)."""

    __tablename__ = "rate_limit_event"
    __table_args__ = (Index(None, "key", "at"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    key: Mapped[str] = mapped_column(String(255))
    at: Mapped[datetime]


class GoldRelease(Base):
    """The release of one split's gold to everyone (the default split's also sets the task's)."""

    __tablename__ = "gold_release"
    __table_args__ = (UniqueConstraint("task_id", "split"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    task_id: Mapped[int] = mapped_column(ForeignKey("task.id", ondelete="CASCADE"))
    split: Mapped[str] = mapped_column(String(64))
    released_at: Mapped[datetime]
    released_by_id: Mapped[int | None] = mapped_column(ForeignKey("user_account.id"))


ACCOUNT_TOKEN_PURPOSES = ("verify", "reset")


class AccountToken(Base):
    """A single-use, expiring e-mail link (verification or password reset); only its sha256."""

    __tablename__ = "account_token"
    __table_args__ = (CheckConstraint(_in("purpose", ACCOUNT_TOKEN_PURPOSES), name="purpose"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("user_account.id", ondelete="CASCADE"))
    purpose: Mapped[str] = mapped_column(String(10))
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    email: Mapped[str] = mapped_column(String(254))
    created_at: Mapped[datetime]
    expires_at: Mapped[datetime]
    used_at: Mapped[datetime | None]

    user: Mapped[User] = relationship()


class LoginSession(Base):
    """A logged-in browser session; its key is in the session cookie, only its sha256 here.

    Deleting the row ends that session on the server, even for a copied cookie.
    """

    __tablename__ = "login_session"

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("user_account.id", ondelete="CASCADE"),
                                         index=True)
    key_hash: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime]


class NotificationSent(Base):
    """A notification already sent to a user (the key makes reminders idempotent)."""

    __tablename__ = "notification_sent"
    __table_args__ = (UniqueConstraint("user_id", "key"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("user_account.id", ondelete="CASCADE"))
    key: Mapped[str] = mapped_column(String(255))
    sent_at: Mapped[datetime]


class AuditEntry(Base):
    """An organiser action on a task (run moved, teams merged, ...): who, when, what and why."""

    __tablename__ = "audit_entry"
    __table_args__ = (Index(None, "task_id", "created_at"), Index(None, "run_id"))

    id: Mapped[int] = mapped_column(primary_key=True)
    task_id: Mapped[int] = mapped_column(ForeignKey("task.id", ondelete="CASCADE"))
    user_id: Mapped[int | None] = mapped_column(ForeignKey("user_account.id"))
    action: Mapped[str] = mapped_column(String(40))
    run_id: Mapped[int | None] = mapped_column(ForeignKey("run.id", ondelete="SET NULL"))
    team_id: Mapped[int | None] = mapped_column(ForeignKey("team.id", ondelete="SET NULL"))
    reason: Mapped[str] = mapped_column(Text)
    details: Mapped[dict[str, Any]] = mapped_column()
    created_at: Mapped[datetime]

    user: Mapped[User | None] = relationship()


COMPARISON_STATUSES = ("pending", "done", "failed")


class RunComparison(Base):
    """Two runs' stored comparison (tests per metric, paired scores), for one digest of inputs.

    Keyed by the digest of both runs' current scores, the gold, the task definition and the
    test's settings, so a rescore or new gold simply misses; computed off the request path.
    """

    __tablename__ = "run_comparison"
    __table_args__ = (
        UniqueConstraint("run_a_id", "run_b_id", "digest"),
        CheckConstraint(_in("status", COMPARISON_STATUSES), name="status"),
        CheckConstraint("run_a_id <> run_b_id", name="two_runs"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    task_id: Mapped[int] = mapped_column(ForeignKey("task.id", ondelete="CASCADE"))
    run_a_id: Mapped[int] = mapped_column(ForeignKey("run.id", ondelete="CASCADE"))
    run_b_id: Mapped[int] = mapped_column(ForeignKey("run.id", ondelete="CASCADE"))
    digest: Mapped[str] = mapped_column(String(64))
    settings: Mapped[dict[str, Any]] = mapped_column()
    status: Mapped[str] = mapped_column(String(16))
    results: Mapped[list[Any] | None] = mapped_column()
    pairs: Mapped[list[Any] | None] = mapped_column()
    error: Mapped[str | None] = mapped_column(Text)
    elapsed_ms: Mapped[int | None] = mapped_column(Integer)
    requested_at: Mapped[datetime]
    computed_at: Mapped[datetime | None]


class PreparedBoard(Base):
    """A phase board built once for one version of what it shows, served to every viewer.

    `version` is services.prepared.board_version()'s digest of everything the board shows, so a
    change simply misses; `json_text` is the board's JSON form as downloaded, `data` what pages need
    beside it (intervals). A board stored in parts has empty texts and `data["parts"]`: its rows
    (PreparedBoardRow) in order, with their ranks and groups.
    """

    __tablename__ = "prepared_board"
    __table_args__ = (UniqueConstraint("phase_id", "version"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    phase_id: Mapped[int] = mapped_column(ForeignKey("phase.id", ondelete="CASCADE"))
    version: Mapped[str] = mapped_column(String(64))
    data: Mapped[dict[str, Any]] = mapped_column()
    csv_text: Mapped[str] = mapped_column(Text)
    # the JSON download as served, so a worker's first view of a version need not re-encode it
    json_text: Mapped[str] = mapped_column(Text)
    groups_pending: Mapped[bool] = mapped_column(Boolean)
    built_at: Mapped[datetime]
    elapsed_ms: Mapped[int] = mapped_column(Integer)
    # the JSON and CSV downloads gzip-compressed once, off the request, by the process that
    # ran the version's groups (a big board's body is then never compressed by each web
    # worker at each version); NULL until then, and for bodies small enough to compress on a
    # GET. Deferred: read only by the GET that serves them.
    json_gzip: Mapped[bytes | None] = mapped_column(LargeBinary, deferred=True)
    csv_gzip: Mapped[bytes | None] = mapped_column(LargeBinary, deferred=True)


class PreparedBoardRow(Base):
    """One row of a phase's prepared board stored in parts: its JSON and CSV texts with the rank
    and group cells left open, and its intervals (`parts`, a JSON text), under a digest of that
    text (`key`). A stored board names its rows' keys in order, with their ranks and groups
    (`PreparedBoard.data["parts"]`), so storing an upload's board writes the changed rows.
    """

    __tablename__ = "prepared_board_row"
    __table_args__ = (UniqueConstraint("phase_id", "key"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    phase_id: Mapped[int] = mapped_column(ForeignKey("phase.id", ondelete="CASCADE"))
    key: Mapped[str] = mapped_column(String(64))
    parts: Mapped[str] = mapped_column(Text)


class ChainLink:
    """A row of a phase's chain of stored bodies (stored._store_link, _chain): a checkpoint
    (`base` NULL) or an edit against the row `base` names, `digest` naming what it makes and
    `edits` counting the edits since its checkpoint (declared by each table)."""

    @declared_attr.directive
    def __table_args__(cls) -> tuple[Any, ...]:
        return (UniqueConstraint("phase_id", "digest"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    phase_id: Mapped[int] = mapped_column(ForeignKey("phase.id", ondelete="CASCADE"))
    digest: Mapped[str] = mapped_column(String(64))
    base: Mapped[str | None] = mapped_column(String(64))
    edits: Mapped[int]
    body: Mapped[str] = mapped_column(Text)


class PreparedBoardFrame(ChainLink, Base):
    """The order of a phase's stored board rows, as a checkpoint or as edits against one.

    A checkpoint (`base` NULL) lists every row's key in order (`body`: the keys, one a line);
    an edit lists the rows taken out and put in against the frame `base` names (`body`: JSON
    {"went": positions, "added": [[position, key], ...]}); `digest` names the keys in order
    (prepared.keys_digest) and `edits` counts the edits since the checkpoint. A version
    (PreparedBoard.data["keys_digest"]) names its frame, so storing an upload's board writes
    its edits, not every key, and a new checkpoint once the edits grow past a share of the board.
    """

    __tablename__ = "prepared_board_frame"

    edits: Mapped[int] = mapped_column(Integer)


class PreparedBoardGroups(ChainLink, Base):
    """A phase's stored board groups ({run id: {metric: group}}) under a digest (`digest`), as
    a checkpoint or as an edit against the grouping before, as the frames are.

    A checkpoint (`base` NULL; `body`: stored.groups_text, the runs, each one's cell number and
    each distinct cell once) holds every run's groups; an edit holds the runs whose groups
    changed or came, the same way, and the runs that went, against the grouping `base` names
    (`edits` counts the changes since the checkpoint). A version stored in parts names its
    groups by digest (`PreparedBoard.data["parts"]["groups_digest"]`), so a board's groups are
    stored once per grouping, and a process that holds the grouping before reads its changes.
    """

    __tablename__ = "prepared_board_groups"

    # rows stored whole before edits (migration 0055) count none
    edits: Mapped[int] = mapped_column(Integer, server_default="0")


class ModelSubmission(Base):
    """An encoder a team uploaded (the model track): checked at once, run by a queue job.

    The zip is stored content-addressed; `description` is check_model's; a job claims the row
    (queued → running) with a conditional UPDATE, and `run_id` names the run it produced.
    """

    __tablename__ = "model_submission"
    __table_args__ = (
        CheckConstraint(_in("status", MODEL_STATUSES), name="status"),
        CheckConstraint(f"failure IS NULL OR {_in('failure', MODEL_FAILURES)}", name="failure"),
        Index(None, "status", "uploaded_at"),
        Index(None, "team_id", "phase_id"),
        # a retried upload (the client's Idempotency-Key) finds its model, not a second slot
        Index("uq_model_submission_client_key", "team_id", "client_key", unique=True,
              sqlite_where=text("client_key IS NOT NULL"),
              postgresql_where=text("client_key IS NOT NULL")),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    task_id: Mapped[int] = mapped_column(ForeignKey("task.id", ondelete="CASCADE"))
    phase_id: Mapped[int] = mapped_column(ForeignKey("phase.id", ondelete="CASCADE"))
    team_id: Mapped[int] = mapped_column(ForeignKey("team.id", ondelete="CASCADE"))
    user_id: Mapped[int | None] = mapped_column(ForeignKey("user_account.id"))
    name: Mapped[str] = mapped_column(String(120))
    uploaded_at: Mapped[datetime]
    storage_key: Mapped[str] = mapped_column(String(512))
    archive_sha256: Mapped[str] = mapped_column(String(64))
    size: Mapped[int] = mapped_column(BYTES)
    # check_model's digest of every file of the model, and its whole description
    digest: Mapped[str] = mapped_column(String(64))
    description: Mapped[dict[str, Any]] = mapped_column()
    # what the form gave beside the folder: prompt (prefix) and pooling
    options: Mapped[dict[str, Any]] = mapped_column(default=dict)
    status: Mapped[str] = mapped_column(String(10), default="queued")
    reason: Mapped[str] = mapped_column(Text, default="", server_default="")
    run_id: Mapped[int | None] = mapped_column(ForeignKey("run.id", ondelete="SET NULL"))
    attempts: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    started_at: Mapped[datetime | None]
    finished_at: Mapped[datetime | None]
    # set when the team publishes the model's files with its run: then whoever sees the run
    # may download them; None keeps them to the team and the organisers
    published_at: Mapped[datetime | None]
    # the running job's supervisor writes this every few seconds: a model whose beats stopped
    # lost its worker (jobs.models.recover re-queues it once, then fails it)
    heartbeat_at: Mapped[datetime | None]
    # what the team sees of a job: pairs done of the total, rate, per-dataset times, peak
    # memory and a short log of the job's own events (never input text)
    progress: Mapped[dict[str, Any] | None] = mapped_column()
    # a failed model's class (MODEL_FAILURES); reason says it in a sentence
    failure: Mapped[str | None] = mapped_column(String(20))
    # the uploading client's key for this upload (Idempotency-Key), unique within the team
    client_key: Mapped[str | None] = mapped_column(String(64))
    # the remote worker (WorkerToken) holding the running job; None for the site's own workers.
    # No foreign key: SQLite adds no named constraint to an existing table, and tokens are
    # revoked, never deleted
    worker_token_id: Mapped[int | None] = mapped_column(Integer)
    # when that worker's result arrived: set once per attempt by a conditional UPDATE, so a
    # retried or racing result post never submits a second run
    result_at: Mapped[datetime | None]

    phase: Mapped[Phase] = relationship()
    team: Mapped[Team] = relationship()
    task: Mapped[Task] = relationship()
    user: Mapped[User | None] = relationship()
    run: Mapped[Run | None] = relationship()


class ModelUpload(Base):
    """A model arriving in parts (a chunked, resumable upload), staged in storage.

    Parts arrive in order: `received` moves from a part's offset to its end by a conditional
    UPDATE, so a repeated or racing part is refused with the offset to resume from. The parts go
    once the upload becomes a ModelSubmission, is refused, cancelled or expires; the row stays
    with its state (ids are never reused; a repeated finish answers as the first did).
    """

    __tablename__ = "model_upload"
    __table_args__ = (
        CheckConstraint("received >= 0 AND received <= size", name="received"),
        CheckConstraint(_in("state", UPLOAD_STATES), name="state"),
        Index(None, "user_id"),
        Index(None, "updated_at"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    task_id: Mapped[int] = mapped_column(ForeignKey("task.id", ondelete="CASCADE"))
    team_id: Mapped[int] = mapped_column(ForeignKey("team.id", ondelete="CASCADE"))
    user_id: Mapped[int] = mapped_column(ForeignKey("user_account.id", ondelete="CASCADE"))
    filename: Mapped[str] = mapped_column(String(255))
    size: Mapped[int] = mapped_column(BYTES)
    received: Mapped[int] = mapped_column(BYTES, default=0, server_default="0")
    # sha256 of the whole archive when the client gave it: checked before the model is
    sha256: Mapped[str | None] = mapped_column(String(64))
    # storage keys of the parts, in order (each written once: keys.upload_part)
    parts: Mapped[list[Any]] = mapped_column(default=list)
    # what the model's submission will say: name, phase, prompt, pooling, publish
    options: Mapped[dict[str, Any]] = mapped_column(default=dict)
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]
    # rows are kept once the upload ends (ids are never reused, and a repeated finish answers
    # what the first did): the model it became, or the refusal it got
    state: Mapped[str] = mapped_column(String(10), default="open", server_default="open")
    # no foreign key: SQLite adds no named constraint to an existing table, and both rows go
    # with their team (ON DELETE CASCADE) anyway
    model_id: Mapped[int | None] = mapped_column(Integer)
    outcome: Mapped[dict[str, Any] | None] = mapped_column()

    task: Mapped[Task] = relationship()
    team: Mapped[Team] = relationship()


class WorkerToken(Base):
    """A remote model worker's token for one task's model queue (a GPU host that holds no site
    secret): only its sha256 is stored, the plaintext is shown once; revoked, never deleted."""

    __tablename__ = "worker_token"
    __table_args__ = (Index(None, "task_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    task_id: Mapped[int] = mapped_column(ForeignKey("task.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(120))
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    prefix: Mapped[str] = mapped_column(String(12))
    created_by_id: Mapped[int | None] = mapped_column(ForeignKey("user_account.id"))
    created_at: Mapped[datetime]
    # the worker's last claim, beat or result (a GET never writes it)
    last_seen_at: Mapped[datetime | None]
    revoked_at: Mapped[datetime | None]
    revoked_by_id: Mapped[int | None] = mapped_column(ForeignKey("user_account.id"))

    task: Mapped[Task] = relationship()


class ModelWorker(Base):
    """A model worker that declared what it can run (baselines.models.capabilities): a remote
    worker (its token; key "token:ID") or a host of the site's own workers (key "site:HOST",
    any task). The queue hands a model only to a worker that can run it, and says of a queued
    model that no registered worker can run why it waits. A site's hardware, not a task's data:
    not in a task's dump."""

    __tablename__ = "model_worker"

    id: Mapped[int] = mapped_column(primary_key=True)
    key: Mapped[str] = mapped_column(String(160), unique=True)
    name: Mapped[str] = mapped_column(String(120))
    token_id: Mapped[int | None] = mapped_column(
        ForeignKey("worker_token.id", ondelete="CASCADE"), index=True)
    capabilities: Mapped[dict[str, Any]] = mapped_column()
    # its last declaration (a claim, or the site's sweep): a worker not seen for an hour is
    # not counted as registered
    seen_at: Mapped[datetime]


# ----------------------------------------------------------------------------- issue 30 (part 1)
# Terms, the participation gate and announcements. A task dump includes these tables:
# TermsVersion, TermsAcceptance, TaskSecret, TeamApproval, Announcement, AnnouncementRead,
# AnnouncementOptIn.

ACCEPTANCE_CLIENTS = ("web", "api", "cli")
TERMS_SOURCES = ("definition", "organiser")
APPROVAL_STATES = ("approved", "refused")
ANNOUNCEMENT_KINDS = ("message", "gold-correction", "deadline", "results")
ANNOUNCEMENT_STATUSES = ("draft", "sent")


class TermsVersion(Base):
    """One version of a task's (phase_id None) or a phase's terms, named by its text's digest.

    The row of a (task, phase) that took effect last is the current version (services.terms);
    an empty text lifts the terms.
    """

    __tablename__ = "terms_version"
    __table_args__ = (
        CheckConstraint(_in("source", TERMS_SOURCES), name="source"),
        Index(None, "task_id", "phase_id", "created_at"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    task_id: Mapped[int] = mapped_column(ForeignKey("task.id", ondelete="CASCADE"))
    phase_id: Mapped[int | None] = mapped_column(ForeignKey("phase.id", ondelete="CASCADE"))
    text: Mapped[str] = mapped_column(Text)
    digest: Mapped[str] = mapped_column(String(64))
    source: Mapped[str] = mapped_column(String(12))
    # The text in other languages ({code: text}), shown to readers of those languages; the
    # version (its digest) is the text's own
    translations: Mapped[dict[str, Any] | None]
    created_by_id: Mapped[int | None] = mapped_column(ForeignKey("user_account.id"))
    created_at: Mapped[datetime]
    # when the version takes effect (None: when created); until then the one before it is in
    # force. A change scheduled ahead, so nobody is locked out by surprise (issue 40).
    effective_at: Mapped[datetime | None]
    # until then, having accepted the version this one replaces counts as accepting this one
    grace_until: Mapped[datetime | None]

    phase: Mapped[Phase | None] = relationship()


class TermsAcceptance(Base):
    """A user's acceptance of one terms version: who, when, in which team, from which client."""

    __tablename__ = "terms_acceptance"
    __table_args__ = (
        UniqueConstraint("terms_version_id", "user_id"),
        CheckConstraint(_in("client", ACCEPTANCE_CLIENTS), name="client"),
        Index(None, "task_id", "accepted_at"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    task_id: Mapped[int] = mapped_column(ForeignKey("task.id", ondelete="CASCADE"))
    terms_version_id: Mapped[int] = mapped_column(
        ForeignKey("terms_version.id", ondelete="CASCADE"))
    user_id: Mapped[int] = mapped_column(ForeignKey("user_account.id", ondelete="CASCADE"))
    team_id: Mapped[int | None] = mapped_column(ForeignKey("team.id", ondelete="SET NULL"))
    digest: Mapped[str] = mapped_column(String(64))
    client: Mapped[str] = mapped_column(String(8))
    accepted_at: Mapped[datetime]
    # The language of the text shown when it was accepted (None: before issue 43, or the API)
    language: Mapped[str | None] = mapped_column(String(8))

    version: Mapped[TermsVersion] = relationship()
    user: Mapped[User] = relationship()
    team: Mapped[Team | None] = relationship()


class TaskSecret(Base):
    """The secret of an unlisted task's link (`/tasks/NAME?key=SECRET`); a new one revokes it."""

    __tablename__ = "task_secret"

    id: Mapped[int] = mapped_column(primary_key=True)
    task_id: Mapped[int] = mapped_column(ForeignKey("task.id", ondelete="CASCADE"), unique=True)
    secret: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime]


class TeamApproval(Base):
    """An organiser's decision on a team, where the task asks for approval of each team."""

    __tablename__ = "team_approval"
    __table_args__ = (CheckConstraint(_in("state", APPROVAL_STATES), name="state"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    team_id: Mapped[int] = mapped_column(ForeignKey("team.id", ondelete="CASCADE"), unique=True)
    state: Mapped[str] = mapped_column(String(10))
    decided_by_id: Mapped[int | None] = mapped_column(ForeignKey("user_account.id"))
    decided_at: Mapped[datetime]
    # what the organisers told the team (shown on the task page and mailed with the decision)
    reason: Mapped[str | None] = mapped_column(Text)


class Announcement(Base):
    """An organisers' message to a task's teams (phase_id: only that phase's teams).

    Drafts (some written by the site: a gold correction, a deadline change, published results)
    wait for an organiser to send them; sending queues the mail to those who opted in.
    score_phases: the phases whose scores or ranks the site wrote into the text (sending is
    refused while any of them is hidden from the readers).
    """

    __tablename__ = "announcement"
    __table_args__ = (
        CheckConstraint(_in("kind", ANNOUNCEMENT_KINDS), name="kind"),
        CheckConstraint(_in("status", ANNOUNCEMENT_STATUSES), name="status"),
        CheckConstraint("(status = 'sent') = (sent_at IS NOT NULL)", name="sent"),
        Index(None, "task_id", "status", "sent_at"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    task_id: Mapped[int] = mapped_column(ForeignKey("task.id", ondelete="CASCADE"))
    phase_id: Mapped[int | None] = mapped_column(ForeignKey("phase.id", ondelete="CASCADE"))
    kind: Mapped[str] = mapped_column(String(20))
    status: Mapped[str] = mapped_column(String(8))
    title: Mapped[str] = mapped_column(String(200))
    body: Mapped[str] = mapped_column(Text)
    # The announcement in other languages ({code: {"title": ..., "body": ...}})
    translations: Mapped[dict[str, Any] | None]
    created_by_id: Mapped[int | None] = mapped_column(ForeignKey("user_account.id"))
    created_at: Mapped[datetime]
    sent_by_id: Mapped[int | None] = mapped_column(ForeignKey("user_account.id"))
    sent_at: Mapped[datetime | None]
    score_phases: Mapped[list[Any]] = mapped_column(default=list, server_default="[]")
    # critical (deadlines, gold corrections, rule changes): mailed to every participant,
    # whatever their opt-in (the terms page says so); others only to those who opted in
    critical: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    # a sent announcement edited (its earlier texts kept: AnnouncementRevision) or withdrawn
    # (hidden from readers, kept for the organisers). No foreign keys on the added columns:
    # SQLite adds no named constraint to an existing table, and announcement is never rebuilt
    edited_at: Mapped[datetime | None]
    withdrawn_at: Mapped[datetime | None]
    withdrawn_by_id: Mapped[int | None] = mapped_column(Integer)
    withdraw_reason: Mapped[str | None] = mapped_column(Text)

    phase: Mapped[Phase | None] = relationship()


class AnnouncementRead(Base):
    """A user has read an announcement (the task page marks the others unread)."""

    __tablename__ = "announcement_read"
    __table_args__ = (UniqueConstraint("announcement_id", "user_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    announcement_id: Mapped[int] = mapped_column(
        ForeignKey("announcement.id", ondelete="CASCADE"))
    user_id: Mapped[int] = mapped_column(ForeignKey("user_account.id", ondelete="CASCADE"))
    read_at: Mapped[datetime]


class AnnouncementOptIn(Base):
    """A user asked for a task's announcements by e-mail."""

    __tablename__ = "announcement_opt_in"
    __table_args__ = (UniqueConstraint("task_id", "user_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    task_id: Mapped[int] = mapped_column(ForeignKey("task.id", ondelete="CASCADE"))
    user_id: Mapped[int] = mapped_column(ForeignKey("user_account.id", ondelete="CASCADE"))
    created_at: Mapped[datetime]


# ----------------------------------------------------------------------------- issue 44
# The organiser's cockpit: notification channels and their delivery log, questions and answers,
# announcement revisions, queue alerts and stored analytics. A task dump includes
# AnnouncementRevision, NotificationChannel, Question, QuestionReply and QueueWatch; the
# delivery log, raised alerts and analytics are derived and left out.

CHANNEL_KINDS = ("webhook", "chat", "mail")
DELIVERY_STATUSES = ("pending", "sent", "failed")
QUESTION_VISIBILITIES = ("public", "private")
QUEUE_ALERT_KINDS = ("wait", "run")


class AnnouncementRevision(Base):
    """The text a sent announcement had before an organiser edited it (one row per edit)."""

    __tablename__ = "announcement_revision"

    id: Mapped[int] = mapped_column(primary_key=True)
    announcement_id: Mapped[int] = mapped_column(
        ForeignKey("announcement.id", ondelete="CASCADE"), index=True)
    title: Mapped[str] = mapped_column(String(200))
    body: Mapped[str] = mapped_column(Text)
    edited_by_id: Mapped[int | None] = mapped_column(ForeignKey("user_account.id"))
    edited_at: Mapped[datetime]


class NotificationChannel(Base):
    """Where a task's events go besides participants' mail: a signed webhook, a chat webhook
    (Slack/Mattermost `{"text": ...}`) or a mail address; `events`: the kinds it takes.

    `secret` signs webhook bodies (HMAC-SHA256); it is shown once, then only its last four
    characters (services.tasks.channels)."""

    __tablename__ = "notification_channel"
    __table_args__ = (CheckConstraint(_in("kind", CHANNEL_KINDS), name="kind"),
                      Index(None, "task_id"))

    id: Mapped[int] = mapped_column(primary_key=True)
    task_id: Mapped[int] = mapped_column(ForeignKey("task.id", ondelete="CASCADE"))
    kind: Mapped[str] = mapped_column(String(10))
    name: Mapped[str] = mapped_column(String(120))
    target: Mapped[str] = mapped_column(String(2000))
    secret: Mapped[str | None] = mapped_column(String(128))
    events: Mapped[list[Any]] = mapped_column(default=list)
    created_by_id: Mapped[int | None] = mapped_column(ForeignKey("user_account.id"))
    created_at: Mapped[datetime]
    disabled_at: Mapped[datetime | None]


class NotificationDelivery(Base):
    """One event's delivery to one channel (the delivery log): its body as sent, each attempt's
    outcome, and when the next retry is due (backoff); written in the transaction that made
    the event, so a rolled-back change sends nothing."""

    __tablename__ = "notification_delivery"
    __table_args__ = (CheckConstraint(_in("status", DELIVERY_STATUSES), name="status"),
                      Index(None, "status", "next_attempt_at"),
                      Index(None, "channel_id", "created_at"))

    id: Mapped[int] = mapped_column(primary_key=True)
    channel_id: Mapped[int] = mapped_column(
        ForeignKey("notification_channel.id", ondelete="CASCADE"))
    task_id: Mapped[int] = mapped_column(ForeignKey("task.id", ondelete="CASCADE"))
    event: Mapped[str] = mapped_column(String(40))
    body: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(String(10), default="pending")
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    next_attempt_at: Mapped[datetime]
    last_status: Mapped[int | None] = mapped_column(Integer)
    last_error: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime]
    delivered_at: Mapped[datetime | None]


class Question(Base):
    """A participant's question to a task's organisers: public (everyone reads it and its
    answers) or private (the asker and the organisers) until published; an FAQ entry is
    listed first; hidden ones are the organisers' only, locked ones take no more replies."""

    __tablename__ = "question"
    __table_args__ = (CheckConstraint(_in("visibility", QUESTION_VISIBILITIES),
                                      name="visibility"),
                      Index(None, "task_id", "updated_at"))

    id: Mapped[int] = mapped_column(primary_key=True)
    task_id: Mapped[int] = mapped_column(ForeignKey("task.id", ondelete="CASCADE"))
    user_id: Mapped[int | None] = mapped_column(ForeignKey("user_account.id"))
    title: Mapped[str] = mapped_column(String(200))
    body: Mapped[str] = mapped_column(Text)
    visibility: Mapped[str] = mapped_column(String(8))
    is_faq: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]
    answered_at: Mapped[datetime | None]
    published_at: Mapped[datetime | None]
    hidden_at: Mapped[datetime | None]
    locked_at: Mapped[datetime | None]

    user: Mapped[User | None] = relationship()
    replies: Mapped[list[QuestionReply]] = relationship(
        back_populates="question", order_by="QuestionReply.id", cascade="all, delete-orphan")


class QuestionReply(Base):
    """An answer (an organiser's) or a follow-up (the asker's, or on a public question any
    participant's) to a question."""

    __tablename__ = "question_reply"

    id: Mapped[int] = mapped_column(primary_key=True)
    question_id: Mapped[int] = mapped_column(ForeignKey("question.id", ondelete="CASCADE"),
                                             index=True)
    user_id: Mapped[int | None] = mapped_column(ForeignKey("user_account.id"))
    body: Mapped[str] = mapped_column(Text)
    by_organiser: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[datetime]
    hidden_at: Mapped[datetime | None]

    question: Mapped[Question] = relationship(back_populates="replies")
    user: Mapped[User | None] = relationship()


class QueueWatch(Base):
    """A task's queue alerts: a job waiting or running longer than these minutes raises one
    alert (checked by the schedule ticker), as an announcement draft, mail to the organisers
    and the task's channels (the `queue_alert` event)."""

    __tablename__ = "queue_watch"

    id: Mapped[int] = mapped_column(primary_key=True)
    task_id: Mapped[int] = mapped_column(ForeignKey("task.id", ondelete="CASCADE"), unique=True)
    wait_minutes: Mapped[int | None] = mapped_column(Integer)
    run_minutes: Mapped[int | None] = mapped_column(Integer)
    draft_announcement: Mapped[bool] = mapped_column(Boolean, default=False)
    mail_organisers: Mapped[bool] = mapped_column(Boolean, default=True)
    updated_at: Mapped[datetime]


class QueueAlert(Base):
    """One alert raised for a job (subject "run:ID" or "model:ID") waiting or running too long:
    raised once per job and kind."""

    __tablename__ = "queue_alert"
    __table_args__ = (UniqueConstraint("task_id", "subject", "kind"),
                      CheckConstraint(_in("kind", QUEUE_ALERT_KINDS), name="kind"))

    id: Mapped[int] = mapped_column(primary_key=True)
    task_id: Mapped[int] = mapped_column(ForeignKey("task.id", ondelete="CASCADE"))
    subject: Mapped[str] = mapped_column(String(40))
    kind: Mapped[str] = mapped_column(String(8))
    minutes: Mapped[int] = mapped_column(Integer)
    summary: Mapped[str] = mapped_column(Text)
    raised_at: Mapped[datetime]


class TaskAnalytics(Base):
    """A task's analytics as the last job computed them (services.boards.analytics): pages and
    downloads read this one row, whatever the number of runs. `stamp` names what they were
    computed from, so a job recomputes only a changed task."""

    __tablename__ = "task_analytics"

    id: Mapped[int] = mapped_column(primary_key=True)
    task_id: Mapped[int] = mapped_column(ForeignKey("task.id", ondelete="CASCADE"), unique=True)
    stamp: Mapped[str] = mapped_column(String(64))
    data: Mapped[dict[str, Any]] = mapped_column()
    computed_at: Mapped[datetime]
    elapsed_ms: Mapped[int] = mapped_column(Integer)
class PhaseParts(Base):
    """A phase's split of its test items into public, private and ignored parts (the
    definition's `[parts]`): drawn from a seed, or the organisers' file; the split's text
    (`dataset, id, usage` lines, evaluation.parts) is stored under its sha256. Private until the
    phase's reveal; then published with the gold."""

    __tablename__ = "phase_parts"
    __table_args__ = (UniqueConstraint("phase_id"),
                      CheckConstraint("source IN ('drawn', 'file')", name="source"))

    id: Mapped[int] = mapped_column(primary_key=True)
    phase_id: Mapped[int] = mapped_column(ForeignKey("phase.id", ondelete="CASCADE"))
    source: Mapped[str] = mapped_column(String(8))
    # the draw's seed (kept secret until the reveal); None for the organisers' file
    seed: Mapped[int | None] = mapped_column(BigInteger)
    rule: Mapped[str] = mapped_column(Text)
    sha256: Mapped[str] = mapped_column(String(64))
    storage_key: Mapped[str] = mapped_column(String(512))
    filename: Mapped[str | None] = mapped_column(String(255))
    # items per dataset and part {dataset: {part: n}}
    counts: Mapped[dict[str, Any]] = mapped_column()
    created_by_id: Mapped[int | None] = mapped_column(ForeignKey("user_account.id"))
    created_at: Mapped[datetime]


class PartScore(Base):
    """A run's scores on the private part or the whole of a split test set, beside its score
    record (which holds the public part's: what the phase's board and run pages show)."""

    __tablename__ = "part_score"
    __table_args__ = (UniqueConstraint("score_id", "part"),
                      CheckConstraint("part IN ('private', 'whole')", name="part"))

    id: Mapped[int] = mapped_column(primary_key=True)
    score_id: Mapped[int] = mapped_column(ForeignKey("run_score.id", ondelete="CASCADE"))
    part: Mapped[str] = mapped_column(String(8))
    scores: Mapped[dict[str, Any]] = mapped_column()
    flat: Mapped[dict[str, Any]] = mapped_column()
    # score_digest of scores and flat: a board build keys its parsed records by it
    digest: Mapped[str] = mapped_column(String(40))


class FinalRun(Base):
    """One of a team's final runs in a phase with a split test set: what its private standing
    is taken from. Chosen by the team until the deadline; `fallback` marks one written at the
    close for a team that chose none (its best public runs, audited)."""

    __tablename__ = "final_run"
    __table_args__ = (UniqueConstraint("team_id", "phase_id", "run_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    team_id: Mapped[int] = mapped_column(ForeignKey("team.id", ondelete="CASCADE"))
    phase_id: Mapped[int] = mapped_column(ForeignKey("phase.id", ondelete="CASCADE"))
    run_id: Mapped[int] = mapped_column(ForeignKey("run.id", ondelete="CASCADE"))
    chosen_by_id: Mapped[int | None] = mapped_column(ForeignKey("user_account.id"))
    chosen_at: Mapped[datetime]
    fallback: Mapped[bool] = mapped_column(Boolean, default=False)


class PartBoard(Base):
    """A board stored beside a phase's live one (services.boards.reveal): the board frozen at
    its freeze time, the private and whole boards of final runs, and the shake-up report; one
    row per version (a digest of what it shows), the newest kept."""

    __tablename__ = "part_board"
    __table_args__ = (UniqueConstraint("phase_id", "kind", "version"),
                      CheckConstraint(_in("kind", PART_BOARDS), name="kind"))

    id: Mapped[int] = mapped_column(primary_key=True)
    phase_id: Mapped[int] = mapped_column(ForeignKey("phase.id", ondelete="CASCADE"))
    kind: Mapped[str] = mapped_column(String(12))
    version: Mapped[str] = mapped_column(String(64))
    # the board's JSON text ({"board", "intervals"}) or the report's ({"report"})
    data: Mapped[str] = mapped_column(Text)
    csv: Mapped[str] = mapped_column(Text, default="")
    built_at: Mapped[datetime]
    elapsed_ms: Mapped[int] = mapped_column(Integer, default=0)


# ----------------------------------------------------------------------------- board changes
# The database's own record of changes a board shows: triggers on run, run_score and team.
#
# Every write that changes what a phase board shows (a shown run added, changed, withdrawn or
# moved; a new score record of a shown run; a team's name or flags where it has shown runs) bumps
# the phase's `board_counter.serial` and logs the change in `board_change` under that serial, by
# trigger, so no write path (ORM, core `update()`, bulk inserts, SQL by hand) can bypass it. A
# board's version names the serial; a merge reads the runs logged since its base's serial.
#
# A shown run is a current, scored one (services/boards/leaderboard.board_listing). The counter is
# a row per phase, not a sequence: the row lock orders concurrent writers, so on PostgreSQL a
# reader that sees serial N sees every change logged under N or less (a sequence's max id would
# not: ids are taken in one order and committed in another). One home for the DDL: the models'
# metadata (create_all) and migration 0043 both run these statements.

# the columns of run whose change can change a board (board_listing's and the version's)
_RUN_COLUMNS = ("phase_id", "is_current", "status", "is_late", "is_fix", "team_id")
_TEAM_COLUMNS = ("name", "is_baseline", "is_organiser_team")
_SHOWN = "{row}.is_current AND {row}.status = 'scored'"

BOARD_TRIGGERS = ("board_change_run_insert", "board_change_run_update",
                  "board_change_run_delete", "board_change_score_insert",
                  "board_change_score_delete", "board_change_team")


def _changed(columns: tuple[str, ...]) -> str:
    return " OR ".join(f"OLD.{c} IS NOT NEW.{c}" for c in columns)


def _sqlite_bump(phases: str, run: str, team: str) -> str:
    """Bump the counter of each phase `phases` (a SELECT of phase ids, WHERE included) yields
    and log the change under its new serial (two statements of a trigger body)."""
    return (f"INSERT INTO board_counter (phase_id, serial) SELECT phase_id, 1 FROM ({phases}) "
            "WHERE true ON CONFLICT (phase_id) DO UPDATE SET serial = serial + 1;\n"
            "INSERT INTO board_change (phase_id, serial, run_id, team_id) "
            f"SELECT c.phase_id, c.serial, {run}, {team} FROM board_counter c "
            f"WHERE c.phase_id IN ({phases});\n")


def _sqlite() -> list[str]:
    shown_new, shown_old = _SHOWN.format(row="NEW"), _SHOWN.format(row="OLD")
    return [
        "CREATE TRIGGER IF NOT EXISTS board_change_run_insert "
        "AFTER INSERT ON run "
        f"WHEN {shown_new} BEGIN\n"
        + _sqlite_bump("SELECT NEW.phase_id AS phase_id", "NEW.id", "NULL") + "END",
        "CREATE TRIGGER IF NOT EXISTS board_change_run_update "
        f"AFTER UPDATE OF {', '.join(_RUN_COLUMNS)} "
        f"ON run WHEN ({_changed(_RUN_COLUMNS)}) AND (({shown_old}) OR ({shown_new})) BEGIN\n"
        + _sqlite_bump(f"SELECT OLD.phase_id AS phase_id WHERE {shown_old}", "OLD.id", "NULL")
        + _sqlite_bump(f"SELECT NEW.phase_id AS phase_id WHERE {shown_new} "
                       f"AND NOT ({shown_old} AND OLD.phase_id = NEW.phase_id)",
                       "NEW.id", "NULL") + "END",
        "CREATE TRIGGER IF NOT EXISTS board_change_run_delete "
        "AFTER DELETE ON run "
        f"WHEN {shown_old} BEGIN\n"
        + _sqlite_bump("SELECT OLD.phase_id AS phase_id", "OLD.id", "NULL") + "END",
        "CREATE TRIGGER IF NOT EXISTS board_change_score_insert "
        "AFTER INSERT ON run_score BEGIN\n"
        + _sqlite_bump("SELECT phase_id FROM run WHERE id = NEW.run_id AND "
                       + _SHOWN.format(row="run"), "NEW.run_id", "NULL") + "END",
        "CREATE TRIGGER IF NOT EXISTS board_change_score_delete "
        "AFTER DELETE ON run_score BEGIN\n"
        + _sqlite_bump("SELECT phase_id FROM run WHERE id = OLD.run_id AND "
                       + _SHOWN.format(row="run"), "OLD.run_id", "NULL") + "END",
        "CREATE TRIGGER IF NOT EXISTS board_change_team "
        f"AFTER UPDATE OF {', '.join(_TEAM_COLUMNS)} ON team "
        f"WHEN {_changed(_TEAM_COLUMNS)} BEGIN\n"
        + _sqlite_bump("SELECT DISTINCT phase_id FROM run WHERE team_id = NEW.id AND "
                       + _SHOWN.format(row="run"), "NULL", "NEW.id") + "END",
    ]


def _distinct(columns: tuple[str, ...]) -> str:
    old = ", ".join(f"OLD.{c}" for c in columns)
    new = ", ".join(f"NEW.{c}" for c in columns)
    return f"({old}) IS DISTINCT FROM ({new})"


def _postgresql() -> list[str]:
    shown_new, shown_old = _SHOWN.format(row="NEW"), _SHOWN.format(row="OLD")
    shown_run = _SHOWN.format(row="r")
    return [
        # the counter row's lock orders writers: the serial is taken and logged under it
        "CREATE OR REPLACE FUNCTION board_change_bump(p integer, r integer, t integer) "
        "RETURNS void "
        "LANGUAGE plpgsql AS $$\nDECLARE s bigint;\nBEGIN\n"
        "  INSERT INTO board_counter (phase_id, serial) VALUES (p, 1) ON CONFLICT (phase_id) "
        "DO UPDATE SET serial = board_counter.serial + 1 RETURNING serial INTO s;\n"
        "  INSERT INTO board_change (phase_id, serial, run_id, team_id) VALUES (p, s, r, t);\n"
        "END $$",
        "CREATE OR REPLACE FUNCTION board_change_run() "
        "RETURNS trigger LANGUAGE plpgsql AS $$\nBEGIN\n"
        f"  IF TG_OP <> 'INSERT' AND {shown_old} THEN\n"
        "    PERFORM board_change_bump(OLD.phase_id, OLD.id, NULL);\n  END IF;\n"
        f"  IF TG_OP <> 'DELETE' AND {shown_new} AND (TG_OP = 'INSERT' OR NOT ({shown_old} "
        "AND OLD.phase_id = NEW.phase_id)) THEN\n"
        "    PERFORM board_change_bump(NEW.phase_id, NEW.id, NULL);\n  END IF;\n"
        "  RETURN NULL;\nEND $$",
        # dropped first: CREATE OR REPLACE TRIGGER needs PostgreSQL 14, DEPLOY.md says 13
        "DROP TRIGGER IF EXISTS board_change_run_insert ON run",
        "CREATE TRIGGER board_change_run_insert "
        "AFTER INSERT ON run FOR EACH ROW "
        f"WHEN ({shown_new}) EXECUTE FUNCTION board_change_run()",
        "DROP TRIGGER IF EXISTS board_change_run_update ON run",
        "CREATE TRIGGER board_change_run_update "
        f"AFTER UPDATE OF {', '.join(_RUN_COLUMNS)} ON run "
        f"FOR EACH ROW WHEN ({_distinct(_RUN_COLUMNS)} AND (({shown_old}) OR ({shown_new}))) "
        "EXECUTE FUNCTION board_change_run()",
        "DROP TRIGGER IF EXISTS board_change_run_delete ON run",
        "CREATE TRIGGER board_change_run_delete "
        "AFTER DELETE ON run FOR EACH ROW "
        f"WHEN ({shown_old}) EXECUTE FUNCTION board_change_run()",
        "CREATE OR REPLACE FUNCTION board_change_score() "
        "RETURNS trigger LANGUAGE plpgsql AS $$\n"
        "DECLARE p integer; k integer;\nBEGIN\n"
        "  k := CASE WHEN TG_OP = 'DELETE' THEN OLD.run_id ELSE NEW.run_id END;\n"
        f"  SELECT r.phase_id INTO p FROM run r WHERE r.id = k AND {shown_run};\n"
        "  IF p IS NOT NULL THEN\n    PERFORM board_change_bump(p, k, NULL);\n  END IF;\n"
        "  RETURN NULL;\nEND $$",
        "DROP TRIGGER IF EXISTS board_change_score_insert ON run_score",
        "CREATE TRIGGER board_change_score_insert "
        "AFTER INSERT ON run_score FOR EACH ROW "
        "EXECUTE FUNCTION board_change_score()",
        "DROP TRIGGER IF EXISTS board_change_score_delete ON run_score",
        "CREATE TRIGGER board_change_score_delete "
        "AFTER DELETE ON run_score FOR EACH ROW "
        "EXECUTE FUNCTION board_change_score()",
        "CREATE OR REPLACE FUNCTION board_change_team() "
        "RETURNS trigger LANGUAGE plpgsql AS $$\n"
        "DECLARE p integer;\nBEGIN\n"
        # in phase order: two writers bump the same counters in one order (no deadlock)
        f"  FOR p IN SELECT DISTINCT r.phase_id FROM run r WHERE r.team_id = NEW.id AND "
        f"{shown_run} ORDER BY r.phase_id LOOP\n"
        "    PERFORM board_change_bump(p, NULL, NEW.id);\n  END LOOP;\n"
        "  RETURN NULL;\nEND $$",
        "DROP TRIGGER IF EXISTS board_change_team ON team",
        "CREATE TRIGGER board_change_team "
        f"AFTER UPDATE OF {', '.join(_TEAM_COLUMNS)} ON team "
        f"FOR EACH ROW WHEN ({_distinct(_TEAM_COLUMNS)}) EXECUTE FUNCTION board_change_team()",
    ]


def board_trigger_statements(dialect: str) -> list[str]:
    """The statements creating the triggers (after the tables they read and write exist)."""
    if dialect == "sqlite":
        return _sqlite()
    if dialect == "postgresql":
        return _postgresql()
    raise NotImplementedError(f"board change triggers for {dialect}")


def board_trigger_drops(dialect: str) -> list[str]:
    """The statements dropping what board_trigger_statements() made."""
    tables = {"run_insert": "run", "run_update": "run", "run_delete": "run",
              "score_insert": "run_score", "score_delete": "run_score", "team": "team"}
    if dialect == "sqlite":
        return [f"DROP TRIGGER IF EXISTS {name}" for name in BOARD_TRIGGERS]
    drops = [f"DROP TRIGGER IF EXISTS {name} ON {tables[name.removeprefix('board_change_')]}"
             for name in BOARD_TRIGGERS]
    return drops + [f"DROP FUNCTION IF EXISTS {f}" for f in (
        "board_change_run()", "board_change_score()", "board_change_team()",
        "board_change_bump(integer, integer, integer)")]


class BoardCounter(Base):
    """A phase's board serial: moved by database triggers (board_trigger_statements) with every
    write that changes what the phase's board shows; a board's version names it."""

    __tablename__ = "board_counter"

    # no foreign key: the triggers write it while a phase's runs are cascade-deleted
    phase_id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    serial: Mapped[int] = mapped_column(BigInteger)


class BoardChange(Base):
    """One change a phase's board shows, logged by trigger under the serial it took: a run
    (run_id) or every run of a team (team_id, run_id NULL). A merge reads those after its base's
    serial; the board job prunes old ones (only recent ones can be merged)."""

    __tablename__ = "board_change"
    __table_args__ = (UniqueConstraint("phase_id", "serial"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    # no foreign keys: the log names runs deleted since, and is written during cascades
    phase_id: Mapped[int] = mapped_column(Integer)
    serial: Mapped[int] = mapped_column(BigInteger)
    run_id: Mapped[int | None] = mapped_column(Integer)
    team_id: Mapped[int | None] = mapped_column(Integer)


def _board_triggers(action: str) -> Any:
    """Create (or drop) the board change triggers with the metadata's tables (create_all)."""

    def run(_target: Any, connection: Any, **_kw: Any) -> None:
        name = connection.dialect.name
        statements = (board_trigger_statements(name) if action == "create"
                      else board_trigger_drops(name))
        for statement in statements:
            connection.exec_driver_sql(statement)

    return run


event.listen(Base.metadata, "after_create", _board_triggers("create"))
event.listen(Base.metadata, "before_drop", _board_triggers("drop"))
