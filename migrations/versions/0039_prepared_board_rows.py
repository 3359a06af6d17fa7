"""Prepared boards stored in parts: each row once, so storing an upload's board writes its rows.

Revision ID: 0039_prepared_board_rows
Revises: 0038_model_encoding
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0039_prepared_board_rows"
down_revision: str | None = "0038_model_encoding"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Apply this revision."""
    op.create_table(
        "prepared_board_row",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("phase_id", sa.Integer(), nullable=False),
        sa.Column("key", sa.String(length=64), nullable=False),
        sa.Column("parts", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(["phase_id"], ["phase.id"],
                                name=op.f("fk_prepared_board_row_phase_id_phase"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_prepared_board_row")),
        sa.UniqueConstraint("phase_id", "key", name=op.f("uq_prepared_board_row_phase_id_key")),
    )


def downgrade() -> None:
    """Revert this revision: boards stored in parts are dropped (they are built again)."""
    op.execute("DELETE FROM prepared_board WHERE json_text = ''")
    op.drop_table("prepared_board_row")
