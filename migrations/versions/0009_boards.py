"""Prepared boards: a phase board built once per version of what it shows.

Revision ID: 0009_boards
Revises: 0011_charts
Create Date: 2026-11-23 10:55:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op


revision: str = '0009_boards'
down_revision: str | None = '0011_charts'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Apply this revision."""
    op.create_table('prepared_board',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('phase_id', sa.Integer(), nullable=False),
    sa.Column('version', sa.String(length=64), nullable=False),
    sa.Column('data', sa.JSON(), nullable=False),
    sa.Column('csv_text', sa.Text(), nullable=False),
    sa.Column('json_text', sa.Text(), nullable=False),
    sa.Column('groups_pending', sa.Boolean(), nullable=False),
    sa.Column('built_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('elapsed_ms', sa.Integer(), nullable=False),
    sa.ForeignKeyConstraint(['phase_id'], ['phase.id'], name=op.f('fk_prepared_board_phase_id_phase'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_prepared_board')),
    sa.UniqueConstraint('phase_id', 'version', name=op.f('uq_prepared_board_phase_id_version'))
    )


def downgrade() -> None:
    """Revert this revision."""
    op.drop_table('prepared_board')
