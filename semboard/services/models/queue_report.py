"""A task's queue as its organisers see it, and its alerts: runs waiting for a score, models
queued, running, failed (by class) and slow, with their ages and the workers serving them; a job
waiting or running past the task's thresholds raises one alert (the schedule ticker's `check`).

The site admins' /admin/queue adds the site's own rq workers (jobs.queue.health); the same
report, cut to one task, is what /tasks/T/organise/queue and GET /api/v1/tasks/T/queue show.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from semboard.db import insert_unless_refused
from semboard.errors import InvalidData, Phrase
from semboard.i18n.catalogues import Words
from semboard.models import (
    GoldFile,
    ModelSubmission,
    QueueAlert,
    QueueWatch,
    Run,
    Task,
    User,
    WorkerToken,
)
from semboard.notify.events import queue_event
from semboard.services.models import model_queue
from semboard.services.tasks import access, announcements, translations
from semboard.timefmt import api_time

# a run accepted this long ago and still unscored (gold present) lost its job (jobs.scoring)
STUCK_AFTER_S = 300
# failed models listed (their classes are counted over every failure)
RECENT = 20
MAX_MINUTES = 7 * 24 * 60


def _age(now: datetime, since: datetime | None) -> float | None:
    return None if since is None else round((now - since).total_seconds(), 1)


def report(session: Session, *, task: Task, user: User | None, now: datetime) -> dict[str, Any]:
    """The task's queue (organisers only): JSON-ready, ages in seconds."""
    access.require_organiser(session, user, task)
    watch = watch_of(session, task=task)
    wait_s = watch.wait_minutes * 60 if watch and watch.wait_minutes else None
    run_s = watch.run_minutes * 60 if watch and watch.run_minutes else None
    has_gold = select(GoldFile.id).where(GoldFile.task_id == task.id).exists()
    waiting = list(session.scalars(
        select(Run).where(Run.task_id == task.id, Run.status == "valid", Run.is_current,
                          has_gold).order_by(Run.submitted_at, Run.id)))
    errors = list(session.scalars(select(Run).where(
        Run.task_id == task.id, Run.status == "error", Run.is_current).order_by(Run.id.desc())))
    models = list(session.scalars(select(ModelSubmission).where(
        ModelSubmission.task_id == task.id).order_by(ModelSubmission.id)))
    place = {m: k for k, m in enumerate(model_queue.queued_order(session), start=1)}
    tokens = {t.id: t for t in session.scalars(
        select(WorkerToken).where(WorkerToken.task_id == task.id))}

    def run_row(run: Run) -> dict[str, Any]:
        age = _age(now, run.submitted_at) or 0.0
        return {"id": run.id, "team": run.team.name, "run": run.name, "phase": run.phase.slug,
                "submitted_at": api_time(run.submitted_at), "age_s": age,
                "stuck": age >= STUCK_AFTER_S, "slow": wait_s is not None and age >= wait_s}

    def model_row(row: ModelSubmission) -> dict[str, Any]:
        token = tokens.get(row.worker_token_id or 0)
        waited = _age(now, row.uploaded_at) if row.status == "queued" else None
        running = _age(now, row.started_at) if row.status == "running" else None
        return {"id": row.id, "team": row.team.name, "model": row.name,
                "phase": row.phase.slug, "status": row.status,
                "uploaded_at": api_time(row.uploaded_at), "started_at": api_time(row.started_at),
                "finished_at": api_time(row.finished_at), "position": place.get(row.id),
                "waiting_s": waited, "running_s": running,
                "heartbeat_age_s": _age(now, row.heartbeat_at) if row.status == "running"
                else None,
                "worker": (token.name if token else "the site's own worker")
                if row.status == "running" else None,
                "attempts": row.attempts, "failure": row.failure,
                "reason": row.reason if row.status == "failed" else "",
                "slow": (waited is not None and wait_s is not None and waited >= wait_s)
                or (running is not None and run_s is not None and running >= run_s)}

    failed = [m for m in models if m.status == "failed"]
    queued = [m for m in models if m.status == "queued"]
    queued.sort(key=lambda m: place.get(m.id, len(place) + 1))
    rows = {"waiting_runs": [run_row(r) for r in waiting],
            "queued_models": [model_row(m) for m in queued],
            "running_models": [model_row(m) for m in models if m.status == "running"],
            "failed_models": [model_row(m) for m in reversed(failed)][:RECENT]}
    return {
        "task": task.name, "now": api_time(now),
        "counts": {"waiting_runs": len(waiting), "stuck_runs": sum(
            1 for r in rows["waiting_runs"] if r["stuck"]), "error_runs": len(errors),
            "queued_models": len(queued), "running_models": len(rows["running_models"]),
            "failed_models": len(failed),
            "slow": sum(1 for key in ("waiting_runs", "queued_models", "running_models")
                        for r in rows[key] if r["slow"])},
        "failed_by_type": {"models": dict(sorted(Counter(
            m.failure or "failed" for m in failed).items())),
            "runs": {"error": len(errors), "stuck": sum(
                1 for r in rows["waiting_runs"] if r["stuck"])}},
        **rows,
        "error_runs": [{"id": r.id, "team": r.team.name, "run": r.name, "phase": r.phase.slug,
                        "issues": len(r.issues or [])} for r in errors[:RECENT]],
        "workers": [{"name": t.name, "revoked": t.revoked_at is not None,
                     "last_seen_at": api_time(t.last_seen_at),
                     "last_seen_s": _age(now, t.last_seen_at),
                     "jobs": [m.id for m in models if m.status == "running"
                              and m.worker_token_id == t.id]}
                    for t in sorted(tokens.values(), key=lambda t: t.id)
                    if t.revoked_at is None or any(m.worker_token_id == t.id
                                                   for m in models if m.status == "running")],
        "watch": watch_json(watch),
        "alerts": [{"subject": a.subject, "kind": a.kind, "minutes": a.minutes,
                    "summary": a.summary, "raised_at": api_time(a.raised_at)}
                   for a in session.scalars(select(QueueAlert).where(
                       QueueAlert.task_id == task.id).order_by(QueueAlert.id.desc()).limit(
                       RECENT))],
    }


# ----------------------------------------------------------------------------- alerts


def watch_of(session: Session, *, task: Task) -> QueueWatch | None:
    """The task's alert settings (None: no alerts)."""
    return session.scalar(select(QueueWatch).where(QueueWatch.task_id == task.id))


def watch_json(watch: QueueWatch | None) -> dict[str, Any]:
    """The settings as pages and the API show them."""
    if watch is None:
        return {"wait_minutes": None, "run_minutes": None, "draft_announcement": False,
                "mail_organisers": False}
    return {"wait_minutes": watch.wait_minutes, "run_minutes": watch.run_minutes,
            "draft_announcement": watch.draft_announcement,
            "mail_organisers": watch.mail_organisers}


def _minutes(value: Any, what: str) -> int | None:
    if value in (None, ""):
        return None
    try:
        minutes = int(value)
    except (TypeError, ValueError):
        raise InvalidData("%(what)s is a whole number of minutes, not %(value)r", what=what,
                          value=value) from None
    if not 1 <= minutes <= MAX_MINUTES:
        raise InvalidData("%(what)s is between 1 and %(limit)s minutes", what=what,
                          limit=MAX_MINUTES)
    return minutes


def set_watch(session: Session, *, task: Task, user: User | None, wait_minutes: Any,
              run_minutes: Any, draft_announcement: bool, mail_organisers: bool,
              now: datetime) -> QueueWatch:
    """Organisers set the thresholds (empty: no alert of that kind) and where alerts go
    (besides the task's channels that take `queue_alert`)."""
    access.require_organiser(session, user, task)
    watch = watch_of(session, task=task)
    if watch is None:
        watch = QueueWatch(task_id=task.id, updated_at=now)
        session.add(watch)
    watch.wait_minutes = _minutes(wait_minutes, Phrase("the waiting threshold"))
    watch.run_minutes = _minutes(run_minutes, Phrase("the running threshold"))
    watch.draft_announcement = bool(draft_announcement)
    watch.mail_organisers = bool(mail_organisers)
    watch.updated_at = now
    session.flush()
    return watch


def check(session: Session, *, now: datetime) -> list[str]:
    """Raise an alert for each job past its task's threshold that has none yet (the schedule
    ticker's step; idempotent: one alert per job and kind). Each alert is a `queue_alert`
    event (the task's channels; the organisers' mail where the watch asks for it); where it
    asks for a draft, one announcement draft per task and check lists the new alerts."""
    done: list[str] = []
    for watch in list(session.scalars(select(QueueWatch).where(
            (QueueWatch.wait_minutes.is_not(None)) | (QueueWatch.run_minutes.is_not(None))))):
        raised = [alert for alert in _overdue(session, watch, now)
                  if insert_unless_refused(session, alert)]
        for alert in raised:
            queue_event(session, "queue_alert", alert_id=alert.id,
                        mail=watch.mail_organisers)
        if raised and watch.draft_announcement:
            task = session.get(Task, watch.task_id)
            assert task is not None
            lines = "\n".join(f"- {a.summary}" for a in raised)

            def worded(w: Words, task: Task = task, lines: str = lines) -> tuple[str, str]:
                return (w.gettext("%(task)s: scoring is delayed",
                                  task=translations.task_title(task, w.code)),
                        w.gettext("Some submissions wait or run longer than usual:")
                        + f"\n\n{lines}\n\n"
                        + w.gettext("They stay queued and will be processed; no need to upload "
                                    "again."))

            announcements.draft(session, task=task, kind="message", now=now, words=worded)
        done += [f"alert {watch.task_id} {a.summary}" for a in raised]
    return done


def _overdue(session: Session, watch: QueueWatch, now: datetime) -> list[QueueAlert]:
    """Alerts (not yet stored) for the task's jobs past the thresholds."""
    found: list[QueueAlert] = []

    def alert(subject: str, kind: str, minutes: int, summary: str) -> None:
        found.append(QueueAlert(task_id=watch.task_id, subject=subject, kind=kind,
                                minutes=minutes, summary=summary, raised_at=now))

    if watch.wait_minutes:
        cutoff = now - timedelta(minutes=watch.wait_minutes)
        has_gold = select(GoldFile.id).where(GoldFile.task_id == watch.task_id).exists()
        for run in session.scalars(select(Run).where(
                Run.task_id == watch.task_id, Run.status == "valid", Run.is_current, has_gold,
                Run.submitted_at <= cutoff).order_by(Run.id)):
            alert(f"run:{run.id}", "wait", watch.wait_minutes,
                  f"run {run.team.name} / {run.name} has waited for its score more than "
                  f"{watch.wait_minutes} minutes")
        for model in session.scalars(select(ModelSubmission).where(
                ModelSubmission.task_id == watch.task_id, ModelSubmission.status == "queued",
                ModelSubmission.uploaded_at <= cutoff).order_by(ModelSubmission.id)):
            alert(f"model:{model.id}", "wait", watch.wait_minutes,
                  f"model {model.team.name} / {model.name} has been queued more than "
                  f"{watch.wait_minutes} minutes")
    if watch.run_minutes:
        cutoff = now - timedelta(minutes=watch.run_minutes)
        for model in session.scalars(select(ModelSubmission).where(
                ModelSubmission.task_id == watch.task_id, ModelSubmission.status == "running",
                ModelSubmission.started_at <= cutoff).order_by(ModelSubmission.id)):
            alert(f"model:{model.id}", "run", watch.run_minutes,
                  f"model {model.team.name} / {model.name} has been running more than "
                  f"{watch.run_minutes} minutes")
    return found
