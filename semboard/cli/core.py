"""Command-line groups (thin: parse options, call services, commit)."""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import click
from flask import current_app
from flask.cli import AppGroup, with_appcontext
from sqlalchemy.orm import Session

from evaluation import TaskDefinitionError, load_task
from semboard import config
from semboard.clock import utcnow
from semboard.db import session_factory
from semboard.errors import DomainError
from semboard.health import check as check_health
from semboard.models import PHASE_ACCEPTS, PHASE_KINDS, VISIBILITIES, Phase, Task
from semboard.services.boards import leaderboard, reveal
from semboard.services.boards import prepared as prepared_boards
from semboard.services.closing import papertables
from semboard.services.data import gold, inputs
from semboard.services.people import accounts
from semboard.services.runs import request_scoring
from semboard.services.tasks import tasks
from semboard.storage import get_storage

if TYPE_CHECKING:
    from alembic.config import Config

MIGRATIONS_DIR = config.resource_dir("migrations")

task_cli = AppGroup("task", help="Load tasks, set phases, name organisers.")
gold_cli = AppGroup("gold", help="Upload, release and rescore gold.")
token_cli = AppGroup("token", help="API tokens.")
user_cli = AppGroup("user", help="Accounts.")
results_cli = AppGroup("results", help="Results tables for the task paper; publication.")
db_cli = AppGroup("db", help="Database schema (alembic).")


def click_error(err: DomainError) -> click.ClickException:
    """A domain refusal as a CLI error: its message, then one indented line per issue."""
    return click.ClickException("\n".join([str(err)] + [f"  {issue}" for issue in err.issues]))


@contextmanager
def command_session() -> Iterator[Session]:
    """A session committed on success; domain errors become clean CLI errors."""
    session = session_factory()()
    try:
        yield session
        session.commit()
    except DomainError as err:
        session.rollback()
        raise click_error(err) from None
    finally:
        session.close()


def utc_time(value: str) -> datetime:
    """Parse an ISO time; a time without offset is taken as UTC."""
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError as err:
        raise click.BadParameter(f"{value!r} is not an ISO date-time (2012-05-01T00:00)") from err
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


def alembic_config(url: str | None = None) -> Config:
    """An alembic Config pointing at migrations/ and the app's database."""
    from alembic.config import Config  # alembic costs every other command's start

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.attributes["url"] = url or current_app.config["DATABASE_URL"]
    return cfg


def upgrade_database(url: str, revision: str = "head") -> None:
    """Run alembic migrations up to `revision`."""
    from alembic import command  # alembic costs every other command's start

    command.upgrade(alembic_config(url), revision)


@db_cli.command("upgrade")
@click.argument("revision", default="head")
def db_upgrade(revision: str) -> None:
    """Migrate the database to REVISION (default head)."""
    upgrade_database(current_app.config["DATABASE_URL"], revision)
    click.echo(f"database at {revision}")


@click.command("db-upgrade")
@with_appcontext
def db_upgrade_alias() -> None:
    """Migrate the database to the newest revision."""
    upgrade_database(current_app.config["DATABASE_URL"])
    click.echo("database at head")


@click.command("check")
@with_appcontext
def check_cli() -> None:
    """Check every part the configuration uses (database and its migrations, storage with a
    probe object, Redis)."""
    found = check_health(current_app._get_current_object(),  # type: ignore[attr-defined]
                         write_probe=True)
    for part, verdict in found.items():
        click.echo(f"{part}: {verdict}")
    if any(v != "ok" for v in found.values()):
        raise SystemExit(1)


@task_cli.command("load")
@click.argument("name_or_path")
@click.option("--inputs", "inputs_dir",
              type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="Official release folder to load the inputs from.")
@click.option("--split", help="The split whose inputs --inputs holds (default: the default one).")
def task_load(name_or_path: str, inputs_dir: Path | None, split: str | None) -> None:
    """Load (or update) a task from its shipped name or a .toml path."""
    try:
        definition = load_task(name_or_path)
    except TaskDefinitionError as err:
        raise click.ClickException(str(err)) from None
    with command_session() as session:
        task = tasks.load_task(session, definition, now=utcnow())
        click.echo(f"loaded task {task.name}: {task.title}")
        # A new definition can move numbers (a new metric, another aggregate): rescore.
        changed = gold.rescore(session, get_storage(), task=task, now=utcnow())
        if changed:
            click.echo(f"{changed} run(s) rescored under the new definition")
        if inputs_dir is not None:
            rows = inputs.load_release_inputs(session, get_storage(), task=task,
                                              release_dir=inputs_dir, user=None, now=utcnow(),
                                              split=split)
            for row in rows:
                click.echo(f"  inputs {row.dataset}: {row.n_items} items (v{row.version}), "
                           f"split {row.split}")


@task_cli.command("list")
def task_list() -> None:
    """List loaded tasks and their phases."""
    with command_session() as session:
        for task in tasks.list_tasks(session):
            click.echo(f"{task.name}: {task.title}")
            for p in tasks.phases(session, task):
                click.echo(f"  {p.slug} ({p.kind}) {p.opens_at:%Y-%m-%d %H:%M} → "
                           f"{p.closes_at:%Y-%m-%d %H:%M} UTC, max runs {p.max_runs}, "
                           f"window {p.team_window_hours}h, late {p.late_policy}, {p.visibility}, "
                           f"split {p.split}, max per day {p.max_per_day}, accepts {p.accepts}")


@task_cli.command("phase")
@click.argument("task_name")
@click.argument("slug")
@click.option("--name", help="Display name (default: the slug).")
@click.option("--kind", type=click.Choice(PHASE_KINDS))
@click.option("--opens", help="Opening time, ISO, UTC.")
@click.option("--closes", help="Closing time, ISO, UTC.")
@click.option("--window-hours", type=int, help="Per-team window in hours (0: none).")
@click.option("--max-runs", type=int, help="Accepted runs per team (0: unlimited).")
@click.option("--late-policy", type=click.Choice(("reject", "flag")))
@click.option("--visibility", type=click.Choice(VISIBILITIES))
@click.option("--track", help="Restrict runs to one track's datasets ('' for none).")
@click.option("--split", help="The split the phase serves and scores (default: the default one).")
@click.option("--max-per-day", type=int,
              help="Uploads per team in any 24 hours, replacements included (0: unlimited).")
@click.option("--accepts", type=click.Choice(PHASE_ACCEPTS),
              help="What teams submit: runs, models (an encoder the site runs) or both.")
@click.option("--model-settings", help="The models' encoding defaults and limits as JSON, "
              "e.g. '{\"max_seq_length_limit\": 256, \"dtypes\": [\"auto\", \"float16\"]}' "
              "(keys: max_seq_length, max_seq_length_limit, batch_tokens, batch_tokens_limit, "
              "dtype, dtypes); '' for the defaults.")
@click.option("--score-in-request-pairs", type=int,
              help="Score runs of up to this many lines inside the upload request; larger ones "
              "are scored by the queue (0: the site's SEMBOARD_SCORE_IN_REQUEST_PAIRS, which is "
              "also the most that counts).")
def task_phase(task_name: str, slug: str, name: str | None, kind: str | None, opens: str | None,
               closes: str | None, window_hours: int | None, max_runs: int | None,
               late_policy: str | None, visibility: str | None, track: str | None,
               split: str | None = None, max_per_day: int | None = None,
               accepts: str | None = None, model_settings: str | None = None,
               score_in_request_pairs: int | None = None) -> None:
    """Add phase SLUG to TASK_NAME, or update the settings given."""
    given: dict[str, object] = {}
    if name is not None:
        given["name"] = name
    if kind is not None:
        given["kind"] = kind
    if opens is not None:
        given["opens_at"] = utc_time(opens)
    if closes is not None:
        given["closes_at"] = utc_time(closes)
    if window_hours is not None:
        given["team_window_hours"] = window_hours or None
    if max_runs is not None:
        given["max_runs"] = max_runs or None
    if late_policy is not None:
        given["late_policy"] = late_policy
    if visibility is not None:
        given["visibility"] = visibility
    if track is not None:
        given["track"] = track or None
    if split is not None:
        given["split"] = split
    if max_per_day is not None:
        given["max_per_day"] = max_per_day or None
    if accepts is not None:
        given["accepts"] = accepts
    if model_settings is not None:
        try:
            given["model_settings"] = json.loads(model_settings) if model_settings else None
        except json.JSONDecodeError as err:
            raise click.BadParameter(f"not JSON: {err}", param_hint="--model-settings"
                                     ) from None
        if given["model_settings"] is not None and not isinstance(given["model_settings"],
                                                                  dict):
            raise click.BadParameter("give a JSON object", param_hint="--model-settings")
    with command_session() as session:
        task = tasks.get_task(session, task_name)
        existing = {p.slug: p for p in tasks.phases(session, task)}
        # checked before any change (0 clears, as for the other numbers)
        pairs = request_scoring.parse(score_in_request_pairs, zero_clears=True)
        if slug in existing:
            phase = tasks.update_phase(session, existing[slug], **given)
            done = "updated"
        else:
            missing = [o for o, k in (("--kind", "kind"), ("--opens", "opens_at"),
                                      ("--closes", "closes_at")) if k not in given]
            if missing:
                raise click.UsageError(f"a new phase needs {', '.join(missing)}")
            given.setdefault("name", slug)
            phase = tasks.add_phase(session, task, slug=slug, now=utcnow(), **given)  # type: ignore[arg-type]
            done = "added"
        if score_in_request_pairs is not None:
            request_scoring.set_limit(session, phase=phase, pairs=pairs, user=None, now=utcnow())
        click.echo(f"{done} phase {task.name}/{phase.slug}")


@task_cli.command("organiser")
@click.argument("task_name")
@click.argument("email")
@click.option("--remove", is_flag=True, help="Remove instead of adding.")
def task_organiser(task_name: str, email: str, remove: bool) -> None:
    """Name the account EMAIL an organiser of TASK_NAME."""
    with command_session() as session:
        task = tasks.get_task(session, task_name)
        user = accounts.require_user(session, email)
        if remove:
            tasks.remove_organiser(session, task=task, user=user)
            click.echo(f"{user.email} no longer organises {task.name}")
        else:
            tasks.add_organiser(session, task=task, user=user, now=utcnow())
            click.echo(f"{user.email} organises {task.name}")


@gold_cli.command("upload")
@click.argument("task_name")
@click.argument("folder", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--split", help="The split whose gold FOLDER holds (default: the default one).")
def gold_upload(task_name: str, folder: Path, split: str | None) -> None:
    """Upload the gold files found in FOLDER (official release layout or base names)."""
    with command_session() as session:
        task = tasks.get_task(session, task_name)
        now = utcnow()
        rows = gold.load_release_gold(session, get_storage(), task=task, release_dir=folder,
                                      user=None, now=now, split=split)
        for row in rows:
            click.echo(f"gold {row.dataset}: {row.n_items} items (v{row.version}), "
                       f"split {row.split}")
        changed = gold.rescore(session, get_storage(), task=task, now=now)
        click.echo(f"{changed} run(s) scored against the new gold")
        prepared_boards.refresh_significance(session, get_storage(), task=task, now=now)


@gold_cli.command("release")
@click.argument("task_name")
@click.option("--split", help="The split whose gold to release (default: the default one).")
def gold_release(task_name: str, split: str | None) -> None:
    """Release TASK_NAME's gold (of one split) to everyone."""
    with command_session() as session:
        task = tasks.get_task(session, task_name)
        gold.release_gold(session, task=task, user=None, now=utcnow(), split=split)
        click.echo(f"gold of {task.name} released" + (f" (split {split})" if split else ""))


@gold_cli.command("rescore")
@click.argument("task_name")
@click.option("--force", is_flag=True, help="Rescore every run, even those up to date.")
def gold_rescore(task_name: str, force: bool) -> None:
    """Score every run of TASK_NAME against its current gold (history kept)."""
    with command_session() as session:
        task = tasks.get_task(session, task_name)
        now = utcnow()
        changed = gold.rescore(session, get_storage(), task=task, now=now, force=force)
        click.echo(f"{changed} run(s) rescored")
        prepared_boards.refresh_significance(session, get_storage(), task=task, now=now)


@token_cli.command("create")
@click.argument("email")
@click.option("--name", default="cli", help="A label for the token.")
def token_create(email: str, name: str) -> None:
    """Create an API token for EMAIL and print it (shown only once)."""
    with command_session() as session:
        user = accounts.require_user(session, email)
        click.echo(accounts.create_api_token(session, user=user, name=name, now=utcnow()))


@user_cli.command("create")
@click.argument("email")
@click.option("--admin", is_flag=True, help="Make the account a site admin.")
@click.option("--name", "display_name", default="", help="Display name.")
@click.option("--password", envvar="SEMBOARD_NEW_PASSWORD",
              help="Password (default: a random one, printed).")
def user_create(email: str, admin: bool, display_name: str, password: str | None) -> None:
    """Create an account."""
    generated = password is None
    password = password or secrets.token_urlsafe(12)
    with command_session() as session:
        user = accounts.register_user(session, email=email, password=password,
                                      display_name=display_name, now=utcnow(), is_admin=admin)
        click.echo(f"created {'admin ' if admin else ''}{user.email}")
        if generated:
            click.echo(f"password: {password}")


@user_cli.command("admin")
@click.argument("email")
@click.option("--revoke", is_flag=True)
def user_admin(email: str, revoke: bool) -> None:
    """Make EMAIL a site admin (or revoke it)."""
    with command_session() as session:
        user = accounts.require_user(session, email)
        user.is_admin = not revoke
        click.echo(f"{user.email} is {'no longer ' if revoke else ''}a site admin")


@user_cli.command("deactivate")
@click.argument("email")
def user_deactivate(email: str) -> None:
    """Deactivate EMAIL: its sessions end, its API tokens and e-mail links are revoked."""
    with command_session() as session:
        user = accounts.require_user(session, email)
        accounts.set_active(session, user=user, active=False, now=utcnow())
        click.echo(f"{user.email} is deactivated: sessions ended, API tokens revoked")


@user_cli.command("activate")
@click.argument("email")
def user_activate(email: str) -> None:
    """Reactivate EMAIL (it logs in again with its password; old tokens stay revoked)."""
    with command_session() as session:
        user = accounts.require_user(session, email)
        accounts.set_active(session, user=user, active=True, now=utcnow())
        click.echo(f"{user.email} is active again")


@results_cli.command("export")
@click.argument("task_name")
@click.option("--phase", "phase_slug", help="Phase slug (default: the last evaluation phase).")
@click.option("--format", "fmt", type=click.Choice(("csv", "latex", "json")), default="csv")
@click.option("--output", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--table", type=click.Choice(papertables.TABLES),
              help="A paper table instead of the board (STS 2012 Tables 1, 3, 2; a split test "
                   "set's final board and shake-up report).")
@click.option("--rank-baselines", is_flag=True, help="--table runs: rank baselines too.")
def results_export(task_name: str, phase_slug: str | None, fmt: str, output: Path | None,
                   table: str | None = None, rank_baselines: bool = False) -> None:
    """Print (or write) a phase's results table."""
    with command_session() as session:
        task = tasks.get_task(session, task_name)
        phase = _pick_phase(session, task, phase_slug)
        if table == "shakeup":  # computed now where missing (stored for the site too)
            reveal.prepare(session, get_storage(), phase=phase, now=utcnow(), report=True)
        if table is not None:  # the paper tables live in their own service

            text = papertables.export(session, get_storage(), task=task, phase=phase, table=table,
                                      rank_baselines=rank_baselines, now=utcnow()).render(fmt)
            _emit(text, output)
            return
        # With storage, significance groups missing from the cache are computed (and cached).
        board = leaderboard.build_leaderboard(session, task=task, phase=phase, viewer=None,
                                              check_access=False, storage=get_storage(),
                                              now=utcnow())
        if fmt == "json":
            text = json.dumps(board.to_json(), indent=2, ensure_ascii=False) + "\n"
        elif fmt == "latex":
            text = board.to_latex()
        else:
            text = board.to_csv()
        if output:
            output.write_text(text, encoding="utf-8")
            click.echo(f"wrote {output}")
        else:
            click.echo(text, nl=False)


@results_cli.command("publish")
@click.argument("task_name")
@click.option("--phase", "phase_slug", help="Phase slug (default: the last evaluation phase).")
def results_publish(task_name: str, phase_slug: str | None) -> None:
    """Publish a phase's results (its hidden board becomes public)."""
    with command_session() as session:
        task = tasks.get_task(session, task_name)
        phase = _pick_phase(session, task, phase_slug)
        now = utcnow()
        gold.publish_results(session, phase=phase, user=None, now=now)
        prepared_boards.refresh_significance(session, get_storage(), task=task, now=now)
        click.echo(f"results of {task.name}/{phase.slug} published")


def _emit(text: str, output: Path | None) -> None:
    """Write text to a file (saying so) or print it."""
    if output:
        output.write_text(text, encoding="utf-8")
        click.echo(f"wrote {output}")
    else:
        click.echo(text, nl=False)


def _pick_phase(session: Session, task: Task, slug: str | None) -> Phase:
    """The named phase, else the last evaluation phase, else the last phase."""
    if slug:
        return tasks.get_phase(session, task, slug)
    all_phases = tasks.phases(session, task)
    if not all_phases:
        raise click.ClickException("the task has no phases")
    evaluation = [p for p in all_phases if p.kind == "evaluation"]
    return (evaluation or all_phases)[-1]


# public for the command modules that join these groups (semboard.cli.reveal)
emit = _emit
pick_phase = _pick_phase
