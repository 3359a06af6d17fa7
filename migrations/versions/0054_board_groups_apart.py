"""A stored board's significance groups apart from its versions (issue 45): each grouping's
groups stored once, named by a digest in each version's frame, so a process reading a version
reads the board's groups only when they are new to it.

Revision ID: 0054_board_groups_apart
Revises: 0053_board_frame_edits
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0054_board_groups_apart"
down_revision: str | None = "0053_board_frame_edits"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Apply this revision (versions stored before keep their groups in their frame: still
    read)."""
    op.create_table(
        "prepared_board_groups",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("phase_id", sa.Integer(), nullable=False),
        sa.Column("digest", sa.String(length=64), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(["phase_id"], ["phase.id"],
                                name=op.f("fk_prepared_board_groups_phase_id_phase"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_prepared_board_groups")),
        sa.UniqueConstraint("phase_id", "digest",
                            name=op.f("uq_prepared_board_groups_phase_id_digest")),
    )


def downgrade() -> None:
    """Revert this revision: versions naming their groups by digest are dropped (an older
    tree would read them without groups; they are built again)."""
    op.execute("DELETE FROM prepared_board WHERE CAST(data AS TEXT) LIKE '%groups_digest%'")
    op.drop_table("prepared_board_groups")
