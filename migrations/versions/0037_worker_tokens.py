"""Remote model workers: a token per task's model queue, and the worker holding a model's job.

Revision ID: 0037_worker_tokens
Revises: 0036_model_jobs_watched
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0037_worker_tokens"
down_revision: str | None = "0036_model_jobs_watched"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Apply this revision."""
    op.create_table(
        "worker_token",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("task_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=120), nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("prefix", sa.String(length=12), nullable=False),
        sa.Column("created_by_id", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_seen_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("revoked_by_id", sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(["task_id"], ["task.id"],
                                name=op.f("fk_worker_token_task_id_task"), ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["created_by_id"], ["user_account.id"],
                                name=op.f("fk_worker_token_created_by_id_user_account")),
        sa.ForeignKeyConstraint(["revoked_by_id"], ["user_account.id"],
                                name=op.f("fk_worker_token_revoked_by_id_user_account")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_worker_token")),
        sa.UniqueConstraint("token_hash", name=op.f("uq_worker_token_token_hash")),
    )
    op.create_index(op.f("ix_worker_token_task_id"), "worker_token", ["task_id"])
    # a plain ADD COLUMN on SQLite (no table rebuild: see 0021_sessions), so no foreign key
    op.add_column("model_submission", sa.Column("worker_token_id", sa.Integer(), nullable=True))
    op.add_column("model_submission",
                  sa.Column("result_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    """Revert this revision."""
    if op.get_bind().dialect.name == "sqlite":  # no table rebuild: see upgrade()
        op.execute("ALTER TABLE model_submission DROP COLUMN result_at")
        op.execute("ALTER TABLE model_submission DROP COLUMN worker_token_id")
    else:
        op.drop_column("model_submission", "result_at")
        op.drop_column("model_submission", "worker_token_id")
    op.drop_index(op.f("ix_worker_token_task_id"), table_name="worker_token")
    op.drop_table("worker_token")
