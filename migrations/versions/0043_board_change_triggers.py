"""Board versions kept by the database: a serial per phase and a change log, by trigger (issue 32).

Revision ID: 0043_board_change_triggers
Revises: 0042_phase_request_scoring

The triggers' statements live in semboard/models.py (board_trigger_statements), also run by
the models' metadata (create_all), so a test database and a migrated one have the same
triggers. A later migration that rebuilds `run`, `run_score` or `team` on SQLite (batch mode
copies the table) drops their triggers: it must run board_trigger_statements() again.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from semboard.models import board_trigger_drops, board_trigger_statements

revision: str = "0043_board_change_triggers"
down_revision: str | None = "0042_phase_request_scoring"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Apply this revision."""
    op.create_table(
        "board_counter",
        sa.Column("phase_id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("serial", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("phase_id", name=op.f("pk_board_counter")),
    )
    op.create_table(
        "board_change",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("phase_id", sa.Integer(), nullable=False),
        sa.Column("serial", sa.BigInteger(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=True),
        sa.Column("team_id", sa.Integer(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_board_change")),
        sa.UniqueConstraint("phase_id", "serial", name=op.f("uq_board_change_phase_id_serial")),
    )
    bind = op.get_bind()
    for statement in board_trigger_statements(bind.dialect.name):
        bind.exec_driver_sql(statement)  # as written: no bind parameters parsed
    # existing boards: versions now name the serial, so every stored board misses once (the
    # version's digest changed shape); no counter row means serial 0


def downgrade() -> None:
    """Revert this revision."""
    bind = op.get_bind()
    for statement in board_trigger_drops(bind.dialect.name):
        bind.exec_driver_sql(statement)
    op.drop_table("board_change")
    op.drop_table("board_counter")
