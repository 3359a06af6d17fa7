"""Public and private boards from one test set (issue 42): a phase's split, part scores, final
runs, the stored frozen/private/whole boards and shake-up reports, and the phase's freeze time
and reveal rule.

Revision ID: 0051_public_private_parts
Revises: 0052_organiser_cockpit

New tables only, and two phase columns (nullable, or with a server default: existing phases
are unfrozen and reveal at publication, as their boards always did).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0051_public_private_parts"
down_revision: str | Sequence[str] | None = "0052_organiser_cockpit"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

WHEN = sa.DateTime(timezone=True)


def upgrade() -> None:
    """Apply this revision."""
    op.add_column("phase", sa.Column("freeze_at", WHEN, nullable=True))
    # no CHECK on the column here: SQLite cannot add one without rebuilding phase (a rebuild
    # would cascade-delete its runs); the model's constraint holds on new databases
    op.add_column("phase", sa.Column("reveal", sa.String(8), nullable=False,
                                     server_default="publish"))
    if op.get_bind().dialect.name != "sqlite":
        op.create_check_constraint("ck_phase_reveal", "phase", "reveal IN ('close', 'publish')")
    op.create_table(
        "phase_parts",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("phase_id", sa.Integer, sa.ForeignKey("phase.id", ondelete="CASCADE",
                                                        name="fk_phase_parts_phase_id_phase"),
                  nullable=False),
        sa.Column("source", sa.String(8), nullable=False),
        sa.Column("seed", sa.BigInteger, nullable=True),
        sa.Column("rule", sa.Text, nullable=False),
        sa.Column("sha256", sa.String(64), nullable=False),
        sa.Column("storage_key", sa.String(512), nullable=False),
        sa.Column("filename", sa.String(255), nullable=True),
        sa.Column("counts", sa.JSON, nullable=False),
        sa.Column("created_by_id", sa.Integer,
                  sa.ForeignKey("user_account.id",
                                name="fk_phase_parts_created_by_id_user_account"),
                  nullable=True),
        sa.Column("created_at", WHEN, nullable=False),
        sa.UniqueConstraint("phase_id", name="uq_phase_parts_phase_id"),
        sa.CheckConstraint("source IN ('drawn', 'file')", name="ck_phase_parts_source"),
    )
    op.create_table(
        "part_score",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("score_id", sa.Integer,
                  sa.ForeignKey("run_score.id", ondelete="CASCADE",
                                name="fk_part_score_score_id_run_score"), nullable=False),
        sa.Column("part", sa.String(8), nullable=False),
        sa.Column("scores", sa.JSON, nullable=False),
        sa.Column("flat", sa.JSON, nullable=False),
        sa.Column("digest", sa.String(40), nullable=False),
        sa.UniqueConstraint("score_id", "part", name="uq_part_score_score_id_part"),
        sa.CheckConstraint("part IN ('private', 'whole')", name="ck_part_score_part"),
    )
    op.create_table(
        "final_run",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("team_id", sa.Integer, sa.ForeignKey("team.id", ondelete="CASCADE",
                                                       name="fk_final_run_team_id_team"),
                  nullable=False),
        sa.Column("phase_id", sa.Integer, sa.ForeignKey("phase.id", ondelete="CASCADE",
                                                        name="fk_final_run_phase_id_phase"),
                  nullable=False),
        sa.Column("run_id", sa.Integer, sa.ForeignKey("run.id", ondelete="CASCADE",
                                                      name="fk_final_run_run_id_run"),
                  nullable=False),
        sa.Column("chosen_by_id", sa.Integer,
                  sa.ForeignKey("user_account.id",
                                name="fk_final_run_chosen_by_id_user_account"),
                  nullable=True),
        sa.Column("chosen_at", WHEN, nullable=False),
        sa.Column("fallback", sa.Boolean, nullable=False),
        sa.UniqueConstraint("team_id", "phase_id", "run_id",
                            name="uq_final_run_team_id_phase_id_run_id"),
    )
    op.create_table(
        "part_board",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("phase_id", sa.Integer, sa.ForeignKey("phase.id", ondelete="CASCADE",
                                                        name="fk_part_board_phase_id_phase"),
                  nullable=False),
        sa.Column("kind", sa.String(12), nullable=False),
        sa.Column("version", sa.String(64), nullable=False),
        sa.Column("data", sa.Text, nullable=False),
        sa.Column("csv", sa.Text, nullable=False),
        sa.Column("built_at", WHEN, nullable=False),
        sa.Column("elapsed_ms", sa.Integer, nullable=False),
        sa.UniqueConstraint("phase_id", "kind", "version",
                            name="uq_part_board_phase_id_kind_version"),
        sa.CheckConstraint("kind IN ('frozen', 'private', 'whole', 'shakeup')",
                           name="ck_part_board_kind"),
    )


def downgrade() -> None:
    """Revert this revision."""
    for table in ("part_board", "final_run", "part_score", "phase_parts"):
        op.drop_table(table)
    for name in ("reveal", "freeze_at"):
        if op.get_bind().dialect.name == "sqlite":
            # in place: a copy of phase would cascade-delete its runs
            op.execute(f"ALTER TABLE phase DROP COLUMN {name}")
        else:
            op.drop_column("phase", name)
