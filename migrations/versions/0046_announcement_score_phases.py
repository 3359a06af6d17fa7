"""The phases whose scores an announcement's text lists, so a draft never publishes hidden
scores (issue 40).

Revision ID: 0046_announcement_score_phases
Revises: 0045_terms_schedule

Gold-correction drafts written before this revision listed every rescored run of every phase:
each unsent one is marked with all its task's phases, so sending it is refused while any of them
is hidden (an organiser deletes it, or sends it once the results are published).
"""

import json
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0046_announcement_score_phases"
down_revision: str | None = "0045_terms_schedule"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Apply this revision."""
    # Plain ADD COLUMN: rebuilding `announcement` on SQLite would cascade-delete its read marks.
    op.add_column("announcement", sa.Column("score_phases", sa.JSON(), nullable=False,
                                            server_default="[]"))
    bind = op.get_bind()
    drafts = bind.execute(sa.text(
        "SELECT id, task_id FROM announcement WHERE kind = 'gold-correction' "
        "AND status = 'draft'")).all()
    for announcement_id, task_id in drafts:
        phases = [row[0] for row in bind.execute(
            sa.text("SELECT id FROM phase WHERE task_id = :task ORDER BY id"), {"task": task_id})]
        bind.execute(sa.text("UPDATE announcement SET score_phases = :phases WHERE id = :id"),
                     {"phases": json.dumps(phases), "id": announcement_id})


def downgrade() -> None:
    """Revert this revision."""
    if op.get_bind().dialect.name == "sqlite":
        # in place: a copy of `announcement` would cascade-delete its read marks
        op.execute("ALTER TABLE announcement DROP COLUMN score_phases")
    else:
        op.drop_column("announcement", "score_phases")
