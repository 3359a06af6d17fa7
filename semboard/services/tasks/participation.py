"""The participation gate: who may take part in a task and who may even find it.

One home for: e-mail domain allow and deny lists, organiser approval of each team (with the
mail both ways), the entry deadline (teams formed and terms accepted by a date), unlisted tasks
reachable only by their secret link, and (through services.terms) accepted terms. Pages and
the API call the same checks, so they answer alike.
"""

from __future__ import annotations

import functools
import hmac
import secrets
from datetime import datetime

from sqlalchemy import Select, String, bindparam, select
from sqlalchemy.orm import Session

from evaluation.participation import Participation, domain_matches, participation
from semboard.db import READ_ONLY
from semboard.errors import Forbidden, InvalidData, NotFound, Phrase
from semboard.models import (
    ModelSubmission,
    Phase,
    Run,
    Task,
    TaskSecret,
    Team,
    TeamApproval,
    TeamMember,
    TermsAcceptance,
    User,
)
from semboard.notify.events import queue_event
from semboard.services.tasks import auditlog, definitions, roles, terms
from semboard.timefmt import clock_text


def rules(task: Task) -> Participation:
    """The task's definition keys of participation, licence and citation."""
    return participation(definitions.definition(task))


def domain_refusal(task: Task, user: User | None) -> Phrase | None:
    """Why the user's e-mail domain may not take part, or None."""
    stated = rules(task)
    if user is None or not (stated.allow_domains or stated.deny_domains):
        return None
    if stated.deny_domains and domain_matches(user.email, stated.deny_domains):
        return Phrase("%(task)s does not take part from addresses at %(domain)s",
                      task=task.name, domain=user.email.rpartition("@")[2])
    if stated.allow_domains and not domain_matches(user.email, stated.allow_domains):
        return Phrase("%(task)s takes part only from addresses at %(domains)s",
                      task=task.name, domains=", ".join(stated.allow_domains))
    return None


def approval_state(session: Session, *, team: Team) -> str | None:
    """"approved", "refused" or "pending" where the task asks for approval; else None."""
    if not rules(team.task).approval or team.is_baseline:
        return None
    row = session.scalar(select(TeamApproval).where(TeamApproval.team_id == team.id))
    return row.state if row is not None else "pending"


def decide(session: Session, *, team: Team, state: str, user: User | None,
           now: datetime, reason: str = "") -> TeamApproval:
    """Organisers approve or refuse a team (a later decision replaces the earlier one); the
    team's members are mailed the decision and the reason given (shown on the task page)."""
    roles.require_organiser(session, user, team.task)
    if state not in ("approved", "refused"):
        raise InvalidData("a team is approved or refused")
    said = auditlog.check_reason(reason) or None
    row = session.scalar(select(TeamApproval).where(TeamApproval.team_id == team.id))
    previous = row.state if row is not None else "pending"
    if row is None:
        row = TeamApproval(team_id=team.id, state=state, decided_at=now)
        session.add(row)
    row.state = state
    row.decided_at = now
    row.decided_by_id = user.id if user else None
    row.reason = said
    session.flush()
    if previous != state or said:
        queue_event(session, "team_decided", team_id=team.id)
    auditlog.record(session, task=team.task, user=user, team=team, action=f"team-{state}",
                    now=now, reason=said or "the organisers' decision",
                    details={"summary": f"team {team.name} {state}", "previous": previous})
    return row


def require_participant(session: Session, *, task: Task, user: User | None, team: Team | None,
                        now: datetime, phase: Phase | None = None) -> None:
    """Forbidden unless the user may receive the task's data or upload to it (organisers and the
    site's own baseline team pass): domain rules, the team's approval, accepted terms (the
    task's, and the phase's own where a phase is named)."""
    if roles.is_organiser(session, user, task) or (team is not None and team.is_baseline):
        return
    refusal = domain_refusal(task, user)
    if refusal:
        raise Forbidden(refusal)
    if team is not None:
        state = approval_state(session, team=team)
        if state == "pending":
            raise Forbidden("team %(team)s awaits the organisers' approval for %(task)s",
                            team=team.name, task=task.name)
        if state == "refused":
            raise Forbidden("the organisers of %(task)s did not approve team %(team)s",
                            task=task.name, team=team.name)
    terms.require_accepted(session, task=task, user=user, phase=phase, now=now)


class EntryClosed(Forbidden):
    """An upload after a phase's entry deadline by a team, member or acceptance that came
    after it."""


def asked_approval(session: Session, *, team: Team) -> None:
    """A new team of a task that approves each one: its organisers are told (mail, and the
    channels that take `team_pending`)."""
    if approval_state(session, team=team) == "pending":
        queue_event(session, "team_pending", team_id=team.id)


def decision(session: Session, *, team: Team) -> TeamApproval | None:
    """The organisers' decision on the team (with when and why), None while none."""
    return session.scalar(select(TeamApproval).where(TeamApproval.team_id == team.id))


# ----------------------------------------------------------------------------- entry deadline


def entry_closed(session: Session, *, task: Task, now: datetime) -> Phase | None:
    """A phase whose entry deadline has passed and that has not closed: while there is one, no
    team is formed or joined (Kaggle's entry deadline); None when teams may form."""
    return session.scalar(select(Phase).where(
        Phase.task_id == task.id, Phase.entry_deadline.is_not(None),
        Phase.entry_deadline <= now, Phase.closes_at > now)
        .order_by(Phase.entry_deadline, Phase.id).limit(1))


def require_entry_open(session: Session, *, task: Task, user: User, now: datetime) -> None:
    """Forbidden, saying until when, while an entry deadline keeps teams from forming or
    growing (organisers pass)."""
    phase = entry_closed(session, task=task, now=now)
    if phase is not None and not roles.is_organiser(session, user, task):
        assert phase.entry_deadline is not None
        raise Forbidden(
            "the entry deadline of %(phase)s passed at %(deadline)s UTC: no team can be formed "
            "or joined until it closes at %(closes)s UTC", phase=phase.name,
            deadline=clock_text(phase.entry_deadline), closes=clock_text(phase.closes_at))


def entry_refusal(session: Session, *, phase: Phase, team: Team, user: User,
                  now: datetime) -> Phrase | None:
    """Why the user may not upload for the team to the phase after its entry deadline (the
    team formed, the user joined, or the terms accepted only after it), or None. Asked by the
    one admission rule (services.runs.admission.rights)."""
    deadline = phase.entry_deadline
    if deadline is None or now < deadline or team.is_baseline:
        return None
    when = {"phase": phase.name, "deadline": clock_text(deadline)}
    if team.created_at > deadline:
        return Phrase("team %(team)s was formed after the entry deadline of %(phase)s "
                      "(%(deadline)s UTC)", team=team.name, **when)
    joined = session.scalar(select(TeamMember.joined_at).where(
        TeamMember.team_id == team.id, TeamMember.user_id == user.id))
    if joined is None or joined > deadline:
        return Phrase("you joined team %(team)s after the entry deadline of %(phase)s "
                      "(%(deadline)s UTC)", team=team.name, **when)
    if not terms.accepted_by(session, task=phase.task, phase=phase, user=user, at=deadline):
        return Phrase("you had not accepted the terms of %(task)s by the entry deadline of "
                      "%(phase)s (%(deadline)s UTC)", task=phase.task.name, **when)
    return None


def require_domain(session: Session, *, task: Task, user: User) -> None:
    """Forming or joining a team, and accepting terms, are for those whose domain may take
    part (organisers always may)."""
    refusal = domain_refusal(task, user)
    if refusal and not roles.is_organiser(session, user, task):
        raise Forbidden(refusal)


# ----------------------------------------------------------------------------- unlisted tasks


def task_secret(session: Session, *, task: Task) -> str | None:
    """The secret of the task's link (None until one is made)."""
    return session.scalar(select(TaskSecret.secret).where(TaskSecret.task_id == task.id))


def ensure_secret(session: Session, *, task: Task, now: datetime) -> None:
    """Give an unlisted task its secret link (when loaded); a listed one needs none."""
    if rules(task).unlisted and task_secret(session, task=task) is None:
        session.add(TaskSecret(task_id=task.id, secret=secrets.token_urlsafe(24), created_at=now))
        session.flush()


def new_secret(session: Session, *, task: Task, user: User | None, now: datetime) -> str:
    """A new secret link (the old one stops working); organisers only."""
    roles.require_organiser(session, user, task)
    row = session.scalar(select(TaskSecret).where(TaskSecret.task_id == task.id))
    if row is None:
        row = TaskSecret(task_id=task.id, secret="", created_at=now)
        session.add(row)
    row.secret = secrets.token_urlsafe(24)
    row.created_at = now
    session.flush()
    return row.secret


def is_listed(task: Task) -> bool:
    """Whether the task appears in lists, sitemaps and the API index."""
    return not rules(task).unlisted


def can_find(session: Session, *, task: Task, user: User | None, key: str | None) -> bool:
    """A listed task: everyone. An unlisted one: its organisers, anyone with a team or an
    acceptance there, and whoever holds the secret link's key."""
    if is_listed(task) or roles.is_organiser(session, user, task):
        return True
    if key:
        secret = task_secret(session, task=task)
        if secret and hmac.compare_digest(secret.encode(), key.encode()):
            return True
    if user is None:
        return False
    member = session.scalar(select(TeamMember.id).where(
        TeamMember.task_id == task.id, TeamMember.user_id == user.id).limit(1))
    accepted = session.scalar(select(TermsAcceptance.id).where(
        TermsAcceptance.task_id == task.id, TermsAcceptance.user_id == user.id).limit(1))
    return member is not None or accepted is not None


# what a page or API address names, by the argument that names it, and what a missing one
# answers: a run, a model or a team of an unlisted task is as hidden as the task itself
_OWNED_BY_TASK: dict[str, tuple[type[Run] | type[ModelSubmission] | type[Team], Phrase]] = {
    "run_id": (Run, Phrase("no run %(id)s")),
    "model_id": (ModelSubmission, Phrase("no model submission %(id)s")),
    "team_id": (Team, Phrase("no such team"))}


@functools.cache
def _named_statement() -> Select[Task]:
    # built once: building it and its cache key cost more than running it (0.17 of 0.42 ms),
    # and it is the first query of nearly every request
    return select(Task).where(Task.name == bindparam("name", type_=String))


def named_task(session: Session, name: str, *, with_phases: bool = False) -> Task | None:
    """The task of this name, or None (whoever may find it: find_address, tasks.get_task);
    with_phases, its phases read in the same query (a reader's session keeps them for
    phases.ordered_phases: a board page's next query)."""
    if not with_phases:
        return session.scalar(_named_statement(), {"name": name})
    rows = session.execute(_named_phases_statement(), {"name": name}).all()
    if not rows:
        return None
    task = rows[0][0]
    if session.info.get(READ_ONLY):  # a reader writes no phase: they stay as read
        session.info[PHASES_READ] = (task, [phase for _, phase in rows if phase is not None])
    return task


@functools.cache
def _named_phases_statement() -> Select[Task, Phase]:
    # built once, as _named_statement; the phases' order is phases.ordered_phases' own
    return (select(Task, Phase).outerjoin(Phase, Phase.task_id == Task.id)
            .where(Task.name == bindparam("name", type_=String)))


# A reader session's info: the task named_task read with its phases, and those phases
PHASES_READ = "semboard.task_phases"


def find_address(session: Session, args: dict[str, object], *, user: User | None,
                 key: str | None, with_phases: bool = False
                 ) -> tuple[Task | None, NotFound | None]:
    """The task an address's arguments name (task_name, else a run's, model's or team's id)
    and None; or, when what they name does not exist or belongs to a task this caller may not
    find, None and the one NotFound both answer with (hidden and missing look alike, and the
    answer names only what the address itself names). (None, None): the address names none.
    with_phases: a named task's phases read with it (named_task)."""
    name = args.get("task_name")
    if isinstance(name, str):
        task = named_task(session, name, with_phases=with_phases)
        missing = NotFound("no task called %(name)r", name=name)
    else:
        for arg, (model, said) in _OWNED_BY_TASK.items():
            ident = args.get(arg)
            if isinstance(ident, int):
                task_id = session.scalar(select(model.task_id).where(model.id == ident))
                task = session.get(Task, task_id) if task_id is not None else None
                missing = NotFound(said.msgid, id=ident)
                break
        else:
            return None, None
    if task is None or not can_find(session, task=task, user=user, key=key):
        return None, missing
    return task, None


def listed(session: Session, tasks: list[Task], *, user: User | None) -> list[Task]:
    """The tasks a list shows this viewer: listed ones, and unlisted ones they take part in."""
    return [t for t in tasks if is_listed(t) or can_find(session, task=t, user=user, key=None)]
