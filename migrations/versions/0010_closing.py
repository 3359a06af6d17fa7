"""Closing workflow: run descriptions, audit log, team merges, scheduled publication.

Revision ID: 0010_closing
Revises: 0012_accounts
Create Date: 2026-11-23 10:43:12.297138
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op


revision: str = '0010_closing'
down_revision: str | None = '0012_accounts'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Apply this revision."""

    op.create_table('audit_entry',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('task_id', sa.Integer(), nullable=False),
    sa.Column('user_id', sa.Integer(), nullable=True),
    sa.Column('action', sa.String(length=40), nullable=False),
    sa.Column('run_id', sa.Integer(), nullable=True),
    sa.Column('team_id', sa.Integer(), nullable=True),
    sa.Column('reason', sa.Text(), nullable=False),
    sa.Column('details', sa.JSON(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['run_id'], ['run.id'], name=op.f('fk_audit_entry_run_id_run'), ondelete='SET NULL'),
    sa.ForeignKeyConstraint(['task_id'], ['task.id'], name=op.f('fk_audit_entry_task_id_task'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['team_id'], ['team.id'], name=op.f('fk_audit_entry_team_id_team'), ondelete='SET NULL'),
    sa.ForeignKeyConstraint(['user_id'], ['user_account.id'], name=op.f('fk_audit_entry_user_id_user_account')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_audit_entry'))
    )
    with op.batch_alter_table('audit_entry', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_audit_entry_run_id'), ['run_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_audit_entry_task_id_created_at'), ['task_id', 'created_at'], unique=False)

    # Plain ADD COLUMN, never a batch table copy: on SQLite, dropping the old copy of phase,
    # run or team would cascade-delete the rows under it (foreign keys are on).
    op.add_column('phase', sa.Column('publish_at', sa.DateTime(timezone=True), nullable=True))
    op.add_column('phase', sa.Column('release_gold_at', sa.DateTime(timezone=True), nullable=True))
    op.add_column('run', sa.Column('description', sa.Text(), server_default='', nullable=False))
    op.add_column('run', sa.Column('answers', sa.JSON(), server_default='{}', nullable=False))
    op.add_column('team', sa.Column('closed_at', sa.DateTime(timezone=True), nullable=True))
    if op.get_bind().dialect.name == 'sqlite':
        op.execute('ALTER TABLE team ADD COLUMN merged_into_id INTEGER '
                   'CONSTRAINT fk_team_merged_into_id_team REFERENCES team (id)')
    else:
        op.add_column('team', sa.Column('merged_into_id', sa.Integer(), nullable=True))
        op.create_foreign_key(op.f('fk_team_merged_into_id_team'), 'team', 'team',
                              ['merged_into_id'], ['id'])


def downgrade() -> None:
    """Revert this revision."""

    if op.get_bind().dialect.name != 'sqlite':  # SQLite drops the column with its reference
        op.drop_constraint(op.f('fk_team_merged_into_id_team'), 'team', type_='foreignkey')
    op.drop_column('team', 'merged_into_id')
    op.drop_column('team', 'closed_at')
    op.drop_column('run', 'answers')
    op.drop_column('run', 'description')
    op.drop_column('phase', 'release_gold_at')
    op.drop_column('phase', 'publish_at')

    with op.batch_alter_table('audit_entry', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_audit_entry_task_id_created_at'))
        batch_op.drop_index(batch_op.f('ix_audit_entry_run_id'))

    op.drop_table('audit_entry')

