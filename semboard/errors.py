"""Domain errors raised by services; views flash them, the API turns them into JSON."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def issue_dicts(issues: Iterable[Any]) -> list[Any]:
    """JSON form of issues: evaluation.Issue objects converted, stored dicts kept as they are."""
    return [i.to_dict() if hasattr(i, "to_dict") else i for i in issues]


class DomainError(Exception):
    """A user-facing refusal with a message; `status` is the HTTP status the API uses."""

    status = 400

    def __init__(self, message: str, issues: list[Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
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
