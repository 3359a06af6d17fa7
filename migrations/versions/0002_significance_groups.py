"""Significance groups: a phase board's cached paired-bootstrap groups, keyed by a digest.

Revision ID: 0002_significance_groups
Revises: 0001_initial
Create Date: 2026-11-22 08:14:00.222391
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op


revision: str = '0002_significance_groups'
down_revision: str | None = '0001_initial'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Apply this revision."""
    op.create_table('significance_groups',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('phase_id', sa.Integer(), nullable=False),
    sa.Column('digest', sa.String(length=64), nullable=False),
    sa.Column('settings', sa.JSON(), nullable=False),
    sa.Column('groups', sa.JSON(), nullable=False),
    sa.Column('elapsed_ms', sa.Integer(), nullable=False),
    sa.Column('computed_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['phase_id'], ['phase.id'], name=op.f('fk_significance_groups_phase_id_phase'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_significance_groups')),
    sa.UniqueConstraint('phase_id', 'digest', name=op.f('uq_significance_groups_phase_id_digest'))
    )


def downgrade() -> None:
    """Revert this revision."""
    op.drop_table('significance_groups')
