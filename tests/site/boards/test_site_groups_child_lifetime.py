"""A significance-groups child ends with the process that spawned it (issue 40): a web worker
killed at shutdown (SIGKILL, as gunicorn does after its graceful timeout) leaves no child
computing on a stopped site's database. The parent is a real process, killed for real; its child
is held on a table lock so it would otherwise outlive it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest

PROJECT_ROOT = Path(__file__).resolve().parents[3]

PARENT = """
import multiprocessing, sys, time
from semboard import create_app
from semboard.jobs import boards
app = create_app({"TESTING": True, "SECRET_KEY": "x", "DATABASE_URL": sys.argv[1],
                  "SEMBOARD_INSTANCE_PATH": sys.argv[2], "SEMBOARD_UPLOAD_DIR": sys.argv[3],
                  "SEMBOARD_BOARD_JOBS": "process", "SEMBOARD_GROUPS_DELAY_S": 0})
boards.schedule_groups(app, int(sys.argv[4]))
while not multiprocessing.active_children():
    time.sleep(0.05)
print(multiprocessing.active_children()[0].pid, flush=True)
time.sleep(600)
"""


def _alive(pid: int) -> bool:
    """Running (a zombie waiting for a reaper has ended)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state not in ("Z", "X")


@pytest.mark.postgres
@pytest.mark.parametrize("database_url", ["postgres"], indirect=True)
def test_the_groups_child_ends_when_its_parent_is_killed(database_url, world, tmp_path):
    plain = database_url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(plain) as lock:
        # the child's first read (the task) waits on this lock for as long as it is held
        lock.execute("LOCK TABLE task IN ACCESS EXCLUSIVE MODE")
        parent = subprocess.Popen(
            [sys.executable, "-c", PARENT, database_url, str(tmp_path / "instance"),
             str(tmp_path / "uploads"), str(world["task"].id)],
            cwd=PROJECT_ROOT, env={**os.environ, "PYTHONPATH": str(PROJECT_ROOT)},
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        child = 0
        try:
            line = parent.stdout.readline() if parent.stdout else ""
            assert line.strip().isdigit(), parent.stderr.read() if parent.stderr else line
            child = int(line)
            deadline = time.monotonic() + 60
            waiting = 0
            while not waiting and time.monotonic() < deadline:  # the child is at its work
                waiting = lock.execute(
                    "SELECT count(*) FROM pg_locks WHERE NOT granted AND pid <> "
                    "pg_backend_pid()").fetchone()[0]
                time.sleep(0.1)
            assert waiting and _alive(child)
            parent.send_signal(signal.SIGKILL)
            parent.wait(timeout=30)
            deadline = time.monotonic() + 10
            while _alive(child) and time.monotonic() < deadline:
                time.sleep(0.1)
            assert not _alive(child), "the groups child outlived its killed parent"
        finally:
            if parent.poll() is None:
                parent.kill()
                parent.wait()
            if child and _alive(child):
                os.kill(child, signal.SIGKILL)
            lock.rollback()
