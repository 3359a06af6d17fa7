"""A terms version's own time to take effect and its grace period (issue 40).

Revision ID: 0045_terms_schedule
Revises: 0043_board_change_triggers

Both columns are nullable: an existing version took effect when it was made and has no grace.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0045_terms_schedule"
down_revision: str | None = "0043_board_change_triggers"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

COLUMNS = ("effective_at", "grace_until")


def upgrade() -> None:
    """Apply this revision."""
    for name in COLUMNS:
        op.add_column("terms_version", sa.Column(name, sa.DateTime(timezone=True),
                                                 nullable=True))


def downgrade() -> None:
    """Revert this revision."""
    for name in COLUMNS:
        if op.get_bind().dialect.name == "sqlite":
            # in place: a copy of terms_version would cascade-delete its acceptances
            op.execute(f"ALTER TABLE terms_version DROP COLUMN {name}")
        else:
            op.drop_column("terms_version", name)
