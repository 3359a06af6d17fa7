"""The site in several languages (issue 43): an account's language, the language of accepted
terms, translations of terms versions and announcements, and upload log messages kept as the
site's words (said in each reader's language).

Revision ID: 0050_languages
Revises: 0047_model_workers
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0050_languages"
down_revision: str | None = "0047_model_workers"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# (table, column, type): nullable columns without constraints, so SQLite adds and drops them in
# place (a rebuilt `user_account` or `terms_version` would cascade-delete the rows naming them)
COLUMNS = (
    ("user_account", "language", sa.String(length=8)),
    ("terms_acceptance", "language", sa.String(length=8)),
    ("terms_version", "translations", sa.JSON()),
    ("announcement", "translations", sa.JSON()),
    ("upload_log", "said", sa.JSON()),
)


def upgrade() -> None:
    """Apply this revision."""
    for table, column, kind in COLUMNS:
        op.add_column(table, sa.Column(column, kind, nullable=True))


def downgrade() -> None:
    """Revert this revision."""
    sqlite = op.get_bind().dialect.name == "sqlite"
    for table, column, _ in reversed(COLUMNS):
        if sqlite:
            op.execute(f"ALTER TABLE {table} DROP COLUMN {column}")
        else:
            op.drop_column(table, column)
