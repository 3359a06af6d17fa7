"""Every `flask` command the README, DEPLOY.md and GUIDE.md name exists in the site's CLI."""

from __future__ import annotations

import re

import click
import pytest
from deploy_support import PROJECT_ROOT

from semboard import create_app

DOCS = ("README.md", "docs/DEPLOY.md", "docs/GUIDE.md")
# `flask [--app X] command [subcommand]`, as written in prose and code blocks.
FLASK = re.compile(r"\bflask (?:--app [\w.:()]+ )?([a-z][a-z-]+)(?: ([a-z][a-z-]+))?")
# Flask's own commands, on every FlaskGroup rather than on app.cli.
BUILTIN = {"run", "shell", "routes"}


@pytest.mark.parametrize("doc", DOCS)
def test_documented_flask_commands_exist(doc: str, tmp_path) -> None:
    """A renamed or removed command fails here, naming the document and the command."""
    app = create_app({"TESTING": True, "SEMBOARD_INSTANCE_PATH": str(tmp_path),
                      "DATABASE_URL": f"sqlite:///{tmp_path / 'x.sqlite'}"})
    ctx = click.Context(app.cli)
    text = (PROJECT_ROOT / doc).read_text()
    unknown = []
    for name, sub in FLASK.findall(text):
        command = app.cli.get_command(ctx, name)
        if command is None and name not in BUILTIN:
            unknown.append(name)
        elif isinstance(command, click.Group) and sub and command.get_command(ctx, sub) is None:
            unknown.append(f"{name} {sub}")
    assert not unknown, f"{doc} names flask commands the site lacks: {sorted(set(unknown))}"
