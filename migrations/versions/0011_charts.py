"""Run comparisons: two runs' stored paired tests, keyed by a digest of what moves them.

Revision ID: 0011_charts
Revises: 0010_closing
Create Date: 2026-11-23 11:20:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0011_charts'
down_revision: str | None = '0010_closing'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Apply this revision."""
    op.create_table('run_comparison',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('task_id', sa.Integer(), nullable=False),
    sa.Column('run_a_id', sa.Integer(), nullable=False),
    sa.Column('run_b_id', sa.Integer(), nullable=False),
    sa.Column('digest', sa.String(length=64), nullable=False),
    sa.Column('settings', sa.JSON(), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('results', sa.JSON(), nullable=True),
    sa.Column('pairs', sa.JSON(), nullable=True),
    sa.Column('error', sa.Text(), nullable=True),
    sa.Column('elapsed_ms', sa.Integer(), nullable=True),
    sa.Column('requested_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('computed_at', sa.DateTime(timezone=True), nullable=True),
    sa.CheckConstraint("status IN ('pending', 'done', 'failed')", name=op.f('ck_run_comparison_status')),
    sa.CheckConstraint('run_a_id <> run_b_id', name=op.f('ck_run_comparison_two_runs')),
    sa.ForeignKeyConstraint(['run_a_id'], ['run.id'], name=op.f('fk_run_comparison_run_a_id_run'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['run_b_id'], ['run.id'], name=op.f('fk_run_comparison_run_b_id_run'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['task_id'], ['task.id'], name=op.f('fk_run_comparison_task_id_task'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_run_comparison')),
    sa.UniqueConstraint('run_a_id', 'run_b_id', 'digest', name=op.f('uq_run_comparison_run_a_id_run_b_id_digest'))
    )


def downgrade() -> None:
    """Revert this revision."""
    op.drop_table('run_comparison')
