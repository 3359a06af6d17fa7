"""Phase rules: the default board phase, the no-oracle rule, daily limits of scored phases."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from semboard.errors import Forbidden, InvalidData, NotFound
from semboard.models import Phase, Task, User
from semboard.services.tasks import access
from semboard.services.tasks.access import gold_is_public, results_visible

# A phase that shows scores against private gold gets this daily limit unless one is given.
DEFAULT_MAX_PER_DAY = 5


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
    """Practice phases that show scores against private gold (a dev split before release).

    Evaluation phases are bounded by their run limit instead.
    """
    return (values["visibility"] == "public" and values["kind"] != "evaluation"
            and not gold_is_public(session, task=task, split=str(values["split"])))


def default_board_phase(session: Session, task: Task, *, viewer: User | None,
                        now: datetime) -> Phase:
    """The board shown when none is named: the latest opened phase this viewer may see.

    Else the first visible phase; NotFound when the task has no phase, Forbidden when the viewer
    may see none of them. The pages and the API both use this rule.
    """
    all_phases = list(session.scalars(
        select(Phase).where(Phase.task_id == task.id).order_by(Phase.opens_at, Phase.id)))
    if not all_phases:
        raise NotFound("task %(task)s has no phases", task=task.name)
    visible = [p for p in all_phases if access.can_view_leaderboard(session, viewer, p)]
    if not visible:
        raise Forbidden("no board of task %(task)s is visible to you yet", task=task.name)
    # A finished evaluation with published results is what visitors come for.
    opened = [p for p in visible if p.state(now) != "upcoming"]
    return opened[-1] if opened else visible[0]
