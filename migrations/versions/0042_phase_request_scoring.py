"""A phase's own size above which runs are never scored inside the upload request (issue 32).

Revision ID: 0042_phase_request_scoring
Revises: 0041_run_score_run_index
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0042_phase_request_scoring"
down_revision: str | None = "0041_run_score_run_index"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

CHECK = "score_in_request_pairs IS NULL OR score_in_request_pairs > 0"


def upgrade() -> None:
    """Apply this revision."""
    # Plain ADD COLUMN: rebuilding `phase` on SQLite would cascade-delete its runs.
    if op.get_bind().dialect.name == "sqlite":
        op.execute("ALTER TABLE phase ADD COLUMN score_in_request_pairs INTEGER "
                   f"CONSTRAINT ck_phase_score_in_request_pairs CHECK ({CHECK})")
    else:
        op.add_column("phase", sa.Column("score_in_request_pairs", sa.Integer(), nullable=True))
        op.create_check_constraint("score_in_request_pairs", "phase", CHECK)


def downgrade() -> None:
    """Revert this revision."""
    if op.get_bind().dialect.name == "sqlite":
        # in place (its CHECK belongs to the column): a copy of `phase` would cascade-delete rows
        op.execute("ALTER TABLE phase DROP COLUMN score_in_request_pairs")
    else:
        op.drop_constraint(op.f("ck_phase_score_in_request_pairs"), "phase", type_="check")
        op.drop_column("phase", "score_in_request_pairs")
