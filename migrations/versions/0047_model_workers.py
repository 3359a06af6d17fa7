"""Model workers' declared capabilities (the queue hands a model only to a worker that can run it).

Revision ID: 0047_model_workers
Revises: 0051_public_private_parts
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0047_model_workers"
down_revision: str | None = "0051_public_private_parts"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Apply this revision."""
    op.create_table(
        "model_worker",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("key", sa.String(length=160), nullable=False),
        sa.Column("name", sa.String(length=120), nullable=False),
        sa.Column("token_id", sa.Integer(), nullable=True),
        sa.Column("capabilities", sa.JSON(), nullable=False),
        sa.Column("seen_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["token_id"], ["worker_token.id"],
                                name=op.f("fk_model_worker_token_id_worker_token"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_model_worker")),
        sa.UniqueConstraint("key", name=op.f("uq_model_worker_key")),
    )
    op.create_index(op.f("ix_model_worker_token_id"), "model_worker", ["token_id"])


def downgrade() -> None:
    """Revert this revision."""
    op.drop_index(op.f("ix_model_worker_token_id"), table_name="model_worker")
    op.drop_table("model_worker")
