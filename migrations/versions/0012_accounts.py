"""Accounts: e-mail verification, per-user notification switches, single-use e-mail links.

Revision ID: 0012_accounts
Revises: 0015_splits
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op


revision: str = '0012_accounts'
down_revision: str | None = '0015_splits'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_SWITCHES = ('notify_runs', 'notify_deadlines', 'notify_gold', 'notify_results')


def upgrade() -> None:
    """Apply this revision."""
    # Plain ADD/DROP COLUMN, never a batch table copy: on SQLite, copying user_account would
    # drop a table that every other table references.
    op.add_column('user_account',
                  sa.Column('email_verified_at', sa.DateTime(timezone=True), nullable=True))
    for name in _SWITCHES:
        op.add_column('user_account',
                      sa.Column(name, sa.Boolean(), server_default=sa.true(), nullable=False))
    op.create_table('account_token',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('user_id', sa.Integer(), nullable=False),
    sa.Column('purpose', sa.String(length=10), nullable=False),
    sa.Column('token_hash', sa.String(length=64), nullable=False),
    sa.Column('email', sa.String(length=254), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('expires_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('used_at', sa.DateTime(timezone=True), nullable=True),
    sa.CheckConstraint("purpose IN ('verify', 'reset')", name=op.f('ck_account_token_purpose')),
    sa.ForeignKeyConstraint(['user_id'], ['user_account.id'], name=op.f('fk_account_token_user_id_user_account'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_account_token')),
    sa.UniqueConstraint('token_hash', name=op.f('uq_account_token_token_hash'))
    )
    op.create_table('notification_sent',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('user_id', sa.Integer(), nullable=False),
    sa.Column('key', sa.String(length=255), nullable=False),
    sa.Column('sent_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['user_id'], ['user_account.id'], name=op.f('fk_notification_sent_user_id_user_account'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_notification_sent')),
    sa.UniqueConstraint('user_id', 'key', name=op.f('uq_notification_sent_user_id_key'))
    )


def downgrade() -> None:
    """Revert this revision."""
    op.drop_table('notification_sent')
    op.drop_table('account_token')
    for name in reversed(_SWITCHES):
        op.drop_column('user_account', name)
    op.drop_column('user_account', 'email_verified_at')
