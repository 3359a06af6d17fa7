"""`flask demo`: a ready-to-browse site with a generated task, teams, runs and a published board.

Everything is generated here, deterministically, from word lists: no real data is read. The demo
participants' runs (gold plus seeded noise) and the baselines go through the real services, so
they are validated, stored and scored exactly like any upload.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import click
import numpy as np
from flask import current_app
from flask.cli import with_appcontext
from sqlalchemy.orm import Session

from baselines import run_system
from evaluation import load_task, read_inputs, write_run
from semboard.cli.core import upgrade_database
from semboard.clock import utcnow
from semboard.db import get_session
from semboard.errors import DomainError
from semboard.models import Phase, Task, Team, User
from semboard.services.boards import prepared as prepared_boards
from semboard.services.data import gold, inputs
from semboard.services.people import accounts, grants, teams, windows
from semboard.services.runs import submissions
from semboard.services.tasks import definitions, tasks
from semboard.storage import Storage, get_storage

DEMO_TASK = "demo"
DATASET_SIZES = {"news": 80, "forums": 60, "captions": 50}
SEED = 2012
BASELINE_SYSTEMS = ("tokencos", "dice", "lcs")
EVAL_SLUG = "evaluation"
POST_SLUG = "post-evaluation"

# ---------------------------------------------------------------------------
# Synthetic data: sentence pairs built from word lists, with a gold similarity
# that follows from how many parts of the first sentence the second one keeps.

SUBJECTS = [
    "the farmer", "a young doctor", "the old fisherman", "my neighbour", "the pilot",
    "a street musician", "the teacher", "our captain", "the baker", "a tired student",
    "the mayor", "a small child", "the engineer", "the nurse", "a famous painter",
]
VERBS = [
    "repairs", "paints", "sells", "carries", "cleans", "photographs", "builds",
    "describes", "buys", "inspects", "borrows", "delivers", "measures", "hides",
]
OBJECTS = [
    "a wooden boat", "the red bicycle", "an old radio", "a basket of apples", "the garden fence",
    "a broken clock", "the village bridge", "a blue umbrella", "the kitchen table",
    "a pile of letters", "the church roof", "a large map", "the school bus", "a silver kettle",
]
PLACES = [
    "near the harbour", "in the market", "behind the station", "at the town hall",
    "on a sunny morning", "before the storm", "in the quiet library", "beside the river",
    "after lunch", "at the old factory", "under the bridge", "in the crowded square",
]
# Same meaning, other words: a kept part is often reworded, so word overlap alone (what the
# lexical baselines see) does not give the answer away.
PARAPHRASES = {
    "the farmer": "the man who works the farm", "a young doctor": "a junior physician",
    "the old fisherman": "the elderly angler", "my neighbour": "the person next door",
    "the pilot": "the aviator", "a street musician": "a busker", "the teacher": "the schoolmaster",
    "our captain": "the skipper", "the baker": "the man from the bakery",
    "a tired student": "an exhausted pupil", "the mayor": "the head of the town council",
    "a small child": "a little kid", "the engineer": "the technician", "the nurse": "the carer",
    "a famous painter": "a well-known artist",
    "repairs": "fixes", "paints": "colours", "sells": "trades away", "carries": "brings",
    "cleans": "washes", "photographs": "takes a picture of", "builds": "puts together",
    "describes": "explains", "buys": "purchases", "inspects": "examines",
    "borrows": "takes on loan", "delivers": "drops off", "measures": "sizes up",
    "hides": "conceals",
    "a wooden boat": "a timber dinghy", "the red bicycle": "the scarlet bike",
    "an old radio": "a vintage wireless", "a basket of apples": "a crate of fruit",
    "the garden fence": "the hedge fencing", "a broken clock": "a clock that does not work",
    "the village bridge": "the bridge of the hamlet", "a blue umbrella": "a navy brolly",
    "the kitchen table": "the dining board", "a pile of letters": "a heap of mail",
    "the church roof": "the chapel's roof", "a large map": "a big chart",
    "the school bus": "the coach for pupils", "a silver kettle": "a shiny teapot",
    "near the harbour": "close to the port", "in the market": "at the bazaar",
    "behind the station": "at the back of the depot", "at the town hall": "in the civic centre",
    "on a sunny morning": "one bright forenoon", "before the storm": "ahead of the gale",
    "in the quiet library": "among silent bookshelves", "beside the river": "on the riverbank",
    "after lunch": "following the midday meal", "at the old factory": "in the former mill",
    "under the bridge": "below the span", "in the crowded square": "on the busy plaza",
}
# How much each part carries the meaning (sums to the top of the 0-5 scale).
PART_WEIGHTS = (1.4, 1.3, 1.5, 0.8)


def _sentence(parts: tuple[str, ...]) -> str:
    """Join subject, verb, object and place into a capitalised sentence."""
    text = " ".join(parts)
    return text[0].upper() + text[1:] + "."


def generate_pairs(dataset: str, n: int, seed: int = SEED) -> tuple[list[tuple[str, str]],
                                                                    list[float]]:
    """Deterministic sentence pairs and gold scores in [0, 5] for one demo dataset."""
    rng = random.Random(f"{seed}:{dataset}")
    pools = (SUBJECTS, VERBS, OBJECTS, PLACES)
    pairs: list[tuple[str, str]] = []
    scores: list[float] = []
    for _ in range(n):
        first = tuple(rng.choice(pool) for pool in pools)
        keep_rate = rng.choice((0.2, 0.5, 0.8, 0.95))
        keep = [rng.random() < keep_rate for _ in pools]
        second = list(first)
        for i, kept in enumerate(keep):
            if not kept:
                second[i] = rng.choice([w for w in pools[i] if w != first[i]])
            elif rng.random() < 0.45:
                second[i] = PARAPHRASES[first[i]]
        score = sum(w for w, kept in zip(PART_WEIGHTS, keep, strict=True) if kept)
        # Annotators disagree a little; their averages fall on a 0.2 grid.
        score = min(5.0, max(0.0, score + rng.gauss(0.0, 0.25)))
        pairs.append((_sentence(first), _sentence(tuple(second))))
        scores.append(round(score * 5) / 5)
    return pairs, scores


def demo_files(
    definition: Any,
) -> tuple[dict[str, bytes], dict[str, bytes], dict[str, list[float]]]:
    """Input and gold file contents per dataset (in the definition's formats) and gold values."""
    input_files: dict[str, bytes] = {}
    gold_files: dict[str, bytes] = {}
    gold_values: dict[str, list[float]] = {}
    for dataset in definition.dataset_names:
        pairs, scores = generate_pairs(dataset, DATASET_SIZES.get(dataset, 50))
        input_files[dataset] = "".join(f"{a}\t{b}\n" for a, b in pairs).encode()
        gold_files[dataset] = "".join(f"{s:.1f}\n" for s in scores).encode()
        gold_values[dataset] = scores
    return input_files, gold_files, gold_values


def noisy_run(definition: Any, gold_values: dict[str, list[float]], parsed: dict[str, Any], *,
              noise: float, seed: int) -> dict[str, bytes]:
    """A participant-like run: gold plus seeded Gaussian noise, clipped, in the task's format."""
    rng = np.random.default_rng(seed)
    files: dict[str, bytes] = {}
    for dataset in definition.dataset_names:
        values = np.asarray(gold_values[dataset])
        noisy = np.clip(values + rng.normal(0.0, noise, len(values)),
                        *definition.score_range(dataset))
        name, content = write_run(definition, dataset, parsed[dataset].ids,
                                  [round(float(v), 3) for v in noisy])
        files[name] = content
    return files


# ---------------------------------------------------------------------------
# The demo site.

PASSWORD = "demo-password"


@dataclass
class DemoUser:
    """A demo account."""
    email: str
    name: str
    admin: bool = False


ADMIN = DemoUser("admin@demo.semboard.org", "Ada Admin", admin=True)
ORGANISER = DemoUser("organiser@demo.semboard.org", "Olga Organiser")
PARTICIPANTS = [
    DemoUser("alice@demo.semboard.org", "Alice"),
    DemoUser("bob@demo.semboard.org", "Bob"),
    DemoUser("carol@demo.semboard.org", "Carol"),
    DemoUser("dan@demo.semboard.org", "Dan"),
]
# team name, affiliation, member indexes (first is captain), (run name, noise) per run
TEAMS = [
    ("Paraphrase Hunters", "University of Examples", [0, 1],
     [("run1-ensemble", 0.6), ("run2-lexical", 1.2), ("run3-random-forest", 0.9)]),
    ("Bag of Words", "Independent", [2], [("baseline-plus", 1.6), ("tuned", 1.1)]),
    ("Lab of the Organisers", "Demo Institute", [3], [("internal", 0.8)]),
]


@dataclass
class DemoSummary:
    """What the demo built (for the command's output and tests)."""
    task: str
    users: list[tuple[str, str, str]] = field(default_factory=list)
    runs_added: int = 0
    baselines: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _user(session: Session, spec: DemoUser, now: datetime) -> User:
    user = accounts.user_by_email(session, spec.email)
    if user is None:
        user = accounts.register_user(session, email=spec.email, password=PASSWORD,
                                      display_name=spec.name, now=now, is_admin=spec.admin)
    return user


def _phase(session: Session, task: Task, slug: str, **settings: Any) -> Phase:
    try:
        return tasks.get_phase(session, task, slug)
    except DomainError:
        return tasks.add_phase(session, task, slug=slug, **settings)


def _team(session: Session, task: Task, name: str, affiliation: str, members: list[User],
          now: datetime) -> Team:
    team = teams.team_for_user(session, task=task, user=members[0])
    if team is None:
        team = teams.create_team(session, task=task, captain=members[0], name=name,
                                 affiliation=affiliation, now=now)
    for member in members[1:]:
        if teams.team_for_user(session, task=task, user=member) is None:
            teams.join_team(session, task=task, user=member, invite_code=team.invite_code,
                            now=now)
    return team


def build_demo(session: Session, storage: Storage, *, now: datetime,
               with_baselines: bool = True,
               systems: tuple[str, ...] = BASELINE_SYSTEMS) -> DemoSummary:
    """Create (or complete) the demo task, users, teams, runs and boards; safe to run twice."""
    definition = load_task(DEMO_TASK)
    summary = DemoSummary(task=DEMO_TASK)
    task = tasks.load_task(session, definition, now=now)
    definition = definitions.definition(task)

    _user(session, ADMIN, now)
    organiser = _user(session, ORGANISER, now)
    people = [_user(session, spec, now) for spec in PARTICIPANTS]
    if organiser.id not in {u.id for u in tasks.organisers(session, task=task)}:
        tasks.add_organiser(session, task=task, user=organiser, now=now)
    session.commit()
    summary.users = [(s.email, PASSWORD, role) for s, role in
                     [(ADMIN, "site admin"), (ORGANISER, "organiser of demo")]
                     + [(p, "participant") for p in PARTICIPANTS]]

    input_files, gold_files, gold_values = demo_files(definition)
    for dataset, data in input_files.items():
        inputs.upload_inputs(session, storage, task=task, dataset=dataset,
                             filename=definition.input_filename(dataset), data=data,
                             user=organiser, now=now)
    parsed = {d: read_inputs(definition, d, data, filename=definition.input_filename(d))
              for d, data in input_files.items()}

    # A finished evaluation (two weeks ago, 120-hour team windows, three runs, late runs
    # flagged) and an open post-evaluation phase with a public board.
    day = timedelta(days=1)
    start = (now - 21 * day).replace(minute=0, second=0, microsecond=0)
    evaluation = _phase(session, task, EVAL_SLUG, name="Evaluation", kind="evaluation",
                        opens_at=start, closes_at=start + 7 * day, team_window_hours=120,
                        max_runs=3, late_policy="flag", visibility="hidden", now=now)
    post = _phase(session, task, POST_SLUG, name="Post-evaluation", kind="post-evaluation",
                  opens_at=start + 8 * day, closes_at=now + 60 * day, max_runs=5,
                  late_policy="reject", visibility="public", now=now)
    session.commit()
    # Gold exists before the runs, so every run is scored on arrival.
    for dataset, data in gold_files.items():
        gold.upload_gold(session, storage, task=task, dataset=dataset,
                         filename=definition.gold_filename(dataset), data=data, user=organiser,
                         now=now)
    session.commit()

    for index, (name, affiliation, member_ids, runs) in enumerate(TEAMS):
        members = [people[i] for i in member_ids]
        team = _team(session, task, name, affiliation, members, evaluation.opens_at + day)
        session.commit()
        if submissions.runs_for_team(session, team=team, include_replaced=True):
            continue  # this team's runs were made by an earlier `flask demo`
        # The team starts its window a day (or two) after the phase opened, then downloads.
        t = evaluation.opens_at + (1 + index) * day
        windows.start_team_window(session, phase=evaluation, user=members[0], now=t)
        for dataset in definition.dataset_names:
            inputs.download_inputs(session, storage, phase=evaluation, dataset=dataset,
                                   user=members[0], now=t)
        session.commit()
        for k, (run_name, noise) in enumerate(runs):
            files = noisy_run(definition, gold_values, parsed, noise=noise,
                              seed=SEED + 100 * index + k)
            t = t + timedelta(hours=20)
            submissions.submit(session, storage, team=team, phase=evaluation,
                               user=members[k % len(members)], name=run_name, files=files, now=t)
            summary.runs_added += 1
        if index == 0:
            # Replace a run under the same name: history is kept, the slot is reused.
            files = noisy_run(definition, gold_values, parsed, noise=0.5, seed=SEED + 7)
            submissions.submit(session, storage, team=team, phase=evaluation, user=members[0],
                               name=runs[0][0], files=files, now=t + timedelta(hours=2))
            summary.runs_added += 1
        if index == 1:
            # A run after the team's window closed: accepted under the late policy, flagged *.
            late = windows.team_deadline(session, team=team, phase=evaluation) + timedelta(hours=3)
            files = noisy_run(definition, gold_values, parsed, noise=1.0, seed=SEED + 11)
            submissions.submit(session, storage, team=team, phase=evaluation, user=members[0],
                               name="late-fix", files=files, now=late)
            summary.runs_added += 1
        if index == 2:
            grants.mark_organiser_team(session, team=team, by=organiser, now=now)
            # A post-deadline fix granted for a broken file (flagged †).
            granted = evaluation.closes_at + timedelta(hours=1)
            grants.grant_post_deadline_fix(
                session, team=team, phase=evaluation, by=organiser, now=granted,
                reason="Our upload server truncated their file; fix allowed for one day.",
                until=granted + day)
            session.commit()
            files = noisy_run(definition, gold_values, parsed, noise=0.7, seed=SEED + 13)
            submissions.submit(session, storage, team=team, phase=evaluation, user=members[0],
                               name="internal-fixed", files=files,
                               now=granted + timedelta(hours=2))
            summary.runs_added += 1
        # One run on the open post-evaluation board.
        files = noisy_run(definition, gold_values, parsed, noise=0.5 + 0.3 * index,
                          seed=SEED + 1000 + index)
        submissions.submit(session, storage, team=team, phase=post, user=members[0],
                           name="after-the-deadline", files=files, now=post.opens_at + day)
        summary.runs_added += 1

    if with_baselines:
        summary.baselines = _baselines(session, storage, task=task, phases=[evaluation, post],
                                       parsed=parsed, summary=summary, now=now, systems=systems)

    gold.release_gold(session, task=task, user=organiser, now=now)
    gold.publish_results(session, phase=evaluation, user=organiser, now=now)
    session.commit()
    # what the site does after a change: groups computed and boards prepared off the request

    prepared_boards.refresh_significance(session, storage, task=task, now=now)
    session.commit()
    return summary


def _baselines(session: Session, storage: Storage, *, task: Task, phases: list[Phase],
               parsed: dict[str, Any], summary: DemoSummary, now: datetime,
               systems: tuple[str, ...]) -> list[str]:
    """Submit reference systems as runs of the Baselines team (rows marked, never ranked)."""
    team = teams.baseline_team(session, task=task, now=now)
    session.commit()
    done: list[str] = []
    existing = {(r.phase_id, r.name) for r in submissions.runs_for_team(session, team=team)}
    for system in systems:
        missing = [p for p in phases if (p.id, system) not in existing]
        if missing:
            try:
                result = run_system(definitions.definition(task), parsed, system, device="auto",
                                    seed=0)
            except (KeyError, ValueError, ImportError) as err:
                summary.notes.append(f"baseline {system} skipped: {err}")
                continue
            for phase in missing:
                submissions.submit(session, storage, team=team, phase=phase, user=None,
                                   name=system, files=result.files, now=now,
                                   metadata=result.metadata)
                summary.runs_added += 1
        done.append(system)
    return done


@click.command("demo")
@click.option("--no-baselines", is_flag=True, help="Leave out the reference baselines.")
@click.option("--system", "systems", multiple=True, default=BASELINE_SYSTEMS, show_default=True,
              help="Baseline systems to run (repeat; 'embedding' needs the [gpu] extra).")
@with_appcontext
def demo_cli(no_baselines: bool, systems: tuple[str, ...]) -> None:
    """Create the database and a demo task with teams, runs and a published leaderboard."""
    upgrade_database(current_app.config["DATABASE_URL"])
    session = get_session()
    summary = build_demo(session, get_storage(), now=utcnow(), with_baselines=not no_baselines,
                         systems=tuple(systems))
    click.echo(f"demo task '{summary.task}' ready: {summary.runs_added} run(s) added"
               + (f", baselines: {', '.join(summary.baselines)}" if summary.baselines else ""))
    for note in summary.notes:
        click.echo(f"note: {note}")
    click.echo("Log in with (all demo passwords are the same):")
    for email, password, role in summary.users:
        click.echo(f"  {email:32s} {password:16s} {role}")
    # Plain HTTP on localhost: session cookies are Secure unless told otherwise.
    click.echo("Start the site with `SEMBOARD_INSECURE_COOKIES=1 .venv/bin/flask --app app run` "
               "and open http://127.0.0.1:5000/")
