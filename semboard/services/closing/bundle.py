"""The bulk download: every run with files, description and scores, boards, gold, a README.

The zip is written entry by entry into a sink that hands out what was written so far, so a
web response streams it and the CLI writes it to a file without holding it all in memory.
"""

from __future__ import annotations

import io
import json
import re
import zipfile
from collections.abc import Iterator
from datetime import datetime
from typing import IO, Any

from sqlalchemy import select
from sqlalchemy.orm import Session, selectinload

from semboard.models import Phase, Run, Task
from semboard.services.boards import leaderboard, reveal
from semboard.services.boards import prepared as prepared_boards
from semboard.services.closing import descriptions
from semboard.services.data import gold, parts
from semboard.services.tasks import access, citation, definitions, participation, tasks, terms
from semboard.storage import Storage

README = """{title}: bundle of every run ({scope}), made {made} UTC

README.txt                          this file
boards/PHASE.csv, .json, .tex       each phase's leaderboard (baselines unranked)
runs/PHASE/TEAM/RUN/                a current run: its files as uploaded,
    description.json                its system description (text and answers),
    scores.json                     every score it got, oldest first, with signatures
                                    (a model run: its model's facts under "model")
runs/PHASE/TEAM/RUN~vID/            a replaced version of RUN (run id ID), same layout
gold/                               the gold files ({gold_state})
LICENSE, CITATION.cff, CITATION.bib the data's licence and how to cite the task (where stated)
acceptances.csv                     who accepted which version of the terms, when, from where

A run moved to another team or merged with its team is filed under its current team.
"""


class _Sink(io.RawIOBase):
    """A write-only stream keeping what was written until drained (not seekable)."""

    def __init__(self) -> None:
        self.chunks: list[bytes] = []

    def writable(self) -> bool:
        return True

    def write(self, data: bytes) -> int:  # type: ignore[override]
        self.chunks.append(bytes(data))
        return len(data)

    def drain(self) -> bytes:
        data, self.chunks = b"".join(self.chunks), []
        return data


def _part(name: str) -> str:
    """A safe folder name (never a path)."""
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._")
    return cleaned or "_"


def _phases(session: Session, task: Task, phase: Phase | None) -> list[Phase]:
    return [phase] if phase is not None else tasks.phases(session, task)


def _reuse_files(session: Session, archive: zipfile.ZipFile, task: Task, now: datetime) -> None:
    """The licence, the citation (BibTeX and CITATION.cff) and the terms' acceptances."""
    rules = participation.rules(task)
    text = citation.license_text(rules, title=task.title, terms_url=rules.terms_url or None)
    if text:
        archive.writestr("LICENSE", text)
    if rules.citation:
        archive.writestr("CITATION.bib", rules.citation + "\n")
    if rules.citation or rules.license:
        archive.writestr("CITATION.cff", citation.citation_cff(
            title=task.title, rules=rules, url=rules.terms_url or None,
            released=task.gold_released_at or now))
    archive.writestr("acceptances.csv", terms.acceptances_csv(session, task=task, user=None,
                                                              now=now))


def stream(session: Session, storage: Storage, *, task: Task, phase: Phase | None,
           now: datetime) -> Iterator[bytes]:
    """The zip's bytes, chunk by chunk (one stored file in memory at a time)."""
    sink = _Sink()
    phases = _phases(session, task, phase)
    # Only gold that is public (released, or public from the start) enters the bundle, per split.
    whole = definitions.definition(task)
    public = [s for s in whole.splits if access.gold_is_public(session, task=task, split=s)]
    released = whole.default_split in public
    with zipfile.ZipFile(sink, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("README.txt", README.format(
            title=task.title, scope=f"phase {phase.slug}" if phase else "all phases",
            made=f"{now:%Y-%m-%d %H:%M}",
            gold_state="released" if released else "not released yet: no files"))
        _reuse_files(session, archive, task, now)
        yield sink.drain()
        for ph in phases:
            board = prepared_boards.prepared_board(session, phase=ph, now=now,
                                                   build_missing=True).board(task, ph)
            archive.writestr(f"boards/{_part(ph.slug)}.csv", board.to_csv())
            archive.writestr(f"boards/{_part(ph.slug)}.json",
                             json.dumps(board.to_json(), indent=2, ensure_ascii=False))
            archive.writestr(f"boards/{_part(ph.slug)}.tex", board.to_latex())
            # a frozen board, the boards of final runs and the shake-up report (organisers')
            for name, text in reveal.stored_exports(session, phase=ph, viewer=None, now=now,
                                                    trusted=True).items():
                archive.writestr(f"boards/{_part(ph.slug)}-{name}", text)
            yield sink.drain()
            runs = session.scalars(
                select(Run).where(Run.phase_id == ph.id)
                .options(selectinload(Run.files), selectinload(Run.scores),
                         selectinload(Run.team)).order_by(Run.id))
            for run in runs:
                folder = f"runs/{_part(ph.slug)}/{_part(run.team.name)}/{_part(run.name)}"
                if not run.is_current:
                    folder += f"~v{run.id}"
                for f in run.files:
                    archive.writestr(f"{folder}/{_part(f.filename)}", storage.get(f.storage_key))
                    yield sink.drain()
                archive.writestr(f"{folder}/description.json", json.dumps(
                    descriptions.to_json(run), indent=2, ensure_ascii=False))
                facts: dict[str, Any] = {
                    "run_id": run.id, "current": run.is_current, "late": run.is_late,
                    "post_deadline_fix": run.is_fix, "baseline": run.team.is_baseline,
                    "submitted_at": run.submitted_at.isoformat(),
                    "files": [{"filename": f.filename, "sha256": f.sha256} for f in run.files],
                    "scores": [{"gold_digest": r.gold_digest, "created_at":
                                r.created_at.isoformat(), "scores": r.scores}
                               | ({"parts": {p.part: p.scores for p in found.values()}}
                                  if (found := parts.part_scores(session, record=r)) else {})
                               for r in run.scores]}
                model = leaderboard.model_facts(run.meta)
                if model is not None:  # a model-track run: what the site ran, as recorded
                    facts["model"] = model
                archive.writestr(f"{folder}/scores.json",
                                 json.dumps(facts, indent=2, ensure_ascii=False))
                yield sink.drain()
        for split in public:
            # The default split's gold at gold/ (as before splits existed), others beside it.
            folder = "gold" if split == whole.default_split else f"gold/{_part(split)}"
            for row in gold.current_gold(session, task=task, split=split).values():
                archive.writestr(f"{folder}/{_part(row.filename)}", storage.get(row.storage_key))
                yield sink.drain()
    yield sink.drain()


def write(session: Session, storage: Storage, *, task: Task, phase: Phase | None,
          out: IO[bytes], now: datetime) -> int:
    """Write the zip to a file; returns its size in bytes."""
    size = 0
    for chunk in stream(session, storage, task=task, phase=phase, now=now):
        out.write(chunk)
        size += len(chunk)
    return size
