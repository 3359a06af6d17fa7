"""Scheduled publication: a phase's board is published and the task's gold released at set times;
jobs waiting or running past a task's thresholds raise their alerts (services.models.queue_report).

`tick` carries out whatever is due; it is idempotent, so the in-process ticker of every web
worker, `flask schedule tick` from cron and the rq worker can all call it, at the same moment
too: each action is first claimed by a conditional UPDATE (`... WHERE published_at IS NULL`),
which only one transaction can win (PostgreSQL makes the others wait for the row and then
re-check the condition; SQLite writes one at a time), and only the winner acts and audits.
"""

from __future__ import annotations

import logging
from datetime import datetime

from sqlalchemy import or_, select, update
from sqlalchemy.orm import Session

from semboard.errors import InvalidData
from semboard.models import Phase, Task, User
from semboard.services.data import gold
from semboard.services.models import queue_report
from semboard.services.runs import audit, primary
from semboard.services.tasks import access

log = logging.getLogger(__name__)


def set_schedule(session: Session, *, phase: Phase, user: User | None,
                 publish_at: datetime | None, release_gold_at: datetime | None,
                 now: datetime) -> Phase:
    """Set (or clear, with None) when the phase's board is published and the gold released."""
    access.require_organiser(session, user, phase.task)
    for when in (publish_at, release_gold_at):
        if when is not None and when.tzinfo is None:
            raise InvalidData("scheduled times must carry a time zone (UTC)")
    phase.publish_at = publish_at
    phase.release_gold_at = release_gold_at
    session.flush()
    return phase


def tick(session: Session, *, now: datetime) -> list[str]:
    """Publish the boards and release the gold that are due, raise the queue alerts that are
    due; returns what was done (flushed)."""
    done: list[str] = []
    due = session.scalars(select(Phase).where(or_(
        (Phase.publish_at <= now) & Phase.results_published_at.is_(None),
        Phase.release_gold_at <= now)).order_by(Phase.id))
    for phase in list(due):
        task: Task = phase.task
        if phase.publish_at is not None and phase.publish_at <= now \
                and phase.results_published_at is None and _claim_publication(session, phase, now):
            gold.publish_results(session, phase=phase, user=None, now=now)
            audit.record(session, task=task, user=None, action="published", now=now,
                         reason=f"scheduled for {phase.publish_at:%Y-%m-%d %H:%M} UTC",
                         details={"summary": f"results of {phase.slug} published on schedule"})
            done.append(f"published {task.name}/{phase.slug}")
        if phase.release_gold_at is not None and phase.release_gold_at <= now \
                and task.gold_released_at is None:
            if not gold.current_gold(session, task=task):
                continue  # nothing to release yet; tried again on the next tick
            if not _claim_gold_release(session, task, now):
                continue  # another ticker released it a moment ago
            gold.release_gold(session, task=task, user=None, now=now)
            audit.record(session, task=task, user=None, action="gold-released", now=now,
                         reason=f"scheduled for {phase.release_gold_at:%Y-%m-%d %H:%M} UTC",
                         details={"summary": f"gold of {task.name} released on schedule"})
            done.append(f"released the gold of {task.name}")
    # closed phases ranking primary runs: the fallback of teams that chose none is written down
    done += primary.settle_due(session, now=now)
    done += queue_report.check(session, now=now)
    # closed phases with a split test set: the fallback final runs are written down
    done += primary.settle_finals_due(session, now=now)
    return done


def _claim_publication(session: Session, phase: Phase, now: datetime) -> bool:
    """Set the phase's publication time unless another transaction did; True if this one did."""
    claimed = session.execute(
        update(Phase).where(Phase.id == phase.id, Phase.results_published_at.is_(None))
        .values(results_published_at=now).execution_options(synchronize_session=False))
    session.refresh(phase, ["results_published_at"])
    return bool(claimed.rowcount)  # type: ignore[attr-defined]


def _claim_gold_release(session: Session, task: Task, now: datetime) -> bool:
    """Set the task's gold release time unless another transaction did; True if this one did."""
    claimed = session.execute(
        update(Task).where(Task.id == task.id, Task.gold_released_at.is_(None))
        .values(gold_released_at=now).execution_options(synchronize_session=False))
    session.refresh(task, ["gold_released_at"])
    return bool(claimed.rowcount)  # type: ignore[attr-defined]
