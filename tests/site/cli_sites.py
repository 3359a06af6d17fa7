"""A whole site in a folder, driven by its commands: the real-data end-to-end tests' set-up."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from flask import Flask

from semboard import create_app
from semboard.db import get_session
from semboard.models import Base


def folder_site(root: Path, now: list[datetime], *, url: str | None = None,
                secret: str = "test", **config: object) -> Flask:
    """A site whose uploads and instance live under root (its database too, unless url names
    one), boards built inline, its clock now[0] (tests move it on)."""
    clock: Callable[[], datetime] = lambda: now[0]  # noqa: E731 - read at each request
    app = create_app({"TESTING": True, "SECRET_KEY": secret, "WTF_CSRF_ENABLED": False,
                      "DATABASE_URL": url or f"sqlite:///{root / 'site.sqlite'}", **config,
                      "SEMBOARD_UPLOAD_DIR": str(root / "uploads"),
                      "SEMBOARD_INSTANCE_PATH": str(root / "instance"),
                      "SEMBOARD_BOARD_JOBS": "inline", "SEMBOARD_CLOCK": clock})
    with app.app_context():
        Base.metadata.create_all(get_session().get_bind())
    return app


def run_command(app: Flask, *args: str, ok: bool = True) -> str:
    """A `flask` command's output; it must succeed (or fail, with ok=False)."""
    result = app.test_cli_runner().invoke(args=list(args))
    assert (result.exit_code == 0) == ok, (args, result.output, result.exception)
    return result.output
