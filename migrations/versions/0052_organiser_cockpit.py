"""The organiser's cockpit (issue 44): notification channels and their delivery log, questions
and answers, announcement revisions (critical, edited, withdrawn), queue alerts, stored
analytics, the entry deadline, refusal reasons and the reason of an approval decision.

Revision ID: 0052_organiser_cockpit
Revises: 0046_announcement_score_phases

Added columns are plain
ADD COLUMN, nullable or with a server default: phase, announcement, upload_log and team_approval
are never rebuilt on SQLite (a copy would cascade-delete the rows that point at them).
"""

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

revision: str = "0052_organiser_cockpit"
down_revision: str | None = "0046_announcement_score_phases"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

WHEN = sa.DateTime(timezone=True)
# (table, column) added to existing tables, in order
ADDED = [
    ("phase", sa.Column("entry_deadline", WHEN, nullable=True)),
    ("upload_log", sa.Column("reason", sa.String(length=32), nullable=True)),
    ("team_approval", sa.Column("reason", sa.Text(), nullable=True)),
    ("announcement", sa.Column("critical", sa.Boolean(), nullable=False,
                               server_default=sa.false())),
    ("announcement", sa.Column("edited_at", WHEN, nullable=True)),
    ("announcement", sa.Column("withdrawn_at", WHEN, nullable=True)),
    ("announcement", sa.Column("withdrawn_by_id", sa.Integer(), nullable=True)),
    ("announcement", sa.Column("withdraw_reason", sa.Text(), nullable=True)),
]


def _id(table: str) -> list[Any]:
    return [sa.Column("id", sa.Integer(), nullable=False),
            sa.PrimaryKeyConstraint("id", name=op.f(f"pk_{table}"))]


def _fk(table: str, column: str, target: str, cascade: bool = True) -> sa.ForeignKeyConstraint:
    referred = target.split(".")[0]
    return sa.ForeignKeyConstraint([column], [target],
                                   name=op.f(f"fk_{table}_{column}_{referred}"),
                                   ondelete="CASCADE" if cascade else None)


def _check(table: str, name: str, column: str, values: tuple[str, ...]) -> sa.CheckConstraint:
    listed = ", ".join(repr(v) for v in values)
    return sa.CheckConstraint(f"{column} IN ({listed})", name=op.f(f"ck_{table}_{name}"))


def upgrade() -> None:
    """Apply this revision."""
    for table, column in ADDED:
        op.add_column(table, column)
    op.create_table(
        "announcement_revision", *_id("announcement_revision"),
        sa.Column("announcement_id", sa.Integer(), nullable=False),
        sa.Column("title", sa.String(length=200), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("edited_by_id", sa.Integer(), nullable=True),
        sa.Column("edited_at", WHEN, nullable=False),
        _fk("announcement_revision", "announcement_id", "announcement.id"),
        _fk("announcement_revision", "edited_by_id", "user_account.id", cascade=False),
    )
    op.create_index(op.f("ix_announcement_revision_announcement_id"), "announcement_revision",
                    ["announcement_id"])
    op.create_table(
        "notification_channel", *_id("notification_channel"),
        sa.Column("task_id", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=10), nullable=False),
        sa.Column("name", sa.String(length=120), nullable=False),
        sa.Column("target", sa.String(length=2000), nullable=False),
        sa.Column("secret", sa.String(length=128), nullable=True),
        sa.Column("events", sa.JSON(), nullable=False),
        sa.Column("created_by_id", sa.Integer(), nullable=True),
        sa.Column("created_at", WHEN, nullable=False),
        sa.Column("disabled_at", WHEN, nullable=True),
        _check("notification_channel", "kind", "kind", ("webhook", "chat", "mail")),
        _fk("notification_channel", "task_id", "task.id"),
        _fk("notification_channel", "created_by_id", "user_account.id", cascade=False),
    )
    op.create_index(op.f("ix_notification_channel_task_id"), "notification_channel",
                    ["task_id"])
    op.create_table(
        "notification_delivery", *_id("notification_delivery"),
        sa.Column("channel_id", sa.Integer(), nullable=False),
        sa.Column("task_id", sa.Integer(), nullable=False),
        sa.Column("event", sa.String(length=40), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("status", sa.String(length=10), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", WHEN, nullable=False),
        sa.Column("last_status", sa.Integer(), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=False),
        sa.Column("created_at", WHEN, nullable=False),
        sa.Column("delivered_at", WHEN, nullable=True),
        _check("notification_delivery", "status", "status", ("pending", "sent", "failed")),
        _fk("notification_delivery", "channel_id", "notification_channel.id"),
        _fk("notification_delivery", "task_id", "task.id"),
    )
    op.create_index(op.f("ix_notification_delivery_status_next_attempt_at"),
                    "notification_delivery", ["status", "next_attempt_at"])
    op.create_index(op.f("ix_notification_delivery_channel_id_created_at"),
                    "notification_delivery", ["channel_id", "created_at"])
    op.create_table(
        "question", *_id("question"),
        sa.Column("task_id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=True),
        sa.Column("title", sa.String(length=200), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("visibility", sa.String(length=8), nullable=False),
        sa.Column("is_faq", sa.Boolean(), nullable=False),
        sa.Column("created_at", WHEN, nullable=False),
        sa.Column("updated_at", WHEN, nullable=False),
        sa.Column("answered_at", WHEN, nullable=True),
        sa.Column("published_at", WHEN, nullable=True),
        sa.Column("hidden_at", WHEN, nullable=True),
        sa.Column("locked_at", WHEN, nullable=True),
        _check("question", "visibility", "visibility", ("public", "private")),
        _fk("question", "task_id", "task.id"),
        _fk("question", "user_id", "user_account.id", cascade=False),
    )
    op.create_index(op.f("ix_question_task_id_updated_at"), "question", ["task_id", "updated_at"])
    op.create_table(
        "question_reply", *_id("question_reply"),
        sa.Column("question_id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=True),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("by_organiser", sa.Boolean(), nullable=False),
        sa.Column("created_at", WHEN, nullable=False),
        sa.Column("hidden_at", WHEN, nullable=True),
        _fk("question_reply", "question_id", "question.id"),
        _fk("question_reply", "user_id", "user_account.id", cascade=False),
    )
    op.create_index(op.f("ix_question_reply_question_id"), "question_reply", ["question_id"])
    op.create_table(
        "queue_watch", *_id("queue_watch"),
        sa.Column("task_id", sa.Integer(), nullable=False),
        sa.Column("wait_minutes", sa.Integer(), nullable=True),
        sa.Column("run_minutes", sa.Integer(), nullable=True),
        sa.Column("draft_announcement", sa.Boolean(), nullable=False),
        sa.Column("mail_organisers", sa.Boolean(), nullable=False),
        sa.Column("updated_at", WHEN, nullable=False),
        _fk("queue_watch", "task_id", "task.id"),
        sa.UniqueConstraint("task_id", name=op.f("uq_queue_watch_task_id")),
    )
    op.create_table(
        "queue_alert", *_id("queue_alert"),
        sa.Column("task_id", sa.Integer(), nullable=False),
        sa.Column("subject", sa.String(length=40), nullable=False),
        sa.Column("kind", sa.String(length=8), nullable=False),
        sa.Column("minutes", sa.Integer(), nullable=False),
        sa.Column("summary", sa.Text(), nullable=False),
        sa.Column("raised_at", WHEN, nullable=False),
        _check("queue_alert", "kind", "kind", ("wait", "run")),
        _fk("queue_alert", "task_id", "task.id"),
        sa.UniqueConstraint("task_id", "subject", "kind",
                            name=op.f("uq_queue_alert_task_id_subject_kind")),
    )
    op.create_table(
        "task_analytics", *_id("task_analytics"),
        sa.Column("task_id", sa.Integer(), nullable=False),
        sa.Column("stamp", sa.String(length=64), nullable=False),
        sa.Column("data", sa.JSON(), nullable=False),
        sa.Column("computed_at", WHEN, nullable=False),
        sa.Column("elapsed_ms", sa.Integer(), nullable=False),
        _fk("task_analytics", "task_id", "task.id"),
        sa.UniqueConstraint("task_id", name=op.f("uq_task_analytics_task_id")),
    )


def downgrade() -> None:
    """Revert this revision."""
    for table in ("task_analytics", "queue_alert", "queue_watch", "question_reply", "question",
                  "notification_delivery", "notification_channel", "announcement_revision"):
        op.drop_table(table)  # their indexes go with them
    for table, column in reversed(ADDED):
        if op.get_bind().dialect.name == "sqlite":  # in place: no table rebuild (see above)
            op.execute(f"ALTER TABLE {table} DROP COLUMN {column.name}")
        else:
            op.drop_column(table, column.name)
