"""README's commands run where they stand: its marked shell blocks, on a demo in a temp folder."""

from __future__ import annotations

import os
import re
import shlex
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from deploy_support import PROJECT_ROOT

from semboard import create_app
from semboard.db import dispose_app_engine

README = PROJECT_ROOT / "README.md"
FENCE = re.compile(r"^```(\S*)([^\n]*)\n(.*?)^```$", re.S | re.M)


def blocks() -> list[tuple[str, str, str]]:
    """(language, info after it, body) of every fenced block of the README, in order."""
    text = README.read_text()
    return [(m.group(1), m.group(2).strip(), m.group(3)) for m in FENCE.finditer(text)]


def marked(name: str) -> str:
    """The shell blocks marked `readme-test=NAME`, joined in order."""
    found = [body for lang, info, body in blocks() if info == f"readme-test={name}"]
    assert found, f"README.md has no ```sh readme-test={name} block"
    return "\n".join(found)


def free_port() -> int:
    """A free loopback port."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def newcomer(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A folder like the project's (app.py, .venv) and the environment of an activated venv."""
    (tmp_path / "app.py").symlink_to(PROJECT_ROOT / "app.py")
    (tmp_path / ".venv").symlink_to(PROJECT_ROOT / ".venv")
    keep = {k: v for k, v in os.environ.items()
            if not k.startswith(("SEMBOARD_", "DATABASE_URL", "REDIS_URL", "SECRET_KEY"))}
    env = {**keep, "PATH": f"{PROJECT_ROOT / '.venv' / 'bin'}:{os.environ['PATH']}",
           "VIRTUAL_ENV": str(PROJECT_ROOT / ".venv"), "PYTHONPATH": str(PROJECT_ROOT),
           "SEMBOARD_INSTANCE_PATH": str(tmp_path / "instance"),
           "SEMBOARD_CONFIG": str(tmp_path / "semboard-cli.json"),
           "SEMBOARD_SCHEDULE_SECONDS": "0"}
    return tmp_path, env


def bash(script: str, cwd: Path, env: dict[str, str], timeout: int = 120) -> str:
    """Run SCRIPT as `bash -euo pipefail`; its output, or a failure showing it."""
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"README commands failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def test_first_two_commands_stay() -> None:
    """Install + demo + serve, then `bash .ci/run`; the venv is activated before the rest."""
    first, second, activate = (body.strip() for _, _, body in blocks()[:3])
    assert "python3 -m venv .venv && .venv/bin/pip install -q -e . && " \
           ".venv/bin/flask --app app demo && " \
           "SEMBOARD_INSECURE_COOKIES=1 .venv/bin/flask --app app run" in first
    assert second.endswith("bash .ci/run") and (PROJECT_ROOT / ".ci" / "run").is_file()
    assert activate == ". .venv/bin/activate"
    # after activation, bare commands: no block mixes in .venv/bin paths
    for _, info, body in blocks():
        if info.startswith("readme-test="):
            assert ".venv/bin" not in body, body


def test_walk_through_leaves_are_ignored() -> None:
    """demo-data/, my-run/ and broken/ from the walk-through never show up in `git status`."""
    for folder in ("demo-data/x.txt", "my-run/x.txt", "broken/x.txt", "sts2012-site/x.txt"):
        done = subprocess.run(["git", "check-ignore", "-q", folder], cwd=PROJECT_ROOT)
        assert done.returncode == 0, f"{folder} is not ignored by .gitignore"


@pytest.fixture
def demo_site(newcomer: tuple[Path, dict[str, str]]) -> Iterator[tuple[Path, dict[str, str], str]]:
    """The first command's demo and server (port chosen free), as the README starts them."""
    folder, env = newcomer
    first = blocks()[0][2]
    demo = re.search(r"\.venv/bin/flask --app app demo", first)
    serve = re.search(r"(SEMBOARD_INSECURE_COOKIES=1) \.venv/bin/flask --app app run", first)
    assert demo and serve
    bash(".venv/bin/flask --app app demo", folder, env)
    port = free_port()
    log = (folder / "server.log").open("w")
    server = subprocess.Popen([".venv/bin/flask", "--app", "app", "run", "--port", str(port)],
                              cwd=folder, env={**env, "SEMBOARD_INSECURE_COOKIES": "1"},
                              stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(f"{url}/healthz", timeout=2)
                break
            except OSError:
                assert server.poll() is None and time.monotonic() < deadline, \
                    (folder / "server.log").read_text()
                time.sleep(0.2)
        yield folder, env, url
    finally:
        server.terminate()
        server.wait(timeout=10)
        log.close()


def test_participating_and_api_blocks(demo_site: tuple[Path, dict[str, str], str]) -> None:
    """The CLI walk-through, the broken run and the curl example, in order, on the demo."""
    folder, env, url = demo_site
    script = marked("participate").replace("http://127.0.0.1:5000", url)
    output = bash(script, folder, env)
    assert "exit code 6" in output
    assert "run-from-curl" in output and "my-dice" in output


def flask_commands(script: str, variables: dict[str, str]) -> list[list[str]]:
    """The `flask --app app ...` commands of SCRIPT, its `NAME=value` lines set by VARIABLES."""
    commands = []
    for line in script.replace("\\\n", " ").splitlines():
        words = shlex.split(line, comments=True)
        if not words:
            continue
        if words[0] == "export" and len(words) == 2:
            words = words[1:]  # `export NAME=value`: the test provides the value
        name, sep, _ = words[0].partition("=")
        if sep and len(words) == 1:
            assert name in variables, f"README sets {name}, which this test does not provide"
            continue
        assert words[:3] == ["flask", "--app", "app"], f"not a site command: {line}"
        for key, value in variables.items():
            words = [w.replace(f"${key}", value) for w in words]
        commands.append(words[3:])
    return commands


def test_hosting_block(newcomer: tuple[Path, dict[str, str]], shared_data: Path,
                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The hosting walk-through on the real STS 2012 release, ending in the LaTeX results table.

    The same commands as the README's, run in one process (each `flask` start costs seconds).
    """
    _, env = newcomer
    script = marked("hosting")
    assert "RELEASE=path/to/sts2012" in script
    # a site of its own, apart from the demo's instance/, and no password on the command line
    assert 'export SEMBOARD_INSTANCE_PATH="$PWD/sts2012-site"' in script
    assert "--password" not in script
    for key in [k for k in os.environ if k not in env]:
        monkeypatch.delenv(key)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    app = create_app()
    output = []
    try:
        given = {"RELEASE": str(shared_data / "sts2012"),
                 "SEMBOARD_INSTANCE_PATH": env["SEMBOARD_INSTANCE_PATH"]}
        for args in flask_commands(script, given):
            result = app.test_cli_runner().invoke(args=args)
            assert result.exit_code == 0, (args, result.output, result.exception)
            output.append(result.output)
    finally:
        dispose_app_engine(app)
    assert "\\begin{tabular}" in output[-1] and "tokencos" in output[-1]
