"""A stored board's row order as a checkpoint and edits against it (issue 45): storing an
upload's board version writes its edits, not the key of every row.

Revision ID: 0053_board_frame_edits
Revises: 0050_languages
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0053_board_frame_edits"
down_revision: str | None = "0050_languages"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Apply this revision (boards stored before keep their keys in their data: still read)."""
    op.create_table(
        "prepared_board_frame",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("phase_id", sa.Integer(), nullable=False),
        sa.Column("digest", sa.String(length=64), nullable=False),
        sa.Column("base", sa.String(length=64), nullable=True),
        sa.Column("edits", sa.Integer(), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(["phase_id"], ["phase.id"],
                                name=op.f("fk_prepared_board_frame_phase_id_phase"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_prepared_board_frame")),
        sa.UniqueConstraint("phase_id", "digest",
                            name=op.f("uq_prepared_board_frame_phase_id_digest")),
    )


def downgrade() -> None:
    """Revert this revision: boards stored in parts are dropped (they are built again)."""
    op.execute("DELETE FROM prepared_board WHERE json_text = ''")
    op.drop_table("prepared_board_frame")
