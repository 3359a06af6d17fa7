"""Team windows: a team's own clock inside a phase, started on request, and its deadline."""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session

from semboard.db import insert_unless_refused
from semboard.errors import Forbidden, InvalidData, NotFound, PhaseNotOpen
from semboard.models import Phase, Team, TeamWindow, User
from semboard.services.people import teams
from semboard.services.tasks import tasks
from semboard.timefmt import clock_text

DAY = timedelta(hours=24)


def window_phase_for(session: Session, *, phase: Phase, user: User | None,
                     now: datetime) -> Phase | None:
    """Another phase whose window guards this phase's split inputs (None: this phase may serve).

    A windowed phase's inputs are served only through phases that start that window, so no
    other route (a practice phase on the same split) hands them out before the window starts.
    """
    if phase.team_window_hours:
        return None
    for other in tasks.phases(session, phase.task):
        if (other.id != phase.id and other.split == phase.split and other.team_window_hours
                and other.state(now) != "closed"):
            return other
    return None


def team_window(session: Session, *, team: Team, phase: Phase) -> TeamWindow | None:
    """The team's window in the phase, if the team has started it."""
    return session.scalar(
        select(TeamWindow).where(TeamWindow.team_id == team.id, TeamWindow.phase_id == phase.id)
    )


def team_deadline(session: Session, *, team: Team, phase: Phase) -> datetime:
    """When the team's submissions stop being on time: window end, never past the phase close.

    Computed from the window's start and the phase's current settings, so a later change of the
    close (or of the window length) moves every team's deadline with it.
    """
    window = team_window(session, team=team, phase=phase)
    return tasks.phase_deadline(phase, window.started_at if window else None)


def start_window(
    session: Session, *, team: Team, phase: Phase, user: User | None, now: datetime
) -> TeamWindow | None:
    """Start the team's window at now unless it has started (phases without windows: None)."""
    if not phase.team_window_hours or team.is_baseline:
        return None
    window = team_window(session, team=team, phase=phase)
    if window is not None:
        return window
    window = TeamWindow(
        team_id=team.id,
        phase_id=phase.id,
        started_at=now,
        ends_at=tasks.phase_deadline(phase, now),
        started_by_id=user.id if user else None,
    )
    if not insert_unless_refused(session, window):
        # A teammate's concurrent start (or upload) came first; theirs stands.
        window = team_window(session, team=team, phase=phase)
    return window


def window_text(phase: Phase) -> str:
    """How a team starts its window, for refusals and hints."""
    hours = phase.team_window_hours
    return (f"start it on the task page (or `POST /api/v1/tasks/{phase.task.name}/phases/"
            f"{phase.slug}/window`, or `semboard download --start-window`); it ends {hours} h "
            f"later, never past the close")


def start_team_window(session: Session, *, phase: Phase, user: User | None,
                      now: datetime) -> tuple[Team, TeamWindow, bool]:
    """Start the user's team's window in an open windowed phase: (team, window, started now).

    Idempotent: a window that already started is returned unchanged.
    """
    task = phase.task
    team = teams.team_for_user(session, task=task, user=user)
    if team is None:
        raise Forbidden("join or create a team for %(task)s to start a window", task=task.name)
    if not phase.team_window_hours:
        raise InvalidData("phase %(phase)s has no per-team windows: its deadline is the close, "
                          "%(closes_at)s UTC",
                          phase=phase.name, closes_at=clock_text(phase.closes_at))
    if team.is_baseline:
        raise InvalidData("the Baselines team has no windows")
    # No window_phase_for check: it guards only phases without windows, never this one.
    existing = team_window(session, team=team, phase=phase)
    if existing is not None:
        return team, existing, False
    state = phase.state(now)
    if state == "upcoming":
        raise PhaseNotOpen("phase %(phase)s opens at %(opens_at)s UTC",
                           phase=phase.name, opens_at=clock_text(phase.opens_at))
    if state == "closed":
        raise PhaseNotOpen("phase %(phase)s closed at %(closes_at)s UTC",
                           phase=phase.name, closes_at=clock_text(phase.closes_at))
    window = start_window(session, team=team, phase=phase, user=user, now=now)
    assert window is not None  # a windowed phase and a participant team
    return team, window, window.started_at == now


def started_team_window(session: Session, *, phase: Phase, user: User | None
                        ) -> tuple[Team, TeamWindow]:
    """The user's team and its started window in the phase (read only; NotFound if none)."""
    team = teams.team_for_user(session, task=phase.task, user=user)
    if team is None:
        raise Forbidden("join or create a team for %(task)s to have a window", task=phase.task.name)
    if not phase.team_window_hours:
        raise NotFound("phase %(phase)s has no per-team windows", phase=phase.name)
    window = team_window(session, team=team, phase=phase)
    if window is None:
        raise NotFound("your team's %(team_window_hours)s-hour window in phase %(phase)s has "
                       "not started: %(phase2)s",
                       team_window_hours=phase.team_window_hours, phase=phase.name,
                       phase2=window_text(phase))
    return team, window
