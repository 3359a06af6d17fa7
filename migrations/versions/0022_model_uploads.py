"""Model uploads in parts, published model files, and 64-bit byte counts.

Revision ID: 0022_model_uploads
Revises: 0016_models
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0022_model_uploads"
down_revision: str | None = "0016_models"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Apply this revision."""
    sqlite = op.get_bind().dialect.name == "sqlite"
    if not sqlite:  # SQLite's INTEGER is 64-bit already; elsewhere a model passes 2 GiB
        op.alter_column("model_submission", "size", type_=sa.BigInteger(),
                        existing_type=sa.Integer(), existing_nullable=False)
        op.alter_column("upload_log", "total_bytes", type_=sa.BigInteger(),
                        existing_type=sa.Integer(), existing_nullable=False)
    op.add_column("model_submission",
                  sa.Column("published_at", sa.DateTime(timezone=True), nullable=True))
    op.create_table(
        "model_upload",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("task_id", sa.Integer(), nullable=False),
        sa.Column("team_id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("filename", sa.String(length=255), nullable=False),
        sa.Column("size", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("received", sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
                  server_default="0", nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=True),
        sa.Column("parts", sa.JSON(), nullable=False),
        sa.Column("options", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("received >= 0 AND received <= size",
                           name=op.f("ck_model_upload_received")),
        sa.ForeignKeyConstraint(["task_id"], ["task.id"],
                                name=op.f("fk_model_upload_task_id_task"), ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["team_id"], ["team.id"],
                                name=op.f("fk_model_upload_team_id_team"), ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["user_id"], ["user_account.id"],
                                name=op.f("fk_model_upload_user_id_user_account"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_model_upload")),
    )
    op.create_index(op.f("ix_model_upload_user_id"), "model_upload", ["user_id"])
    op.create_index(op.f("ix_model_upload_updated_at"), "model_upload", ["updated_at"])


def downgrade() -> None:
    """Revert this revision."""
    op.drop_index(op.f("ix_model_upload_updated_at"), table_name="model_upload")
    op.drop_index(op.f("ix_model_upload_user_id"), table_name="model_upload")
    op.drop_table("model_upload")
    if op.get_bind().dialect.name == "sqlite":  # no table rebuild (see 0021_sessions)
        op.execute("ALTER TABLE model_submission DROP COLUMN published_at")
    else:
        op.drop_column("model_submission", "published_at")
        op.alter_column("upload_log", "total_bytes", type_=sa.Integer(),
                        existing_type=sa.BigInteger(), existing_nullable=False)
        op.alter_column("model_submission", "size", type_=sa.Integer(),
                        existing_type=sa.BigInteger(), existing_nullable=False)
