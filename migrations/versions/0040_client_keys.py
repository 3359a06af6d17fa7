"""Client keys: a retried upload (same Idempotency-Key) answers the first one's run or model.

Revision ID: 0040_client_keys
Revises: 0039_prepared_board_rows
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0040_client_keys"
down_revision: str | None = "0039_prepared_board_rows"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLES = ("run", "model_submission")


def upgrade() -> None:
    """Apply this revision."""
    # plain ADD COLUMN and CREATE INDEX on both databases (no SQLite table copy)
    for table in TABLES:
        op.add_column(table, sa.Column("client_key", sa.String(length=64), nullable=True))
        op.create_index(f"uq_{table}_client_key", table, ["team_id", "client_key"],
                        unique=True, sqlite_where=sa.text("client_key IS NOT NULL"),
                        postgresql_where=sa.text("client_key IS NOT NULL"))


def downgrade() -> None:
    """Revert this revision."""
    for table in TABLES:
        op.drop_index(f"uq_{table}_client_key", table_name=table)
        if op.get_bind().dialect.name == "sqlite":  # no table rebuild: see upgrade()
            op.execute(f"ALTER TABLE {table} DROP COLUMN client_key")
        else:
            op.drop_column(table, "client_key")
