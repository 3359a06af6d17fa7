"""Admission of a team's upload (run or model) to a phase: the one home of its rules.

Asked in this order by every door (jobs.scoring.accept_run through submissions.submit,
jobs.models.accept_model and the upload in parts through models.check_submission; the pages,
the API and the CLI only map its refusals to their answers):
1. who (`rights`): the team's members (organisers for the site's Baselines team), who pass the
   participation gate for this phase: e-mail domain, the team's approval, the task's and the
   phase's terms in force, and after the phase's entry deadline a team formed, a membership and
   an acceptance of the terms from before it (services.tasks.participation);
2. the system description's answers (`described`, runs only);
3. when (`timing`): the phase open, the team's deadline, the late policy, granted fixes, a
   gold release;
4. how many (`check_room`, `take_slot`): the daily quota and the run slots, where a pending
   (queued or running) model holds a slot and a day's upload until its job ends.
The upload log keeps every refusal of 2-4 (its only trace).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from evaluation.descriptions import check_answers
from semboard.db import begin_write
from semboard.errors import (
    DomainError,
    Forbidden,
    InvalidData,
    PhaseNotOpen,
    Phrase,
    RateLimited,
    RunLimitReached,
    RunRejected,
    WindowClosed,
    issue_dicts,
    said,
)
from semboard.models import ModelSubmission, Phase, Run, Task, Team, UploadLog, User
from semboard.services.people import grants, ratelimit, windows
from semboard.services.tasks import access, definitions, participation, splits, tasks
from semboard.timefmt import clock_text

DAY = timedelta(hours=24)
# A model holds its slot and its day's upload while in these states.
PENDING = ("queued", "running")
REJECTED_UPLOADS_PER_HOUR = 20


@dataclass(frozen=True)
class DailyQuota:
    """A team's uploads to a phase in the last 24 hours (pending models included) and when the
    next one is allowed."""

    limit: int | None
    used: int
    next_allowed_at: datetime | None
    pending: int = 0

    def to_dict(self) -> dict[str, object]:
        """JSON form."""
        return {"max_per_day": self.limit, "used_last_24h": self.used,
                "models_pending": self.pending,
                "next_allowed_at": self.next_allowed_at.isoformat()
                if self.next_allowed_at else None}


@dataclass(frozen=True)
class Room:
    """A team's room in a phase: run slots held by current runs and pending models, the day's
    uploads."""

    limit: int | None
    runs: int
    pending: int
    held: int
    quota: DailyQuota

    @property
    def free(self) -> int | None:
        """Slots left (None: no limit)."""
        return None if not self.limit else max(self.limit - self.held, 0)

    def to_dict(self) -> dict[str, object]:
        """JSON form."""
        return {"max_runs": self.limit, "runs": self.runs, "models_pending": self.pending,
                "free": self.free}


def rights(session: Session, *, team: Team, phase: Phase, user: User | None, now: datetime,
           what: str = "runs", admitted_model: bool = False) -> None:
    """Forbidden unless the user may upload for the team to the phase: its member (for the
    Baselines team, runs only: an organiser, or the site itself with user None) who passes
    the participation gate with this phase's own terms. admitted_model: a model's own run,
    whose gate was passed when the model was admitted (its membership is asked again)."""
    if phase.task_id != team.task_id:
        raise InvalidData("the team and the phase belong to different tasks")
    if team.is_baseline and what == "runs":
        if user is not None and not access.is_organiser(session, user, phase.task):
            raise Forbidden("only organisers submit runs of the Baselines team")
        return
    if team.is_baseline or user is None or not access.is_member(session, user, team.id):
        if what == "runs":
            raise Forbidden("only the team's members may submit its runs")
        raise Forbidden("only the team's members may submit its models")
    if not admitted_model:
        participation.require_participant(session, task=phase.task, user=user, team=team,
                                          phase=phase, now=now)
        refusal = participation.entry_refusal(session, phase=phase, team=team, user=user,
                                              now=now)
        if refusal and not access.is_organiser(session, user, phase.task):
            raise participation.EntryClosed(refusal)


def described(phase: Phase, description: str, given: Mapping[str, Any]) -> dict[str, Any]:
    """An upload's system description checked against the definition's questions: the
    normalised answers, or InvalidData listing every problem."""
    answers, issues = check_answers(definitions.definition(phase.task), description, given)
    if issues:
        raise InvalidData("the system description has %(problems)s problem(s)", issues,
                          problems=len(issues))
    return answers


def _pending(session: Session, *, team: Team, phase: Phase,
             except_model: int | None) -> list[tuple[str, datetime]]:
    """(name, upload time) of the team's models of the phase still waiting for their job."""
    query = select(ModelSubmission.name, ModelSubmission.uploaded_at).where(
        ModelSubmission.team_id == team.id, ModelSubmission.phase_id == phase.id,
        ModelSubmission.status.in_(PENDING))
    if except_model is not None:  # a model's own run does not wait for itself
        query = query.where(ModelSubmission.id != except_model)
    return [(name, at) for name, at in session.execute(query)]


def daily_quota(session: Session, *, team: Team, phase: Phase, now: datetime,
                except_model: int | None = None) -> DailyQuota:
    """Accepted runs (replacements count, so replaced runs too) and pending models in the last
    24 hours; past the phase's limit, when the oldest of them is a day old."""
    if not phase.max_per_day:
        return DailyQuota(None, 0, None)
    since = now - DAY
    times = list(session.scalars(select(Run.submitted_at).where(
        Run.team_id == team.id, Run.phase_id == phase.id, Run.submitted_at > since)))
    models = [at for _name, at in _pending(session, team=team, phase=phase,
                                           except_model=except_model) if at > since]
    times = sorted([*times, *models], reverse=True)
    if len(times) < phase.max_per_day:
        return DailyQuota(phase.max_per_day, len(times), None, len(models))
    # The window slides: the next upload is allowed when the oldest counted one is a day old.
    return DailyQuota(phase.max_per_day, len(times), times[phase.max_per_day - 1] + DAY,
                      len(models))


def _held(session: Session, *, team: Team, phase: Phase,
          except_model: int | None) -> tuple[list[Run], set[str], int]:
    """(current runs, names holding a slot, pending models): a pending model holds the slot of
    its name (replacing a current run of that name takes no new one)."""
    current = list(session.scalars(select(Run).where(
        Run.team_id == team.id, Run.phase_id == phase.id, Run.is_current)))
    pending = _pending(session, team=team, phase=phase, except_model=except_model)
    return current, {r.name for r in current} | {n for n, _at in pending}, len(pending)


def room(session: Session, *, team: Team, phase: Phase, now: datetime) -> Room:
    """What the upload and task pages and the API show: slots left, the day's uploads."""
    current, held, pending = _held(session, team=team, phase=phase, except_model=None)
    return Room(phase.max_runs, len(current), pending, len(held),
                daily_quota(session, team=team, phase=phase, now=now))


def _slot_refusal(phase: Phase, runs: int, pending: int) -> RunLimitReached:
    held = (Phrase("your team has used all %(max_runs)s runs of %(phase)s",
                   max_runs=phase.max_runs, phase=phase.name) if not pending else
            Phrase("your team's %(runs)s run(s) and %(pending)s model(s) waiting fill the "
                   "%(max_runs)s runs of %(phase)s", runs=runs, pending=pending,
                   max_runs=phase.max_runs, phase=phase.name))
    return RunLimitReached("%(held)s; upload under an existing run name to replace a run",
                           held=held)


def check_room(session: Session, *, team: Team, phase: Phase, name: str | None, now: datetime,
               except_model: int | None = None) -> None:
    """RateLimited (naming the next allowed time) when the day's uploads are used, or
    RunLimitReached when runs and pending models fill the slots (a same name replaces; name
    None: not known yet, the slots are checked when it is)."""
    if team.is_baseline:
        return
    quota = daily_quota(session, team=team, phase=phase, now=now, except_model=except_model)
    if quota.next_allowed_at is not None:
        waiting = (Phrase(", %(pending)s of them model(s) waiting", pending=quota.pending)
                   if quota.pending else "")
        raise RateLimited(
            "your team has made %(used)s uploads to %(phase)s in the last 24 hours%(waiting)s "
            "(at most %(limit)s); next upload allowed at %(next_allowed_at)s UTC",
            used=quota.used, phase=phase.name, waiting=waiting, limit=quota.limit,
            next_allowed_at=f"{quota.next_allowed_at:%Y-%m-%d %H:%M}")
    if phase.max_runs and name is not None:
        current, held, pending = _held(session, team=team, phase=phase,
                                       except_model=except_model)
        if name not in held and len(held) >= phase.max_runs:
            raise _slot_refusal(phase, len(current), pending)


def timing(session: Session, *, team: Team, phase: Phase, now: datetime) -> tuple[bool, bool]:
    """(is_late, is_fix) of a team's upload at `now`; PhaseNotOpen or WindowClosed when the
    phase, the team's deadline or a gold release refuse it (a model counts at its upload time).
    """
    task = phase.task
    is_late = is_fix = False
    if phase.state(now) == "upcoming":
        raise PhaseNotOpen("phase %(phase)s opens at %(opens_at)s UTC",
                           phase=phase.name, opens_at=clock_text(phase.opens_at))
    deadline = windows.team_deadline(session, team=team, phase=phase)
    if now >= deadline:
        if grants.active_grant(session, team=team, phase=phase, now=now) is not None:
            is_fix = True
        elif phase.late_policy == "flag":
            is_late = True
        else:
            raise WindowClosed(
                "your deadline for %(phase)s passed at %(deadline)s UTC",
                phase=phase.name, deadline=clock_text(deadline))
    # Once gold is released a run can be fitted to it: only post-evaluation phases (and fixes
    # an organiser granted) still take runs, so a late run can never top the official board.
    # Gold public from the start (training, trial) is practice data and takes runs.
    release = splits.release_row(session, task=task, split=phase.split)
    released = release.released_at if release is not None else None
    if released is not None and now >= released and phase.kind != "post-evaluation" \
            and not is_fix:
        raise WindowClosed(
            "the gold of %(task)s was released at %(released)s UTC; %(phase)s takes no new "
            "runs (submit to a post-evaluation phase)",
            task=task.name, released=clock_text(released), phase=phase.name)
    return is_late, is_fix


def admit(session: Session, *, team: Team, phase: Phase, name: str | None, now: datetime,
          except_model: int | None = None) -> tuple[bool, bool]:
    """(is_late, is_fix) of an upload the phase takes now; else the DomainError saying why.

    name None: a run whose name is read from its files; take_slot checks its slot once known.

    The Baselines team is the organisers' own: no timing, quota or slots.
    except_model: the model whose own run this is (it holds no slot against itself).
    """
    if team.is_baseline:
        return False, False
    is_late, is_fix = timing(session, team=team, phase=phase, now=now)
    check_room(session, team=team, phase=phase, name=name, now=now, except_model=except_model)
    return is_late, is_fix


def take_slot(session: Session, *, team: Team, phase: Phase, name: str, is_late: bool,
              now: datetime, except_model: int | None = None) -> tuple[Run | None, int | None]:
    """Under the team's write lock: (the same-named current run it replaces, the slot number).

    The day's quota and the slots again, so concurrent uploads cannot both pass; a late run
    cannot replace one.
    """
    check_room(session, team=team, phase=phase, name=name, now=now, except_model=except_model)
    current = list(session.scalars(select(Run).where(
        Run.team_id == team.id, Run.phase_id == phase.id, Run.is_current)))
    same = next((r for r in current if r.name == name), None)
    if same is not None:
        if is_late:
            raise WindowClosed("run %(name)r can no longer be replaced: your deadline has passed",
                               name=name)
        return same, same.slot
    if not phase.max_runs or team.is_baseline:
        return None, None
    used = {r.slot for r in current}
    return None, next(s for s in range(1, phase.max_runs + 1) if s not in used)


def free_slots(session: Session, *, team: Team, phase: Phase, names: Collection[str],
               pending: Collection[str] = ()) -> list[int | None]:
    """Slot numbers for current runs (these names) moving to the team, with pending models of
    these names (an organiser's move or merge); RunLimitReached when they do not all fit."""
    if not phase.max_runs:
        return [None] * len(names)
    current, held, _pending_count = _held(session, team=team, phase=phase, except_model=None)
    if len(held | set(names) | set(pending)) > phase.max_runs:
        left = max(phase.max_runs - len(held), 0)
        raise RunLimitReached(
            "team %(team)s has %(left)s free run slot(s) in %(phase)s (runs and models waiting "
            "count), %(names)s needed",
            team=team.name, left=left, phase=phase.name,
            names=len(set(names) | set(pending) - held))
    used = {r.slot for r in current}
    free: list[int | None] = [s for s in range(1, phase.max_runs + 1) if s not in used]
    return free[: len(names)]


def offered_phases(session: Session, *, task: Task, team: Team, now: datetime) -> list[Phase]:
    """The phases an upload form offers the team: opened ones that can still take its runs."""
    opened = [p for p in tasks.phases(session, task) if p.state(now) != "upcoming"]
    if team.is_baseline:
        return opened
    released = {r.split: r.released_at for r in splits.releases(session, task=task)}

    def takes_runs(phase: Phase) -> bool:
        # After its split's gold release only a post-evaluation phase, or a fix, takes runs.
        at = released.get(phase.split)
        return (at is None or now < at or phase.kind == "post-evaluation"
                or grants.active_grant(session, team=team, phase=phase, now=now) is not None)

    return [p for p in opened if takes_runs(p)]


def team_phase_status(session: Session, *, team: Team, phases: list[Phase],
                      now: datetime) -> dict[str, dict[str, object]]:
    """Per phase: the team's window (start, end), deadline, daily quota and run slots."""
    out: dict[str, dict[str, object]] = {}
    for phase in phases:
        window = windows.team_window(session, team=team, phase=phase)
        found = room(session, team=team, phase=phase, now=now)
        out[phase.slug] = {
            "split": phase.split,
            "window_started_at": window.started_at.isoformat() if window else None,
            "window_ends_at": window.ends_at.isoformat() if window else None,
            "deadline": windows.team_deadline(session, team=team, phase=phase).isoformat(),
            "daily": found.quota.to_dict(),
            "slots": found.to_dict(),
        }
    return out


# ----------------------------------------------------------------------------- the upload log

def rate_key(team: Team) -> str:
    """The rate-limit key of a team's invalid uploads."""
    return f"rejected-upload:team:{team.id}"


def log_upload(
    session: Session,
    *,
    team: Team,
    phase: Phase | None,
    user: User | None,
    name: str,
    files: Mapping[str, bytes | int],
    outcome: str,
    message: str | DomainError,
    now: datetime,
    issues: list[Any] | None = None,
    run: Run | None = None,
    reason: str | None = None,
) -> UploadLog:
    """Add the upload log's row of an upload (accepted or rejected; reason: a refusal's
    class, REFUSAL_REASONS)."""
    entry = UploadLog(
        task_id=team.task_id,
        phase_id=phase.id if phase else None,
        team_id=team.id,
        user_id=user.id if user else None,
        run_id=run.id if run else None,
        run_name=name[:255],
        outcome=outcome,
        message=str(message),
        said=said(message),
        issues=issue_dicts(issues or []),
        filenames=[name[:255] for name in sorted(files)[:200]],
        # a model's archive is logged by its size: it is never held in memory whole
        total_bytes=sum(v if isinstance(v, int) else len(v) for v in files.values()),
        created_at=now,
        reason=reason,
    )
    session.add(entry)
    return entry


# a refusal's class, as the upload log keeps it (the organisers' analytics count them)
REFUSAL_REASONS = {
    "invalid": Phrase("the files had problems"),
    "too-many-invalid": Phrase("too many invalid uploads in an hour"),
    "deadline": Phrase("the deadline had passed"),
    "not-open": Phrase("the phase was not open"),
    "run-limit": Phrase("the run slots were full"),
    "daily-limit": Phrase("the day's uploads were used"),
    "rights": Phrase("not allowed to upload"),
    "bad-request": Phrase("a field of the upload was wrong"),
    "other": Phrase("another reason"),
}


def refusal_reason(err: DomainError) -> str:
    """The class of a refusal (REFUSAL_REASONS' key)."""
    for kind, reason in ((RunRejected, "invalid"), (WindowClosed, "deadline"),
                         (PhaseNotOpen, "not-open"), (RunLimitReached, "run-limit"),
                         (RateLimited, "daily-limit"), (Forbidden, "rights"),
                         (InvalidData, "bad-request")):
        if isinstance(err, kind):
            return reason
    return "other"


def refuse(
    session: Session,
    err: DomainError,
    *,
    team: Team,
    phase: Phase | None,
    user: User | None,
    name: str,
    files: Mapping[str, bytes | int],
    now: datetime,
    reason: str | None = None,
) -> DomainError:
    """Commit only an upload-log row (and the rate-limit count) for a refused upload; the error."""
    session.rollback()
    begin_write(session)  # SQLite: take the write lock before reading (see db.begin_write)
    log_upload(session, team=team, phase=phase, user=user, name=name, files=files,
               outcome="rejected", message=err, issues=err.issues, now=now,
               reason=reason or refusal_reason(err))
    # Only invalid files count towards the limit: a refusal for timing, slots or rights is the
    # site's rule, not a participant probing the validator.
    if isinstance(err, RunRejected):
        ratelimit.record(session, key=rate_key(team), now=now)
    session.commit()
    return err


def refuse_invalid(session: Session, err: RunRejected, *, team: Team, phase: Phase | None,
                   user: User | None, name: str, files: Mapping[str, bytes | int],
                   now: datetime) -> DomainError:
    """Refuse a run with problems; past the hourly limit of invalid uploads, a 429 saying when
    it lifts (a valid run is never refused for earlier mistakes: this comes after checks)."""
    lifts = None if team.is_baseline else ratelimit.lifts_at(
        session, key=rate_key(team), limit=REJECTED_UPLOADS_PER_HOUR, per=timedelta(hours=1),
        now=now)
    refusal: DomainError = err
    if lifts is not None:
        refusal = RateLimited(
            "%(text)s. %(limit)s invalid uploads in the last hour: check "
            "your files before uploading again; the limit lifts at %(lifts)s UTC (valid runs "
            "are always accepted)", err.issues, text=err, limit=REJECTED_UPLOADS_PER_HOUR,
            lifts=clock_text(lifts))
    return refuse(session, refusal, team=team, phase=phase, user=user, name=name, files=files,
                  now=now, reason="too-many-invalid" if lifts is not None else "invalid")
