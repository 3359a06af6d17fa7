"""Sessions that end: one row per logged-in browser session; accounts deleted by their owner.

Revision ID: 0021_sessions
Revises: 0009_boards
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0021_sessions"
down_revision: str | None = "0009_boards"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Apply this revision."""
    # Plain ADD COLUMN, never a batch table copy: on SQLite, copying user_account would drop a
    # table that every other table references (and cascade-delete their rows).
    op.add_column("user_account",
                  sa.Column("deleted_at", sa.DateTime(timezone=True), nullable=True))
    op.create_table(
        "login_session",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("key_hash", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["user_id"], ["user_account.id"],
                                name=op.f("fk_login_session_user_id_user_account"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_login_session")),
        sa.UniqueConstraint("key_hash", name=op.f("uq_login_session_key_hash")),
    )
    op.create_index(op.f("ix_login_session_user_id"), "login_session", ["user_id"])


def downgrade() -> None:
    """Revert this revision."""
    op.drop_index(op.f("ix_login_session_user_id"), table_name="login_session")
    op.drop_table("login_session")
    if op.get_bind().dialect.name == "sqlite":  # no table rebuild: see upgrade()
        op.execute("ALTER TABLE user_account DROP COLUMN deleted_at")
    else:
        op.drop_column("user_account", "deleted_at")
