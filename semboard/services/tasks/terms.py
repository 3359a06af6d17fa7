"""A task's and its phases' terms: versions named by digest, and who accepted which, how.

The current version of a task's (or a phase's) terms is its newest TermsVersion; the definition's
`terms` and `[phase_terms]` enter as versions when the task is loaded or a phase added, the
organiser pages add versions of their own. A changed text is a new digest: everyone accepts it
again. An empty text lifts the terms.
"""

from __future__ import annotations

import csv
import hashlib
import io
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session, selectinload

from evaluation.participation import participation
from evaluation.texts import LANGUAGE_TAG
from semboard.errors import Forbidden, InvalidData
from semboard.exportsafe import csv_cell
from semboard.i18n.languages import LANGUAGES
from semboard.models import (
    ACCEPTANCE_CLIENTS,
    Phase,
    Task,
    Team,
    TeamMember,
    TermsAcceptance,
    TermsVersion,
    User,
)
from semboard.services.tasks import access, definitions, translations
from semboard.timefmt import api_time

MAX_TERMS = 100_000


class TermsRequired(Forbidden):
    """The user must accept the current terms first; names the versions still to accept."""

    def __init__(self, task: Task, pending: list[TermsVersion]) -> None:
        self.task_name = task.name
        self.digests = [v.digest for v in pending]
        super().__init__(f"accept the terms of {task.name} first: read them at "
                         f"/tasks/{task.name}/terms (or run `semboard accept {task.name}`)")

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


def _newest(session: Session, *, task: Task, phase: Phase | None,
            source: str | None = None) -> TermsVersion | None:
    query = select(TermsVersion).where(
        TermsVersion.task_id == task.id,
        TermsVersion.phase_id.is_(None) if phase is None else TermsVersion.phase_id == phase.id)
    if source is not None:
        query = query.where(TermsVersion.source == source)
    return session.scalar(query.order_by(TermsVersion.created_at.desc(),
                                         TermsVersion.id.desc()).limit(1))


def current(session: Session, *, task: Task, phase: Phase | None = None) -> TermsVersion | None:
    """The version in force for the task (phase None) or the phase; None when there are none."""
    row = _newest(session, task=task, phase=phase)
    return row if row is not None and row.text else None


def in_force(session: Session, *, task: Task, phase: Phase | None = None) -> list[TermsVersion]:
    """The task's terms, then the phase's own (each only where there are some)."""
    found = [current(session, task=task)]
    if phase is not None:
        found.append(current(session, task=task, phase=phase))
    return [v for v in found if v is not None]


def _add(session: Session, *, task: Task, phase: Phase | None, text: str, source: str,
         user: User | None, now: datetime, translated: dict[str, str]) -> TermsVersion:
    row = TermsVersion(task_id=task.id, phase_id=phase.id if phase else None, text=_normal(text),
                       digest=digest_of(text), source=source,
                       translations=_translations(translated),
                       created_by_id=user.id if user else None, created_at=now)
    session.add(row)
    session.flush()
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
              user: User | None, now: datetime,
              translated: dict[str, str] | None = None) -> TermsVersion | None:
    """Organisers set a new text (empty: no terms) and, optionally, its translations by
    language; the same text again keeps its version, with the translations given."""
    access.require_organiser(session, user, task)
    translated = {code: value for code, value in (translated or {}).items() if _normal(value)}
    if any(len(value) > MAX_TERMS for value in [text, *translated.values()]):
        raise InvalidData("terms are limited to %(MAX_TERMS)s characters", MAX_TERMS=MAX_TERMS)
    unknown = sorted(set(translated) - set(LANGUAGES))
    if unknown:
        raise InvalidData("the site speaks no language %(code)s", code=unknown[0])
    if phase is not None and phase.task_id != task.id:
        raise InvalidData("that phase belongs to another task")
    last = _newest(session, task=task, phase=phase)
    if last is not None and last.digest == digest_of(text):
        if translated:
            last.translations = _translations(translated)
        return last
    if last is None and not _normal(text):
        return None
    return _add(session, task=task, phase=phase, text=text, source="organiser", user=user,
                now=now, translated=translated)


def _translations(translated: dict[str, str]) -> dict[str, str] | None:
    """The stored form of a version's translations (None: none)."""
    return {code: _normal(text) for code, text in sorted(translated.items())} or None


def pending(session: Session, *, task: Task, user: User | None,
            phase: Phase | None = None) -> list[TermsVersion]:
    """Versions in force that the user has not accepted (all of them for an anonymous user)."""
    versions = in_force(session, task=task, phase=phase)
    if not versions or user is None:
        return versions
    accepted = set(session.scalars(select(TermsAcceptance.terms_version_id).where(
        TermsAcceptance.user_id == user.id,
        TermsAcceptance.terms_version_id.in_([v.id for v in versions]))))
    return [v for v in versions if v.id not in accepted]


def require_accepted(session: Session, *, task: Task, user: User | None,
                     phase: Phase | None = None) -> None:
    """TermsRequired unless the user accepted every version in force (organisers need not)."""
    if access.is_organiser(session, user, task):
        return
    missing = pending(session, task=task, user=user, phase=phase)
    if missing:
        raise TermsRequired(task, missing)


@dataclass
class Accepted:
    """What an acceptance did: the versions in force and those accepted now."""
    versions: list[TermsVersion]
    new: list[TermsAcceptance]


def accept(session: Session, *, task: Task, user: User, client: str, now: datetime,
           digests: list[str] | None = None,
           shown: dict[str, str] | None = None) -> Accepted:
    """Accept the task's terms and those of every phase (idempotent).

    `digests`, when given, must name the versions in force: a text that changed since the user
    read it is refused, not accepted unseen. `shown`: the language each version (by digest) was
    shown in, recorded with its acceptance.
    """
    shown = shown or {}
    if client not in ACCEPTANCE_CLIENTS:
        raise InvalidData("client must be one of %(ACCEPTANCE_CLIENTS)s",
                          ACCEPTANCE_CLIENTS=', '.join(ACCEPTANCE_CLIENTS))
    versions = [current(session, task=task)] + [
        current(session, task=task, phase=p) for p in task.phases]
    found = [v for v in versions if v is not None]
    if not found:
        raise InvalidData("%(task)s has no terms to accept", task=task.name)
    if digests is not None and sorted(set(digests)) != sorted({v.digest for v in found}):
        raise InvalidData("the terms changed since you read them: read them again at "
                          "/tasks/%(task)s/terms", task=task.name)
    # the team (if any) is recorded with the acceptance; teams' own module sits above tasks
    team = session.scalar(select(Team).join(TeamMember, TeamMember.team_id == Team.id).where(
        TeamMember.task_id == task.id, TeamMember.user_id == user.id))
    todo = pending(session, task=task, user=user)
    todo += [v for p in task.phases for v in pending(session, task=task, user=user, phase=p)
             if v.phase_id is not None]
    new = []
    for version in {v.id: v for v in todo}.values():
        row = TermsAcceptance(task_id=task.id, terms_version_id=version.id, user_id=user.id,
                              team_id=team.id if team else None, digest=version.digest,
                              client=client, accepted_at=now,
                              language=_shown_language(shown.get(version.digest)))
        session.add(row)
        new.append(row)
    session.flush()
    return Accepted(found, new)


def _shown_language(tag: str | None) -> str | None:
    """A shown language as recorded: a language tag, or None when none (or nonsense) came."""
    if tag is None or not LANGUAGE_TAG.fullmatch(tag):
        return None
    return tag


def acceptances(session: Session, *, task: Task, user: User | None) -> list[TermsAcceptance]:
    """Every acceptance of the task, newest first (organisers only)."""
    access.require_organiser(session, user, task)
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


def acceptances_json(session: Session, *, task: Task, user: User | None) -> list[dict[str, object]]:
    """Acceptances with whether each names the version in force now."""
    rows = acceptances(session, task=task, user=user)
    live = {v.id for v in [current(session, task=task)] + [
        current(session, task=task, phase=p) for p in task.phases] if v is not None}
    return [acceptance_json(r) | {"current": r.terms_version_id in live} for r in rows]


CSV_COLUMNS = ("accepted_at", "user", "email", "team", "phase", "digest", "client", "language",
               "current")


def acceptances_csv(session: Session, *, task: Task, user: User | None) -> str:
    """The acceptances as CSV (formula-looking cells escaped)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for row in acceptances_json(session, task=task, user=user):
        writer.writerow([csv_cell(row[c]) for c in CSV_COLUMNS])
    return out.getvalue()


def counts(session: Session, *, task: Task) -> dict[str, object]:
    """What the archive's manifest states: versions, acceptances, users who accepted."""
    versions = list(session.scalars(select(TermsVersion).where(TermsVersion.task_id == task.id)))
    rows = list(session.scalars(select(TermsAcceptance).where(TermsAcceptance.task_id == task.id)))
    live = current(session, task=task)
    return {"versions": len(versions), "acceptances": len(rows),
            "users": len({r.user_id for r in rows}),
            "current_digest": live.digest if live else None,
            "accepted_current": len({r.user_id for r in rows
                                     if live is not None and r.terms_version_id == live.id})}
