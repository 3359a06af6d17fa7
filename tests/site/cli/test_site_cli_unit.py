"""Pieces of the participant CLI that need no server: progress bar, multipart, run folders."""

from __future__ import annotations

import io
import os
import sys
from pathlib import Path
from typing import ClassVar

import pytest

from semboard_cli import client, main


class FakeTty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_bar_follows_the_upload(monkeypatch):
    seen: list[tuple[int, int]] = []
    body = client.ProgressBody(b"x" * 20_000, lambda sent, total: seen.append((sent, total)))
    assert len(body) == 20_000
    chunks = []
    while block := body.read(8192):
        chunks.append(block)
    assert b"".join(chunks) == b"x" * 20_000
    assert [s for s, _ in seen][:3] == [8192, 16384, 20_000]
    tty = FakeTty()
    monkeypatch.setattr(sys, "stderr", tty)
    client.draw_progress(10, 20)
    client.draw_progress(20, 20)
    assert " 50%" in tty.getvalue() and "100%" in tty.getvalue() and tty.getvalue().endswith("\n")


def test_multipart_body_carries_fields_and_files():
    body, content_type = client.multipart({"name": "r1"}, {"a.txt": b"1\n", "b.txt": b"2\n"})
    boundary = content_type.split("boundary=")[1]
    assert body.count(f"--{boundary}".encode()) == 4
    assert b'name="files"; filename="a.txt"' in body and b"\r\n1\n\r\n" in body


def test_run_folder_reading(tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "a.txt").write_text("1\n")
    (tmp_path / "run" / ".hidden").write_text("x")
    assert main._read_run(tmp_path / "run") == {"a.txt": b"1\n"}
    with pytest.raises(client.CliError) as err:
        main._read_run(tmp_path / "missing")
    assert err.value.code == client.EXIT_NOT_FOUND


def test_a_run_folder_with_subfolders_travels_as_one_zip_keeping_them(tmp_path):
    """answer/task1/english.txt and answer/task2/english.txt (issue 46): zipped, not flattened."""
    import io
    import zipfile

    for sub in ("task1", "task2"):
        (tmp_path / "answer" / sub).mkdir(parents=True)
        (tmp_path / "answer" / sub / "english.txt").write_text(f"w\t{sub[-1]}\n")
    (files,) = [main._read_run(tmp_path / "answer")]
    assert list(files) == ["answer.zip"]
    with zipfile.ZipFile(io.BytesIO(files["answer.zip"])) as zf:
        assert sorted(zf.namelist()) == ["answer/task1/english.txt", "answer/task2/english.txt"]
        assert zf.read("answer/task2/english.txt") == b"w\t2\n"


def test_usage_errors_exit_2_and_help_lists_exit_codes(capsys):
    with pytest.raises(SystemExit) as err:
        main.main(["submit", "tiny"])
    assert err.value.code == 2
    with pytest.raises(SystemExit):
        main.main(["--help"])
    assert "exit codes" in capsys.readouterr().out


def test_unreachable_site_exits_9(tmp_path, monkeypatch):
    from site_net import free_port

    monkeypatch.setenv("SEMBOARD_CONFIG", str(tmp_path / "c.json"))
    code = main.main(["--url", f"http://127.0.0.1:{free_port()}", "tasks"])
    assert code == client.EXIT_NETWORK


def test_a_closed_pipe_ends_quietly(tmp_path):
    """`semboard leaderboard demo | head`: the reader leaving early is exit 0, no traceback."""
    import subprocess
    import sys

    code = ("import semboard_cli.main as m\n"
            "m.cmd_tasks = lambda args: [m._out('line') for _ in range(100000)] and 0\n"
            "raise SystemExit(m.main(['tasks']))\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, cwd=Path(__file__).resolve().parents[3],
                            env={**os.environ, "SEMBOARD_CONFIG": str(tmp_path / "c.json")})
    assert proc.stdout is not None
    proc.stdout.readline()
    proc.stdout.close()
    err = proc.stderr.read() if proc.stderr else b""
    assert proc.wait(timeout=60) == 0, err
    assert b"Traceback" not in err


class _FakeApi:
    """Answers the task detail and records the upload's multipart body."""

    def __init__(self, run_filename: str, team_run_filename: str | None = None) -> None:
        self.run_filename = run_filename
        self.team_run_filename = team_run_filename
        self.body = b""

    def get_json(self, path: str) -> dict[str, object]:
        return {"name": "t", "datasets": [{"name": "a", "run_filename": self.run_filename,
                                           "team_run_filename": self.team_run_filename}]}

    def request(self, method: str, path: str, data: object, headers: object) -> object:
        self.body = bytes(data.read(1 << 20))  # type: ignore[attr-defined]

        class Answer:
            headers: ClassVar[dict[str, str]] = {}

            def json(self) -> dict[str, object]:
                return {"name": "r1", "id": 1, "status": "scored", "phase": "test",
                        "task": "t"}
        return Answer()


@pytest.mark.parametrize(("pattern", "name", "sent", "code"), [
    ("OUT.{run}.a.txt", None, None, 0),  # the site reads the name from the files
    ("OUT.{run}.a.txt", "r1", b"r1", 0),  # a given name is sent for the site to check
    ("{dataset}.txt", "r1", b"r1", 0),
    ("{dataset}.txt", None, None, client.EXIT_USAGE),  # nothing would name the run
])
def test_submit_sends_no_name_when_file_names_carry_it(tmp_path, monkeypatch, capsys,
                                                      pattern, name, sent, code):
    api = _FakeApi(pattern)
    monkeypatch.setattr(main, "_api", lambda args: api)
    (tmp_path / "OUT.r1.a.txt").write_text("1\n")
    argv = ["submit", "t", str(tmp_path / "OUT.r1.a.txt")] + (["--name", name] if name else [])
    assert main.main(argv) == code
    if code:
        assert "--name is required" in capsys.readouterr().err
        return
    has_name = b'name="name"' in api.body
    assert has_name == (sent is not None)
    if sent:
        assert b'name="name"\r\n\r\n' + sent in api.body


def test_submit_reads_the_name_from_team_filename_alone(tmp_path, monkeypatch):
    """{run} only in run.team_filename (issue 31): no --name needed, none sent."""
    api = _FakeApi("{dataset}.txt", "OUT.{team}.{run}.a.txt")
    monkeypatch.setattr(main, "_api", lambda args: api)
    (tmp_path / "OUT.T.r1.a.txt").write_text("1\n")
    assert main.main(["submit", "t", str(tmp_path / "OUT.T.r1.a.txt")]) == 0
    assert b'name="name"' not in api.body
