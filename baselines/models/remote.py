"""A remote model worker: a GPU host that encodes a task's models over the site's worker API.

    python -m baselines.models.remote --site https://site --token-file /etc/semboard/worker-token
    semboard worker --site https://site --token-file ...      (the same, from the participant CLI)

The host holds one secret: a worker token an organiser issued for the task's model queue
(`flask worker-tokens issue TASK NAME`, or the site admin's queue page), read from a file or
$SEMBOARD_WORKER_TOKEN, never from the command line. It needs no database, no storage keys and
nothing else of the site: it claims a model (POST /api/v1/worker/claim), downloads the job's
input files and the model's zip (checked against their sha256), encodes them with
`run_model_job` exactly as the site's own job does (the settings of the upload come in the job
description; device, dtype, threads and memory ceilings are this host's), beats its progress,
and posts the run files with their facts; the site submits the run as it submits its own.
"""

from __future__ import annotations

import argparse
import hashlib
import inspect
import json
import logging
import os
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urljoin

import requests

from baselines.models.archive import unpack_model_archive
from baselines.models.capabilities import Capabilities, host_capabilities
from baselines.models.job import JobBudget, ModelJobFailed, ModelRun, run_model_job
from baselines.models.progress import Heartbeat
from evaluation import DatasetInputs, ValidationError, parse_task, read_inputs

log = logging.getLogger("semboard.worker")

TOKEN_ENV = "SEMBOARD_WORKER_TOKEN"
API = "/api/v1/worker"
RETRIES = 5  # a post the site did not answer is sent again (the site answers repeats alike)
EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_AUTH, EXIT_NETWORK = 0, 1, 2, 3, 9
BLOCK = 1 << 20


class WorkerError(Exception):
    """A refusal the worker cannot go on after (a revoked token, a site it cannot reach)."""

    def __init__(self, message: str, code: int = EXIT_ERROR) -> None:
        super().__init__(message)
        self.message, self.code = message, code


def read_token(token_file: str | None, environ: dict[str, str] | None = None) -> str:
    """The worker token from a file (first line), else $SEMBOARD_WORKER_TOKEN."""
    environ = dict(os.environ) if environ is None else environ
    if token_file:
        try:
            lines = Path(token_file).read_text().strip().splitlines()
        except OSError as err:
            raise WorkerError(f"{token_file}: cannot read the worker token ({err.strerror})",
                              EXIT_USAGE) from None
        token = lines[0].strip() if lines else ""
        if not token:
            raise WorkerError(f"{token_file}: the file is empty", EXIT_USAGE)
        return token
    token = environ.get(TOKEN_ENV, "").strip()
    if not token:
        raise WorkerError(f"give the worker token: --token-file FILE or ${TOKEN_ENV}",
                          EXIT_USAGE)
    return token


class Site:
    """The site's worker API over HTTP(S), with the worker token on every request."""

    def __init__(self, base: str, token: str, *, timeout_s: float = 120.0,
                 http: Any = None) -> None:
        self.base = base.rstrip("/") + "/"
        self.timeout_s = timeout_s
        self.http = http or requests.Session()
        self.headers = {"Authorization": f"Bearer {token}",
                        "User-Agent": "semboard-model-worker"}

    def url(self, path: str) -> str:
        """An absolute URL of a site path (the site's own links keep any prefix it is under)."""
        return urljoin(self.base, path.lstrip("/") if path.startswith(API) else path)

    def call(self, method: str, path: str, *, retry: bool = False, stream: bool = False,
             **kwargs: Any) -> requests.Response:
        """One request; 401 raises WorkerError (the token is refused: stop); with retry, a
        network error, 5xx or 409 ("being submitted") is sent again with a growing pause."""
        for attempt in range(RETRIES if retry else 1):
            try:
                answer = self.http.request(method, self.url(path), headers=self.headers,
                                           timeout=self.timeout_s, stream=stream, **kwargs)
            except requests.RequestException as err:
                if attempt + 1 >= (RETRIES if retry else 1):
                    raise WorkerError(f"the site {self.base} could not be reached: {err}",
                                      EXIT_NETWORK) from None
                time.sleep(min(2 ** attempt, 30))
                continue
            if answer.status_code == 401:
                raise WorkerError(f"the site refused the worker token: {_message(answer)}",
                                  EXIT_AUTH)
            if retry and (answer.status_code >= 500 or answer.status_code == 409) and \
                    attempt + 1 < RETRIES:
                time.sleep(min(2 ** attempt, 30))
                continue
            return answer
        raise AssertionError("unreachable")


def _message(answer: requests.Response) -> str:
    try:
        return str(answer.json().get("error", answer.text))[:500]
    except ValueError:
        return answer.text[:500] or f"HTTP {answer.status_code}"


def _check(answer: requests.Response, what: str) -> requests.Response:
    if answer.status_code >= 400:
        raise ModelJobFailed(f"{what}: the site answered {answer.status_code}: "
                             f"{_message(answer)}")
    return answer


class RemoteReporter(Heartbeat):
    """A job's progress, posted with a heartbeat every beat_s seconds; `taken` is set when the
    site says the job is no longer this worker's (cancelled, queued again, token revoked)."""

    def __init__(self, site: Site, job: dict[str, Any], *, beat_s: float) -> None:
        # a beat is one post: it may take the site's timeout
        super().__init__(beat_s=beat_s, name=f"semboard-worker-beat-{job['model_id']}",
                         beat_timeout_s=site.timeout_s)
        self.site, self.job = site, job
        self.refused: WorkerError | None = None

    def beat(self) -> bool:
        """Post heartbeat + progress; False (and `taken` set) when the job was taken."""
        if self.taken.is_set():
            return False
        try:
            answer = self.site.call("POST", self.job["urls"]["progress"], json={
                "attempt": self.job["attempt"], "progress": self.snapshot()})
        except WorkerError as err:
            if err.code == EXIT_AUTH:  # revoked: stop at once
                self.refused = err
                self.taken.set()
            else:  # a missed beat: the next one may pass; the site's sweep decides
                log.warning("heartbeat failed: %s", err.message)
            return False
        if answer.status_code == 409:
            log.warning("model %s: %s", self.job["model_id"], _message(answer))
            self.taken.set()
            return False
        return answer.status_code == 200


@dataclass(frozen=True)
class Host:
    """This host's side of run_model_job: device, dtype, threads and memory ceilings, the
    longest texts it encodes; `declared`: the capabilities it claims with (None: asked of
    torch for this device and these ceilings)."""

    device: str = "auto"
    dtype: str | None = None
    threads: int | None = None
    memory_bytes: int = 16 << 30
    gpu_memory_bytes: int | None = None
    max_seq_length: int = 8192
    declared: Capabilities | None = None

    def settings(self) -> dict[str, Any]:
        """run_model_job's host keywords (the job's own settings come on top)."""
        return {"device": self.device, "dtype": self.dtype, "threads": self.threads}

    def capabilities(self) -> Capabilities:
        """What this host declares with each claim: the site hands it only models it can
        run (a CPU host is never given a float16 model)."""
        if self.declared is not None:
            return self.declared
        return host_capabilities(self.device, memory_bytes=self.memory_bytes,
                                 gpu_memory_bytes=self.gpu_memory_bytes,
                                 max_seq_length=self.max_seq_length)


def job_inputs(site: Site, job: dict[str, Any]) -> tuple[Any, dict[str, DatasetInputs]]:
    """The job's definition (its split) and parsed inputs, read as the site reads its own."""
    definition = parse_task(job["definition"], source=f"<definition of {job['task']}>")
    definition = definition.for_split(job["split"])
    found = {}
    for item in job["inputs"]:
        answer = _check(site.call("GET", job["urls"]["inputs"][item["dataset"]], retry=True),
                        f"input {item['filename']}")
        data = answer.content
        if hashlib.sha256(data).hexdigest() != item["sha256"]:
            raise ModelJobFailed(f"input {item['filename']} arrived damaged (sha256 differs)")
        found[item["dataset"]] = read_inputs(definition, item["dataset"], data,
                                             filename=item["filename"])
    return definition, found


def fetch_model(site: Site, job: dict[str, Any], path: Path) -> None:
    """The model's zip, block by block (a model may be larger than memory), sha256 checked."""
    answer = _check(site.call("GET", job["urls"]["model"], retry=True, stream=True), "model")
    digest = hashlib.sha256()
    with path.open("wb") as out:
        for block in answer.iter_content(BLOCK):
            digest.update(block)
            out.write(block)
    if digest.hexdigest() != job["archive"]["sha256"]:
        raise ModelJobFailed("the model's zip arrived damaged (sha256 differs)")


def job_settings(host: Host, job: dict[str, Any]) -> dict[str, Any]:
    """run_model_job's keywords: this host's, then the upload's (from the site) on top; a
    setting this worker's baselines does not know is refused (update the worker)."""
    settings = {**host.settings(),
                **{k: v for k, v in (job.get("settings") or {}).items() if v is not None}}
    known = set(inspect.signature(run_model_job).parameters)
    unknown = sorted(set(settings) - known)
    if unknown:
        raise ModelJobFailed(f"this worker does not know the setting(s) {', '.join(unknown)}: "
                             "update its semboard to the site's version")
    return settings


def encode(site: Site, host: Host, job: dict[str, Any], reporter: RemoteReporter,
           encoder: Callable[..., ModelRun] = run_model_job) -> ModelRun:
    """Download the job's inputs and model and encode them, as the site's own job does."""
    definition, inputs = job_inputs(site, job)
    reporter.line("inputs downloaded")
    budget = JobBudget(time_s=float(job["budget"]["time_s"]), memory_bytes=host.memory_bytes,
                       gpu_memory_bytes=host.gpu_memory_bytes)
    settings = job_settings(host, job)
    with tempfile.TemporaryDirectory(prefix="semboard-worker-") as tmp:
        archive = Path(tmp) / "model.zip"
        fetch_model(site, job, archive)
        reporter.line("model downloaded")
        try:
            folder = unpack_model_archive(archive, Path(tmp) / "model")
        except ValidationError as err:
            raise ModelJobFailed(f"the stored model could not be unpacked: {err}") from None
        return encoder(folder, definition, inputs, budget=budget, progress=reporter.on_event,
                       stop=reporter.taken, **settings)


def run_job(site: Site, host: Host, job: dict[str, Any]) -> dict[str, Any]:
    """Encode one claimed job and post its run (or its failure); the site's answer."""
    reporter = RemoteReporter(site, job, beat_s=float(job.get("beat_s") or 10.0))
    reporter.start()
    result: ModelRun | None = None
    failure: ModelJobFailed | None = None
    try:
        result = encode(site, host, job, reporter)
        reporter.line("encoded; sending the run")
        reporter.ended("sending")
    except ModelJobFailed as err:
        failure = err
    except WorkerError:
        raise
    except Exception as err:  # the job must end on the site, not stay "running"
        log.exception("model %s failed", job["model_id"])
        failure = ModelJobFailed(f"{type(err).__name__}: {err}")
    finally:
        reporter.stop()
    if reporter.refused is not None:
        raise reporter.refused
    if failure is not None:
        if failure.kind == "cancelled" and reporter.taken.is_set():
            return {"model_id": job["model_id"], "status": "taken", "reason": failure.reason}
        answer = site.call("POST", job["urls"]["failure"], retry=True, json={
            "attempt": job["attempt"], "kind": failure.kind, "reason": failure.reason})
    else:
        assert result is not None
        answer = site.call(
            "POST", job["urls"]["result"], retry=True,
            data={"attempt": str(job["attempt"]), "metadata": json.dumps(result.metadata)},
            files=[("files", (name, data, "text/plain"))
                   for name, data in sorted(result.files.items())])
        if answer.status_code == 422:  # the site refused the run's facts: the job ends failed
            answer = site.call("POST", job["urls"]["failure"], retry=True, json={
                "attempt": job["attempt"], "kind": "internal",
                "reason": f"the site refused this worker's result: {_message(answer)}"})
    if answer.status_code != 200:
        return {"model_id": job["model_id"], "status": "refused",
                "reason": f"{answer.status_code}: {_message(answer)}"}
    return dict(answer.json())


def serve(site: Site, host: Host, *, once: bool = False, burst: bool = False,
          poll_s: float = 10.0, out: Callable[[str], None] = print) -> int:
    """Claim and run the queue's models until stopped (once: one job; burst: until the queue
    is empty); the number of jobs run."""
    me = site.call("GET", f"{API}/me", retry=True)
    if me.status_code != 200:
        raise WorkerError(f"the site answered {me.status_code}: {_message(me)}")
    who = me.json()
    caps = host.capabilities()
    out(f"worker {who['name']!r}: serving the model queue of task {who['task']} on "
        f"{site.base} (device {host.device}; declares {caps.summary()})")
    runs = 0
    while True:
        try:
            answer = site.call("POST", f"{API}/claim", retry=True,
                               json={"capabilities": caps.to_dict()})
        except WorkerError as err:
            if err.code != EXIT_NETWORK or once or burst:
                raise
            # a serving worker outlives an outage of the site: it asks again later
            log.warning("%s; trying again in %g s", err.message, poll_s)
            time.sleep(poll_s)
            continue
        if answer.status_code == 204:
            if once or burst:
                out("nothing queued")
                return runs
            time.sleep(poll_s)
            continue
        if answer.status_code != 200:
            raise WorkerError(f"claim refused: {answer.status_code}: {_message(answer)}")
        job = answer.json()
        out(f"model {job['model_id']} ({job['name']}, attempt {job['attempt']}): encoding "
            f"{sum(1 for _ in job['inputs'])} dataset(s)")
        state = run_job(site, host, job)
        runs += 1
        out(f"model {state['model_id']}: {state['status']}"
            + (f", run {state['run_id']}" if state.get("run_id") else "")
            + (f" ({state['reason']})" if state.get("reason") else ""))
        if once:
            return runs


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The worker's options (shared by `semboard worker` and this module's command)."""
    parser.add_argument("--site", help="the site's address, https://...")
    parser.add_argument("--token-file", help=f"a file holding the worker token (default: "
                        f"${TOKEN_ENV}); never give the token itself on the command line")
    parser.add_argument("--device", default="auto", help="auto (CUDA when present), cpu, "
                        "cuda or cuda:N")
    parser.add_argument("--dtype", choices=["float16", "bfloat16", "float32"],
                        help="weights and activations (default: float16 on CUDA, float32 on CPU;"
                        " a dtype the upload or phase fixes wins)")
    parser.add_argument("--threads", type=int, help="CPU threads of the encoding (default: "
                        "torch's)")
    parser.add_argument("--memory-mb", type=int, default=16384,
                        help="resident memory ceiling of an encoding process (default 16384)")
    parser.add_argument("--gpu-memory-mb", type=int, default=0,
                        help="the job's share of the GPU's memory (default 0: all of it)")
    parser.add_argument("--max-seq-length", type=int, default=8192,
                        help="the longest texts (tokens) this host encodes: the site hands it "
                             "no model cut longer (default 8192)")
    parser.add_argument("--poll-s", type=float, default=10.0,
                        help="how long to wait when nothing is queued (default 10)")
    parser.add_argument("--once", action="store_true", help="run one job, then stop")
    parser.add_argument("--burst", action="store_true", help="stop once the queue is empty")


def run(args: argparse.Namespace) -> int:
    """Run the worker from parsed options; an exit code."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    try:
        if not args.site:
            raise WorkerError("give the site: --site https://...", EXIT_USAGE)
        site = Site(args.site, read_token(args.token_file))
        host = Host(device=args.device, dtype=args.dtype, threads=args.threads,
                    memory_bytes=args.memory_mb << 20,
                    gpu_memory_bytes=args.gpu_memory_mb << 20 if args.gpu_memory_mb > 0
                    else None, max_seq_length=args.max_seq_length)
        serve(site, host, once=args.once, burst=args.burst, poll_s=args.poll_s)
    except WorkerError as err:
        print(f"error: {err.message}", file=sys.stderr)
        return err.code
    except KeyboardInterrupt:
        return 130
    return EXIT_OK


def main(argv: list[str] | None = None, prog: str = "python -m baselines.models.remote") -> int:
    """`python -m baselines.models.remote` (and `semboard worker`)."""
    # no abbreviations: `--token SECRET` must be refused, not read as --token-file
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0],
                                     allow_abbrev=False)
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
