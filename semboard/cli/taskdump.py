"""`flask task dump|restore` (a whole task to another site), `flask user invite`, and
`flask task ranking|primary`."""

from __future__ import annotations

from pathlib import Path

import click
from flask import current_app
from flask.cli import with_appcontext
from sqlalchemy import select

from semboard.cli.core import command_session, task_cli, user_cli
from semboard.clock import request_now
from semboard.errors import InvalidData, NotFound
from semboard.jobs.queue import wait_for_threads
from semboard.mail import delivery
from semboard.models import PHASE_RANKINGS, Run
from semboard.services.boards import prepared
from semboard.services.closing import taskdump, taskimport
from semboard.services.people import account_links, accounts
from semboard.services.runs import primary
from semboard.services.tasks import tasks
from semboard.storage import get_storage

SIGNING_KEY = "SEMBOARD_DUMP_KEY"
TRUSTED_KEYS = "SEMBOARD_DUMP_TRUSTED_KEYS"


def _key(setting: str) -> tuple[str, bytes] | None:
    """This site's signing key (SEMBOARD_DUMP_KEY: KEYID:SECRET), or None."""
    found = taskdump.parse_keys(current_app.config.get(setting) or "", setting=setting)
    if len(found) > 1:
        raise InvalidData(f"{setting} holds one key (KEYID:SECRET)")
    return next(iter(found.items()), None)


@click.command("dump")
@with_appcontext
@click.argument("task_name")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="The dump file to write (a new .zip).")
def task_dump(task_name: str, output: Path) -> None:
    """Write the whole task (rows, files, users it names, audit log) with a manifest of digests,
    signed with SEMBOARD_DUMP_KEY when it is set."""
    with command_session() as session:
        key = _key(SIGNING_KEY)
        task = tasks.get_task(session, task_name)
        manifest = taskdump.dump(session, get_storage(), task=task, out=output,
                                 now=request_now(), key=key)
    rows = ", ".join(f"{n} {name}" for name, n in manifest["tables"].items() if n)
    click.echo(f"wrote {output}: {rows}; {manifest['objects']} stored file(s)")
    click.echo(f"signed by key {key[0]}" if key else
               f"unsigned ({SIGNING_KEY} is not set): the receiving site cannot tell who made it")


@click.command("restore")
@with_appcontext
@click.argument("dump_file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--as", "new_name", metavar="NEWNAME",
              help="Import the task under this name (its name is taken here, or the same dump "
                   "is imported a second time).")
@click.option("--link-existing-accounts", is_flag=True,
              help="Give accounts of this site with a dumped person's e-mail that person's "
                   "roles on the imported task (without it, such a dump is refused).")
@click.option("--rescore", is_flag=True,
              help="Import a dump whose stored scores disagree with its files, with this site's "
                   "scores instead (each change is listed).")
@click.option("--require-signature", is_flag=True,
              help="Refuse a dump unless a key of SEMBOARD_DUMP_TRUSTED_KEYS signed it.")
@click.option("--invite", is_flag=True,
              help="Mail each account made here an invitation: a link to choose its password "
                   "(printed instead when the site sends no mail).")
def task_restore(dump_file: Path, new_name: str | None, link_existing_accounts: bool,
                 rescore: bool, require_signature: bool, invite: bool) -> None:
    """Import a dumped task as a new task of this site beside its others, checked as untrusted
    input (docs/MOVING.md): new ids, every score recomputed, nothing written if refused."""
    now = request_now()
    mail = delivery.mail_configured(current_app)
    with command_session() as session:
        trusted = taskdump.parse_keys(current_app.config.get(TRUSTED_KEYS) or "",
                                      setting=TRUSTED_KEYS)
        own = _key(SIGNING_KEY)
        if own is not None:
            trusted.setdefault(*own)
        options = taskimport.Options(
            name=new_name, link_existing=link_existing_accounts, rescore=rescore,
            require_signature=require_signature, invite=invite, trusted=trusted,
            bounds=taskdump.Bounds.for_site(current_app.config))
        report = taskimport.restore(session, get_storage(), path=dump_file, now=now,
                                    options=options)
    with command_session() as session:  # the boards, from the files now in storage
        task = tasks.get_task(session, report.task)
        grouped = prepared.refresh_significance(session, get_storage(), task=task, now=now)
    if report.invitations and mail:
        wait_for_threads()  # the invitations' delivery thread, before the command exits
    for line in restore_lines(report, grouped=grouped, mail=mail,
                              base=current_app.config.get("SEMBOARD_BASE_URL") or ""):
        click.echo(line)


def restore_lines(report: taskimport.Report, *, grouped: int, mail: bool,
                  base: str) -> list[str]:
    """What `flask task restore` tells the operator (every line true of what it did)."""
    base = base.rstrip("/") or "<this site>"
    lines = [f"dump of task {report.source} (format {report.format}): {report.signature}"]
    rows = ", ".join(f"{n} {name}" for name, n in report.tables.items() if n)
    lines.append(f"restored {report.source} as task {report.task}: {rows}")
    if report.rescored:
        lines.append(f"scores: {report.scores} score record(s) recomputed from the dump's gold "
                     f"and run files; {len(report.rescored)} disagreed with the dump and hold "
                     "this site's figures now (--rescore):")
        lines += [f"  {change}" for change in report.rescored]
    else:
        lines.append(f"scores: {report.scores} score record(s) recomputed from the dump's gold "
                     "and run files: each agrees with the dump")
    lines.append(f"boards prepared; {grouped} with significance groups")
    if report.renewed_codes:
        lines.append("new invite codes (another team of this site had theirs): "
                     + ", ".join(report.renewed_codes))
    if report.cancelled_models:
        lines.append("models that had not run, cancelled (their teams upload them again): "
                     + ", ".join(report.cancelled_models))
    lines.append(f"accounts: {len(report.created)} created (active, no password yet), "
                 f"{len(report.linked)} existing linked by e-mail, {report.deleted} deleted "
                 "accounts' stand-ins")
    for email, roles in sorted(report.linked.items()):
        lines.append(f"  linked {email}: {'; '.join(roles)}")
    for email in report.created:
        token = report.invitations.get(email)
        if token and not mail:
            lines.append(f"  created {email}: set a password at {base}/reset-password/{token}")
        else:
            lines.append(f"  created {email}")
    if not report.created:
        return lines
    if report.invitations and mail:
        lines.append(f"each created account was mailed an invitation to choose its password "
                     f"(the link lasts {account_links.INVITE_HOURS // 24} days; a new one: "
                     f"{base}/forgot-password)")
    elif report.invitations:
        lines.append("this site sends no mail (SEMBOARD_MAIL_URL is unset): give each person "
                     f"the link above (it works once, for {account_links.INVITE_HOURS // 24} "
                     "days; `flask user invite EMAIL` makes a new one)")
    elif mail:
        lines.append(f"each person chooses a password through 'Forgot password' "
                     f"({base}/forgot-password) with their e-mail, or `flask user invite` "
                     "mails them a link")
    else:
        lines.append("this site sends no mail (SEMBOARD_MAIL_URL is unset): "
                     "`flask user invite EMAIL` prints a link for each person to choose a "
                     "password")
    return lines


@click.command("invite")
@with_appcontext
@click.argument("emails", nargs=-1, required=True)
@click.option("--task", "task_name", help="The task the invitation speaks of (a moved task).")
def user_invite(emails: tuple[str, ...], task_name: str | None) -> None:
    """Send each EMAIL's account a link to choose its password (7 days; printed when the site
    sends no mail): people whose accounts a task import made."""
    now = request_now()
    mail = delivery.mail_configured(current_app)
    base = (current_app.config.get("SEMBOARD_BASE_URL") or "").rstrip("/") or "<this site>"
    links = {}
    with command_session() as session:
        title = tasks.get_task(session, task_name).title if task_name else None
        for email in emails:
            user = accounts.require_user(session, email)
            if not user.is_active_account:
                raise InvalidData(f"{user.email} is deactivated: `flask user activate` first")
            links[user.email] = account_links.invite(session, user=user, task_title=title,
                                                     now=now)
    if mail:
        wait_for_threads()  # the delivery thread, before the command exits
    for email, token in links.items():
        click.echo(f"invitation mailed to {email}" if mail else
                   f"{email}: {base}/reset-password/{token}")


@click.command("ranking")
@with_appcontext
@click.argument("task_name")
@click.argument("phase_slug")
@click.argument("ranking", type=click.Choice(PHASE_RANKINGS))
def task_ranking(task_name: str, phase_slug: str, ranking: str) -> None:
    """Rank every run of a phase, or each team's primary run only (audited)."""
    with command_session() as session:
        task = tasks.get_task(session, task_name)
        phase = tasks.get_phase(session, task, phase_slug)
        primary.set_ranking(session, phase=phase, ranking=ranking, user=None, now=request_now())
        prepared.store_prepared(session, phase=phase, now=request_now())
    click.echo(f"{task_name}/{phase_slug} ranks {ranking} runs")


@click.command("primary")
@with_appcontext
@click.argument("task_name")
@click.argument("phase_slug")
@click.argument("run_id", type=int, required=False)
@click.option("--reason", default="", help="Why the organisers mark a team's run (audited).")
@click.option("--settle", is_flag=True, help="Write down the fallback of teams that chose none "
              "(only once the phase has closed).")
def task_primary(task_name: str, phase_slug: str, run_id: int | None, reason: str,
                 settle: bool) -> None:
    """List each team's primary run; mark RUN_ID primary for its team (organisers, with
    --reason); --settle writes down the fallbacks of a closed phase."""
    now = request_now()
    with command_session() as session:
        task = tasks.get_task(session, task_name)
        phase = tasks.get_phase(session, task, phase_slug)
        if run_id is not None:
            run = session.scalar(select(Run).where(Run.id == run_id, Run.phase_id == phase.id))
            if run is None:
                raise NotFound(f"phase {phase_slug} has no run {run_id}")
            primary.choose(session, phase=phase, run=run, user=None, now=now, reason=reason)
        if settle:
            for line in primary.settle(session, phase=phase, now=now):
                click.echo(line)
        if phase.ranking != primary.PRIMARY:
            click.echo(f"{task_name}/{phase_slug} ranks every run")
            return
        for choice in sorted(primary.primary_runs(session, phase=phase).values(),
                             key=lambda c: c.team_id):
            how = "chosen" if choice.chosen else "fallback (latest scored run)"
            click.echo(f"team {choice.team_id}: run {choice.run_id} ({how})")


for _command in (task_dump, task_restore, task_ranking, task_primary):
    task_cli.add_command(_command)
user_cli.add_command(user_invite)
