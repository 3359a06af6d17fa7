"""Primary runs: a phase ranks every run or one primary run per team (issue 30).

Revision ID: 0033_primary_runs
Revises: 0032_terms_announcements
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0033_primary_runs"
down_revision: str | None = "0032_terms_announcements"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Apply this revision."""
    # Plain ADD COLUMN: rebuilding `phase` on SQLite would cascade-delete its runs.
    if op.get_bind().dialect.name == "sqlite":
        op.execute("ALTER TABLE phase ADD COLUMN ranking VARCHAR(8) DEFAULT 'every' NOT NULL "
                   "CONSTRAINT ck_phase_ranking CHECK (ranking IN ('every', 'primary'))")
    else:
        op.add_column("phase", sa.Column("ranking", sa.String(length=8), server_default="every",
                                         nullable=False))
        op.create_check_constraint("ranking", "phase", "ranking IN ('every', 'primary')")
    op.create_table(
        "primary_run",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("team_id", sa.Integer(), nullable=False),
        sa.Column("phase_id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("chosen_by_id", sa.Integer(), nullable=True),
        sa.Column("chosen_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("fallback", sa.Boolean(), nullable=False),
        sa.ForeignKeyConstraint(["chosen_by_id"], ["user_account.id"],
                                name=op.f("fk_primary_run_chosen_by_id_user_account")),
        sa.ForeignKeyConstraint(["phase_id"], ["phase.id"],
                                name=op.f("fk_primary_run_phase_id_phase"), ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["run_id"], ["run.id"],
                                name=op.f("fk_primary_run_run_id_run"), ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["team_id"], ["team.id"],
                                name=op.f("fk_primary_run_team_id_team"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_primary_run")),
        sa.UniqueConstraint("team_id", "phase_id", name=op.f("uq_primary_run_team_id_phase_id")),
    )


def downgrade() -> None:
    """Revert this revision."""
    op.drop_table("primary_run")
    if op.get_bind().dialect.name == "sqlite":
        # in place (its CHECK belongs to the column): a copy of `phase` would cascade-delete rows
        op.execute("ALTER TABLE phase DROP COLUMN ranking")
    else:
        op.drop_constraint(op.f("ck_phase_ranking"), "phase", type_="check")
        op.drop_column("phase", "ranking")
