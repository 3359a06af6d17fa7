"""Model jobs watched: heartbeats, progress and failure classes; upload rows kept with a state.

Revision ID: 0036_model_jobs_watched
Revises: 0035_score_digest
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0036_model_jobs_watched"
down_revision: str | None = "0035_score_digest"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

FAILURES = "'refused', 'too_slow', 'out_of_memory', 'worker_lost', 'cancelled', 'internal'"
STATES = "'open', 'finishing', 'finished', 'refused', 'cancelled', 'expired'"


def upgrade() -> None:
    """Apply this revision."""
    # Plain ADD COLUMN on SQLite, never a batch table copy (see 0021_sessions): SQLite takes a
    # CHECK on an added column.
    op.add_column("model_submission",
                  sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=True))
    op.add_column("model_submission", sa.Column("progress", sa.JSON(), nullable=True))
    op.add_column("model_upload", sa.Column("outcome", sa.JSON(), nullable=True))
    if op.get_bind().dialect.name == "sqlite":
        op.execute("ALTER TABLE model_submission ADD COLUMN failure VARCHAR(20) "
                   f"CONSTRAINT ck_model_submission_failure CHECK (failure IS NULL OR "
                   f"failure IN ({FAILURES}))")
        op.execute("ALTER TABLE model_upload ADD COLUMN state VARCHAR(10) DEFAULT 'open' NOT "
                   f"NULL CONSTRAINT ck_model_upload_state CHECK (state IN ({STATES}))")
        op.add_column("model_upload", sa.Column("model_id", sa.Integer(), nullable=True))
        return
    op.add_column("model_submission", sa.Column("failure", sa.String(length=20), nullable=True))
    op.create_check_constraint(op.f("ck_model_submission_failure"), "model_submission",
                               f"failure IS NULL OR failure IN ({FAILURES})")
    op.add_column("model_upload", sa.Column("state", sa.String(length=10),
                                            server_default="open", nullable=False))
    op.create_check_constraint(op.f("ck_model_upload_state"), "model_upload",
                               f"state IN ({STATES})")
    op.add_column("model_upload", sa.Column("model_id", sa.Integer(), nullable=True))


def downgrade() -> None:
    """Revert this revision."""
    if op.get_bind().dialect.name == "sqlite":  # no table rebuild: see upgrade()
        for table, column in (("model_upload", "model_id"), ("model_upload", "state"),
                              ("model_upload", "outcome"), ("model_submission", "failure"),
                              ("model_submission", "progress"),
                              ("model_submission", "heartbeat_at")):
            op.execute(f"ALTER TABLE {table} DROP COLUMN {column}")
        return
    op.drop_column("model_upload", "model_id")
    op.drop_column("model_upload", "state")
    op.drop_column("model_upload", "outcome")
    op.drop_column("model_submission", "failure")
    op.drop_column("model_submission", "progress")
    op.drop_column("model_submission", "heartbeat_at")
