"""A stored board version's JSON and CSV downloads gzip-compressed once, off the request
(issue 45): each web worker reads them instead of compressing a big board's body at each
version.

Revision ID: 0056_board_packed_bodies
Revises: 0055_board_groups_edits
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0056_board_packed_bodies"
down_revision: str | None = "0055_board_groups_edits"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Apply this revision (the versions stored before have none: compressed when asked)."""
    with op.batch_alter_table("prepared_board") as batch:
        batch.add_column(sa.Column("json_gzip", sa.LargeBinary(), nullable=True))
        batch.add_column(sa.Column("csv_gzip", sa.LargeBinary(), nullable=True))


def downgrade() -> None:
    """Revert this revision (the compressed bodies are dropped; the texts stay)."""
    with op.batch_alter_table("prepared_board") as batch:
        batch.drop_column("csv_gzip")
        batch.drop_column("json_gzip")
