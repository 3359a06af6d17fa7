"""Domain errors raised by services; views flash them, the API turns them into JSON."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def issue_dicts(issues: Iterable[Any]) -> list[Any]:
    """JSON form of issues: evaluation.Issue objects converted, stored dicts kept as they are."""
    return [i.to_dict() if hasattr(i, "to_dict") else i for i in issues]


class Phrase(str):
    """Text a service words for people: a str of its English form that keeps its msgid and
    values, so a page can say it in the reader's language (a part of a message, or a refusal's
    reason); pybabel extracts Phrase("...") like an error's message."""

    msgid: str
    values: dict[str, Any]

    def __new__(cls, msgid: str, **values: Any) -> Phrase:
        """The English text of msgid with values filled in."""
        made = super().__new__(cls, msgid % values if values else msgid)
        made.msgid, made.values = msgid, values
        return made


def said(text: Any) -> dict[str, Any] | None:
    """A DomainError's or Phrase's words as JSON (msgid and values, nested words too); None
    for other text."""
    if not isinstance(text, DomainError | Phrase):
        return None
    values = {key: said(value) or (value if isinstance(value, int | float) else str(value))
              for key, value in text.values.items()}
    return {"msgid": text.msgid, "values": values}


def said_again(data: dict[str, Any]) -> Phrase:
    """The Phrase that `said` wrote down."""
    values = {key: said_again(value) if isinstance(value, dict) else value
              for key, value in (data.get("values") or {}).items()}
    return Phrase(data["msgid"], **values)


class DomainError(Exception):
    """A user-facing refusal with a message; `status` is the HTTP status the API uses.

    The message is a catalogue msgid with %(name)s fields and `values` fills them in: the API
    and commands say it in English (`message`), pages in the reader's language (pybabel
    extracts the first argument of every error class named in semboard.i18n.extraction).
    """

    status = 400

    def __init__(self, message: str, issues: list[Any] | None = None, **values: Any) -> None:
        if isinstance(message, Phrase) and not values:
            values = message.values
            message = message.msgid
        self.msgid = message
        self.values = values
        self.message = message % values if values else message
        super().__init__(self.message)
        self.issues = list(issues or [])

    def __str__(self) -> str:
        return self.message

    def to_dict(self) -> dict[str, Any]:
        """JSON form: the message and any issues (each with file, line and message)."""
        return {"error": self.message, "issues": issue_dicts(self.issues)}


class NotFound(DomainError):
    """The object does not exist (or the viewer may not know it exists)."""

    status = 404


class Forbidden(DomainError):
    """The user may not do this."""

    status = 403


class AuthenticationFailed(DomainError):
    """Wrong e-mail, password or token."""

    status = 401


class Conflict(DomainError):
    """The request clashes with the current state."""

    status = 409


class AlreadyInTeam(Conflict):
    """The user already belongs to a team of this task."""


class NameTaken(Conflict):
    """The name (or e-mail) is already used."""


class RunLimitReached(Conflict):
    """The team has used every run slot of the phase."""


class WindowClosed(DomainError):
    """The team's window (or the phase) has closed and the late policy refuses the run."""

    status = 403


class PhaseNotOpen(DomainError):
    """No phase accepts this now."""

    status = 403


class RateLimited(DomainError):
    """Too many attempts; try again later."""

    status = 429


class InvalidData(DomainError):
    """Bad input data or settings, with issues naming file and line where known."""

    status = 422


class RunRejected(InvalidData):
    """A run failed validation; `issues` lists every problem (evaluation.Issue)."""
