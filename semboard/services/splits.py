"""Splits of a hosted task: which split a file or phase uses, gold access, the no-oracle rule,
per-team daily limits and windows that only the phase starting them can open."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from semboard.errors import InvalidData
from semboard.models import GoldRelease, Phase, Run, Task, Team, User
from semboard.services import tasks

if TYPE_CHECKING:
    from evaluation import TaskDefinition

# A phase that shows scores against private gold gets this daily limit unless one is given.
DEFAULT_MAX_PER_DAY = 5
DAY = timedelta(hours=24)


def split_name(task: Task, split: str | None) -> str:
    """The named split (InvalidData when the definition has none), or the default one."""
    definition = tasks.definition(task)
    name = split or definition.default_split
    if name not in definition.splits:
        raise InvalidData(f"task {task.name} has no split {name!r}; its splits: "
                          f"{', '.join(definition.splits)}")
    return name


def split_definition(task: Task, split: str | None) -> TaskDefinition:
    """The task's definition restricted to one split (None: the default split)."""
    return tasks.definition(task).for_split(split_name(task, split))


def phase_definition(phase: Phase) -> TaskDefinition:
    """The definition a phase validates and scores with: its split's datasets and files."""
    definition = tasks.definition(phase.task)
    return definition.for_split(phase.split if phase.split in definition.splits
                                else definition.default_split)


def release_row(session: Session, *, task: Task, split: str) -> GoldRelease | None:
    """The release of one split's gold, if it happened."""
    return session.scalar(select(GoldRelease).where(GoldRelease.task_id == task.id,
                                                    GoldRelease.split == split))


def releases(session: Session, *, task: Task) -> list[GoldRelease]:
    """Every split release of a task."""
    return list(session.scalars(select(GoldRelease).where(GoldRelease.task_id == task.id)))


def gold_is_public(session: Session, *, task: Task, split: str) -> bool:
    """Public from the start (training, trial data) or released since."""
    split_def = tasks.definition(task).splits.get(split)
    if split_def is not None and split_def.gold_public:
        return True
    return release_row(session, task=task, split=split) is not None


def shows_scores(phase: Phase) -> bool:
    """Whether participants see the phase's scores while its results are unpublished."""
    return phase.visibility == "public"


def results_visible(visibility: object, published_at: object) -> bool:
    """Whether participants see a phase's scores: a public board, or published results."""
    return visibility == "public" or published_at is not None


def check_no_oracle(session: Session, task: Task, values: dict[str, object],
                    phase_id: int | None) -> None:
    """Refuse a phase setting that would turn visible scores into an oracle for private gold.

    Scores shown against a split's private gold leak it (one line at a time, through Pearson);
    that is refused while another phase scored against the same gold keeps its results hidden
    and still takes runs on time (a post-evaluation board opening after the close is fine).
    Hidden phases alone are unaffected, and so are public phases side by side (nothing hidden).
    """
    split = str(values["split"])
    if gold_is_public(session, task=task, split=split):
        return
    mine = results_visible(values["visibility"], values.get("results_published_at"))
    for other in tasks.phases(session, task):
        if other.id == phase_id or other.split != split:
            continue
        theirs = results_visible(other.visibility, other.results_published_at)
        if mine and not theirs and values["opens_at"] < other.closes_at:  # type: ignore[operator]
            raise InvalidData(
                f"phase {values['slug']} would show scores against the private gold of split "
                f"{split!r}, which also scores phase {other.slug} (results not published): a "
                "participant could read that gold through the scores. Use another split (a dev "
                "split) for scored feedback, or make this phase hidden.")
        if theirs and not mine and other.opens_at < values["closes_at"]:  # type: ignore[operator]
            raise InvalidData(
                f"phase {other.slug} shows scores against the private gold of split {split!r}; "
                f"a phase {values['slug']} with hidden results on the same split would make it "
                "an oracle for that gold. Use another split for one of them, or make phase "
                f"{other.slug} hidden first.")


def needs_daily_limit(session: Session, task: Task, values: dict[str, object]) -> bool:
    """Practice phases that show scores against private gold (a dev split before release).

    Evaluation phases are bounded by their run limit instead.
    """
    return (values["visibility"] == "public" and values["kind"] != "evaluation"
            and not gold_is_public(session, task=task, split=str(values["split"])))


@dataclass(frozen=True)
class DailyQuota:
    """A team's uploads to a phase in the last 24 hours and when the next one is allowed."""

    limit: int | None
    used: int
    next_allowed_at: datetime | None

    def to_dict(self) -> dict[str, object]:
        """JSON form."""
        return {"max_per_day": self.limit, "used_last_24h": self.used,
                "next_allowed_at": self.next_allowed_at.isoformat()
                if self.next_allowed_at else None}


def daily_quota(session: Session, *, team: Team, phase: Phase, now: datetime) -> DailyQuota:
    """Accepted runs (replacements count, so replaced runs too) in the last 24 hours."""
    if not phase.max_per_day:
        return DailyQuota(None, 0, None)
    since = now - DAY
    used = session.scalar(select(func.count()).where(
        Run.team_id == team.id, Run.phase_id == phase.id, Run.submitted_at > since)) or 0
    if used < phase.max_per_day:
        return DailyQuota(phase.max_per_day, used, None)
    # The window slides: the next upload is allowed when the oldest counted one is a day old.
    times = list(session.scalars(
        select(Run.submitted_at).where(Run.team_id == team.id, Run.phase_id == phase.id,
                                       Run.submitted_at > since)
        .order_by(Run.submitted_at.desc())))
    return DailyQuota(phase.max_per_day, used, times[phase.max_per_day - 1] + DAY)


def window_phase_for(session: Session, *, phase: Phase, user: User | None,
                     now: datetime) -> Phase | None:
    """Another phase whose window guards this phase's split inputs (None: this phase may serve).

    A windowed phase's inputs are served only through phases that start that window, so no
    other route (a practice phase on the same split) hands them out before the window starts.
    """
    if phase.team_window_hours:
        return None
    for other in tasks.phases(session, phase.task):
        if (other.id != phase.id and other.split == phase.split and other.team_window_hours
                and now < other.closes_at):
            return other
    return None


_PHASE_INPUT = {"name": str, "kind": str, "opens_at": str, "closes_at": str,
                "team_window_hours": int, "max_runs": int, "late_policy": str,
                "visibility": str, "track": str, "split": str, "max_per_day": int}


def phase_fields(body: dict[str, Any]) -> dict[str, Any]:
    """Phase settings from a JSON body (ISO times; 0 or null clears a number)."""
    fields: dict[str, Any] = {}
    for key, kind in _PHASE_INPUT.items():
        if key not in body:
            continue
        value = body[key]
        if value is None or (kind is int and value == 0):
            fields[key] = None
            continue
        if not isinstance(value, kind) or isinstance(value, bool):
            raise InvalidData(f"phase field {key} must be a {kind.__name__}")
        if key in ("opens_at", "closes_at"):
            try:
                parsed = datetime.fromisoformat(str(value))
            except ValueError as err:
                raise InvalidData(f"{key} {value!r} is not an ISO date-time") from err
            fields[key] = parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed
        else:
            fields[key] = value
    return fields


def team_phase_status(session: Session, *, team: Team, phases: list[Phase],
                      now: datetime) -> dict[str, dict[str, object]]:
    """Per phase: the team's window (start, end) and its daily upload quota."""
    from semboard.services import inputs

    out: dict[str, dict[str, object]] = {}
    for phase in phases:
        window = inputs.team_window(session, team=team, phase=phase)
        out[phase.slug] = {
            "split": phase.split,
            "window_started_at": window.started_at.isoformat() if window else None,
            "window_ends_at": window.ends_at.isoformat() if window else None,
            "deadline": inputs.team_deadline(session, team=team, phase=phase).isoformat(),
            "daily": daily_quota(session, team=team, phase=phase, now=now).to_dict(),
        }
    return out


def splits_json(session: Session, *, task: Task) -> dict[str, dict[str, object]]:
    """The task's splits: datasets and whether their gold is public."""
    definition = tasks.definition(task)
    released = {r.split: r.released_at for r in session.scalars(
        select(GoldRelease).where(GoldRelease.task_id == task.id))}
    return {
        name: {
            "datasets": list(split.datasets),
            "gold_public": split.gold_public or name in released,
            "gold_released_at": released[name].isoformat() if name in released else None,
            "default": name == definition.default_split,
        }
        for name, split in definition.splits.items()
    }
