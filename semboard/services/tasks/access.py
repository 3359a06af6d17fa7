"""Who may see what: one place for every access rule (viewer is a User or None).

The read rule of a task's data (issue 40) lives here: `read_refusal` says whether a viewer may
read a split's inputs or gold, and every route that serves any of it asks it (downloads,
per-item pages and their CSV, charts drawn from gold, comparisons' pairs, exports, the
archive). It weighs the organisers' role, the gold's release, the definition's redistribution
keys (`public_inputs`, `public_gold`) and, for everyone else, the participation gate: a team,
its approval, the e-mail domain and the task's and phase's terms in force (with their grace).
Its part "private" is a split phase's private part (issue 42): private and whole scores, final
boards, the shake-up report and the split itself, the organisers' alone until the reveal.
Roles (admin, organiser, member) come from `roles`, named here again so callers ask access.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from sqlalchemy.orm import Session

from semboard.clock import request_now
from semboard.errors import Forbidden
from semboard.models import Phase, Run, Task, Team, User
from semboard.services.tasks import definitions, participation, splits, terms
from semboard.services.tasks.roles import (
    can_manage_task,
    is_admin,
    is_member,
    is_organiser,
    require_organiser,
    team_of,
    viewer,
)

__all__ = ["can_manage_task", "is_admin", "is_member", "is_organiser", "require_organiser",
           "team_of", "viewer"]  # the roles, asked of access like every other rule

# inputs, gold, or a split phase's private part (its private and whole scores, final boards,
# shake-up report and the split itself: issue 42)
Part = Literal["inputs", "gold", "private"]


def results_visible(visibility: object, published_at: object) -> bool:
    """Whether participants see a phase's scores: a public board, or a hidden one published.

    An "organisers" board stays theirs even after publication (switching to it hides a board
    again). The one visibility rule: boards, scores, run pages and the no-oracle check read it.
    """
    return visibility == "public" or (visibility == "hidden" and published_at is not None)


def can_view_leaderboard(session: Session, user: User | None, phase: Phase) -> bool:
    """Organisers see every board; others public ones and any whose results are published."""
    return (results_visible(phase.visibility, phase.results_published_at)
            or is_organiser(session, user, phase.task))


def can_view_scores(session: Session, user: User | None, phase: Phase) -> bool:
    """Scores of a phase's runs are visible exactly when its leaderboard is."""
    return can_view_leaderboard(session, user, phase)


def can_view_run(session: Session, user: User | None, run: Run, *,
                 now: datetime | None = None) -> bool:
    """A run's page: its team's members and organisers; others once it is on the board they
    see (while a board is frozen, the runs current at the freeze: a later upload's scores stay
    its team's until the reveal)."""
    if is_organiser(session, user, run.task) or is_member(session, user, run.team_id):
        return True
    if not can_view_leaderboard(session, user, run.phase):
        return False
    phase = run.phase
    when = now if now is not None else request_now()
    if phase.freeze_at is not None and frozen(session, phase, when):
        return run.submitted_at < phase.freeze_at and (
            run.is_current or (run.replaced_at is not None and run.replaced_at >= phase.freeze_at))
    return run.is_current


def revealed(session: Session, phase: Phase, now: datetime) -> bool:
    """Whether a phase's hidden figures are out: private and whole scores of a split test set,
    its final boards and shake-up report, and (a frozen board) its live state. The one reveal
    rule: once the phase has closed and, unless it reveals at the close (`reveal = "close"`),
    its results are published (by hand or at their publish time); or once its split's gold is
    public (nothing is hidden from whoever holds the gold and their runs)."""
    if gold_is_public(session, task=phase.task, split=phase.split):
        return True
    if phase.state(now) != "closed":
        return False
    return phase.reveal == "close" or phase.results_published_at is not None


def frozen(session: Session, phase: Phase, now: datetime) -> bool:
    """Whether the phase's board shows its state at the freeze time: from `freeze_at` until the
    reveal (organisers see the live board all along: sees_live)."""
    return (phase.freeze_at is not None and now >= phase.freeze_at
            and not revealed(session, phase, now))


def sees_live(session: Session, user: User | None, phase: Phase, now: datetime) -> bool:
    """Whether the viewer is served the live board (not the frozen one): organisers always,
    everyone else unless the board is frozen."""
    return not frozen(session, phase, now) or is_organiser(session, user, phase.task)


def can_view_private(session: Session, user: User | None, phase: Phase, now: datetime) -> bool:
    """A split phase's private and whole scores, final boards and shake-up report, its split:
    the read rule's part "private" (page, API, exports, mail, announcements, the archive)."""
    return can_read(session, user, phase.task, part="private", phase=phase, now=now)


def gold_is_public(session: Session, *, task: Task, split: str | None = None) -> bool:
    """A split's gold (None: the default split) is public from the start (training, trial data)
    or once released."""
    whole = definitions.definition(task)
    name = split if split in whole.splits else whole.default_split
    if whole.splits[name].gold_public:
        return True
    if name == whole.default_split and task.gold_released_at is not None:
        return True  # the default split's release is also stamped on the task (older sites)
    return splits.release_row(session, task=task, split=name) is not None


def gated(session: Session, *, task: Task, now: datetime) -> bool:
    """Whether taking part asks anything: terms in force (the task's or a phase's), the teams'
    approval or e-mail domain lists."""
    stated = participation.rules(task)
    return bool(stated.approval or stated.allow_domains or stated.deny_domains
                or terms.every_in_force(session, task=task, now=now))


def shown_publicly(session: Session, *, task: Task, now: datetime) -> dict[Part, bool]:
    """What the definition lets anyone see of a split once its gold is public (the licence's
    redistribution setting): `public_inputs` (default false) and `public_gold` (unstated: true
    unless the task gates participation)."""
    stated = participation.rules(task)
    shown_gold = stated.public_gold
    if shown_gold is None:
        shown_gold = not gated(session, task=task, now=now)
    return {"inputs": stated.public_inputs, "gold": shown_gold}


def publicly_readable(session: Session, *, task: Task, part: Part, split: str,
                      now: datetime) -> bool:
    """Whether anyone may read the split's inputs or gold: its gold is public (from the start,
    or released) and the definition lets that data be shown to all (shown_publicly)."""
    return (gold_is_public(session, task=task, split=split)
            and shown_publicly(session, task=task, now=now)[part])


def _split_phases(task: Task, split: str) -> list[Phase]:
    return [p for p in task.phases if p.split == split]


def read_refusal(session: Session, user: User | None, task: Task, *, part: Part,
                 split: str | None = None, phase: Phase | None = None,
                 now: datetime) -> Forbidden | None:
    """Why the viewer may not read the split's (None: the phase's, else the default split's)
    inputs or gold; None when they may. The one read rule of a task's data.

    Organisers read everything. Gold is nobody else's before it is public (released, or public
    from the start). Data the definition lets be shown publicly is everyone's; the rest is for
    participants: a member of a team of the task who passes the gate (domain, approval, the
    task's terms and those of the phase read through, else of every phase of the split).
    Timing (a phase not open yet, a team window) is the inputs download's own, on top.
    The part "private" (a split phase's private part) is nobody else's before the reveal.
    """
    if is_organiser(session, user, task):
        return None
    if part == "private":
        return _private_refusal(session, user, phase, now)
    split = definitions.split_name(task, split or (phase.split if phase else None))
    if part == "gold" and not gold_is_public(session, task=task, split=split):
        return Forbidden("the %(split)s gold of this task has not been released", split=split)
    if publicly_readable(session, task=task, part=part, split=split, now=now):
        return None
    team = team_of(session, task=task, user=user)
    if team is None:
        if part == "inputs":
            return Forbidden("join or create a team for this task to download its inputs")
        return Forbidden("join or create a team for this task to download its gold")
    try:
        participation.require_participant(session, task=task, user=user, team=team, now=now,
                                          phase=phase)
        for other in ([] if phase is not None else _split_phases(task, split)):
            terms.require_accepted(session, task=task, user=user, phase=other, now=now)
    except Forbidden as refusal:
        return refusal
    return None


def _private_refusal(session: Session, user: User | None, phase: Phase | None,
                     now: datetime) -> Forbidden | None:
    """The private part of a phase's split test set: nobody's but the organisers' before the
    phase's reveal; then whoever sees its board."""
    if phase is None:
        return Forbidden("a private part belongs to a phase")
    if not revealed(session, phase, now):
        return Forbidden("the private part of phase %(phase)s's test set stays hidden until "
                         "its reveal", phase=phase.slug)
    if not can_view_leaderboard(session, user, phase):
        return Forbidden("the results of phase %(phase)s are not published", phase=phase.slug)
    return None


def can_read(session: Session, user: User | None, task: Task, *, part: Part,
             split: str | None = None, phase: Phase | None = None, now: datetime) -> bool:
    """Whether the viewer may read the split's inputs or gold (read_refusal)."""
    return read_refusal(session, user, task, part=part, split=split, phase=phase,
                        now=now) is None


def require_read(session: Session, user: User | None, task: Task, *, part: Part,
                 split: str | None = None, phase: Phase | None = None,
                 now: datetime) -> None:
    """Raise the read rule's refusal (TermsRequired names the terms to accept)."""
    refusal = read_refusal(session, user, task, part=part, split=split, phase=phase, now=now)
    if refusal is not None:
        raise refusal


def can_view_gold(session: Session, user: User | None, task: Task,
                  split: str | None = None, *, now: datetime) -> bool:
    """Gold of a split (None: the default one): the read rule."""
    return can_read(session, user, task, part="gold", split=split, now=now)


def can_view_items(session: Session, user: User | None, run: Run, *, now: datetime) -> bool:
    """A run's pairs beside gold (errors, scatter, comparisons' pairs): whoever sees its scores,
    when the read rule lets them read its split's gold (through the run's phase) and, in a
    phase splitting its test set, its private part."""
    split_phase = definitions.phase_parts_rule(run.phase) is not None
    return (can_view_run(session, user, run, now=now)
            and can_view_scores(session, user, run.phase)
            and can_read(session, user, run.task, part="gold", phase=run.phase, now=now)
            # a split test set's items hold its private part's: hidden until the reveal
            and (not split_phase or can_view_private(session, user, run.phase, now)))


def can_view_item_texts(session: Session, user: User | None, run: Run, *,
                        now: datetime) -> bool:
    """The pairs' texts beside them: the read rule of the split's inputs, on top."""
    return (can_view_items(session, user, run, now=now)
            and can_read(session, user, run.task, part="inputs", phase=run.phase, now=now))


def can_see_run_audit(session: Session, user: User | None, run: Run) -> bool:
    """Organisers' actions on a run, with their reasons: the run's team and the organisers."""
    return is_member(session, user, run.team_id) or is_organiser(session, user, run.task)


def can_see_invite_code(session: Session, user: User | None, team: Team) -> bool:
    """A team's invite code: its captain (who shares it) and the task's organisers."""
    if team.is_baseline or user is None:
        return False
    captain = team.captain_id == user.id and is_member(session, user, team.id)
    return captain or is_organiser(session, user, team.task)
