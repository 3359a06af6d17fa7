"""A stored board's groupings as a checkpoint and edits against the grouping before (issue
45): a groups round stores the runs whose groups changed, and a process holding the grouping
before reads those, not every run's groups.

Revision ID: 0055_board_groups_edits
Revises: 0054_board_groups_apart
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0055_board_groups_edits"
down_revision: str | None = "0054_board_groups_apart"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Apply this revision (the groupings stored before are checkpoints: still read)."""
    with op.batch_alter_table("prepared_board_groups") as batch:
        batch.add_column(sa.Column("base", sa.String(length=64), nullable=True))
        batch.add_column(sa.Column("edits", sa.Integer(), server_default="0", nullable=False))


def downgrade() -> None:
    """Revert this revision: the groupings stored as edits are dropped with the versions of
    their phases that name groups by digest (an older tree would read an edit as a whole
    grouping; those boards are built again)."""
    op.execute("DELETE FROM prepared_board WHERE CAST(data AS TEXT) LIKE '%groups_digest%' "
               "AND phase_id IN (SELECT phase_id FROM prepared_board_groups "
               "WHERE base IS NOT NULL)")
    op.execute("DELETE FROM prepared_board_groups WHERE base IS NOT NULL")
    with op.batch_alter_table("prepared_board_groups") as batch:
        batch.drop_column("edits")
        batch.drop_column("base")
