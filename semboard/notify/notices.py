"""What a task channel is told of an event: one notice (title, text, link, facts) per event.

Notices carry names, ids and links, never a score: a channel may be a chat room wider than the
organisers, and a board's scores stay behind its own access rule. A private question's notice
names only its number.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.orm import Session

from semboard.errors import Phrase
from semboard.models import (
    Announcement,
    ModelSubmission,
    Phase,
    Question,
    QueueAlert,
    Run,
    Task,
    Team,
    UploadLog,
)

# the events a channel can take, each with what an organiser's form calls it
CHANNEL_EVENTS: dict[str, str] = {
    "run_scored": Phrase("a run was scored"),
    "run_rejected": Phrase("an upload was refused"),
    "results_published": Phrase("a board was published"),
    "gold_released": Phrase("the gold was released"),
    "announcement": Phrase("an announcement was sent"),
    "job_failed": Phrase("a model job failed"),
    "queue_alert": Phrase("a job waits or runs too long"),
    "question_asked": Phrase("a question was asked"),
    "team_pending": Phrase("a team asks to take part"),
}
DEFAULT_EVENTS = ("results_published", "gold_released", "announcement", "job_failed",
                  "queue_alert", "question_asked", "team_pending")


@dataclass(frozen=True)
class Notice:
    """One event as a channel is told it."""

    event: str
    task_id: int
    task: str
    title: str
    text: str
    url: str
    data: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The JSON a webhook receives (the delivery adds its id and time in headers)."""
        return {"event": self.event, "task": self.task, "title": self.title, "text": self.text,
                "url": self.url, "data": self.data}


def notice(session: Session, event: dict[str, Any], *, base_url: str) -> Notice | None:
    """The notice of one event, or None when it concerns no task channel (account mail) or
    what it names is gone."""
    kind = event["kind"]
    build = _BUILDERS.get(kind)
    return build(session, event, base_url) if build is not None else None


def _run_scored(session: Session, ev: dict[str, Any], base: str) -> Notice | None:
    run = session.get(Run, ev["run_id"])
    if run is None:
        return None
    team = run.team
    return Notice("run_scored", run.task_id, run.task.name,
                  f"{run.task.name}: run {team.name} / {run.name} scored",
                  f"Run {run.name!r} of team {team.name} in {run.phase.name} was scored.",
                  f"{base}/runs/{run.id}",
                  {"run_id": run.id, "team": team.name, "run": run.name,
                   "phase": run.phase.slug})


def _run_rejected(session: Session, ev: dict[str, Any], base: str) -> Notice | None:
    entry = session.get(UploadLog, ev["log_id"])
    if entry is None:
        return None
    task = session.get(Task, entry.task_id)
    team = session.get(Team, entry.team_id) if entry.team_id else None
    if task is None:
        return None
    who = team.name if team else "someone"
    return Notice("run_rejected", task.id, task.name,
                  f"{task.name}: an upload of {who} was refused",
                  f"An upload of {who} ({entry.run_name!r}) was refused"
                  + (f" ({entry.reason})" if entry.reason else "") + ".",
                  f"{base}/tasks/{task.name}/organise/log",
                  {"team": who, "run": entry.run_name, "reason": entry.reason})


def _gold_released(session: Session, ev: dict[str, Any], base: str) -> Notice | None:
    task = session.get(Task, ev["task_id"])
    if task is None:
        return None
    return Notice("gold_released", task.id, task.name, f"{task.name}: gold released",
                  f"The gold standard of {task.title} is released.", f"{base}/tasks/{task.name}")


def _results_published(session: Session, ev: dict[str, Any], base: str) -> Notice | None:
    phase = session.get(Phase, ev["phase_id"])
    if phase is None:
        return None
    task = phase.task
    return Notice("results_published", task.id, task.name,
                  f"{task.name}: results of {phase.name} published",
                  f"The board of {phase.name} of {task.title} is published.",
                  f"{base}/tasks/{task.name}/leaderboard/{phase.slug}", {"phase": phase.slug})


def _announcement(session: Session, ev: dict[str, Any], base: str) -> Notice | None:
    row = session.get(Announcement, ev["announcement_id"])
    if row is None or row.status != "sent" or row.withdrawn_at is not None:
        return None
    task = session.get(Task, row.task_id)
    assert task is not None
    edited = " (edited)" if ev.get("edited") else ""
    return Notice("announcement", task.id, task.name, f"{task.name}: {row.title}{edited}",
                  row.body if row.phase_id is None else
                  f"An announcement to the teams of {row.phase.name if row.phase else ''}.",
                  f"{base}/tasks/{task.name}/announcements#a{row.id}",
                  {"announcement_id": row.id, "critical": row.critical,
                   "edited": bool(ev.get("edited"))})


def _job_failed(session: Session, ev: dict[str, Any], base: str) -> Notice | None:
    # the job ended the row by a core UPDATE: the loaded object is read again
    row = session.get(ModelSubmission, ev["model_id"], populate_existing=True)
    if row is None:
        return None
    return Notice("job_failed", row.task_id, row.task.name,
                  f"{row.task.name}: model {row.team.name} / {row.name} failed "
                  f"({row.failure or 'failed'})",
                  f"The model job of {row.team.name}'s {row.name!r} failed: {row.reason}",
                  f"{base}/tasks/{row.task.name}/organise/queue",
                  {"model_id": row.id, "failure": row.failure, "team": row.team.name})


def _queue_alert(session: Session, ev: dict[str, Any], base: str) -> Notice | None:
    alert = session.get(QueueAlert, ev["alert_id"])
    if alert is None:
        return None
    task = session.get(Task, alert.task_id)
    assert task is not None
    return Notice("queue_alert", task.id, task.name, f"{task.name}: {alert.summary}",
                  alert.summary, f"{base}/tasks/{task.name}/organise/queue",
                  {"subject": alert.subject, "kind": alert.kind, "minutes": alert.minutes})


def _question_asked(session: Session, ev: dict[str, Any], base: str) -> Notice | None:
    question = session.get(Question, ev["question_id"])
    if question is None:
        return None
    task = session.get(Task, question.task_id)
    assert task is not None
    public = question.visibility == "public"
    return Notice("question_asked", task.id, task.name,
                  f"{task.name}: question #{question.id}"
                  + (f": {question.title}" if public else " (private)"),
                  question.body if public else "A private question waits for an answer.",
                  f"{base}/tasks/{task.name}/questions/{question.id}",
                  {"question_id": question.id, "visibility": question.visibility})


def _team_pending(session: Session, ev: dict[str, Any], base: str) -> Notice | None:
    team = session.get(Team, ev["team_id"])
    if team is None:
        return None
    task = team.task
    return Notice("team_pending", task.id, task.name,
                  f"{task.name}: team {team.name} asks to take part",
                  f"Team {team.name} ({team.affiliation or 'no affiliation'}) waits for the "
                  "organisers' approval.",
                  f"{base}/tasks/{task.name}/organise/participation", {"team": team.name})


def _channel_test(session: Session, ev: dict[str, Any], base: str) -> Notice | None:
    task = session.get(Task, ev["task_id"])
    if task is None:
        return None
    return Notice("channel_test", task.id, task.name, f"{task.name}: a test notice",
                  "An organiser asked for this test; the channel works.",
                  f"{base}/tasks/{task.name}/organise/channels", {"channel_id": ev["channel_id"]})


_BUILDERS = {"channel_test": _channel_test, "run_scored": _run_scored,
             "run_rejected": _run_rejected, "gold_released": _gold_released,
             "results_published": _results_published,
             "announcement": _announcement, "job_failed": _job_failed,
             "queue_alert": _queue_alert, "question_asked": _question_asked,
             "team_pending": _team_pending}
