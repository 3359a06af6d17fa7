"""`flask` command groups, listed by name and imported when one runs (`flask --help` stays fast)."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

import click
from flask import Flask, current_app

# Where create_app leaves the site's installer when `flask` built the app only to find commands.
PENDING_SITE = "semboard.pending_site"
# Modules whose commands join core's groups (task, gold, results): imported with those groups.
CORE = ("semboard.cli.core", "semboard.cli.archive", "semboard.cli.closing",
        "semboard.cli.participation", "semboard.cli.taskdump", "semboard.cli.reveal")


@dataclass(frozen=True)
class Entry:
    """A top-level command: where it lives, the help `flask --help` shows, group or command."""

    target: str  # "module:attribute"
    help: str  # the command's own first line (a test holds the two equal)
    group: bool = True

    def modules(self) -> tuple[str, ...]:
        """The modules to import for the command, the one that defines it first."""
        module = self.target.partition(":")[0]
        return (module, *(m for m in CORE if m != module)) if module in CORE else (module,)


COMMANDS: dict[str, Entry] = {
    "audit": Entry("semboard.cli.closing:audit_cli",
                   "Organiser actions with a reason, and their audit log."),
    "baselines": Entry("semboard.cli.baselines:baselines_cli",
                       "Run reference baselines through the submission pipeline."),
    "boards": Entry("semboard.cli.boards:boards_cli",
                    "Prepared boards, significance groups, stuck scoring jobs."),
    "check": Entry("semboard.cli.core:check_cli", "Check every part the configuration uses "
                   "(database and its migrations, storage with a probe object, Redis).",
                   group=False),
    "db": Entry("semboard.cli.core:db_cli", "Database schema (alembic)."),
    "db-upgrade": Entry("semboard.cli.core:db_upgrade_alias",
                        "Migrate the database to the newest revision.", group=False),
    "demo": Entry("semboard.cli.demo:demo_cli", "Create the database and a demo task with "
                  "teams, runs and a published leaderboard.", group=False),
    "gold": Entry("semboard.cli.core:gold_cli", "Upload, release and rescore gold."),
    "models": Entry("semboard.cli.models:models_cli", "The model track: a task's models, "
                    "failed ones run again, queued or running ones cancelled."),
    "notify-deadlines": Entry("semboard.cli.mail:notify_deadlines_cli", "Mail every member "
                              "whose team deadline is within 24 hours (once per deadline).",
                              group=False),
    "results": Entry("semboard.cli.core:results_cli",
                     "Results tables for the task paper; publication."),
    "schedule": Entry("semboard.cli.closing:schedule_cli",
                      "Publication of boards and gold at set times."),
    "task": Entry("semboard.cli.core:task_cli", "Load tasks, set phases, name organisers."),
    "token": Entry("semboard.cli.core:token_cli", "API tokens."),
    "user": Entry("semboard.cli.core:user_cli", "Accounts."),
    "worker-tokens": Entry("semboard.cli.models:worker_tokens_cli", "Remote model workers' "
                           "tokens: one task's model queue each (a GPU host holds only its "
                           "token)."),
    "worker": Entry("semboard.cli.worker:worker_cli", "Run queued jobs in this process (default: "
                    "every queue, semboard, mail, analysis, baselines).", group=False),
}


def load(entry: Entry) -> click.Command:
    """Import the command's modules and return the command itself."""
    for module in entry.modules():
        importlib.import_module(module)
    module, _, attribute = entry.target.partition(":")
    command = getattr(importlib.import_module(module), attribute)
    assert isinstance(command, click.Command), entry.target
    return command


def finish_site() -> None:
    """Install the site on the current app where `flask` built it only to find its commands."""
    if not current_app:
        return
    app = current_app._get_current_object()  # type: ignore[attr-defined]
    install = app.extensions.pop(PENDING_SITE, None)
    if install is not None:
        install(app)


class _Deferred:
    """A stand-in, listed with the command's help, that imports the command when it is used."""

    entry: Entry

    def real(self) -> click.Command:
        return load(self.entry)

    def make_context(self, info_name: str | None, args: list[str],
                     parent: click.Context | None = None, **extra: Any) -> click.Context:
        """The real command's context; the site is installed once its arguments parse."""
        ctx = self.real().make_context(info_name, args, parent=parent, **extra)  # --help exits
        finish_site()
        return ctx


class DeferredCommand(_Deferred, click.Command):
    """A top-level command imported when it runs."""

    def __init__(self, name: str, entry: Entry) -> None:
        click.Command.__init__(self, name, help=entry.help)
        self.entry = entry


class DeferredGroup(_Deferred, click.Group):
    """A top-level group imported when it runs or its subcommands are asked for."""

    def __init__(self, name: str, entry: Entry) -> None:
        click.Group.__init__(self, name, help=entry.help)
        self.entry = entry

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        real = self.real()
        assert isinstance(real, click.Group), self.entry.target
        return real.get_command(ctx, cmd_name)

    def list_commands(self, ctx: click.Context) -> list[str]:
        real = self.real()
        assert isinstance(real, click.Group), self.entry.target
        return real.list_commands(ctx)


def register(app: Flask) -> None:
    """Add every command group to the app, as stand-ins that import it when it is used."""
    for name, entry in COMMANDS.items():
        app.cli.add_command(DeferredGroup(name, entry) if entry.group
                            else DeferredCommand(name, entry))
