"""An index of score records by run (and id): a board reads a run's newest score without
scanning every record (a merge re-reads the changed runs only; the version's run list).

Revision ID: 0041_run_score_run_index
Revises: 0040_client_keys
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0041_run_score_run_index"
down_revision: str | None = "0040_client_keys"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Apply this revision."""
    op.create_index("ix_run_score_run_id_id", "run_score", ["run_id", "id"])


def downgrade() -> None:
    """Revert this revision."""
    op.drop_index("ix_run_score_run_id_id", table_name="run_score")
