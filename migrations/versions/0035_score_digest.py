"""A content digest on each score record, so a board build parses only records it lacks.

Revision ID: 0035_score_digest
Revises: 0033_primary_runs
"""

import hashlib
import json
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

revision: str = "0035_score_digest"
down_revision: str | None = "0033_primary_runs"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _digest(scores: Any, flat: Any) -> str:
    # as semboard.models.score_digest (a migration keeps its own copy: models move on)
    text = json.dumps([scores, flat], sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha1(text.encode()).hexdigest()


def upgrade() -> None:
    """Apply this revision."""
    op.add_column("run_score", sa.Column("digest", sa.String(length=40), nullable=True))
    table = sa.table("run_score", sa.column("id", sa.Integer), sa.column("scores", sa.JSON),
                     sa.column("flat", sa.JSON), sa.column("digest", sa.String))
    bind = op.get_bind()
    last = 0
    while True:  # in batches: a large site's records never sit in memory at once
        rows = bind.execute(sa.select(table.c.id, table.c.scores, table.c.flat)
                            .where(table.c.id > last).order_by(table.c.id).limit(500)).all()
        if not rows:
            break
        for row_id, scores, flat in rows:
            bind.execute(table.update().where(table.c.id == row_id)
                         .values(digest=_digest(scores, flat)))
        last = rows[-1][0]


def downgrade() -> None:
    """Revert this revision."""
    with op.batch_alter_table("run_score") as batch:
        batch.drop_column("digest")
