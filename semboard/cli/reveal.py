"""`flask task parts|freeze|finals` and `flask results shakeup|boards`: public and private
boards from one test set (issue 42), from the command line (trusted: no viewer asked)."""

from __future__ import annotations

import json
from pathlib import Path

import click
from flask.cli import with_appcontext
from sqlalchemy import select

from semboard.cli.core import (
    command_session,
    emit,
    pick_phase,
    results_cli,
    task_cli,
    utc_time,
)
from semboard.clock import request_now
from semboard.errors import NotFound
from semboard.models import Run
from semboard.services.boards import reveal
from semboard.services.data import gold, inputs, parts
from semboard.services.people import teams
from semboard.services.runs import primary
from semboard.services.tasks import phases, tasks
from semboard.storage import get_storage


@click.command("parts")
@with_appcontext
@click.argument("task_name")
@click.argument("phase_slug")
@click.option("--seed", type=int, help="Draw the split from this seed (default: a secret one).")
@click.option("--draw", is_flag=True, help="Draw the split now (with --seed, or a secret seed).")
@click.option("--file", "split_file", type=click.Path(exists=True, dir_okay=False,
                                                       path_type=Path),
              help="The organisers' split: dataset, id, usage rows (public|private|ignored).")
@click.option("--again", is_flag=True, help="Replace a split runs were scored against.")
@click.option("--reason", default="", help="Why (audited; needed with --again).")
@click.option("--output", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the stored split (dataset, id, usage) to this file.")
def task_parts(task_name: str, phase_slug: str, seed: int | None, draw: bool,
               split_file: Path | None, again: bool, reason: str, output: Path | None) -> None:
    """Show a phase's split of its test items (the definition's [parts]); draw it (--draw,
    --seed) or give it as a file (--file), then rescore every run."""
    now = request_now()
    storage = get_storage()
    with command_session() as session:
        task = tasks.get_task(session, task_name)
        phase = tasks.get_phase(session, task, phase_slug)
        changed = False
        if split_file is not None:
            items = inputs.parsed_inputs(session, storage, task=task, split=phase.split)
            parts.upload(session, storage, phase=phase, items=items, filename=split_file.name,
                         data=split_file.read_bytes(), user=None, now=now, reason=reason,
                         again=again)
            changed = True
        elif draw or seed is not None:
            known = gold.parsed_gold(session, storage, task=task, split=phase.split)
            parts.draw(session, storage, phase=phase, gold=known, seed=seed, user=None, now=now,
                       reason=reason, again=again)
            changed = True
        if changed:
            session.commit()
            rescored = gold.rescore(session, storage, task=task, now=now)
            click.echo(f"rescored {rescored} run(s)")
        found = parts.describe(session, phase=phase, viewer=None, now=now, trusted=True)
        if found is None:
            raise NotFound(f"phase {phase_slug} is not listed in the definition's [parts]")
        click.echo(json.dumps(found, indent=2, default=str))
        if output is not None:
            _, data = parts.download_split(session, storage, phase=phase, viewer=None, now=now,
                                           trusted=True)
            output.write_bytes(data)
            click.echo(f"wrote {output}")


@click.command("freeze")
@with_appcontext
@click.argument("task_name")
@click.argument("phase_slug")
@click.option("--at", "freeze_at", help="Freeze the public board at this time (UTC).")
@click.option("--never", is_flag=True, help="Never freeze the board.")
@click.option("--reveal", "reveal_at", type=click.Choice(("close", "publish")),
              help="Reveal private figures and the live board at the close, or when the "
                   "results are published (default: as set, first 'publish').")
def task_freeze(task_name: str, phase_slug: str, freeze_at: str | None, never: bool,
                reveal_at: str | None) -> None:
    """When a phase's public board freezes, and when its hidden figures are revealed."""
    with command_session() as session:
        task = tasks.get_task(session, task_name)
        phase = tasks.get_phase(session, task, phase_slug)
        when = None if never else (utc_time(freeze_at) if freeze_at else phase.freeze_at)
        phases.set_freeze(session, phase, freeze_at=when, reveal=reveal_at or phase.reveal,
                          user=None, now=request_now())
        click.echo(f"{task_name}/{phase_slug}: freezes "
                   f"{phase.freeze_at.isoformat() if phase.freeze_at else 'never'}; "
                   f"revealed at {phase.reveal}")


@click.command("finals")
@with_appcontext
@click.argument("task_name")
@click.argument("phase_slug")
@click.argument("team_name", required=False)
@click.argument("run_ids", type=int, nargs=-1)
@click.option("--reason", default="", help="Why the organisers choose a team's final runs.")
@click.option("--settle", is_flag=True, help="Write down the fallback of teams that chose none "
              "(only once the phase has closed).")
def task_finals(task_name: str, phase_slug: str, team_name: str | None, run_ids: tuple[int, ...],
                reason: str, settle: bool) -> None:
    """List each team's final runs; choose TEAM's (organisers, with --reason); --settle writes
    down the fallbacks of a closed phase."""
    now = request_now()
    with command_session() as session:
        task = tasks.get_task(session, task_name)
        phase = tasks.get_phase(session, task, phase_slug)
        if team_name is not None:
            team = next((t for t in teams.list_teams(session, task=task)
                         if t.name == team_name), None)
            if team is None:
                raise NotFound(f"task {task_name} has no team {team_name!r}")
            runs = list(session.scalars(select(Run).where(Run.id.in_(run_ids))))
            if len(runs) != len(set(run_ids)):
                raise NotFound(f"no run {sorted(set(run_ids) - {r.id for r in runs})}")
            primary.choose_finals(session, phase=phase, team=team, runs=runs, user=None,
                                  now=now, reason=reason)
        if settle:
            for line in primary.settle_finals(session, phase=phase, now=now):
                click.echo(line)
        for finals in sorted(primary.final_runs(session, phase=phase).values(),
                             key=lambda f: f.team_id):
            how = "chosen" if finals.chosen else "fallback (best public)"
            click.echo(f"team {finals.team_id}: runs {list(finals.run_ids)} ({how}"
                       f"{', settled' if finals.settled else ''})")


@results_cli.command("shakeup")
@click.argument("task_name")
@click.option("--phase", "phase_slug", help="Phase slug (default: the last evaluation phase).")
@click.option("--format", "fmt", type=click.Choice(("json", "csv", "latex")), default="json")
@click.option("--output", type=click.Path(dir_okay=False, path_type=Path))
def results_shakeup(task_name: str, phase_slug: str | None, fmt: str,
                    output: Path | None) -> None:
    """Compute (and store) a phase's shake-up report, then print or write it."""
    now = request_now()
    with command_session() as session:
        task = tasks.get_task(session, task_name)
        phase = pick_phase(session, task, phase_slug)
        reveal.prepare(session, get_storage(), phase=phase, now=now, report=True)
        report = reveal.stored_report(session, phase=phase)
        if report is None:
            raise NotFound(f"phase {phase.slug} has no shake-up report (no split drawn yet)")
        text = {"json": lambda: json.dumps(report, indent=2, ensure_ascii=False) + "\n",
                "csv": lambda: reveal.report_csv(report),
                "latex": lambda: reveal.report_latex(report)}[fmt]()
    emit(text, output)


@results_cli.command("boards")
@click.argument("task_name")
@click.option("--phase", "phase_slug", help="Phase slug (default: the last evaluation phase).")
@click.option("--kind", type=click.Choice(reveal.BOARD_KINDS), required=True,
              help="The board frozen at the freeze time, or of final runs on the private part "
                   "or the whole.")
@click.option("--format", "fmt", type=click.Choice(("json", "csv", "latex")), default="csv")
@click.option("--output", type=click.Path(dir_okay=False, path_type=Path))
def results_boards(task_name: str, phase_slug: str | None, kind: str, fmt: str,
                   output: Path | None) -> None:
    """Print (or write) a phase's frozen, private or whole board (stored on the way)."""
    now = request_now()
    with command_session() as session:
        task = tasks.get_task(session, task_name)
        phase = pick_phase(session, task, phase_slug)
        reveal.prepare(session, None, phase=phase, now=now)
        board = reveal.board_of(reveal.served_kind(session, phase=phase, kind=kind, viewer=None,
                                                   now=now, build_missing=True, trusted=True),
                                phase)
        text = {"json": lambda: json.dumps(board.to_json(), indent=2, ensure_ascii=False)
                + "\n", "csv": board.to_csv, "latex": board.to_latex}[fmt]()
    emit(text, output)


for _command in (task_parts, task_freeze, task_finals):
    task_cli.add_command(_command)
