"""`flask --help` lists every command without importing the site; a command that runs gets it."""

from __future__ import annotations

import importlib
import json
import os
import pkgutil
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from flask.cli import FlaskGroup

import semboard.cli
from semboard import cli, create_app
from semboard.db import OBSERVERS_KEY

ROOT = Path(__file__).resolve().parents[3]
# What the site's pages, API, jobs and scoring import: `flask --help` needs none of it.
SITE = ("semboard.views", "semboard.api", "semboard.services", "semboard.jobs", "semboard.models",
        "semboard.db", "semboard.cli.core", "sqlalchemy", "numpy", "scipy", "pandas", "evaluation",
        "alembic", "rq", "boto3")
# `flask` as its console script runs it, then what the process imported.
PROBE = """
import json, sys
from flask.cli import main
sys.argv = ["flask", *sys.argv[1:]]
try:
    main()
except SystemExit as end:
    assert not end.code, end.code
print(json.dumps(sorted(sys.modules)))
"""


def _flask(tmp_path: Path, app: str, *args: str) -> tuple[str, set[str]]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "FLASK_APP": app,
           "SEMBOARD_INSTANCE_PATH": str(tmp_path), "SEMBOARD_SCHEDULE_SECONDS": "0",
           "DATABASE_URL": f"sqlite:///{tmp_path / 'site.sqlite'}"}
    for key in ("REDIS_URL", "SEMBOARD_STORAGE"):
        env.pop(key, None)
    done = subprocess.run([sys.executable, "-c", PROBE, *args], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=120, check=True)
    text, _, modules = done.stdout.rstrip("\n").rpartition("\n")
    return text, set(json.loads(modules))


@pytest.mark.parametrize("app", ["semboard", "app"])
def test_flask_help_lists_every_command_without_importing_the_site(tmp_path, app) -> None:
    text, modules = _flask(tmp_path, app, "--help")
    listed = {line.split()[0] for line in text.split("Commands:")[1].splitlines() if line.strip()}
    assert set(cli.COMMANDS) | {"run", "routes", "shell"} == listed
    assert "Load tasks, set phases, name organisers." in text
    imported = sorted(m for m in modules if m.startswith(SITE))
    assert imported == [], imported[:10]


def test_a_groups_help_imports_that_group_only(tmp_path) -> None:
    text, modules = _flask(tmp_path, "semboard", "gold", "--help")
    assert "upload" in text and "diff" in text  # core's own and closing's subcommand
    assert "semboard.cli.core" in modules and "semboard.cli.closing" in modules
    assert not {"semboard.views", "semboard.api", "semboard.cli.worker", "rq"} & modules


def test_flask_routes_serves_the_whole_site(tmp_path) -> None:
    text, _ = _flask(tmp_path, "app", "routes")
    assert "api.list_tasks" in text and "web.home" in text


def test_a_command_run_through_flask_gets_the_whole_site(tmp_path, monkeypatch) -> None:
    """Listing leaves the site pending; running a command installs it before the command runs."""
    monkeypatch.setenv("SEMBOARD_INSTANCE_PATH", str(tmp_path))
    monkeypatch.setenv("SEMBOARD_SCHEDULE_SECONDS", "0")
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{tmp_path / 'site.sqlite'}")
    for key in ("REDIS_URL", "SEMBOARD_STORAGE"):
        monkeypatch.delenv(key, raising=False)
    built = []

    def factory():
        built.append(create_app())
        return built[-1]

    group = FlaskGroup(create_app=factory)
    listing = CliRunner().invoke(group, ["--help"])
    assert listing.exit_code == 0, listing.output
    assert cli.PENDING_SITE in built[0].extensions and not built[0].blueprints
    ran = CliRunner().invoke(group, ["db-upgrade"])
    assert ran.exit_code == 0, ran.output
    app = built[1]
    assert cli.PENDING_SITE not in app.extensions
    assert {"web", "api"} <= set(app.blueprints) and OBSERVERS_KEY in app.extensions
    assert any(rule.rule == "/api/v1/tasks" for rule in app.url_map.iter_rules())


def test_an_app_built_outside_flask_has_the_site_at_once(tmp_path) -> None:
    app = create_app({"TESTING": True, "SEMBOARD_INSTANCE_PATH": str(tmp_path),
                      "SEMBOARD_SCHEDULE_SECONDS": 0})
    assert cli.PENDING_SITE not in app.extensions and {"web", "api"} <= set(app.blueprints)


def test_the_registry_matches_the_commands() -> None:
    """Each stand-in shows its command's help, kind and subcommands."""
    ctx = click.Context(click.Group("flask"))
    for name, entry in cli.COMMANDS.items():
        real = cli.load(entry)
        assert real.name == name
        assert isinstance(real, click.Group) == entry.group, name
        stand_in = cli.DeferredGroup(name, entry) if entry.group else cli.DeferredCommand(
            name, entry)
        for limit in (45, 200):
            assert stand_in.get_short_help_str(limit) == real.get_short_help_str(limit), name
        if isinstance(real, click.Group):
            assert isinstance(stand_in, click.Group)
            assert stand_in.list_commands(ctx) == real.list_commands(ctx), name


def test_every_command_of_the_cli_package_is_reachable() -> None:
    """A command defined in semboard/cli/ is in the registry or a subcommand of a group there."""
    ctx = click.Context(click.Group("flask"))
    reachable: set[int] = set()
    for entry in cli.COMMANDS.values():
        command = cli.load(entry)
        reachable.add(id(command))
        if isinstance(command, click.Group):
            reachable |= {id(command.get_command(ctx, n)) for n in command.list_commands(ctx)}
    orphans = []
    for info in pkgutil.iter_modules(semboard.cli.__path__, "semboard.cli."):
        module = importlib.import_module(info.name)
        orphans += [f"{info.name}.{attr}" for attr, value in vars(module).items()
                    if isinstance(value, click.Command) and value.__module__ != "click"
                    and id(value) not in reachable]
    assert orphans == []


def test_the_package_names_its_domain_errors_not_the_web_handlers() -> None:
    """`from semboard import errors` is the domain errors module after the factory's module has
    loaded its web helpers (a package attribute named after a web module hid it)."""
    probe = ("import semboard\nfrom semboard import errors\nimport semboard.web.errors\n"
             "from semboard import errors as again\nprint(errors.__name__, again.__name__)")
    done = subprocess.run([sys.executable, "-c", probe], env={**os.environ,
                          "PYTHONPATH": str(ROOT)}, cwd=ROOT, capture_output=True, text=True,
                          timeout=120, check=True)
    assert done.stdout.split() == ["semboard.errors", "semboard.errors"]
