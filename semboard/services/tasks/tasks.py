"""Tasks (from their definitions), phases and organisers."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

import evaluation
from baselines.models.settings import EncodingRules, SettingsError
from evaluation import TaskDefinitionError, parse_task
from semboard.clock import utcnow
from semboard.db import insert_unless_refused, require_fits
from semboard.errors import Forbidden, InvalidData, NameTaken, NotFound, PhaseNotOpen
from semboard.models import (
    LATE_POLICIES,
    PHASE_ACCEPTS,
    PHASE_KINDS,
    VISIBILITIES,
    Phase,
    Task,
    TaskOrganiser,
    TeamWindow,
    User,
)
from semboard.services.tasks import access, announcements, definitions, participation, terms
from semboard.services.tasks import phases as phase_rules

if TYPE_CHECKING:
    from evaluation import TaskDefinition

PHASE_FIELDS = (
    "slug",
    "name",
    "kind",
    "opens_at",
    "closes_at",
    "team_window_hours",
    "max_runs",
    "late_policy",
    "visibility",
    "track",
    "split",
    "max_per_day",
    "accepts",
    "model_settings",
    "entry_deadline",
)


def load_task(session: Session, definition: TaskDefinition, *, now: datetime) -> Task:
    """Create the task from a TaskDefinition, or update the stored definition of the same name."""
    task = session.scalar(select(Task).where(Task.name == definition.name))
    if task is None:
        task = Task(name=definition.name, created_at=now)
        session.add(task)
    task.title = require_fits(definition.title, Task.title, "a task title")
    task.description = definition.description.strip()
    task.definition_text = definition.text
    task.definition_digest = definition.digest
    task.updated_at = now
    session.flush()
    terms.sync_from_definition(session, task=task, now=now)
    participation.ensure_secret(session, task=task, now=now)
    return task


def read_definition(*, data: bytes | None, filename: str = "", shipped: str = ""
                    ) -> TaskDefinition:
    """A definition from an uploaded TOML file, else a shipped one by name; InvalidData says
    what is wrong (with the file's line, from the parser)."""
    try:
        if data:
            return parse_task(data.decode("utf-8-sig"), source=filename or "<upload>")
        if shipped:
            return evaluation.load_task(shipped)
    except (TaskDefinitionError, UnicodeDecodeError) as err:
        raise InvalidData("The definition could not be loaded: %(err)s", err=err) from None
    raise InvalidData("Pick a shipped definition or upload a TOML file.")


def manageable_tasks(session: Session, user: User | None) -> list[Task]:
    """The tasks this user may reload (site admins: all)."""
    return [t for t in list_tasks(session) if access.can_manage_task(session, user, t)]


def load_definition(session: Session, definition: TaskDefinition, *, user: User | None,
                    now: datetime) -> Task:
    """Load (or reload) a task for a user of the site: organisers reload their own tasks; a
    new task is the site admins' decision (Forbidden otherwise)."""
    if user is None or not user.is_admin:
        existing = session.scalar(select(Task).where(Task.name == definition.name))
        if existing is None or not access.can_manage_task(session, user, existing):
            raise Forbidden("Only site admins can load the new task %(definition)s; you can "
                            "reload the tasks you organise.", definition=definition.name)
    return load_task(session, definition, now=now)


def list_tasks(session: Session) -> list[Task]:
    """Every task, by name."""
    return list(session.scalars(select(Task).order_by(Task.name)))


def get_task(session: Session, name: str) -> Task:
    """A task by name, or NotFound."""
    task = participation.named_task(session, name)
    if task is None:
        raise NotFound("no task called %(name)r", name=name)
    return task


def check_phase(task: Task, values: dict[str, Any]) -> None:
    """Raise InvalidData naming the first bad setting (a phase added, changed or imported)."""
    slug = values["slug"]
    if not slug or not all(c.isalnum() or c in "-_" for c in slug) or len(slug) > 64:
        raise InvalidData("phase slug %(slug)r: use letters, digits, '-' and '_' only", slug=slug)
    require_fits(values["name"], Phase.name, "a phase name")
    if values["kind"] not in PHASE_KINDS:
        raise InvalidData("phase kind must be one of %(PHASE_KINDS)s",
                          PHASE_KINDS=', '.join(PHASE_KINDS))
    if values["late_policy"] not in LATE_POLICIES:
        raise InvalidData("late policy must be one of %(LATE_POLICIES)s",
                          LATE_POLICIES=', '.join(LATE_POLICIES))
    if values["visibility"] not in VISIBILITIES:
        raise InvalidData("visibility must be one of %(VISIBILITIES)s",
                          VISIBILITIES=', '.join(VISIBILITIES))
    if values["accepts"] not in PHASE_ACCEPTS:
        raise InvalidData("a phase accepts one of %(PHASE_ACCEPTS)s, not %(accepts)r",
                          PHASE_ACCEPTS=', '.join(PHASE_ACCEPTS), accepts=values['accepts'])
    for key in ("opens_at", "closes_at"):
        if values[key].tzinfo is None:
            raise InvalidData("%(key)s must carry a timezone (times are UTC)", key=key)
    if values["closes_at"] <= values["opens_at"]:
        raise InvalidData("a phase must close after it opens")
    entry = values.get("entry_deadline")
    if entry is not None and (entry.tzinfo is None or entry >= values["closes_at"]):
        raise InvalidData("the entry deadline (teams formed and terms accepted) must be a UTC "
                          "time before the phase closes")
    for key in ("team_window_hours", "max_runs", "max_per_day"):
        if values[key] is not None and values[key] <= 0:
            raise InvalidData("%(key)s must be positive (or empty for none)", key=key)
    track = values["track"]
    if track:
        tracks = definitions.definition(task).tracks
        if track not in tracks:
            raise InvalidData("task %(task)s has no track %(track)r", task=task.name, track=track)
    splits = definitions.definition(task).splits
    if values["split"] not in splits:
        raise InvalidData("task %(task)s has no split %(split)r; its splits: %(splits)s",
                          task=task.name, split=values['split'], splits=', '.join(splits))
    if values["accepts"] != "runs":
        problem = definitions.model_problem(task, split=values["split"], track=track or None)
        if problem is not None:
            raise InvalidData("phase %(slug)s cannot take models: %(problem)s",
                              slug=slug, problem=problem)
    if values.get("model_settings") is not None and not isinstance(values["model_settings"],
                                                                    dict):
        raise InvalidData("phase %(slug)s, model settings: give a JSON object", slug=slug)
    if values.get("model_settings"):  # stored whole and checked: uploads read it as it is
        try:
            values["model_settings"] = EncodingRules.from_dict(values["model_settings"]).to_dict()
        except SettingsError as err:
            raise InvalidData("phase %(slug)s, model settings: %(err)s",
                              slug=slug, err=err) from None
    else:
        values["model_settings"] = None


def _check_split_rules(session: Session, task: Task, values: dict[str, Any],
                       phase_id: int | None) -> None:
    """The no-oracle rule, and a daily limit for scores shown against private gold."""

    phase_rules.check_no_oracle(session, task, values, phase_id)
    if values["max_per_day"] is None and phase_rules.needs_daily_limit(session, task, values):
        values["max_per_day"] = phase_rules.DEFAULT_MAX_PER_DAY


def add_phase(
    session: Session,
    task: Task,
    *,
    slug: str,
    name: str,
    kind: str,
    opens_at: datetime,
    closes_at: datetime,
    team_window_hours: int | None = None,
    max_runs: int | None = None,
    late_policy: str = "reject",
    visibility: str = "public",
    track: str | None = None,
    split: str | None = None,
    max_per_day: int | None = None,
    accepts: str = "runs",
    model_settings: dict[str, Any] | None = None,
    entry_deadline: datetime | None = None,
    now: datetime,
) -> Phase:
    """Add a phase to the task (split: the definition's default when None; model_settings:
    the models' encoding defaults and limits, baselines.models.settings.EncodingRules)."""
    values = dict(
        slug=slug.strip(),
        name=name.strip() or slug,
        kind=kind,
        opens_at=opens_at,
        closes_at=closes_at,
        team_window_hours=team_window_hours,
        max_runs=max_runs,
        late_policy=late_policy,
        visibility=visibility,
        track=track or None,
        split=split or definitions.definition(task).default_split,
        max_per_day=max_per_day,
        accepts=accepts,
        model_settings=model_settings,
        entry_deadline=entry_deadline,
    )
    check_phase(task, values)
    _check_split_rules(session, task, values, None)
    phase = Phase(task_id=task.id, created_at=now, **values)
    if not insert_unless_refused(session, phase):
        raise NameTaken("task %(task)s already has a phase %(slug)r", task=task.name, slug=slug)
    session.refresh(task, ["phases"])
    terms.sync_from_definition(session, task=task, now=now)  # the phase's own terms, if any
    return phase


def update_phase(session: Session, phase: Phase, **fields: Any) -> Phase:
    """Change some settings of a phase (same names as add_phase)."""
    unknown = set(fields) - set(PHASE_FIELDS)
    if unknown:
        raise InvalidData("unknown phase settings: %(unknown)s", unknown=', '.join(sorted(unknown)))
    values = {key: getattr(phase, key) for key in PHASE_FIELDS}
    closes_before, entry_before = phase.closes_at, phase.entry_deadline
    values.update(fields)
    values["track"] = values["track"] or None
    values["split"] = values["split"] or definitions.definition(phase.task).default_split
    check_phase(phase.task, values)
    _check_split_rules(session, phase.task, {**values, "results_published_at":
                                             phase.results_published_at}, phase.id)
    # Scores shown against private gold always come with a daily limit.
    values["max_per_day"] = values["max_per_day"] or _default_limit(session, phase.task, values)
    try:
        with session.begin_nested():  # flushes pending changes first, so assign inside it
            for key, value in values.items():
                setattr(phase, key, value)
            # Stored window ends follow the phase (deadlines are computed, these are a record).
            for window in session.scalars(select(TeamWindow).where(
                    TeamWindow.phase_id == phase.id)):
                window.ends_at = phase_deadline(phase, window.started_at)
            session.flush()
    except IntegrityError as err:
        raise NameTaken("task %(task)s already has a phase %(slug)r",
                        task=phase.task.name, slug=values['slug']) from err
    announcements.draft_deadline_change(session, phase=phase, before=closes_before, now=utcnow())
    announcements.draft_entry_change(session, phase=phase, before=entry_before, now=utcnow())
    return phase


def _default_limit(session: Session, task: Task, values: dict[str, Any]) -> int | None:
    """The daily limit a phase gets when it starts showing scores against private gold."""

    if phase_rules.needs_daily_limit(session, task, values):
        return phase_rules.DEFAULT_MAX_PER_DAY
    return None


def get_phase(session: Session, task: Task, slug: str) -> Phase:
    """A phase of the task by slug, or NotFound."""
    phase = phase_rules.phase_named(session, task, slug)
    if phase is None:
        raise NotFound("task %(task)s has no phase %(slug)r", task=task.name, slug=slug)
    return phase


def phases(session: Session, task: Task) -> list[Phase]:
    """The task's phases in opening order."""
    return phase_rules.ordered_phases(session, task)


def current_phases(session: Session, task: Task, *, now: datetime) -> list[Phase]:
    """Phases open now."""
    return [p for p in phases(session, task) if p.state(now) == "open"]


def phase_for_submission(
    session: Session, task: Task, *, now: datetime, slug: str | None = None
) -> Phase:
    """The named phase; else the open one; else the last closed one (its late policy decides).

    Several open phases (tracks) are never guessed between: InvalidData lists them.
    """
    if slug:
        return get_phase(session, task, slug)
    open_now = current_phases(session, task, now=now)
    if len(open_now) > 1:
        listed = ", ".join(f"{p.slug} ({p.name})" for p in open_now)
        raise InvalidData("%(open_now)s phases of %(task)s are open: %(listed)s; name the "
                          "phase to submit to (API field 'phase', CLI --phase)",
                          open_now=len(open_now), task=task.name, listed=listed)
    if open_now:
        return open_now[0]
    closed = [p for p in phases(session, task) if p.state(now) == "closed"]
    if closed:
        return max(closed, key=lambda p: (p.closes_at, p.id))
    raise PhaseNotOpen("no phase of %(task)s accepts runs yet", task=task.name)


def phase_deadline(phase: Phase, window_start: datetime | None) -> datetime:
    """A team's deadline: its window's end, never past the phase's close."""
    if window_start is None or not phase.team_window_hours:
        return phase.closes_at
    return min(phase.closes_at, window_start + timedelta(hours=phase.team_window_hours))


def add_organiser(session: Session, *, task: Task, user: User, now: datetime) -> TaskOrganiser:
    """Name user an organiser of task (idempotent)."""
    row = session.scalar(
        select(TaskOrganiser).where(
            TaskOrganiser.task_id == task.id, TaskOrganiser.user_id == user.id
        )
    )
    if row is None:
        row = TaskOrganiser(task_id=task.id, user_id=user.id, created_at=now)
        session.add(row)
        session.flush()
    return row


def remove_organiser(session: Session, *, task: Task, user: User) -> None:
    """Remove user from the task's organisers."""
    row = session.scalar(
        select(TaskOrganiser).where(
            TaskOrganiser.task_id == task.id, TaskOrganiser.user_id == user.id
        )
    )
    if row is not None:
        session.delete(row)
        session.flush()


def organisers(session: Session, *, task: Task) -> list[User]:
    """The task's organisers."""
    query = select(User).join(TaskOrganiser).where(TaskOrganiser.task_id == task.id)
    return list(session.scalars(query.order_by(User.email)))
