"""Phase rules: the default board phase, the no-oracle rule, daily limits of scored phases,
the freeze time and reveal rule of a phase's board."""

from __future__ import annotations

import functools
from datetime import datetime

from sqlalchemy import Integer, Select, String, bindparam, select
from sqlalchemy.orm import Session

from evaluation.partsrule import parts_rule
from semboard.errors import Forbidden, InvalidData, NotFound
from semboard.models import REVEALS, Phase, Task, User
from semboard.services.tasks import access, auditlog, definitions, participation
from semboard.services.tasks.access import gold_is_public, results_visible

# A phase that shows scores against private gold gets this daily limit unless one is given.
DEFAULT_MAX_PER_DAY = 5


# The phase queries every task page and board GET runs, each built once: building a statement
# and its cache key cost more than running it (0.27 of 0.53 ms on SQLite).
@functools.cache
def _phases_statement() -> Select[Phase]:
    return select(Phase).where(Phase.task_id == bindparam("task_id", type_=Integer))


@functools.cache
def _slug_statement() -> Select[Phase]:
    return select(Phase).where(Phase.task_id == bindparam("task_id", type_=Integer),
                               Phase.slug == bindparam("slug", type_=String))


def ordered_phases(session: Session, task: Task) -> list[Phase]:
    """The task's phases in opening order (tasks.phases): those a reader read with the task
    (participation.named_task), else queried."""
    read = session.info.get(participation.PHASES_READ)
    found = (read[1] if read is not None and read[0] is task
             else session.scalars(_phases_statement(), {"task_id": task.id}))
    # the order in one place, whichever query read them (a task has a few phases)
    return sorted(found, key=lambda phase: (phase.opens_at, phase.id))


def phase_named(session: Session, task: Task, slug: str) -> Phase | None:
    """The task's phase of this slug, or None (tasks.get_phase): among those a reader read
    with the task (participation.named_task), else queried."""
    read = session.info.get(participation.PHASES_READ)
    if read is not None and read[0] is task:
        return next((phase for phase in read[1] if phase.slug == slug), None)
    return session.scalar(_slug_statement(), {"task_id": task.id, "slug": slug})


def check_no_oracle(session: Session, task: Task, values: dict[str, object],
                    phase_id: int | None) -> None:
    """Refuse a phase setting that would turn visible scores into an oracle for private gold.

    Scores shown against a split's private gold leak it (one line at a time, through Pearson);
    that is refused while another phase scored against the same gold keeps its results hidden
    and still takes runs on time (a post-evaluation board opening after the close is fine).
    Hidden phases alone are unaffected, and so are public phases side by side (nothing hidden).
    """
    split = str(values["split"])
    if gold_is_public(session, task=task, split=split):
        return
    mine = results_visible(values["visibility"], values.get("results_published_at"))
    for other in session.scalars(select(Phase).where(Phase.task_id == task.id)):
        if other.id == phase_id or other.split != split:
            continue
        theirs = results_visible(other.visibility, other.results_published_at)
        if mine and not theirs and values["opens_at"] < other.closes_at:  # type: ignore[operator]
            raise InvalidData(
                "phase %(slug)s would show scores against the private gold of split %(split)r, "
                "which also scores phase %(other)s (results not published): a participant "
                "could read that gold through the scores. Use another split (a dev split) for "
                "scored feedback, or make this phase hidden.",
                slug=values['slug'], split=split, other=other.slug)
        if theirs and not mine and other.opens_at < values["closes_at"]:  # type: ignore[operator]
            raise InvalidData(
                "phase %(other)s shows scores against the private gold of split %(split)r; a "
                "phase %(slug)s with hidden results on the same split would make it an oracle "
                "for that gold. Use another split for one of them, or make phase %(other)s "
                "hidden first.", other=other.slug, split=split, slug=values['slug'])


def needs_daily_limit(session: Session, task: Task, values: dict[str, object]) -> bool:
    """Practice phases that show scores against private gold (a dev split before release),
    and phases that split their test items: their public board shows scores against the
    private gold during the phase (the definition's `[parts]`).

    Other evaluation phases are bounded by their run limit instead.
    """
    if values["visibility"] != "public" or gold_is_public(session, task=task,
                                                          split=str(values["split"])):
        return False
    if values["kind"] != "evaluation":
        return True
    rule = parts_rule(definitions.definition(task))
    return rule is not None and str(values.get("slug", "")) in rule.phases


def set_freeze(session: Session, phase: Phase, *, freeze_at: datetime | None, reveal: str,
               user: User | None, now: datetime) -> Phase:
    """When the phase's public board freezes (None: never) and when its hidden figures are
    revealed ("close" or "publish"); organisers, audited, flushes. A freeze time lies inside
    the phase (from its opening to its close)."""
    access.require_organiser(session, user, phase.task)
    if reveal not in REVEALS:
        raise InvalidData("a phase reveals at %(reveals)s, not %(reveal)r",
                          reveals=" or ".join(repr(r) for r in REVEALS), reveal=reveal)
    if freeze_at is not None:
        if freeze_at.tzinfo is None:
            raise InvalidData("the freeze time must carry a timezone (times are UTC)")
        if not phase.opens_at <= freeze_at < phase.closes_at:
            raise InvalidData("the freeze time must lie between the phase's opening "
                              "(%(opens)s) and its close (%(closes)s)",
                              opens=f"{phase.opens_at:%Y-%m-%d %H:%M} UTC",
                              closes=f"{phase.closes_at:%Y-%m-%d %H:%M} UTC")
    before = (phase.freeze_at, phase.reveal)
    phase.freeze_at, phase.reveal = freeze_at, reveal
    session.flush()
    if before != (freeze_at, reveal):
        when = f"{freeze_at:%Y-%m-%d %H:%M} UTC" if freeze_at else "never"
        auditlog.record(session, task=phase.task, user=user, action="freeze-set", now=now,
                        reason="organiser setting",
                        details={"summary": f"{phase.slug}: the board freezes {when}; hidden "
                                            f"figures are revealed at {reveal}",
                                 "phase": phase.slug, "reveal": reveal,
                                 "freeze_at": freeze_at.isoformat() if freeze_at else None})
    return phase


def default_board_phase(session: Session, task: Task, *, viewer: User | None,
                        now: datetime) -> Phase:
    """The board shown when none is named: the latest opened phase this viewer may see.

    Else the first visible phase; NotFound when the task has no phase, Forbidden when the viewer
    may see none of them. The pages and the API both use this rule.
    """
    all_phases = ordered_phases(session, task)
    if not all_phases:
        raise NotFound("task %(task)s has no phases", task=task.name)
    visible = [p for p in all_phases if access.can_view_leaderboard(session, viewer, p)]
    if not visible:
        raise Forbidden("no board of task %(task)s is visible to you yet", task=task.name)
    # A finished evaluation with published results is what visitors come for.
    opened = [p for p in visible if p.state(now) != "upcoming"]
    return opened[-1] if opened else visible[0]
