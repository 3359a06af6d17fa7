"""Fuzz over real HTTP: a generated corpus of malformed uploads against gunicorn workers.

Every upload must get a 4xx naming the file and the problem, leave no run and no stored file,
never a 500, and no worker may die or grow past a memory bound (a zip bomb included).
"""

from __future__ import annotations

import io
import json
import os
import random
import signal
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
import zipfile
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import func, select
from test_site_gunicorn import PROJECT_ROOT, _free_port, _wait_until_serving, databases

from semboard.models import Run, RunFile, UploadLog
from semboard.services.people import accounts

WORKERS = 2
# Peak resident memory a worker may reach over the whole corpus (the bomb alone is 300 MB).
MAX_WORKER_RSS = 400 << 20


@dataclass
class Case:
    """One malformed upload: its parts, and what the answer must mention."""

    label: str
    parts: list[tuple[str, bytes]]
    mention: str
    name: str = "fuzz"


def _zip(entries: list[tuple[str, bytes]], method: int = zipfile.ZIP_DEFLATED) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=method) as zf:
        for name, data in entries:
            zf.writestr(zipfile.ZipInfo(name), data, compress_type=method)
    return buf.getvalue()


def corpus(good: dict[str, bytes]) -> list[Case]:
    """At least 200 malformed uploads, each invalid in one identifiable way."""
    alpha, beta = "STS.output.alpha.txt", "STS.output.beta.txt"
    ok_alpha, ok_beta = good[alpha], good[beta]
    lines = ok_alpha.decode().splitlines()
    rng = random.Random(7)
    cases: list[Case] = []

    def with_alpha(label: str, data: bytes, mention: str = alpha) -> None:
        cases.append(Case(label, [(alpha, data), (beta, ok_beta)], mention))

    def line_at(k: int, token: str) -> bytes:
        changed = list(lines)
        changed[k] = token
        return ("\n".join(changed) + "\n").encode("utf-8")

    # NaN, infinity and not-quite-number spellings, at the first, a middle and the last line.
    tokens = ["nan", "NaN", "-nan", "+NaN", "NAN", "nan(0x1)", "NaNQ", "1.#QNAN", "#N/A", "N/A",
              "null", "None", "-", "", " ", "inf", "-Infinity", "1e999", "0x1p3", "1_000",
              "١", "５", "1.2.3", "1e", ".", "+", "3 4", "1,5", "−1", "6", "-0.5", "5.0001",
              "1e6", "true", "'3'", '"3"', "3;", "3x", "0b11"]
    for k in (0, 14, 29):
        for token in tokens:
            with_alpha(f"token {token!r} at line {k + 1}", line_at(k, token))
    beta_lines = ok_beta.decode().splitlines()
    for token in tokens:
        changed = [*beta_lines[:9], token, *beta_lines[10:]]
        cases.append(Case(f"beta token {token!r}", [(alpha, ok_alpha),
                                                    (beta, ("\n".join(changed) + "\n").encode())],
                          beta))
    # Encodings and binary content.
    text = ok_alpha.decode()
    with_alpha("utf-16 with BOM", text.encode("utf-16"))
    with_alpha("utf-16-le without BOM", text.encode("utf-16-le"))
    with_alpha("utf-16-be without BOM", text.encode("utf-16-be"))
    with_alpha("utf-32", text.encode("utf-32"))
    with_alpha("latin-1 byte", line_at(3, "2,5\xe9").decode().encode("latin-1"))
    with_alpha("invalid utf-8", ok_alpha[:20] + b"\xff\xfe\xfa\n" + ok_alpha[20:])
    with_alpha("NUL in a line", ok_alpha.replace(b"\n", b"\x00\n", 1))
    with_alpha("png header", b"\x89PNG\r\n\x1a\n" + bytes(200))
    for size in (1, 10, 1000, 100_000):
        with_alpha(f"{size} random bytes", rng.randbytes(size))
    with_alpha("empty file", b"")
    with_alpha("only newlines", b"\n\n\n")
    with_alpha("BOM only", b"\xef\xbb\xbf")
    with_alpha("huge line", b"1" * 5_000_000 + b"\n" + ok_alpha)
    with_alpha("huge number line", b"0." + b"1" * 2_000_000 + b"\n" * 30)
    with_alpha("one line too many", ok_alpha + b"1\n")
    with_alpha("one line too few", b"\n".join(ok_alpha.split(b"\n")[:28]) + b"\n")
    with_alpha("a million lines", b"1\n" * 1_000_000)
    # Columns and confidences.
    with_alpha("third column", b"1\t50\textra\n" + b"1\t50\n" * 29)
    with_alpha("confidence on some lines", b"1\t50\n" * 3 + b"1\n" * 27)
    with_alpha("confidence 0", b"1\t0\n" * 30)
    with_alpha("confidence 101", b"1\t101\n" * 30)
    with_alpha("confidence nan", b"1\tnan\n" * 30)
    with_alpha("confidence word", b"1\thigh\n" * 30)
    with_alpha("many tabs", b"\t" * 10_000 + b"\n" + b"1\n" * 29)
    # File names.
    cases.append(Case("unknown name", [("run.txt", ok_alpha), (beta, ok_beta)], "run.txt"))
    cases.append(Case("unknown dataset", [("STS.output.gamma.txt", ok_alpha), (alpha, ok_alpha),
                                          (beta, ok_beta)], "STS.output.gamma.txt"))
    cases.append(Case("other team token", [("STS.output.alpha.other.txt", ok_alpha),
                                           (beta, ok_beta)], "STS.output.alpha.other.txt"))
    cases.append(Case("missing beta", [(alpha, ok_alpha)], beta))
    cases.append(Case("duplicate upload names", [(alpha, ok_alpha), (alpha, ok_alpha),
                                                 (beta, ok_beta)], alpha))
    cases.append(Case("two files for one dataset", [(alpha, ok_alpha),
                                                    ("STS.output.alpha.fuzzers.txt", ok_alpha),
                                                    (beta, ok_beta)], "alpha"))
    cases.append(Case("hidden file only", [("." + alpha, ok_alpha), (beta, ok_beta)], alpha))
    cases.append(Case("no file name", [("", ok_alpha), (beta, ok_beta)], "file name"))
    cases.append(Case("no files", [], "files"))
    # Archives.
    traversal = ["../" + alpha, "../../" + alpha, "a/../../" + alpha, "/tmp/" + alpha,
                 "/" + alpha, "C:\\temp\\" + alpha, "\\\\server\\share\\" + alpha,
                 "..\\" + alpha, "./../" + alpha]
    for entry in traversal:
        cases.append(Case(f"zip entry {entry!r}", [("run.zip", _zip([(entry, ok_alpha),
                                                                      (beta, ok_beta)]))],
                          "run.zip"))
    bomb = _zip([(alpha, b"0" * (300 << 20))])
    cases.append(Case("zip bomb", [("run.zip", bomb)], "run.zip"))
    cases.append(Case("zip bomb beside a good file", [("bomb.zip", bomb), (beta, ok_beta)],
                      "bomb.zip"))
    cases.append(Case("zip of 1001 entries",
                      [("many.zip", _zip([(f"f{i}.txt", b"1") for i in range(1001)]))],
                      "many.zip"))
    cases.append(Case("zip with duplicate base names",
                      [("dup.zip", _zip([("a/" + alpha, ok_alpha), ("b/" + alpha, ok_alpha),
                                         (beta, ok_beta)]))], "dup.zip"))
    cases.append(Case("zip and loose file of one name",
                      [("run.zip", _zip([(alpha, ok_alpha)])), (alpha, ok_alpha),
                       (beta, ok_beta)], alpha))
    nested = _zip([("inner.zip", _zip([(alpha, ok_alpha), (beta, ok_beta)]))])
    cases.append(Case("nested zip", [("outer.zip", nested)], "inner.zip"))
    cases.append(Case("empty zip", [("empty.zip", _zip([]))], "STS.output"))
    cases.append(Case("truncated zip", [("cut.zip", _zip([(alpha, ok_alpha)])[:50])], "cut.zip"))
    cases.append(Case("not a zip", [("fake.zip", b"PK\x03\x04 not really")], "fake.zip"))
    stored = bytearray(_zip([(alpha, ok_alpha), (beta, ok_beta)], zipfile.ZIP_STORED))
    stored[stored.index(b"alpha") + 40] ^= 0xFF  # a flipped byte: the CRC check fails
    cases.append(Case("zip with a bad CRC", [("crc.zip", bytes(stored))], "crc.zip"))
    encrypted = bytearray(_zip([(alpha, ok_alpha)], zipfile.ZIP_STORED))
    encrypted[6] |= 1
    encrypted[encrypted.rindex(b"PK\x01\x02") + 8] |= 1
    cases.append(Case("encrypted zip", [("secret.zip", bytes(encrypted)), (beta, ok_beta)],
                      "secret.zip"))
    cases.append(Case("zip of binary", [("bin.zip", _zip([(alpha, rng.randbytes(3000)),
                                                          (beta, ok_beta)]))], alpha))
    cases.append(Case("zip of utf-16", [("u16.zip", _zip([(alpha, text.encode("utf-16")),
                                                          (beta, ok_beta)]))], alpha))
    # Run names (the file names are fine; the answer names the problem).
    for name in ("", "   ", "x" * 101, "bad\x01name", "tab\tname"):
        cases.append(Case(f"run name {name[:10]!r}", [(alpha, ok_alpha), (beta, ok_beta)],
                          "name", name=name))
    return cases


def _multipart(fields: dict[str, str], parts: list[tuple[str, bytes]]) -> tuple[bytes, str]:
    boundary = uuid.uuid4().hex
    chunks = [f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'
              .encode() for k, v in fields.items()]
    for filename, data in parts:
        quoted = filename.replace("\\", "\\\\").replace('"', '\\"')
        chunks.append(f'--{boundary}\r\nContent-Disposition: form-data; name="files"; '
                      f'filename="{quoted}"\r\nContent-Type: application/octet-stream\r\n\r\n'
                      .encode() + data + b"\r\n")
    chunks.append(f"--{boundary}--\r\n".encode())
    return b"".join(chunks), f"multipart/form-data; boundary={boundary}"


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return sorted(found)


def _peak_rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


@databases
def test_malformed_uploads_over_http_get_clear_4xx_and_change_nothing(
        make, session, tmp_path, database_url):
    real_now = datetime.now(UTC)
    task = make.task(with_gold=True)
    make.phase(task, opens_at=real_now - timedelta(days=1),
               closes_at=real_now + timedelta(days=10), max_runs=3)
    _team, captain = make.team(task, "fuzzers")
    token = accounts.create_api_token(session, user=captain, name="fuzz", now=real_now)
    session.commit()
    cases = corpus(make.tiny.run(seed=1))
    assert len(cases) >= 200
    session.close()

    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    log = tmp_path / "gunicorn.log"
    uploads_dir = tmp_path / "uploads"
    before = {p for p in uploads_dir.rglob("*") if p.is_file()}
    env = {**os.environ, "DATABASE_URL": database_url, "SEMBOARD_UPLOAD_DIR": str(uploads_dir),
           "SEMBOARD_INSTANCE_PATH": str(tmp_path / "instance"), "SECRET_KEY": "fuzz",
           "PYTHONPATH": str(PROJECT_ROOT)}
    failures: list[str] = []
    with log.open("wb") as log_file:
        server = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "--workers", str(WORKERS), "--bind",
             f"127.0.0.1:{port}", "--timeout", "120", "app:app"],
            cwd=PROJECT_ROOT, env=env, stdout=log_file, stderr=subprocess.STDOUT,
        )
    try:
        _wait_until_serving(base, server, log)
        workers = _children(server.pid)
        assert len(workers) == WORKERS
        for case in cases:
            body, content_type = _multipart({"name": case.name}, case.parts)
            request = urllib.request.Request(
                f"{base}/api/v1/tasks/tiny/runs", data=body, method="POST",
                headers={"Content-Type": content_type, "Authorization": f"Bearer {token}"})
            try:
                with urllib.request.urlopen(request, timeout=120) as response:
                    status, answer = response.status, response.read()
            except urllib.error.HTTPError as err:
                status, answer = err.code, err.read()
            except OSError as err:  # the connection dropped: a worker died
                failures.append(f"{case.label}: no answer ({err})")
                continue
            try:
                payload = json.loads(answer)
            except ValueError:
                failures.append(f"{case.label}: {status} with a non-JSON body {answer[:200]!r}")
                continue
            text = json.dumps(payload, ensure_ascii=False)
            if not 400 <= status < 500:
                failures.append(f"{case.label}: status {status}: {text[:300]}")
            elif case.mention not in text or not payload.get("error"):
                failures.append(f"{case.label}: {status} does not name {case.mention!r}: "
                                f"{text[:300]}")
        assert _children(server.pid) == workers, "a worker died and was replaced"
        peaks = {pid: _peak_rss(pid) for pid in workers}
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)

    assert not failures, "\n".join(failures[:40])
    assert max(peaks.values()) < MAX_WORKER_RSS, peaks
    assert "Traceback" not in log.read_text(errors="replace")
    with make.session.begin():
        assert make.session.scalar(select(func.count()).select_from(Run)) == 0
        assert make.session.scalar(select(func.count()).select_from(RunFile)) == 0
        outcomes = set(make.session.scalars(select(UploadLog.outcome)))
    assert outcomes <= {"rejected"}
    assert {p for p in uploads_dir.rglob("*") if p.is_file()} == before, "files were stored"
