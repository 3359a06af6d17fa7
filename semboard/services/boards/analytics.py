"""A task's analytics for its organisers, computed by a job and stored (TaskAnalytics): uploads
and refusals per day and reason, active teams over time, each team's best score over time,
scoring and model-job times.

`compute` reads every upload, run and model of the task once (a job's work: the schedule
ticker's, or the one an organiser asks for); pages, downloads and the API read the stored row,
so a view costs the same whatever the number of runs. `stamp` names what the figures were
computed from, so the ticker recomputes only a task that changed.
"""

from __future__ import annotations

import csv
import hashlib
import io
import statistics
import time
from collections import defaultdict
from datetime import datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from evaluation.metrics import LOWER_IS_BETTER
from evaluation.ranking import ranking_keys
from semboard.db import end_read
from semboard.models import (
    ModelSubmission,
    Phase,
    Run,
    RunScoreRecord,
    Task,
    TaskAnalytics,
    Team,
    UploadLog,
    User,
)
from semboard.services.runs.admission import REFUSAL_REASONS
from semboard.services.tasks import access, definitions
from semboard.timefmt import api_time

VERSION = 1  # of the stored form: a change recomputes every task


def _day(moment: datetime) -> str:
    return moment.date().isoformat()


def stamp(session: Session, *, task: Task) -> str:
    """A digest of what the figures depend on (counts and newest ids): cheap, four queries."""
    parts: list[Any] = [VERSION]
    parts += list(session.execute(select(func.count(UploadLog.id), func.max(UploadLog.id))
                                  .where(UploadLog.task_id == task.id)).one())
    parts += list(session.execute(select(func.count(Run.id), func.max(Run.id))
                                  .where(Run.task_id == task.id)).one())
    parts.append(session.scalar(select(func.max(RunScoreRecord.id)).join(
        Run, Run.id == RunScoreRecord.run_id).where(Run.task_id == task.id)))
    parts += list(session.execute(select(func.count(ModelSubmission.id),
                                         func.max(ModelSubmission.finished_at),
                                         func.max(ModelSubmission.started_at))
                                  .where(ModelSubmission.task_id == task.id)).one())
    parts.append(session.scalar(select(func.count(Team.id)).where(Team.task_id == task.id)))
    return hashlib.sha256(repr(parts).encode()).hexdigest()


def _times(values: list[float]) -> dict[str, Any]:
    """Count, median, 90th percentile and maximum of durations in seconds."""
    if not values:
        return {"n": 0, "median_s": None, "p90_s": None, "max_s": None}
    ordered = sorted(values)
    return {"n": len(ordered), "median_s": round(statistics.median(ordered), 3),
            "p90_s": round(ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))], 3),
            "max_s": round(ordered[-1], 3)}


def compute(session: Session, *, task: Task, now: datetime) -> dict[str, Any]:
    """Every figure of the task (JSON-ready); read-only."""
    uploads: dict[str, dict[str, int]] = defaultdict(lambda: {"accepted": 0, "rejected": 0})
    refusals: dict[tuple[str, str], int] = defaultdict(int)
    active: dict[str, set[int]] = defaultdict(set)
    for outcome, reason, team_id, at in session.execute(
            select(UploadLog.outcome, UploadLog.reason, UploadLog.team_id, UploadLog.created_at)
            .where(UploadLog.task_id == task.id).order_by(UploadLog.id)):
        day = _day(at)
        uploads[day][outcome] += 1
        if outcome == "rejected":
            refusals[(day, reason or "other")] += 1
        elif team_id is not None:
            active[day].add(team_id)
    baseline = {t for t, in session.execute(select(Team.id).where(Team.task_id == task.id,
                                                                    Team.is_baseline))}
    formed: dict[str, int] = defaultdict(int)
    for (at,) in session.execute(select(Team.created_at).where(Team.task_id == task.id,
                                                             Team.is_baseline.is_(False))):
        formed[_day(at)] += 1
    days = sorted(set(uploads) | set(formed))
    teams_so_far = 0
    active_rows = []
    for day in days:
        teams_so_far += formed.get(day, 0)
        active_rows.append({"day": day, "active_teams": len(active.get(day, set()) - baseline),
                            "teams": teams_so_far})
    totals: dict[str, int] = defaultdict(int)
    for (_when, reason), count in refusals.items():
        totals[reason] += count
    return {
        "task": task.name, "computed_for": api_time(now),
        "uploads_by_day": [{"day": d, **uploads[d]} for d in sorted(uploads)],
        "refusals_by_day": [{"day": d, "reason": r, "count": c}
                            for (d, r), c in sorted(refusals.items())],
        "refusals_by_reason": [{"reason": r, "meaning": REFUSAL_REASONS.get(r, r), "count": c}
                               for r, c in sorted(totals.items(), key=lambda kv: -kv[1])],
        "active_teams": active_rows,
        "best_scores": _best_scores(session, task, baseline),
        "scoring_times": _scoring_times(session, task),
        "model_times": _model_times(session, task),
    }


def _best_scores(session: Session, task: Task, baseline: set[int]) -> list[dict[str, Any]]:
    """Per phase: each team's best value of the board's first ranked column after each of its
    runs that improved it (the run's first score; scores an organiser may see)."""
    phases = list(session.scalars(select(Phase).where(Phase.task_id == task.id)
                                  .order_by(Phase.opens_at, Phase.id)))
    first_score = (select(RunScoreRecord.run_id, func.min(RunScoreRecord.id).label("first"))
                   .group_by(RunScoreRecord.run_id).subquery())
    out = []
    for phase in phases:
        keys = ranking_keys(definitions.phase_definition(phase))
        if not keys:
            continue
        key = keys[0]
        lower = key.rsplit("/", 1)[-1] in LOWER_IS_BETTER
        best: dict[int, float] = {}
        points = []
        names = {t.id: t.name for t in session.scalars(select(Team).where(
            Team.task_id == task.id))}
        rows = session.execute(
            select(Run.team_id, Run.submitted_at, RunScoreRecord.flat)
            .join(first_score, first_score.c.run_id == Run.id)
            .join(RunScoreRecord, RunScoreRecord.id == first_score.c.first)
            .where(Run.phase_id == phase.id, Run.status == "scored")
            .order_by(Run.submitted_at, Run.id))
        for team_id, at, flat in rows:
            value = (flat or {}).get(key)
            if team_id in baseline or value is None:
                continue
            old = best.get(team_id)
            if old is None or (value < old if lower else value > old):
                best[team_id] = value
                points.append({"team": names.get(team_id, str(team_id)), "at": api_time(at),
                               "day": _day(at), "best": value})
        out.append({"phase": phase.slug, "name": phase.name, "metric": key,
                    "lower_is_better": lower, "points": points})
    return out


def _scoring_times(session: Session, task: Task) -> list[dict[str, Any]]:
    """Per day of upload: the time from upload to first score."""
    first = (select(RunScoreRecord.run_id, func.min(RunScoreRecord.created_at).label("at"))
             .group_by(RunScoreRecord.run_id).subquery())
    by_day: dict[str, list[float]] = defaultdict(list)
    for submitted, scored in session.execute(
            select(Run.submitted_at, first.c.at).join(first, first.c.run_id == Run.id)
            .where(Run.task_id == task.id)):
        if scored is not None:
            scored = scored if scored.tzinfo else scored.replace(tzinfo=submitted.tzinfo)
            by_day[_day(submitted)].append(max(0.0, (scored - submitted).total_seconds()))
    return [{"day": d, **_times(v)} for d, v in sorted(by_day.items())]


def _model_times(session: Session, task: Task) -> list[dict[str, Any]]:
    """Per day of upload: models' waits in the queue and their jobs' run times, and how many
    ended failed."""
    waits: dict[str, list[float]] = defaultdict(list)
    runs: dict[str, list[float]] = defaultdict(list)
    failed: dict[str, int] = defaultdict(int)
    for uploaded, started, finished, status in session.execute(
            select(ModelSubmission.uploaded_at, ModelSubmission.started_at,
                   ModelSubmission.finished_at, ModelSubmission.status)
            .where(ModelSubmission.task_id == task.id)):
        day = _day(uploaded)
        waits.setdefault(day, [])
        if started is not None:
            waits[day].append(max(0.0, (started - uploaded).total_seconds()))
            if finished is not None:
                runs[day].append(max(0.0, (finished - started).total_seconds()))
        failed[day] += status == "failed"
    return [{"day": d, "wait": _times(waits[d]), "run": _times(runs.get(d, [])),
             "failed": failed.get(d, 0)} for d in sorted(waits)]


# ----------------------------------------------------------------------------- stored


def stored(session: Session, *, task: Task, user: User | None) -> TaskAnalytics | None:
    """The stored figures (organisers only); None until the first job ran."""
    access.require_organiser(session, user, task)
    return session.scalar(select(TaskAnalytics).where(TaskAnalytics.task_id == task.id))


def refresh(session: Session, *, task: Task, now: datetime, force: bool = False) -> bool:
    """Compute and store the task's figures when what they depend on changed (or force);
    whether it did. Reads first, then one short write (the caller commits)."""
    current = stamp(session, task=task)
    row = session.scalar(select(TaskAnalytics).where(TaskAnalytics.task_id == task.id))
    if row is not None and row.stamp == current and not force:
        return False
    started = time.perf_counter()
    data = compute(session, task=task, now=now)
    elapsed = int((time.perf_counter() - started) * 1000)
    end_read(session)  # the reading is done: no lock held while the row is written
    if row is None:
        row = TaskAnalytics(task_id=task.id, stamp=current, data=data, computed_at=now,
                            elapsed_ms=elapsed)
        session.add(row)
    else:
        row.stamp, row.data, row.computed_at, row.elapsed_ms = current, data, now, elapsed
    session.flush()
    return True


def to_csv(data: dict[str, Any]) -> str:
    """Every series in one long table: series, day, key, value (a spreadsheet's pivot input)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["series", "day", "key", "value"])
    for row in data.get("uploads_by_day", []):
        for key in ("accepted", "rejected"):
            writer.writerow(["uploads", row["day"], key, row[key]])
    for row in data.get("refusals_by_day", []):
        writer.writerow(["refusals", row["day"], row["reason"], row["count"]])
    for row in data.get("active_teams", []):
        writer.writerow(["active_teams", row["day"], "active", row["active_teams"]])
        writer.writerow(["teams", row["day"], "formed_so_far", row["teams"]])
    for board in data.get("best_scores", []):
        for point in board["points"]:
            writer.writerow([f"best:{board['phase']}:{board['metric']}", point["at"],
                             point["team"], point["best"]])
    for row in data.get("scoring_times", []):
        for key in ("n", "median_s", "p90_s", "max_s"):
            writer.writerow(["scoring_time", row["day"], key, row[key]])
    for row in data.get("model_times", []):
        for part in ("wait", "run"):
            for key in ("n", "median_s", "p90_s", "max_s"):
                writer.writerow([f"model_{part}", row["day"], key, row[part][key]])
        writer.writerow(["model_failed", row["day"], "failed", row["failed"]])
    return out.getvalue()
