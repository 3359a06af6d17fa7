"""Which runs are scored inside their upload request: the site's size limit, and a phase's own
lower one that its organisers set (audited)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from semboard.errors import InvalidData
from semboard.models import Phase, User
from semboard.services.runs import audit
from semboard.services.tasks import access

FIELD = "score_in_request_pairs"


def effective_limit(phase: Phase, site_limit: int) -> int:
    """The most lines a run of this phase may have and still be scored inside its request.

    A phase's own setting can only lower the site's (SEMBOARD_SCORE_IN_REQUEST_PAIRS): the site
    sizes its web workers for that limit, so an organiser never raises it.
    """
    own = phase.score_in_request_pairs
    return site_limit if own is None else min(own, site_limit)


def parse(value: Any, *, zero_clears: bool = False) -> int | None:
    """A submitted setting: None or a positive integer (InvalidData naming the field);
    zero_clears: 0 means None too (the API's and the CLI's way to clear a number)."""
    if value is None or (zero_clears and type(value) is int and value == 0):
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise InvalidData("%(FIELD)s must be a positive whole number of lines (or null for the "
                          "site's setting), not %(value)r", FIELD=FIELD, value=value)
    return value


def set_limit(session: Session, *, phase: Phase, pairs: Any, user: User | None,
              now: datetime) -> Phase:
    """Set a phase's own limit (organisers; None: the site's); audited when it changes."""
    access.require_organiser(session, user, phase.task)
    pairs = parse(pairs)
    before = phase.score_in_request_pairs
    if before == pairs:
        return phase
    phase.score_in_request_pairs = pairs
    session.flush()
    shown = "the site's setting" if pairs is None else f"{pairs} lines"
    audit.record(session, task=phase.task, user=user, action="request-scoring-set", now=now,
                 reason="organiser setting",
                 details={"summary": f"{phase.slug} scores runs in the upload request up to "
                                     f"{shown} (was {before if before is not None else 'site'})",
                          "phase": phase.slug, FIELD: pairs, "before": before})
    return phase
