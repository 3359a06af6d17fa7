"""Splits of a hosted task: which split a file or phase uses, gold access, the no-oracle rule,
per-team daily limits and windows that only the phase starting them can open."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from semboard.errors import InvalidData
from semboard.models import GoldRelease, Phase, Task
from semboard.services.tasks import definitions

if TYPE_CHECKING:
    pass


def release_row(session: Session, *, task: Task, split: str) -> GoldRelease | None:
    """The release of one split's gold, if it happened."""
    return session.scalar(select(GoldRelease).where(GoldRelease.task_id == task.id,
                                                    GoldRelease.split == split))


def releases(session: Session, *, task: Task) -> list[GoldRelease]:
    """Every split release of a task."""
    return list(session.scalars(select(GoldRelease).where(GoldRelease.task_id == task.id)))


def shows_scores(phase: Phase) -> bool:
    """Whether participants see the phase's scores while its results are unpublished."""
    return phase.visibility == "public"


_PHASE_INPUT = {"name": str, "kind": str, "opens_at": str, "closes_at": str,
                "team_window_hours": int, "max_runs": int, "late_policy": str,
                "visibility": str, "track": str, "split": str, "max_per_day": int,
                "accepts": str, "model_settings": dict, "entry_deadline": str}


def phase_fields(body: dict[str, Any]) -> dict[str, Any]:
    """Phase settings from a JSON body (ISO times; 0 or null clears a number)."""
    fields: dict[str, Any] = {}
    for key, kind in _PHASE_INPUT.items():
        if key not in body:
            continue
        value = body[key]
        if value is None or (kind is int and value == 0):
            fields[key] = None
            continue
        if not isinstance(value, kind) or isinstance(value, bool):
            raise InvalidData("phase field %(key)s must be a %(__name__)s",
                              key=key, __name__=kind.__name__)
        if key in ("opens_at", "closes_at", "entry_deadline"):
            try:
                parsed = datetime.fromisoformat(str(value))
            except ValueError as err:
                raise InvalidData("%(key)s %(value)r is not an ISO date-time",
                                  key=key, value=value) from err
            fields[key] = parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed
        else:
            fields[key] = value
    return fields


def splits_json(session: Session, *, task: Task) -> dict[str, dict[str, object]]:
    """The task's splits: datasets and whether their gold is public."""
    definition = definitions.definition(task)
    released = {r.split: r.released_at for r in session.scalars(
        select(GoldRelease).where(GoldRelease.task_id == task.id))}
    return {
        name: {
            "datasets": list(split.datasets),
            "gold_public": split.gold_public or name in released,
            "gold_released_at": released[name].isoformat() if name in released else None,
            "default": name == definition.default_split,
        }
        for name, split in definition.splits.items()
    }
