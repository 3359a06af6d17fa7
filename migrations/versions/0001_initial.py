"""Initial schema: accounts, tasks and phases, teams, inputs and gold, runs, logs, limits.

Revision ID: 0001_initial
Revises:
Create Date: 2026-11-22 07:28:28.607085
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op


revision: str = '0001_initial'
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Apply this revision."""
    op.create_table('rate_limit_event',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('key', sa.String(length=255), nullable=False),
    sa.Column('at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_rate_limit_event'))
    )
    op.create_index(op.f('ix_rate_limit_event_key_at'), 'rate_limit_event', ['key', 'at'], unique=False)
    op.create_table('user_account',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('email', sa.String(length=254), nullable=False),
    sa.Column('display_name', sa.String(length=120), nullable=False),
    sa.Column('password_hash', sa.String(length=255), nullable=False),
    sa.Column('is_admin', sa.Boolean(), nullable=False),
    sa.Column('is_active_account', sa.Boolean(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_user_account')),
    sa.UniqueConstraint('email', name=op.f('uq_user_account_email'))
    )
    op.create_table('api_token',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('user_id', sa.Integer(), nullable=False),
    sa.Column('name', sa.String(length=120), nullable=False),
    sa.Column('token_hash', sa.String(length=64), nullable=False),
    sa.Column('prefix', sa.String(length=12), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('last_used_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('revoked_at', sa.DateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['user_id'], ['user_account.id'], name=op.f('fk_api_token_user_id_user_account'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_api_token')),
    sa.UniqueConstraint('token_hash', name=op.f('uq_api_token_token_hash'))
    )
    op.create_table('task',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('name', sa.String(length=64), nullable=False),
    sa.Column('title', sa.String(length=255), nullable=False),
    sa.Column('description', sa.Text(), nullable=False),
    sa.Column('definition_text', sa.Text(), nullable=False),
    sa.Column('definition_digest', sa.String(length=64), nullable=False),
    sa.Column('gold_released_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('gold_released_by_id', sa.Integer(), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['gold_released_by_id'], ['user_account.id'], name=op.f('fk_task_gold_released_by_id_user_account')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_task')),
    sa.UniqueConstraint('name', name=op.f('uq_task_name'))
    )
    op.create_table('gold_file',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('task_id', sa.Integer(), nullable=False),
    sa.Column('dataset', sa.String(length=120), nullable=False),
    sa.Column('version', sa.Integer(), nullable=False),
    sa.Column('filename', sa.String(length=255), nullable=False),
    sa.Column('storage_key', sa.String(length=512), nullable=False),
    sa.Column('sha256', sa.String(length=64), nullable=False),
    sa.Column('n_items', sa.Integer(), nullable=False),
    sa.Column('uploaded_by_id', sa.Integer(), nullable=True),
    sa.Column('uploaded_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['task_id'], ['task.id'], name=op.f('fk_gold_file_task_id_task'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['uploaded_by_id'], ['user_account.id'], name=op.f('fk_gold_file_uploaded_by_id_user_account')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_gold_file')),
    sa.UniqueConstraint('task_id', 'dataset', 'version', name=op.f('uq_gold_file_task_id_dataset_version'))
    )
    op.create_table('input_file',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('task_id', sa.Integer(), nullable=False),
    sa.Column('dataset', sa.String(length=120), nullable=False),
    sa.Column('version', sa.Integer(), nullable=False),
    sa.Column('filename', sa.String(length=255), nullable=False),
    sa.Column('storage_key', sa.String(length=512), nullable=False),
    sa.Column('sha256', sa.String(length=64), nullable=False),
    sa.Column('n_items', sa.Integer(), nullable=False),
    sa.Column('uploaded_by_id', sa.Integer(), nullable=True),
    sa.Column('uploaded_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['task_id'], ['task.id'], name=op.f('fk_input_file_task_id_task'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['uploaded_by_id'], ['user_account.id'], name=op.f('fk_input_file_uploaded_by_id_user_account')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_input_file')),
    sa.UniqueConstraint('task_id', 'dataset', 'version', name=op.f('uq_input_file_task_id_dataset_version'))
    )
    op.create_table('phase',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('task_id', sa.Integer(), nullable=False),
    sa.Column('slug', sa.String(length=64), nullable=False),
    sa.Column('name', sa.String(length=120), nullable=False),
    sa.Column('kind', sa.String(length=20), nullable=False),
    sa.Column('opens_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('closes_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('team_window_hours', sa.Integer(), nullable=True),
    sa.Column('max_runs', sa.Integer(), nullable=True),
    sa.Column('late_policy', sa.String(length=10), nullable=False),
    sa.Column('visibility', sa.String(length=12), nullable=False),
    sa.Column('track', sa.String(length=64), nullable=True),
    sa.Column('results_published_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.CheckConstraint("kind IN ('trial', 'development', 'evaluation', 'post-evaluation')", name=op.f('ck_phase_kind')),
    sa.CheckConstraint("late_policy IN ('reject', 'flag')", name=op.f('ck_phase_late_policy')),
    sa.CheckConstraint("visibility IN ('public', 'hidden', 'organisers')", name=op.f('ck_phase_visibility')),
    sa.CheckConstraint('closes_at > opens_at', name=op.f('ck_phase_dates')),
    sa.CheckConstraint('max_runs IS NULL OR max_runs > 0', name=op.f('ck_phase_max_runs')),
    sa.CheckConstraint('team_window_hours IS NULL OR team_window_hours > 0', name=op.f('ck_phase_team_window_hours')),
    sa.ForeignKeyConstraint(['task_id'], ['task.id'], name=op.f('fk_phase_task_id_task'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_phase')),
    sa.UniqueConstraint('task_id', 'slug', name=op.f('uq_phase_task_id_slug'))
    )
    op.create_table('task_organiser',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('task_id', sa.Integer(), nullable=False),
    sa.Column('user_id', sa.Integer(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['task_id'], ['task.id'], name=op.f('fk_task_organiser_task_id_task'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['user_id'], ['user_account.id'], name=op.f('fk_task_organiser_user_id_user_account'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_task_organiser')),
    sa.UniqueConstraint('task_id', 'user_id', name=op.f('uq_task_organiser_task_id_user_id'))
    )
    op.create_table('team',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('task_id', sa.Integer(), nullable=False),
    sa.Column('name', sa.String(length=120), nullable=False),
    sa.Column('affiliation', sa.String(length=255), nullable=False),
    sa.Column('invite_code', sa.String(length=32), nullable=False),
    sa.Column('captain_id', sa.Integer(), nullable=True),
    sa.Column('is_baseline', sa.Boolean(), nullable=False),
    sa.Column('is_organiser_team', sa.Boolean(), nullable=False),
    sa.Column('last_upload_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['captain_id'], ['user_account.id'], name=op.f('fk_team_captain_id_user_account')),
    sa.ForeignKeyConstraint(['task_id'], ['task.id'], name=op.f('fk_team_task_id_task'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_team')),
    sa.UniqueConstraint('invite_code', name=op.f('uq_team_invite_code')),
    sa.UniqueConstraint('task_id', 'name', name=op.f('uq_team_task_id_name'))
    )
    op.create_table('grant_fix',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('team_id', sa.Integer(), nullable=False),
    sa.Column('phase_id', sa.Integer(), nullable=False),
    sa.Column('granted_by_id', sa.Integer(), nullable=True),
    sa.Column('reason', sa.Text(), nullable=False),
    sa.Column('until', sa.DateTime(timezone=True), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['granted_by_id'], ['user_account.id'], name=op.f('fk_grant_fix_granted_by_id_user_account')),
    sa.ForeignKeyConstraint(['phase_id'], ['phase.id'], name=op.f('fk_grant_fix_phase_id_phase'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['team_id'], ['team.id'], name=op.f('fk_grant_fix_team_id_team'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_grant_fix'))
    )
    op.create_table('run',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('task_id', sa.Integer(), nullable=False),
    sa.Column('phase_id', sa.Integer(), nullable=False),
    sa.Column('team_id', sa.Integer(), nullable=False),
    sa.Column('submitted_by_id', sa.Integer(), nullable=True),
    sa.Column('name', sa.String(length=120), nullable=False),
    sa.Column('slot', sa.Integer(), nullable=True),
    sa.Column('is_current', sa.Boolean(), nullable=False),
    sa.Column('status', sa.String(length=12), nullable=False),
    sa.Column('is_late', sa.Boolean(), nullable=False),
    sa.Column('is_fix', sa.Boolean(), nullable=False),
    sa.Column('replaces_id', sa.Integer(), nullable=True),
    sa.Column('issues', sa.JSON(), nullable=False),
    sa.Column('meta', sa.JSON(), nullable=False),
    sa.Column('submitted_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('replaced_at', sa.DateTime(timezone=True), nullable=True),
    sa.CheckConstraint("status IN ('received', 'valid', 'scored', 'error')", name=op.f('ck_run_status')),
    sa.CheckConstraint('slot IS NULL OR slot > 0', name=op.f('ck_run_slot')),
    sa.ForeignKeyConstraint(['phase_id'], ['phase.id'], name=op.f('fk_run_phase_id_phase'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['replaces_id'], ['run.id'], name=op.f('fk_run_replaces_id_run')),
    sa.ForeignKeyConstraint(['submitted_by_id'], ['user_account.id'], name=op.f('fk_run_submitted_by_id_user_account')),
    sa.ForeignKeyConstraint(['task_id'], ['task.id'], name=op.f('fk_run_task_id_task'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['team_id'], ['team.id'], name=op.f('fk_run_team_id_team'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_run'))
    )
    # Partial unique indexes: the run limit and run-name replacement hold under concurrency.
    op.create_index('uq_run_current_name', 'run', ['team_id', 'phase_id', 'name'], unique=True, sqlite_where=sa.text('is_current'), postgresql_where=sa.text('is_current'))
    op.create_index('uq_run_current_slot', 'run', ['team_id', 'phase_id', 'slot'], unique=True, sqlite_where=sa.text('is_current'), postgresql_where=sa.text('is_current'))
    op.create_table('team_member',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('task_id', sa.Integer(), nullable=False),
    sa.Column('team_id', sa.Integer(), nullable=False),
    sa.Column('user_id', sa.Integer(), nullable=False),
    sa.Column('joined_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['task_id'], ['task.id'], name=op.f('fk_team_member_task_id_task'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['team_id'], ['team.id'], name=op.f('fk_team_member_team_id_team'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['user_id'], ['user_account.id'], name=op.f('fk_team_member_user_id_user_account'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_team_member')),
    sa.UniqueConstraint('task_id', 'user_id', name=op.f('uq_team_member_task_id_user_id'))
    )
    op.create_table('team_window',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('team_id', sa.Integer(), nullable=False),
    sa.Column('phase_id', sa.Integer(), nullable=False),
    sa.Column('started_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('ends_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('started_by_id', sa.Integer(), nullable=True),
    sa.ForeignKeyConstraint(['phase_id'], ['phase.id'], name=op.f('fk_team_window_phase_id_phase'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['started_by_id'], ['user_account.id'], name=op.f('fk_team_window_started_by_id_user_account')),
    sa.ForeignKeyConstraint(['team_id'], ['team.id'], name=op.f('fk_team_window_team_id_team'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_team_window')),
    sa.UniqueConstraint('team_id', 'phase_id', name=op.f('uq_team_window_team_id_phase_id'))
    )
    op.create_table('run_file',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('run_id', sa.Integer(), nullable=False),
    sa.Column('filename', sa.String(length=255), nullable=False),
    sa.Column('dataset', sa.String(length=120), nullable=True),
    sa.Column('sha256', sa.String(length=64), nullable=False),
    sa.Column('size', sa.Integer(), nullable=False),
    sa.Column('storage_key', sa.String(length=512), nullable=False),
    sa.ForeignKeyConstraint(['run_id'], ['run.id'], name=op.f('fk_run_file_run_id_run'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_run_file')),
    sa.UniqueConstraint('run_id', 'filename', name=op.f('uq_run_file_run_id_filename'))
    )
    op.create_table('run_score',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('run_id', sa.Integer(), nullable=False),
    sa.Column('gold_digest', sa.String(length=64), nullable=False),
    sa.Column('scores', sa.JSON(), nullable=False),
    sa.Column('flat', sa.JSON(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['run_id'], ['run.id'], name=op.f('fk_run_score_run_id_run'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_run_score'))
    )
    op.create_table('upload_log',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('task_id', sa.Integer(), nullable=False),
    sa.Column('phase_id', sa.Integer(), nullable=True),
    sa.Column('team_id', sa.Integer(), nullable=True),
    sa.Column('user_id', sa.Integer(), nullable=True),
    sa.Column('run_id', sa.Integer(), nullable=True),
    sa.Column('run_name', sa.String(length=255), nullable=False),
    sa.Column('outcome', sa.String(length=10), nullable=False),
    sa.Column('message', sa.Text(), nullable=False),
    sa.Column('issues', sa.JSON(), nullable=False),
    sa.Column('filenames', sa.JSON(), nullable=False),
    sa.Column('total_bytes', sa.Integer(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.CheckConstraint("outcome IN ('accepted', 'rejected')", name=op.f('ck_upload_log_outcome')),
    sa.ForeignKeyConstraint(['phase_id'], ['phase.id'], name=op.f('fk_upload_log_phase_id_phase'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['run_id'], ['run.id'], name=op.f('fk_upload_log_run_id_run')),
    sa.ForeignKeyConstraint(['task_id'], ['task.id'], name=op.f('fk_upload_log_task_id_task'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['team_id'], ['team.id'], name=op.f('fk_upload_log_team_id_team'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['user_id'], ['user_account.id'], name=op.f('fk_upload_log_user_id_user_account')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_upload_log'))
    )
    op.create_index(op.f('ix_upload_log_team_id_created_at'), 'upload_log', ['team_id', 'created_at'], unique=False)


def downgrade() -> None:
    """Revert this revision."""
    op.drop_index(op.f('ix_upload_log_team_id_created_at'), table_name='upload_log')
    op.drop_table('upload_log')
    op.drop_table('run_score')
    op.drop_table('run_file')
    op.drop_table('team_window')
    op.drop_table('team_member')
    op.drop_index('uq_run_current_slot', table_name='run')
    op.drop_index('uq_run_current_name', table_name='run')
    op.drop_table('run')
    op.drop_table('grant_fix')
    op.drop_table('team')
    op.drop_table('task_organiser')
    op.drop_table('phase')
    op.drop_table('input_file')
    op.drop_table('gold_file')
    op.drop_table('task')
    op.drop_table('api_token')
    op.drop_table('user_account')
    op.drop_index(op.f('ix_rate_limit_event_key_at'), table_name='rate_limit_event')
    op.drop_table('rate_limit_event')
