"""The model track: what a phase accepts, and teams' uploaded encoders.

Revision ID: 0016_models
Revises: 0009_boards
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0016_models"
down_revision: str | None = "0021_sessions"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Apply this revision."""
    # Plain ADD COLUMN: rebuilding `phase` on SQLite would cascade-delete its runs.
    if op.get_bind().dialect.name == "sqlite":
        op.execute("ALTER TABLE phase ADD COLUMN accepts VARCHAR(8) DEFAULT 'runs' NOT NULL "
                   "CONSTRAINT ck_phase_accepts CHECK (accepts IN ('runs', 'models', 'both'))")
    else:
        op.add_column("phase", sa.Column("accepts", sa.String(length=8), server_default="runs",
                                         nullable=False))
        op.create_check_constraint("accepts", "phase", "accepts IN ('runs', 'models', 'both')")
    op.create_table(
        "model_submission",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("task_id", sa.Integer(), nullable=False),
        sa.Column("phase_id", sa.Integer(), nullable=False),
        sa.Column("team_id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=True),
        sa.Column("name", sa.String(length=120), nullable=False),
        sa.Column("uploaded_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("storage_key", sa.String(length=512), nullable=False),
        sa.Column("archive_sha256", sa.String(length=64), nullable=False),
        sa.Column("size", sa.Integer(), nullable=False),
        sa.Column("digest", sa.String(length=64), nullable=False),
        sa.Column("description", sa.JSON(), nullable=False),
        sa.Column("options", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(length=10), nullable=False),
        sa.Column("reason", sa.Text(), server_default="", nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=True),
        sa.Column("attempts", sa.Integer(), server_default="0", nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint("status IN ('queued', 'running', 'failed', 'done')",
                           name=op.f("ck_model_submission_status")),
        sa.ForeignKeyConstraint(["phase_id"], ["phase.id"],
                                name=op.f("fk_model_submission_phase_id_phase"),
                                ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["run_id"], ["run.id"],
                                name=op.f("fk_model_submission_run_id_run"), ondelete="SET NULL"),
        sa.ForeignKeyConstraint(["task_id"], ["task.id"],
                                name=op.f("fk_model_submission_task_id_task"),
                                ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["team_id"], ["team.id"],
                                name=op.f("fk_model_submission_team_id_team"),
                                ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["user_id"], ["user_account.id"],
                                name=op.f("fk_model_submission_user_id_user_account")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_model_submission")),
    )
    op.create_index(op.f("ix_model_submission_status_uploaded_at"), "model_submission",
                    ["status", "uploaded_at"])
    op.create_index(op.f("ix_model_submission_team_id_phase_id"), "model_submission",
                    ["team_id", "phase_id"])


def downgrade() -> None:
    """Revert this revision."""
    op.drop_index(op.f("ix_model_submission_team_id_phase_id"), table_name="model_submission")
    op.drop_index(op.f("ix_model_submission_status_uploaded_at"), table_name="model_submission")
    op.drop_table("model_submission")
    if op.get_bind().dialect.name == "sqlite":
        # in place (its CHECK belongs to the column): a copy of `phase` would cascade-delete rows
        op.execute("ALTER TABLE phase DROP COLUMN accepts")
    else:
        op.drop_constraint("accepts", "phase", type_="check")
        op.drop_column("phase", "accepts")
