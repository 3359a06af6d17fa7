"""A task's and its phases' terms: versions named by digest, and who accepted which, how.

The current version of a task's (or a phase's) terms is the TermsVersion that took effect last;
the definition's `terms` and `[phase_terms]` enter as versions when the task is loaded or a
phase added, the organiser pages add versions of their own. A changed text is a new digest:
everyone accepts it again. An empty text lifts the terms.

A change need not lock everyone out at once (issue 40): it can be scheduled (it takes effect at
a set time; until then the version before it stays in force, and it can be accepted ahead), and
it can carry a grace period, during which having accepted the version it replaced counts as
having accepted it. Participants are told on the task page and by mail (`terms_changed`).
"""

from __future__ import annotations

import csv
import hashlib
import io
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import ColumnElement, func, or_, select
from sqlalchemy.orm import Session, selectinload

from evaluation.participation import participation
from evaluation.texts import LANGUAGE_TAG
from semboard.errors import Forbidden, InvalidData, Phrase
from semboard.exportsafe import csv_cell
from semboard.i18n.languages import LANGUAGES
from semboard.models import (
    ACCEPTANCE_CLIENTS,
    Phase,
    Task,
    TermsAcceptance,
    TermsVersion,
    User,
)
from semboard.notify.events import queue_event
from semboard.services.tasks import auditlog, definitions, roles, translations
from semboard.timefmt import api_time, clock_text

MAX_TERMS = 100_000
# the longest grace period organisers may give a change (members of a long task still decide)
MAX_GRACE = timedelta(days=30)


class TermsRequired(Forbidden):
    """The user must accept the current terms first; names the versions still to accept."""

    def __init__(self, task: Task, pending: list[TermsVersion]) -> None:
        self.task_name = task.name
        self.digests = [v.digest for v in pending]
        super().__init__(Phrase("accept the terms of %(task)s first: read them at "
                                "/tasks/%(task)s/terms (or run `semboard accept %(task)s`)",
                                task=task.name))

    def to_dict(self) -> dict[str, object]:
        """JSON form: the message, where to read the terms and where to accept them."""
        return {**super().to_dict(), "terms_url": f"/tasks/{self.task_name}/terms",
                "accept_url": f"/api/v1/tasks/{self.task_name}/terms/accept",
                "terms_digests": self.digests}


def digest_of(text: str) -> str:
    """The version's name: sha256 of the text with its line ends and outer space normalised."""
    return hashlib.sha256(_normal(text).encode("utf-8")).hexdigest()


def _normal(text: str) -> str:
    return text.replace("\r\n", "\n").strip()


def _since() -> ColumnElement[datetime]:
    """When a version took effect: its own time, else when it was made."""
    return func.coalesce(TermsVersion.effective_at, TermsVersion.created_at)


def _of(task_id: int, phase_id: int | None) -> ColumnElement[bool]:
    """The versions of one task's (phase_id None) or one phase's terms."""
    return (TermsVersion.task_id == task_id) & (
        TermsVersion.phase_id.is_(None) if phase_id is None else TermsVersion.phase_id == phase_id)


def _newest(session: Session, *, task: Task, phase: Phase | None,
            source: str | None = None) -> TermsVersion | None:
    """The version made last (scheduled ones too): what a new text is compared with."""
    query = select(TermsVersion).where(_of(task.id, phase.id if phase else None))
    if source is not None:
        query = query.where(TermsVersion.source == source)
    return session.scalar(query.order_by(TermsVersion.created_at.desc(),
                                         TermsVersion.id.desc()).limit(1))


def _in_effect(session: Session, *, task: Task, phase: Phase | None,
               now: datetime) -> TermsVersion | None:
    """The version that took effect last by `now` (an empty text included)."""
    return session.scalar(
        select(TermsVersion).where(_of(task.id, phase.id if phase else None), or_(
            TermsVersion.effective_at.is_(None), TermsVersion.effective_at <= now))
        .order_by(_since().desc(), TermsVersion.id.desc()).limit(1))


def effective(version: TermsVersion) -> datetime:
    """When the version took (or takes) effect."""
    return version.effective_at or version.created_at


def current(session: Session, *, task: Task, phase: Phase | None = None,
            now: datetime) -> TermsVersion | None:
    """The version in force at `now` for the task (phase None) or the phase; None when none."""
    row = _in_effect(session, task=task, phase=phase, now=now)
    return row if row is not None and row.text else None


def in_force(session: Session, *, task: Task, phase: Phase | None = None,
             now: datetime) -> list[TermsVersion]:
    """The task's terms, then the phase's own (each only where there are some)."""
    found = [current(session, task=task, now=now)]
    if phase is not None:
        found.append(current(session, task=task, phase=phase, now=now))
    return [v for v in found if v is not None]


def every_in_force(session: Session, *, task: Task, now: datetime) -> list[TermsVersion]:
    """The task's terms and every phase's own in force at `now` (what accepting accepts)."""
    found = [current(session, task=task, now=now)] + [
        current(session, task=task, phase=p, now=now) for p in task.phases]
    return [v for v in found if v is not None]


def accepted_by(session: Session, *, task: Task, phase: Phase | None, user: User,
                at: datetime) -> bool:
    """Whether the user had accepted, by `at`, a version of each terms (the task's, the
    phase's own) that was in force then: what an entry deadline asks (issue 44). Terms with
    no text in force at `at` ask nothing."""
    for version in in_force(session, task=task, phase=phase, now=at):
        scope = select(TermsVersion.id).where(
            TermsVersion.task_id == task.id,
            TermsVersion.phase_id.is_(None) if version.phase_id is None
            else TermsVersion.phase_id == version.phase_id)
        if session.scalar(select(TermsAcceptance.id).where(
                TermsAcceptance.user_id == user.id, TermsAcceptance.accepted_at <= at,
                TermsAcceptance.terms_version_id.in_(scope)).limit(1)) is None:
            return False
    return True


def scheduled(session: Session, *, task: Task, now: datetime) -> list[TermsVersion]:
    """Versions (task's and phases') made to take effect after `now`, soonest first."""
    return list(session.scalars(
        select(TermsVersion).where(TermsVersion.task_id == task.id,
                                   TermsVersion.effective_at > now)
        .order_by(TermsVersion.effective_at, TermsVersion.id)))


def replaced(session: Session, version: TermsVersion) -> TermsVersion | None:
    """The version in force just before this one took effect (None: there was none)."""
    return session.scalar(
        select(TermsVersion).where(_of(version.task_id, version.phase_id),
                                   TermsVersion.id != version.id, or_(
            _since() < effective(version),
            (_since() == effective(version)) & (TermsVersion.id < version.id)))
        .order_by(_since().desc(), TermsVersion.id.desc()).limit(1))


def in_grace(version: TermsVersion, now: datetime) -> bool:
    """Whether the version's grace period runs at `now`."""
    return version.grace_until is not None and now < version.grace_until


def _add(session: Session, *, task: Task, phase: Phase | None, text: str, source: str,
         user: User | None, now: datetime, translated: dict[str, str] | None = None,
         effective_at: datetime | None = None,
         grace_until: datetime | None = None) -> TermsVersion:
    row = TermsVersion(task_id=task.id, phase_id=phase.id if phase else None, text=_normal(text),
                       digest=digest_of(text), source=source,
                       translations=_translations(translated or {}),
                       created_by_id=user.id if user else None, created_at=now,
                       effective_at=effective_at, grace_until=grace_until)
    session.add(row)
    session.flush()
    where = f"terms of {phase.slug}" if phase is not None else "the task's terms"
    what = "lifted" if not row.text else f"set (version {row.digest[:12]})"
    auditlog.record(session, task=task, user=user, action="terms-changed", now=now,
                    reason="from the task definition" if source == "definition"
                    else "set by an organiser",
                    details={"summary": f"{where} {what}", "phase": phase.slug if phase else None,
                             "digest": row.digest, "source": source})
    if row.text:  # participants are told (mail.messages: members of the task's teams)
        queue_event(session, "terms_changed", version_id=row.id)
    return row


def sync_from_definition(session: Session, *, task: Task, now: datetime) -> None:
    """Enter the definition's terms (task and phases by slug) as versions where they changed.

    A definition's text is compared with the last version that came from a definition, so
    reloading an unchanged definition keeps what organisers set on the pages since.
    """
    stated = participation(definitions.definition(task))
    wanted: list[tuple[Phase | None, str]] = [(None, stated.terms)]
    by_slug = dict(stated.phase_terms)
    wanted += [(p, by_slug.get(p.slug, "")) for p in task.phases]
    for phase, text in wanted:
        last = _newest(session, task=task, phase=phase, source="definition")
        translated = translations.definition_terms(task, phase.slug if phase else None)
        if last is None and not text:
            continue
        if last is None or last.digest != digest_of(text):
            _add(session, task=task, phase=phase, text=text, source="definition", user=None,
                 now=now, translated=translated)
        else:  # the same text: its translations follow the definition's (the version stays)
            last.translations = _translations(translated)


def set_terms(session: Session, *, task: Task, phase: Phase | None, text: str,
              user: User | None, now: datetime, translated: dict[str, str] | None = None,
              effective_at: datetime | None = None,
              grace_until: datetime | None = None) -> TermsVersion | None:
    """Organisers set a new text (empty: no terms) and, optionally, its translations by
    language; the same text again keeps its version, with the translations given.

    effective_at: a later time it takes effect (scheduled); grace_until: until then members who
    accepted the version it replaces go on as before (at most MAX_GRACE after it takes effect).
    """
    roles.require_organiser(session, user, task)
    translated = {code: value for code, value in (translated or {}).items() if _normal(value)}
    if any(len(value) > MAX_TERMS for value in [text, *translated.values()]):
        raise InvalidData("terms are limited to %(MAX_TERMS)s characters", MAX_TERMS=MAX_TERMS)
    unknown = sorted(set(translated) - set(LANGUAGES))
    if unknown:
        raise InvalidData("the site speaks no language %(code)s", code=unknown[0])
    if phase is not None and phase.task_id != task.id:
        raise InvalidData("that phase belongs to another task")
    starts = effective_at or now
    if effective_at is not None and effective_at <= now:
        raise InvalidData("effective_at: a scheduled change takes effect in the future (now is "
                          "%(now)s UTC)", now=clock_text(now))
    if grace_until is not None and not starts < grace_until <= starts + MAX_GRACE:
        raise InvalidData("grace period: it ends after the change takes effect, at most "
                          "%(days)s days later", days=MAX_GRACE.days)
    last = _newest(session, task=task, phase=phase)
    if last is not None and last.digest == digest_of(text):
        if translated:
            last.translations = _translations(translated)
        return last
    if last is None and not _normal(text):
        return None
    return _add(session, task=task, phase=phase, text=text, source="organiser", user=user,
                now=now, translated=translated, effective_at=effective_at,
                grace_until=grace_until)


def _translations(translated: dict[str, str]) -> dict[str, str] | None:
    """The stored form of a version's translations (None: none)."""
    return {code: _normal(text) for code, text in sorted(translated.items())} or None


def schedule_from_form(effective_at: str | None, grace_hours: str | None, *,
                       now: datetime) -> tuple[datetime | None, datetime | None]:
    """(effective_at, grace_until) from a form's or a command's text: a UTC time
    ("2012-04-05T00:00", empty: at once) and a number of hours (empty: none)."""
    when = None
    if effective_at and effective_at.strip():
        try:
            when = datetime.fromisoformat(effective_at.strip().replace("Z", "+00:00"))
        except ValueError:
            raise InvalidData("effective_at: %(given)r is not a time such as "
                              "2012-04-05T00:00 (UTC)", given=effective_at) from None
        when = when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)
    until = None
    if grace_hours and grace_hours.strip():
        try:
            hours = float(grace_hours)
        except ValueError:
            raise InvalidData("grace period: %(given)r is not a number of hours",
                              given=grace_hours) from None
        if not 0 < hours <= MAX_GRACE.total_seconds() / 3600:
            raise InvalidData("grace period: give 1 to %(hours)s hours",
                              hours=int(MAX_GRACE.total_seconds() // 3600))
        until = (when or now) + timedelta(hours=hours)
    return when, until


def pending(session: Session, *, task: Task, user: User | None, now: datetime,
            phase: Phase | None = None) -> list[TermsVersion]:
    """Versions in force that the user has not accepted (all of them for an anonymous user);
    during a version's grace period, accepting the version it replaced is enough."""
    versions = in_force(session, task=task, phase=phase, now=now)
    if not versions or user is None:
        return versions
    before = {v.id: replaced(session, v) for v in versions if in_grace(v, now)}
    asked = [v.id for v in versions] + [r.id for r in before.values() if r is not None]
    accepted = set(session.scalars(select(TermsAcceptance.terms_version_id).where(
        TermsAcceptance.user_id == user.id, TermsAcceptance.terms_version_id.in_(asked))))

    def done(version: TermsVersion) -> bool:
        earlier = before.get(version.id)
        return version.id in accepted or (earlier is not None and bool(earlier.text)
                                          and earlier.id in accepted)

    return [v for v in versions if not done(v)]


def require_accepted(session: Session, *, task: Task, user: User | None, now: datetime,
                     phase: Phase | None = None) -> None:
    """TermsRequired unless the user accepted every version in force (organisers need not)."""
    if roles.is_organiser(session, user, task):
        return
    missing = pending(session, task=task, user=user, phase=phase, now=now)
    if missing:
        raise TermsRequired(task, missing)


@dataclass(frozen=True)
class Standing:
    """How a user stands with one version: accepted it, or covered by the grace period of a
    change (until `covered_until`: they accepted the text it replaced), or neither."""

    version: TermsVersion
    accepted: bool
    covered_until: datetime | None = None

    def to_json(self) -> dict[str, object]:
        """What the API states of a version for its caller."""
        v = self.version
        return {"phase": v.phase.slug if v.phase else None, "digest": v.digest, "text": v.text,
                "accepted": self.accepted, "source": v.source,
                "effective_at": api_time(effective(v)),
                "grace_until": api_time(v.grace_until) if v.grace_until else None,
                "covered_until": api_time(self.covered_until) if self.covered_until else None}


def standings(session: Session, *, task: Task, user: User | None,
              now: datetime) -> tuple[list[Standing], list[Standing]]:
    """The versions in force (task's, then each phase's) and those scheduled, as the user
    stands with each: what the terms pages, the task page and the API show."""
    live = every_in_force(session, task=task, now=now)
    ahead = [v for v in scheduled(session, task=task, now=now) if v.text]
    mine = set() if user is None else set(session.scalars(
        select(TermsAcceptance.terms_version_id).where(TermsAcceptance.user_id == user.id,
                                                       TermsAcceptance.task_id == task.id)))

    def standing(version: TermsVersion) -> Standing:
        if version.id in mine:
            return Standing(version, True)
        earlier = replaced(session, version) if in_grace(version, now) else None
        covered = earlier is not None and bool(earlier.text) and earlier.id in mine
        return Standing(version, False, version.grace_until if covered else None)

    return [standing(v) for v in live], [standing(v) for v in ahead]


@dataclass
class Accepted:
    """What an acceptance did: the versions in force and those accepted now."""
    versions: list[TermsVersion]
    new: list[TermsAcceptance]


def accept(session: Session, *, task: Task, user: User, client: str, now: datetime,
           digests: list[str] | None = None,
           shown: dict[str, str] | None = None) -> Accepted:
    """Accept the task's terms and those of every phase (idempotent), and the versions
    scheduled to take effect later whose digests are given (all of them without digests).

    `digests`, when given, must name the versions in force: a text that changed since the user
    read it is refused, not accepted unseen. `shown`: the language each version (by digest) was
    shown in, recorded with its acceptance.
    """
    shown = shown or {}
    if client not in ACCEPTANCE_CLIENTS:
        raise InvalidData("client must be one of %(ACCEPTANCE_CLIENTS)s",
                          ACCEPTANCE_CLIENTS=', '.join(ACCEPTANCE_CLIENTS))
    found = every_in_force(session, task=task, now=now)
    ahead = [v for v in scheduled(session, task=task, now=now) if v.text]
    if digests is not None:
        given = set(digests)
        if given - {v.digest for v in found + ahead} or {v.digest for v in found} - given:
            raise InvalidData("the terms changed since you read them: read them again at "
                              "/tasks/%(task)s/terms", task=task.name)
        ahead = [v for v in ahead if v.digest in given]
    if not found and not ahead:
        raise InvalidData("%(task)s has no terms to accept", task=task.name)
    # the team (if any) is recorded with the acceptance
    team = roles.team_of(session, task=task, user=user)
    done = set(session.scalars(select(TermsAcceptance.terms_version_id).where(
        TermsAcceptance.user_id == user.id,
        TermsAcceptance.terms_version_id.in_([v.id for v in found + ahead]))))
    new = []
    for version in {v.id: v for v in found + ahead if v.id not in done}.values():
        row = TermsAcceptance(task_id=task.id, terms_version_id=version.id, user_id=user.id,
                              team_id=team.id if team else None, digest=version.digest,
                              client=client, accepted_at=now,
                              language=_shown_language(shown.get(version.digest)))
        session.add(row)
        new.append(row)
    session.flush()
    return Accepted(found + ahead, new)


def _shown_language(tag: str | None) -> str | None:
    """A shown language as recorded: a language tag, or None when none (or nonsense) came."""
    if tag is None or not LANGUAGE_TAG.fullmatch(tag):
        return None
    return tag


def acceptances(session: Session, *, task: Task, user: User | None) -> list[TermsAcceptance]:
    """Every acceptance of the task, newest first (organisers only)."""
    roles.require_organiser(session, user, task)
    query = (select(TermsAcceptance).where(TermsAcceptance.task_id == task.id)
             .options(selectinload(TermsAcceptance.user), selectinload(TermsAcceptance.team),
                      selectinload(TermsAcceptance.version).selectinload(TermsVersion.phase))
             .order_by(TermsAcceptance.accepted_at.desc(), TermsAcceptance.id.desc()))
    return list(session.scalars(query))


def acceptance_json(row: TermsAcceptance) -> dict[str, object]:
    """One acceptance as the API and the CSV state it."""
    return {"user": row.user.display_name, "email": row.user.email,
            "team": row.team.name if row.team else None,
            "phase": row.version.phase.slug if row.version.phase else None,
            "digest": row.digest, "client": row.client, "accepted_at": api_time(row.accepted_at),
            "language": row.language, "current": None}


def acceptances_json(session: Session, *, task: Task, user: User | None,
                     now: datetime) -> list[dict[str, object]]:
    """Acceptances with whether each names the version in force now."""
    rows = acceptances(session, task=task, user=user)
    live = {v.id for v in every_in_force(session, task=task, now=now)}
    return [acceptance_json(r) | {"current": r.terms_version_id in live} for r in rows]


CSV_COLUMNS = ("accepted_at", "user", "email", "team", "phase", "digest", "client", "language",
               "current")


def acceptances_csv(session: Session, *, task: Task, user: User | None, now: datetime) -> str:
    """The acceptances as CSV (formula-looking cells escaped)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for row in acceptances_json(session, task=task, user=user, now=now):
        writer.writerow([csv_cell(row[c]) for c in CSV_COLUMNS])
    return out.getvalue()


def counts(session: Session, *, task: Task, now: datetime) -> dict[str, object]:
    """What the archive's manifest states: versions, acceptances, users who accepted."""
    versions = list(session.scalars(select(TermsVersion).where(TermsVersion.task_id == task.id)))
    rows = list(session.scalars(select(TermsAcceptance).where(TermsAcceptance.task_id == task.id)))
    live = current(session, task=task, now=now)
    return {"versions": len(versions), "acceptances": len(rows),
            "users": len({r.user_id for r in rows}),
            "current_digest": live.digest if live else None,
            "accepted_current": len({r.user_id for r in rows
                                     if live is not None and r.terms_version_id == live.id})}
