"""A task's versioned dataset files (inputs and gold): checked uploads stored as new versions."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from semboard.cache import LRU
from semboard.errors import InvalidData
from semboard.models import GoldFile, InputFile, Task, User
from semboard.services.tasks import access, definitions
from semboard.storage import Storage, put_content, sha256

if TYPE_CHECKING:
    from evaluation import TaskDefinition

DataFile = TypeVar("DataFile", InputFile, GoldFile)
T = TypeVar("T")


def check_upload(
    session: Session, *, task: Task, dataset: str, filename: str, user: User | None, kind: str,
    split: str | None = None,
) -> TaskDefinition:
    """What every inputs or gold upload must pass before its content is read; the definition.

    An organiser (or the command line), a dataset of the task, and not a file carrying the
    official name of another dataset's file of this kind: uploading STS.input.MSRvid.txt as
    MSRpar would silently misalign everything scored later.
    """

    access.require_organiser(session, user, task)
    definitions.dataset_spec(task, dataset, split)
    definition = definitions.split_definition(task, split)
    name_of = definition.input_filename if kind == "input" else definition.gold_filename
    base = filename.replace("\\", "/").rsplit("/", 1)[-1]
    for spec in definition.datasets:
        # datasets sharing one file (SICK's two subtasks) may each take it
        if (spec.name != dataset and base and base == name_of(spec.name)
                and name_of(spec.name) != name_of(dataset)):
            raise InvalidData("%(base)s is the %(kind)s file of %(spec)s, not of %(dataset)s",
                              base=base, kind=kind, spec=spec.name, dataset=dataset)
    return definition


def newest_versions(session: Session, model: type[DataFile], *, task: Task,
                    split: str) -> dict[str, DataFile]:
    """The newest version of each dataset's file of this kind in one split."""
    newest = (
        select(model.dataset, func.max(model.version).label("v"))
        .where(model.task_id == task.id, model.split == split)
        .group_by(model.dataset)
        .subquery()
    )
    query = select(model).join(
        newest, (model.dataset == newest.c.dataset) & (model.version == newest.c.v)
    ).where(model.task_id == task.id, model.split == split)
    return {row.dataset: row for row in session.scalars(query)}


def store_version(
    session: Session,
    storage: Storage,
    model: type[DataFile],
    make_key: Callable[[str, str, str], str],
    *,
    task: Task,
    split: str,
    dataset: str,
    filename: str,
    data: bytes,
    n_items: int,
    user: User | None,
    now: datetime,
) -> DataFile:
    """Store already checked bytes as the dataset's next version (the same bytes again: no-op).

    `make_key(task, dataset, digest)` is the storage key maker of this kind (`storage.keys`).
    """
    digest = sha256(data)
    latest = newest_versions(session, model, task=task, split=split).get(dataset)
    if latest is not None and latest.sha256 == digest:
        return latest
    key = make_key(task.name, dataset, digest)
    put_content(storage, key, data)
    row = model(
        task_id=task.id,
        split=split,
        dataset=dataset,
        version=(latest.version + 1) if latest else 1,
        filename=filename,
        storage_key=key,
        sha256=digest,
        n_items=n_items,
        uploaded_by_id=user.id if user else None,
        uploaded_at=now,
    )
    session.add(row)
    session.flush()
    return row


class ParsedCache:
    """Parsed files by a key naming their content (never stale), least recently used evicted."""

    def __init__(self, limit: int = 256) -> None:
        self._items: LRU[Hashable, Any] = LRU(limit)

    def get(self, key: Hashable, parse: Callable[..., T], *args: Any) -> T:
        """The cached value for key, computed as parse(*args) when absent."""
        return self._items.get_or_compute(key, lambda: parse(*args))
