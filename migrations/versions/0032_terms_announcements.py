"""Terms versions and acceptances, the participation gate (team approval, secret links) and
announcements (issue 30).

Revision ID: 0032_terms_announcements
Revises: 0022_model_uploads
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0032_terms_announcements"
down_revision: str | None = "0022_model_uploads"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Apply this revision."""
    op.create_table(
        "announcement_opt_in",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("task_id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["task_id"],
            ["task.id"],
            name=op.f("fk_announcement_opt_in_task_id_task"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["user_id"],
            ["user_account.id"],
            name=op.f("fk_announcement_opt_in_user_id_user_account"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_announcement_opt_in")),
        sa.UniqueConstraint(
            "task_id", "user_id", name=op.f("uq_announcement_opt_in_task_id_user_id")
        ),
    )
    op.create_table(
        "task_secret",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("task_id", sa.Integer(), nullable=False),
        sa.Column("secret", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["task_id"], ["task.id"], name=op.f("fk_task_secret_task_id_task"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_task_secret")),
        sa.UniqueConstraint("task_id", name=op.f("uq_task_secret_task_id")),
    )
    op.create_table(
        "announcement",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("task_id", sa.Integer(), nullable=False),
        sa.Column("phase_id", sa.Integer(), nullable=True),
        sa.Column("kind", sa.String(length=20), nullable=False),
        sa.Column("status", sa.String(length=8), nullable=False),
        sa.Column("title", sa.String(length=200), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("created_by_id", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("sent_by_id", sa.Integer(), nullable=True),
        sa.Column("sent_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint(
            "(status = 'sent') = (sent_at IS NOT NULL)", name=op.f("ck_announcement_sent")
        ),
        sa.CheckConstraint(
            "kind IN ('message', 'gold-correction', 'deadline', 'results')",
            name=op.f("ck_announcement_kind"),
        ),
        sa.CheckConstraint("status IN ('draft', 'sent')", name=op.f("ck_announcement_status")),
        sa.ForeignKeyConstraint(
            ["created_by_id"],
            ["user_account.id"],
            name=op.f("fk_announcement_created_by_id_user_account"),
        ),
        sa.ForeignKeyConstraint(
            ["phase_id"],
            ["phase.id"],
            name=op.f("fk_announcement_phase_id_phase"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["sent_by_id"],
            ["user_account.id"],
            name=op.f("fk_announcement_sent_by_id_user_account"),
        ),
        sa.ForeignKeyConstraint(
            ["task_id"], ["task.id"], name=op.f("fk_announcement_task_id_task"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_announcement")),
    )
    with op.batch_alter_table("announcement", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_announcement_task_id_status_sent_at"),
            ["task_id", "status", "sent_at"],
            unique=False,
        )

    op.create_table(
        "team_approval",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("team_id", sa.Integer(), nullable=False),
        sa.Column("state", sa.String(length=10), nullable=False),
        sa.Column("decided_by_id", sa.Integer(), nullable=True),
        sa.Column("decided_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("state IN ('approved', 'refused')", name=op.f("ck_team_approval_state")),
        sa.ForeignKeyConstraint(
            ["decided_by_id"],
            ["user_account.id"],
            name=op.f("fk_team_approval_decided_by_id_user_account"),
        ),
        sa.ForeignKeyConstraint(
            ["team_id"], ["team.id"], name=op.f("fk_team_approval_team_id_team"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_team_approval")),
        sa.UniqueConstraint("team_id", name=op.f("uq_team_approval_team_id")),
    )
    op.create_table(
        "terms_version",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("task_id", sa.Integer(), nullable=False),
        sa.Column("phase_id", sa.Integer(), nullable=True),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("digest", sa.String(length=64), nullable=False),
        sa.Column("source", sa.String(length=12), nullable=False),
        sa.Column("created_by_id", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint(
            "source IN ('definition', 'organiser')", name=op.f("ck_terms_version_source")
        ),
        sa.ForeignKeyConstraint(
            ["created_by_id"],
            ["user_account.id"],
            name=op.f("fk_terms_version_created_by_id_user_account"),
        ),
        sa.ForeignKeyConstraint(
            ["phase_id"],
            ["phase.id"],
            name=op.f("fk_terms_version_phase_id_phase"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["task_id"], ["task.id"], name=op.f("fk_terms_version_task_id_task"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_terms_version")),
    )
    with op.batch_alter_table("terms_version", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_terms_version_task_id_phase_id_created_at"),
            ["task_id", "phase_id", "created_at"],
            unique=False,
        )

    op.create_table(
        "announcement_read",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("announcement_id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("read_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["announcement_id"],
            ["announcement.id"],
            name=op.f("fk_announcement_read_announcement_id_announcement"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["user_id"],
            ["user_account.id"],
            name=op.f("fk_announcement_read_user_id_user_account"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_announcement_read")),
        sa.UniqueConstraint(
            "announcement_id", "user_id", name=op.f("uq_announcement_read_announcement_id_user_id")
        ),
    )
    op.create_table(
        "terms_acceptance",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("task_id", sa.Integer(), nullable=False),
        sa.Column("terms_version_id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("team_id", sa.Integer(), nullable=True),
        sa.Column("digest", sa.String(length=64), nullable=False),
        sa.Column("client", sa.String(length=8), nullable=False),
        sa.Column("accepted_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint(
            "client IN ('web', 'api', 'cli')", name=op.f("ck_terms_acceptance_client")
        ),
        sa.ForeignKeyConstraint(
            ["task_id"],
            ["task.id"],
            name=op.f("fk_terms_acceptance_task_id_task"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["team_id"],
            ["team.id"],
            name=op.f("fk_terms_acceptance_team_id_team"),
            ondelete="SET NULL",
        ),
        sa.ForeignKeyConstraint(
            ["terms_version_id"],
            ["terms_version.id"],
            name=op.f("fk_terms_acceptance_terms_version_id_terms_version"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["user_id"],
            ["user_account.id"],
            name=op.f("fk_terms_acceptance_user_id_user_account"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_terms_acceptance")),
        sa.UniqueConstraint(
            "terms_version_id", "user_id", name=op.f("uq_terms_acceptance_terms_version_id_user_id")
        ),
    )
    with op.batch_alter_table("terms_acceptance", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_terms_acceptance_task_id_accepted_at"),
            ["task_id", "accepted_at"],
            unique=False,
        )


def downgrade() -> None:
    """Revert this revision."""
    with op.batch_alter_table("terms_acceptance", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_terms_acceptance_task_id_accepted_at"))

    op.drop_table("terms_acceptance")
    op.drop_table("announcement_read")
    with op.batch_alter_table("terms_version", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_terms_version_task_id_phase_id_created_at"))

    op.drop_table("terms_version")
    op.drop_table("team_approval")
    with op.batch_alter_table("announcement", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_announcement_task_id_status_sent_at"))

    op.drop_table("announcement")
    op.drop_table("task_secret")
    op.drop_table("announcement_opt_in")
