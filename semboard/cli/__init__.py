"""`flask` command groups: tasks, gold, users, closing, mail, demo, boards, worker, models."""

from __future__ import annotations

from flask import Flask

from semboard.cli import (
    archive,
    baselines,
    boards,
    closing,
    core,
    demo,
    mail,
    models,
    participation,  # noqa: F401  (its commands join `core.task_cli`)
    taskdump,
    worker,
)


def register(app: Flask) -> None:
    """Add every command group to the app."""
    core.register_cli(app)
    core.results_cli.add_command(archive.results_archive)
    for command in (taskdump.task_dump, taskdump.task_restore, taskdump.task_ranking,
                    taskdump.task_primary):
        core.task_cli.add_command(command)
    closing.register_closing(app)
    for command in (baselines.baselines_cli, boards.boards_cli, demo.demo_cli,
                    mail.notify_deadlines_cli, models.models_cli, models.worker_tokens_cli,
                    worker.worker_cli):
        app.cli.add_command(command)
