"""What a server process loads for a large upload is loaded at its start (issue 45): a gunicorn
worker under the deployed settings, and the kept groups process a `flask worker` starts before
any round (a fresh one when it ends). Real processes; what they loaded is read from
/proc/PID/maps (pyarrow's library mapped), not from timing."""

from __future__ import annotations

import http.client
import os
import re
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from tests.servers import free_port

PROJECT_ROOT = Path(__file__).resolve().parents[3]


def _children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry))
    return found


def _maps_arrow(pid: int) -> bool:
    try:
        return "libarrow" in Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return False


def _pid_line(proc: subprocess.Popen[str], limit_s: float = 120.0) -> int:
    """The next pid the parent prints, or a failure after limit_s."""
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], limit_s)
    assert ready, "no groups process was started"
    return int(proc.stdout.readline())


def _env(tmp_path: Path) -> dict[str, str]:
    return {**{k: v for k, v in os.environ.items() if k != "REDIS_URL"},
            "PYTHONPATH": str(PROJECT_ROOT), "SECRET_KEY": "x",
            "DATABASE_URL": f"sqlite:///{tmp_path / 'site.sqlite'}",
            "SEMBOARD_INSTANCE_PATH": str(tmp_path / "instance"),
            "SEMBOARD_UPLOAD_DIR": str(tmp_path / "uploads")}


def test_a_gunicorn_worker_under_the_deployed_settings_has_the_reader_loaded(tmp_path):
    # the settings the image's gunicorn command names (docs/DEPLOY.md's unit names the same)
    shipped = re.findall(r"exec gunicorn -c (\S+) ", (PROJECT_ROOT / "Dockerfile").read_text())
    assert shipped == ["python:semboard.serve.gunicorn_conf"]
    assert f"gunicorn -c {shipped[0]} " in (PROJECT_ROOT / "docs" / "DEPLOY.md").read_text()
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "-c", shipped[0], "-w", "1",
         "-b", f"127.0.0.1:{port}", "semboard:create_app()"],
        cwd=PROJECT_ROOT, env=_env(tmp_path), stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while True:  # a worker answers once its post_worker_init hook has run
            assert time.monotonic() < deadline and server.poll() is None, "gunicorn did not serve"
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
                conn.request("GET", "/no-such-page")
                conn.getresponse().read()
                conn.close()
                break
            except OSError:
                time.sleep(0.2)
        (worker,) = _children(server.pid)
        # no upload came: pyarrow (the fast reader of big runs) was loaded at the worker's start
        assert _maps_arrow(worker)
        # and, without Redis, its groups process was started (its first upload's groups do not
        # wait ~3 s for an interpreter and the app: a request-mode round took 6.26 s so)
        (groups,) = [pid for pid in _children(worker)  # not multiprocessing's resource tracker
                     if b"spawn_main" in Path(f"/proc/{pid}/cmdline").read_bytes()]
        while not _maps_arrow(groups):
            assert time.monotonic() < deadline, "the groups process did not load pyarrow"
            time.sleep(0.2)
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=60)


KEEPER = """
import multiprocessing, sys, time
from semboard import create_app
from semboard.jobs import boards
boards.GROUPS_RESTART_S = 0.2
app = create_app({"TESTING": True, "SECRET_KEY": "x", "DATABASE_URL": sys.argv[1],
                  "SEMBOARD_INSTANCE_PATH": sys.argv[2], "SEMBOARD_BOARD_JOBS": "process"})
boards.keep_groups_process(app)
seen = set()
while len(seen) < 2:
    for child in multiprocessing.active_children():
        if child.pid not in seen:
            seen.add(child.pid)
            print(child.pid, flush=True)
    time.sleep(0.05)
time.sleep(600)
"""


def test_a_kept_groups_process_is_started_before_any_round_and_again_when_it_ends(tmp_path):
    parent = subprocess.Popen(
        [sys.executable, "-c", KEEPER, f"sqlite:///{tmp_path / 'site.sqlite'}",
         str(tmp_path / "instance")], cwd=PROJECT_ROOT, env=_env(tmp_path),
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        first = _pid_line(parent)  # started with no round sent
        deadline = time.monotonic() + 120
        while not _maps_arrow(first):  # and loads what a round needs before any comes
            assert time.monotonic() < deadline, "the groups process did not load pyarrow"
            time.sleep(0.2)
        os.kill(first, signal.SIGTERM)  # it ends (as an idle one does): another is started
        second = _pid_line(parent)
        assert second != first
    finally:
        parent.kill()
        parent.wait()


def test_what_a_process_loads_at_its_start_is_left_out_of_later_full_collections(tmp_path):
    # a full collection walks every object the collector tracks: after preload() the app's and
    # the modules' objects are frozen, so the next full collection walks a few, not 100,000s
    script = (
        "import gc, json\n"
        "from app import create_app\n"
        "create_app()\n"
        "from semboard.serve.preload import preload\n"
        "preload()\n"
        "print(json.dumps([gc.get_freeze_count(), len(gc.get_objects())]))\n")
    done = subprocess.run([sys.executable, "-c", script], cwd=PROJECT_ROOT, env=_env(tmp_path),
                          capture_output=True, text=True, timeout=120, check=True)
    frozen, walked = map(int, done.stdout.split("\n")[-2].strip("[]").split(","))
    assert frozen > 50_000, (frozen, walked)
    assert walked < frozen / 20, (frozen, walked)


def test_a_preloaded_process_runs_the_young_collector_rarely(tmp_path):
    # Python 3.11's first threshold (700) ran a young pass every three or four GETs of these
    # pages (29 in 100); after preload() the collector waits for 10,000 net allocations
    script = (
        "import gc, json\n"
        "from app import create_app\n"
        "app = create_app()\n"
        "from semboard.serve.preload import preload\n"
        "preload()\n"
        "passes = []\n"
        "gc.callbacks.append(lambda phase, info: phase == 'start' and passes.append(1))\n"
        "client = app.test_client()\n"
        "for _ in range(50):\n"
        "    assert client.get('/tasks').status_code == 200\n"
        "    assert client.get('/').status_code in (200, 302)\n"
        "print(json.dumps([gc.get_threshold()[0], len(passes)]))\n")
    env = _env(tmp_path)
    subprocess.run([sys.executable, "-m", "flask", "--app", "app", "db-upgrade"],
                   cwd=PROJECT_ROOT, env=env, capture_output=True, timeout=120, check=True)
    done = subprocess.run([sys.executable, "-c", script], cwd=PROJECT_ROOT, env=env,
                          capture_output=True, text=True, timeout=120, check=True)
    threshold, passes = map(int, done.stdout.split("\n")[-2].strip("[]").split(","))
    assert threshold == 10_000
    assert passes <= 3, passes


def test_a_worker_with_a_queue_starts_no_groups_process_of_its_own(tmp_path):
    # with Redis the `flask worker` keeps the host's groups process; a web worker starts none
    from semboard import create_app
    from semboard.jobs import boards

    app = create_app({"TESTING": True, "SECRET_KEY": "x", "REDIS_URL": "redis://127.0.0.1:1/0",
                      "DATABASE_URL": f"sqlite:///{tmp_path / 'site.sqlite'}",
                      "SEMBOARD_INSTANCE_PATH": str(tmp_path / "instance")})
    assert boards.mode(app) == "rq"
    assert boards.start_groups_process(app) is False
    assert id(app) not in boards._groups_processes


def _compiles(app: Any, monkeypatch: Any) -> list[str]:
    """The templates app's Jinja environment compiles from now on (names, in order)."""
    compiled: list[str] = []
    real = app.jinja_env.compile
    monkeypatch.setattr(app.jinja_env, "compile", lambda source, name=None, *a, **k: (
        compiled.append(name) or real(source, name, *a, **k)))
    return compiled


def test_a_worker_compiles_every_template_at_its_start_not_on_a_request(
        app, client, world, monkeypatch):
    # a worker's first board page compiled five templates inside the first GET after an upload
    # (120 ms; the deployed benchmark found one in a measured sample)
    from semboard.serve import gunicorn_conf, preload

    phase, task = world["phase"], world["task"]
    compiled = _compiles(app, monkeypatch)
    steps: list[str] = []
    monkeypatch.setattr(preload, "preload", lambda: steps.append("preload") or [])
    gunicorn_conf.post_worker_init(SimpleNamespace(wsgi=app))
    assert set(compiled) == set(app.jinja_env.list_templates()) and len(compiled) > 50
    assert steps == ["preload"]  # after the templates: what preload() freezes includes them
    compiled.clear()
    for path in ("/tasks", f"/tasks/{task.name}", f"/tasks/{task.name}/leaderboard/{phase.slug}",
                 "/no-such-page", "/auth/login"):
        client.get(path)
    assert compiled == []
