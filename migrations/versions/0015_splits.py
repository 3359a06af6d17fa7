"""Splits: input and gold files belong to a split, phases name one; per-split gold releases.

Existing data becomes each task's default split ("test" unless its stored definition says
otherwise); phases point at it and a released task's gold counts as that split's release.

Revision ID: 0015_splits
Revises: 0002_significance_groups
"""

import tomllib
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015_splits"
down_revision: str | None = "0002_significance_groups"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _default_split(text: str) -> str:
    """The default split a stored definition names ("test" when it names none or is unreadable)."""
    try:
        value = tomllib.loads(text).get("default_split", "test")
    except tomllib.TOMLDecodeError:
        return "test"
    return value if isinstance(value, str) and value else "test"


def upgrade() -> None:
    """Apply this revision."""
    for table in ("input_file", "gold_file"):
        with op.batch_alter_table(table) as batch:
            batch.add_column(sa.Column("split", sa.String(length=64), server_default="test",
                                       nullable=False))
            batch.drop_constraint(f"uq_{table}_task_id_dataset_version", type_="unique")
            batch.create_unique_constraint(f"uq_{table}_task_id_split_dataset_version",
                                           ["task_id", "split", "dataset", "version"])
    # Never rebuild `phase` on SQLite: dropping the old copy would cascade-delete every run,
    # window and grant under it (foreign keys are on). Plain ADD COLUMN keeps the rows.
    op.add_column("phase", sa.Column("split", sa.String(length=64), server_default="test",
                                     nullable=False))
    if op.get_bind().dialect.name == "sqlite":
        op.execute("ALTER TABLE phase ADD COLUMN max_per_day INTEGER CONSTRAINT "
                   "ck_phase_max_per_day CHECK (max_per_day IS NULL OR max_per_day > 0)")
    else:
        op.add_column("phase", sa.Column("max_per_day", sa.Integer(), nullable=True))
        op.create_check_constraint("max_per_day", "phase",
                                   "max_per_day IS NULL OR max_per_day > 0")
    op.create_table(
        "gold_release",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("task_id", sa.Integer(), nullable=False),
        sa.Column("split", sa.String(length=64), nullable=False),
        sa.Column("released_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("released_by_id", sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(["task_id"], ["task.id"],
                                name=op.f("fk_gold_release_task_id_task"), ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["released_by_id"], ["user_account.id"],
                                name=op.f("fk_gold_release_released_by_id_user_account")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_gold_release")),
        sa.UniqueConstraint("task_id", "split", name=op.f("uq_gold_release_task_id_split")),
    )
    conn = op.get_bind()
    rows = conn.execute(sa.text(
        "SELECT id, definition_text, gold_released_at, gold_released_by_id FROM task"
    )).all()
    for task_id, text, released_at, released_by in rows:
        split = _default_split(text)
        for table in ("input_file", "gold_file", "phase"):
            conn.execute(sa.text(f"UPDATE {table} SET split = :s WHERE task_id = :t"),
                         {"s": split, "t": task_id})
        if released_at is not None:
            conn.execute(sa.text(
                "INSERT INTO gold_release (task_id, split, released_at, released_by_id) "
                "VALUES (:t, :s, :at, :by)"), {"t": task_id, "s": split, "at": released_at,
                                               "by": released_by})


def downgrade() -> None:
    """Revert this revision (files of other splits than a task's default would collide)."""
    op.drop_table("gold_release")
    if op.get_bind().dialect.name == "sqlite":  # no table rebuild: see upgrade()
        op.execute("ALTER TABLE phase DROP COLUMN max_per_day")
        op.execute("ALTER TABLE phase DROP COLUMN split")
    else:
        op.drop_constraint("max_per_day", "phase", type_="check")
        op.drop_column("phase", "max_per_day")
        op.drop_column("phase", "split")
    for table in ("input_file", "gold_file"):
        with op.batch_alter_table(table) as batch:
            batch.drop_constraint(f"uq_{table}_task_id_split_dataset_version", type_="unique")
            batch.create_unique_constraint(f"uq_{table}_task_id_dataset_version",
                                           ["task_id", "dataset", "version"])
            batch.drop_column("split")
