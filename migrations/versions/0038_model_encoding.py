"""A phase's encoding rules for models: default and most max_seq_length, token budget, dtypes.

Revision ID: 0038_model_encoding
Revises: 0037_worker_tokens
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0038_model_encoding"
down_revision: str | None = "0037_worker_tokens"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Apply this revision."""
    # a nullable column: plain ADD COLUMN on SQLite, no table copy (see 0021_sessions)
    op.add_column("phase", sa.Column("model_settings", sa.JSON(), nullable=True))


def downgrade() -> None:
    """Revert this revision."""
    if op.get_bind().dialect.name == "sqlite":  # no table rebuild: see upgrade()
        op.execute("ALTER TABLE phase DROP COLUMN model_settings")
        return
    op.drop_column("phase", "model_settings")
