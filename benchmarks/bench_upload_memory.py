"""Benchmark: peak memory and time of validating the largest run uploads (issue 21, finding 4).

Each case runs `validate_run` in a fresh subprocess, as an upload worker does after reading the
request: the task's inputs are loaded first, then the peak resident set is reset (Linux
/proc/self/clear_refs) and the run is validated. pyarrow (the fast reader of big files) is
loaded and warmed on another file first: a worker pays that once, not per upload. Printed per
case: the file's size and lines, whether it was accepted, the peak memory above the resident
set before validation (and as a multiple of the file's size), and the validation time.

Cases (one dataset of --pairs pairs, STS 2012 line format, upload limit 64 MiB):
  valid         a run as write_run writes it (6 decimals)
  valid-padded  the same scores padded to the largest allowed upload (just under 64 MiB)
  one-bad-line  valid-padded with one score that is not a number (the line-by-line reader)
  10x-lines     ten times too many lines ("0.5"), the shape of the reported 60 MiB file

    python benchmarks/bench_upload_memory.py [--pairs 1500000] [--case NAME]

With --stages, the processes of a deployed site instead (issue 45: each one's peak <= 3x the
file): a SQLite site of one --pairs dataset (bench_deployed's memory task) takes the
valid-padded run, each stage in its own fresh process, in order:
  web      the upload through the app's API (queue mode: admitted, validated, stored)
  worker   the queue worker's job: the stored run scored, its board stored
  groups   the significance groups of the board with the new run
  web2     the other team's upload on a fresh worker (the host cache now holds the inputs)
Each stage's process first loads what the deployed processes load at their start
(semboard.serve.preload: gunicorn's post_worker_init, `flask worker`, its groups process) and
serves one request. Printed per stage: the peak resident memory above the level before it, and
the peak of the memory Python itself allocated (tracemalloc, with --trace; slower), as
multiples of the file.

    python benchmarks/bench_upload_memory.py --stages [--pairs 1500000] [--trace] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

UPLOAD_LIMIT = 64 << 20
TASK = """
name = "bench"
[layout]
input = "STS.input.{dataset}.txt"
[scores]
min = 0
max = 5
[inputs]
format = "tsv"
columns = ["sentence1", "sentence2"]
id = "line"
[run]
filename = "STS.output.{dataset}.txt"
[metrics]
dataset = ["pearson"]
primary = "pearson"
ranking = "per_dataset"
[[datasets]]
name = "big"
"""
CASES = ("valid", "valid-padded", "one-bad-line", "10x-lines")
STAGES = ("web", "worker", "groups", "web2")


def _kib(field: str) -> int:
    """A VmRSS / VmHWM line of /proc/self/status, in KiB (0 where there is none)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def make_run(case: str, pairs: int) -> bytes:
    """The run file of a case."""
    import numpy as np

    scores = np.random.default_rng(0).uniform(0, 5, pairs)
    if case == "10x-lines":
        return b"0.5\n" * (pairs * 10)
    if case == "valid":
        return "".join(f"{v:.6f}\n" for v in scores.tolist()).encode()
    width = UPLOAD_LIMIT // pairs - 2  # digits per line: a valid number, as long as allowed
    body = "".join(f"{v:.{width - 2}f}\n" for v in scores.tolist()).encode()
    if case == "one-bad-line":
        at = body.index(b"\n", len(body) // 2) + 1
        body = body[:at] + b"x" + body[at + 1:]
    return body


def child(folder: Path, case: str) -> None:
    """In the subprocess: load the inputs, reset the peak, validate, print what it cost."""
    from evaluation import parse_task, read_inputs, validate_run
    from evaluation.fastparse import arrow_float_columns

    task = parse_task(TASK)
    inputs = {"big": read_inputs(task, "big", (folder / "STS.input.big.txt").read_bytes(),
                                 filename="STS.input.big.txt", texts=False)}
    data = (folder / f"{case}.txt").read_bytes()
    # A worker loads pyarrow and fills its memory pool on its first big upload, once: warm both
    # on another file so that the figure is what each upload costs.
    arrow_float_columns(b"1.5\n" * (1 << 20), 1)
    files = {"STS.output.big.txt": data}
    before = _kib("VmRSS")
    Path("/proc/self/clear_refs").write_text("5")  # the peak (VmHWM) starts from here
    started = time.perf_counter()
    run = validate_run(task, files, inputs)
    elapsed = time.perf_counter() - started
    peak = _kib("VmHWM") or resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"case": case, "bytes": len(data), "lines": data.count(b"\n"),
                      "ok": run.ok, "issues": [str(i) for i in run.issues[:2]],
                      "before_kib": before, "peak_kib": peak, "seconds": elapsed}))


def _site_app(folder: Path):  # type: ignore[no-untyped-def]
    """The app of the staged site: queue mode (no scoring in the request), groups queued."""
    from semboard import create_app

    return create_app({
        "DATABASE_URL": f"sqlite:///{folder / 'site.sqlite'}", "SECRET_KEY": "bench",
        "SEMBOARD_INSTANCE_PATH": str(folder / "instance"),
        "SEMBOARD_UPLOAD_DIR": str(folder / "uploads"),
        "SEMBOARD_HOST_CACHE": str(folder / "host-cache"),
        # groups go to a queue that is not there: the groups stage computes them itself
        "SEMBOARD_BOARD_JOBS": "rq", "REDIS_URL": "redis://127.0.0.1:9/0",
        "MAX_CONTENT_LENGTH": 2 * UPLOAD_LIMIT})


def _measured(work, trace: bool) -> dict[str, object]:  # type: ignore[no-untyped-def]
    """Run work() from a reset peak: resident peak above the level before (KiB), tracemalloc's."""
    import gc
    import tracemalloc

    gc.collect()
    if trace:
        tracemalloc.start()
    before = _kib("VmRSS")
    Path("/proc/self/clear_refs").write_text("5")
    started = time.process_time()
    result = work()
    cpu = time.process_time() - started
    peak = _kib("VmHWM")
    traced = tracemalloc.get_traced_memory()[1] if trace else 0
    tracemalloc.stop()
    return {"before_kib": before, "peak_kib": peak, "traced": traced, "cpu": cpu,
            "result": str(result)}


def stage_child(folder: Path, stage: str, trace: bool) -> None:
    """In the subprocess: one process's part of a large upload, measured."""
    import logging

    from semboard.jobs import boards, scoring
    from semboard.models import Run, Task
    from semboard.serve.preload import preload

    logging.disable(logging.WARNING)  # the missing queue is said once per upload
    app = _site_app(folder)
    boards.use_host_cache(app)
    tokens = json.loads((folder / "tokens.json").read_text())
    preload()  # what each deployed process loads at its start (gunicorn_conf, flask worker)
    client = app.test_client()
    client.get("/api/v1/tasks")  # a worker has served something before: imports, templates
    if stage in ("web", "web2"):
        token = tokens[0 if stage == "web" else 1]
        body = folder / f"body-{stage}"

        def work():  # type: ignore[no-untyped-def]
            with body.open("rb") as stream:
                answer = client.post(
                    "/api/v1/tasks/big/runs", input_stream=stream,
                    content_length=body.stat().st_size,
                    content_type=f"multipart/form-data; boundary={BOUNDARY}",
                    headers={"Authorization": f"Bearer {token}"})
            assert answer.status_code in (201, 202), answer.get_data()[:300]
            return answer.status_code
    else:
        with app.app_context():
            from semboard.db import get_session

            session = get_session()
            run_id = max(session.query(Run.id).all())[0]
            task_id = session.query(Task.id).filter_by(name="big").one()[0]

        def work():  # type: ignore[no-untyped-def]
            if stage == "worker":
                return scoring.score_run_now(app, run_id)
            return boards.compute_groups(app, task_id)
    print(json.dumps({"stage": stage, **_measured(work, trace)}))


BOUNDARY = "benchboundary7f3a"


def stages(pairs: int, trace: bool, keep: Path | None = None) -> None:
    """Seed a site, run each stage in its own process, print a table (keep: the site's folder,
    left for a closer look)."""
    from bench_deployed import seed_big  # imports this module: loaded only here

    with tempfile.TemporaryDirectory() as scratch:
        tmp = str(keep or scratch)
        folder = Path(tmp)
        tokens = seed_big(f"sqlite:///{folder / 'site.sqlite'}", folder, pairs)
        (folder / "tokens.json").write_text(json.dumps(tokens))
        data = make_run("valid-padded", pairs)
        size = len(data)
        for stage, run in (("web", "big-0"), ("web2", "big-1")):
            (folder / f"body-{stage}").write_bytes(
                f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="name"\r\n\r\n{run}'
                f'\r\n--{BOUNDARY}\r\nContent-Disposition: form-data; name="files"; '
                f'filename="STS.output.big.txt"\r\nContent-Type: text/plain\r\n\r\n'.encode()
                + data + f"\r\n--{BOUNDARY}--\r\n".encode())
        del data
        print(f"{pairs:,} pairs, the run file {size / 2**20:.1f} MiB; peak above the level "
              f"before each stage (load average {os.getloadavg()[0]:.1f})")
        print(f"{'stage':<8}{'before MiB':>11}{'peak MiB':>10}{'x file':>8}"
              f"{'traced MiB':>12}{'x file':>8}{'CPU s':>7}")
        for stage in STAGES:
            out = subprocess.run(
                [sys.executable, __file__, "--stage-child", tmp, stage, str(int(trace))],
                check=True, capture_output=True, text=True, env={**os.environ}).stdout
            r = json.loads(out.strip().splitlines()[-1])
            extra = (r["peak_kib"] - r["before_kib"]) * 1024
            print(f"{stage:<8}{r['before_kib'] / 1024:>11.0f}{extra / 2**20:>10.0f}"
                  f"{extra / size:>8.1f}{r['traced'] / 2**20:>12.0f}{r['traced'] / size:>8.1f}"
                  f"{r['cpu']:>7.2f}", flush=True)


def main() -> None:
    """Generate the data, run each case in its own process, print a table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=1_500_000)
    parser.add_argument("--case", choices=CASES, action="append")
    parser.add_argument("--stages", action="store_true")
    parser.add_argument("--trace", action="store_true")
    parser.add_argument("--keep", type=Path, help="the staged site's folder, kept afterwards")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--stage-child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(Path(args.child[0]), args.child[1])
        return
    if args.stage_child:
        stage_child(Path(args.stage_child[0]), args.stage_child[1],
                    args.stage_child[2] == "1")
        return
    if args.stages:
        stages(args.pairs, args.trace, args.keep)
        return
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "STS.input.big.txt").write_bytes(
            b"".join(b"s %d\tt %d\n" % (i, i) for i in range(args.pairs)))
        print(f"{args.pairs:,} pairs; peak = resident memory above the level before validation")
        print(f"{'case':<14}{'MiB':>8}{'lines':>12}  {'result':<9}{'peak MiB':>9}"
              f"{'x file':>8}{'seconds':>9}")
        for case in args.case or CASES:
            data = make_run(case, args.pairs)
            assert len(data) <= UPLOAD_LIMIT, (case, len(data))
            (folder / f"{case}.txt").write_bytes(data)
            del data
            out = subprocess.run([sys.executable, __file__, "--child", tmp, case], check=True,
                                 capture_output=True, text=True, env={**os.environ}).stdout
            r = json.loads(out.strip().splitlines()[-1])
            extra = (r["peak_kib"] - r["before_kib"]) / 1024
            print(f"{case:<14}{r['bytes'] / 2**20:>8.1f}{r['lines']:>12,}  "
                  f"{'accepted' if r['ok'] else 'refused':<9}{extra:>9.0f}"
                  f"{extra * 2**20 / r['bytes']:>8.1f}{r['seconds']:>9.2f}")
            for issue in r["issues"]:
                print(f"    {issue[:110]}")


if __name__ == "__main__":
    main()
