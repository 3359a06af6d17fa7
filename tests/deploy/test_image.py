"""The image ships what `pip install .` ships: Dockerfile, .dockerignore and the wheel agree."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from deploy_support import (
    PROJECT_ROOT,
    build_wheel,
    copy_files,
    dockerignore_rules,
    in_context,
    tracked_files,
    wheel_names,
)

# Where each source folder of the repository lands inside the wheel.
WHEEL_PLACES = {"templates": "semboard/templates", "static": "semboard/static",
                "migrations": "semboard/migrations", "tasks": "tasks", "semboard": "semboard",
                "semboard_cli": "semboard_cli", "evaluation": "evaluation",
                "baselines": "baselines"}


def dockerfile_stages(text: str) -> list[list[tuple[str, str]]]:
    """The Dockerfile's stages, each a list of (INSTRUCTION, arguments), continuations joined."""
    joined = re.sub(r"\\\n", " ", text)
    stages: list[list[tuple[str, str]]] = []
    for line in joined.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        instruction, _, args = line.partition(" ")
        if instruction.upper() == "FROM":
            stages.append([])
        if stages:
            stages[-1].append((instruction.upper(), args.strip()))
    return stages


def test_wheel_holds_every_source_file_of_the_site(repo_wheel: Path) -> None:
    """Every module, template, static file (vendored JS too), migration and task is in the wheel."""
    names = wheel_names(repo_wheel)
    missing = []
    for path in tracked_files():
        top, _, rest = path.partition("/")
        if top not in WHEEL_PLACES or not rest or "__pycache__" in path:
            continue
        if top in ("semboard", "semboard_cli", "evaluation", "baselines") and \
                not path.endswith(".py"):
            continue
        if f"{WHEEL_PLACES[top]}/{rest}" not in names:
            missing.append(path)
    assert not missing, f"pyproject.toml ships none of these in the wheel: {missing}"
    assert "semboard/static/vendor/vega.min.js" in names


def test_image_context_builds_the_same_wheel(repo_wheel: Path, tmp_path: Path) -> None:
    """The files .dockerignore lets into the build give the same wheel as the whole repository."""
    rules = dockerignore_rules((PROJECT_ROOT / ".dockerignore").read_text())
    context = [p for p in tracked_files() if in_context(p, rules)]
    assert "Dockerfile" not in context and not any(p.startswith("tests/") for p in context)
    (tmp_path / "out").mkdir()
    image_wheel = build_wheel(copy_files(context, tmp_path / "ctx"), tmp_path / "out")
    assert wheel_names(image_wheel) == wheel_names(repo_wheel)


def test_dockerfile_installs_the_wheel_and_nothing_else() -> None:
    """Build stage: `pip wheel` of the package; runtime: installs those wheels, copies nothing."""
    stages = dockerfile_stages((PROJECT_ROOT / "Dockerfile").read_text())
    assert len(stages) == 2, "a build stage and a runtime stage"
    build, final = stages
    build_name = build[0][1].split()[-1]
    assert any(i == "RUN" and re.search(r"pip wheel .*--wheel-dir /wheels \"?\.", a)
               for i, a in build)
    copies = [a for i, a in final if i in ("COPY", "ADD")]
    assert copies == [], f"the runtime stage copies files the wheel may lack: {copies}"
    installs = [a for i, a in final if i == "RUN" and "pip install" in a]
    assert len(installs) == 1
    assert f"from={build_name},source=/wheels" in installs[0]
    assert "--no-index --find-links /wheels" in installs[0]
    assert re.search(r'"semboard(\$\{EXTRAS:\+\[\$EXTRAS\]\})?"', installs[0])
    users = [a for i, a in final if i == "USER"]
    assert users and users[-1] not in ("root", "0")


def test_image_commands_name_what_the_wheel_installs(repo_wheel: Path) -> None:
    """The start command serves `semboard:create_app()` (app.py at the repo root is not shipped)."""
    final = dockerfile_stages((PROJECT_ROOT / "Dockerfile").read_text())[-1]
    env = " ".join(a for i, a in final if i == "ENV")
    assert "FLASK_APP=semboard" in env
    (cmd,) = [a for i, a in final if i == "CMD"]
    assert "'semboard:create_app()'" in cmd and "app:app" not in cmd
    assert "flask db-upgrade" in cmd
    assert "semboard/__init__.py" in wheel_names(repo_wheel)


def test_installed_wheel_serves_the_site(repo_wheel: Path, tmp_path: Path) -> None:
    """A non-editable install, run away from the repository: migrations, pages, vendored JS."""
    target = tmp_path / "site-packages"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target",
                    str(target), str(repo_wheel)], check=True)
    env = {**os.environ, "PYTHONPATH": str(target), "SEMBOARD_INSTANCE_PATH": str(tmp_path / "i"),
           "FLASK_APP": "semboard", "SEMBOARD_INSECURE_COOKIES": "1"}
    env.pop("DATABASE_URL", None)
    upgrade = subprocess.run([sys.executable, "-m", "flask", "db-upgrade"], env=env,
                             cwd=tmp_path, capture_output=True, text=True)
    assert upgrade.returncode == 0, upgrade.stderr[-2000:]
    probe = (
        "import importlib; from semboard import create_app\n"
        "for name in ('semboard', 'semboard_cli', 'evaluation', 'baselines', 'tasks'):\n"
        "    where = importlib.import_module(name).__file__\n"
        f"    assert where.startswith({str(target)!r}), (name, where)\n"
        "client = create_app().test_client()\n"
        "for url in ('/', '/tasks', '/healthz', '/static/vendor/vega.min.js', '/login'):\n"
        "    status = client.get(url).status_code\n"
        "    assert status == 200, (url, status)\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], env=env, cwd=tmp_path,
                          capture_output=True, text=True)
    assert done.returncode == 0 and "ok" in done.stdout, done.stderr[-2000:]
    # The participants' `semboard` command works from the install (the old image lacked it).
    client = subprocess.run([sys.executable, str(target / "bin" / "semboard"), "--help"],
                            env=env, cwd=tmp_path, capture_output=True, text=True)
    assert client.returncode == 0 and "submit" in client.stdout, client.stderr[-2000:]


@pytest.mark.parametrize("pattern, path, sent", [
    ("*\n!semboard/\n**/__pycache__", "semboard/db.py", True),
    ("*\n!semboard/\n**/__pycache__", "semboard/__pycache__/db.pyc", False),
    ("*\n!semboard/", "tests/conftest.py", False),
])
def test_dockerignore_reading(pattern: str, path: str, sent: bool) -> None:
    """The allow-list reading the context test relies on."""
    assert in_context(path, dockerignore_rules(pattern)) is sent
