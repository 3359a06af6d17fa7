"""Accepting a run: the one path for the page, the API, baselines and model runs."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from flask import Flask
from sqlalchemy.orm import Session

from semboard.jobs import boards
from semboard.models import Phase, Run, Team, User
from semboard.services import descriptions, submissions
from semboard.storage import Storage


def accept_run(session: Session, storage: Storage, app: Flask, *, team: Team, phase: Phase,
               user: User | None, name: str, files: Mapping[str, bytes], now: datetime,
               description: str = "", given: Mapping[str, Any] | None = None,
               metadata: Mapping[str, Any] | None = None,
               score_here: bool = False, from_model: bool = False) -> tuple[Run, bool]:
    """Check the description, validate and store the run, apply the description, commit.

    Then, where a queue worker scores runs, queue its scoring (after the commit, so the worker
    finds it); else it was scored in the same transaction. Returns (run, queued). A refusal
    raises a DomainError with every issue (the rejected upload's own log entry is kept).
    score_here: a caller that is itself a background job (baselines, model runs) scores at once.
    from_model: the run of an uploaded model (jobs.models), which "models" phases take.
    """
    queued = not score_here and boards.scoring_queued(app)
    answers = descriptions.check_upload(
        session, team=team, phase=phase, user=user, name=name, files=files,
        description=description, given=dict(given or {}), now=now)
    run = submissions.submit(session, storage, team=team, phase=phase, user=user, name=name,
                             files=files, now=now, score=not queued,
                             metadata=dict(metadata) if metadata is not None else None,
                             from_model=from_model)
    descriptions.apply(run, description, answers)
    session.commit()
    if queued:
        boards.queue_scoring(app, run.id)
    return run, queued
