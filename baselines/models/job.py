"""An encoding job: a checked model scores a task's inputs in its own process, under a budget.

The child is a fresh interpreter (`python -m baselines.models`: it shares no state, threads or
`__main__` with the caller, be it an rq worker or a web process). It checks the folder again,
loads the model, encodes every dataset and sends back the run files in the task's own format
plus metadata over a pipe. The parent enforces a wall-time budget and a resident-memory ceiling
by watching the child and killing it; a child that dies for any reason becomes a
ModelJobFailed with a clear reason, never a hang.
"""

from __future__ import annotations

import contextlib
import os
import platform
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from multiprocessing.connection import Connection
from pathlib import Path
from typing import IO, Any, Literal, cast

import numpy as np

from baselines.embedding import gpu_driver_version, resolve_device
from baselines.models.check import ModelLimits, check_model
from baselines.models.encode import ModelEncoder, library_versions
from baselines.models.settings import EncodingSettings, SettingsError, device_dtype
from baselines.signature import baseline_signature
from evaluation import DatasetInputs, TaskDefinition, load_task, write_run

# how a cosine in [-1, 1] becomes a score in the task's range
Mapping_ = Literal["clip", "linear"]
POLL_S = 0.05  # how often the parent looks at the child's memory and the clock
PROJECT_ROOT = Path(__file__).resolve().parents[2]


class ModelJobFailed(Exception):
    """An encoding job that produced no run; `reason` says why in one sentence, `kind` is its
    class: refused, too_slow, out_of_memory, worker_lost, cancelled or internal."""

    def __init__(self, reason: str, kind: str = "internal") -> None:
        super().__init__(reason)
        self.reason = reason
        self.kind = kind


@dataclass(frozen=True)
class JobBudget:
    """What one encoding job may use: wall time (load included) and resident memory."""

    time_s: float = 3600.0
    memory_bytes: int = 16 << 30
    # a CUDA job's share of the GPU; None: what the device has free when the job starts
    # (torch.cuda.mem_get_info, read by the encoding process)
    gpu_memory_bytes: int | None = None


@dataclass
class JobEvent:
    """Progress of a job: stage ("spawned", "started", "loaded", "encoding", "dataset": one
    dataset ended, after `seconds`), pairs done of the total, the child's process id, and its
    peak resident memory so far (set by the supervising parent)."""

    stage: str
    done: int
    total: int
    pid: int
    dataset: str = ""
    seconds: float = 0.0
    peak_rss: int = 0


@dataclass
class ModelRun:
    """The run files a model produced on a task, and how they were produced."""

    files: dict[str, bytes]
    metadata: dict[str, Any] = field(default_factory=dict)


def cosine_to_scores(cos: np.ndarray, lo: float, hi: float, mapping: Mapping_ = "clip"
                     ) -> np.ndarray:
    """Cosine → task range: "clip" maps [0, 1] onto [lo, hi] (negatives to lo, as the embedding
    baseline does); "linear" maps [-1, 1] onto it."""
    cos = np.asarray(cos, dtype=np.float64)
    sim = np.clip(cos, 0.0, 1.0) if mapping == "clip" else (np.clip(cos, -1.0, 1.0) + 1) / 2
    return lo + sim * (hi - lo)


def clipped_pairs(cos: np.ndarray, mapping: Mapping_) -> int:
    """How many cosines the mapping moved: negatives under "clip" (all mapped to the range's
    low end); none under "linear", which keeps every difference."""
    return int(np.count_nonzero(np.asarray(cos) < 0)) if mapping == "clip" else 0


def model_task_problem(task: TaskDefinition, datasets: Iterable[str]) -> str | None:
    """Why a model cannot answer these datasets of the task (None when it can): an encoder's
    cosine of two texts becomes a score, never a class label nor a one-text item's score."""
    names = list(datasets)
    labelled = [d for d in names if task.dataset(d).gold.classes]
    if labelled:
        return (f"dataset(s) {', '.join(labelled)} of {task.name} take class labels; a model's "
                "cosine similarity gives scores, so the model track cannot answer them")
    single = [d for d in names if task.dataset(d).inputs.single_text]
    if single:
        return (f"dataset(s) {', '.join(single)} of {task.name} have one text an item (a target "
                "word), not a pair whose cosine similarity an encoder could give")
    return None


def _rss_bytes(pid: int) -> int | None:
    """Resident memory of a process from /proc (Linux); None when it cannot be read."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        return None
    return None


def child_main(request_fd: int, reply_fd: int) -> None:
    """The job's process: read the request, check, load, encode; everything goes back on a pipe."""
    conn = Connection(reply_fd, readable=False)
    try:
        with Connection(request_fd, writable=False) as request:
            folder, task, datasets, options = request.recv()
        started = time.perf_counter()
        pid = os.getpid()
        total = sum(len(p) for _, p in datasets.values())
        conn.send(("event", JobEvent("started", 0, total, pid)))
        settings = EncodingSettings.from_dict(options.get("encoding"))
        limits = options["limits"]
        limits = replace(limits, max_seq_length=min(limits.max_seq_length,
                                                    settings.max_seq_length_limit))
        check = check_model(Path(folder), limits, prompt=options["prompt"],
                            prompt_name=options.get("prompt_name"), pooling=options["pooling"],
                            normalize=options["normalize"],
                            max_seq_length=settings.max_seq_length)
        if not check.ok or check.description is None:
            conn.send(("failed", "the model was refused: "
                       + "; ".join(str(i) for i in check.issues), "refused"))
            return
        desc = check.description
        import torch  # heavy optional dependency (gpu extra)

        if options["threads"]:
            torch.set_num_threads(options["threads"])
        device = resolve_device(options["device"])
        try:
            dtype = device_dtype(settings.dtype if settings.dtype != "auto"
                                 else options["dtype"], device)
        except SettingsError as err:
            conn.send(("failed", f"the model's settings cannot run here: {err}", "refused"))
            return
        gpu: dict[str, Any] = {}
        if device == "cuda":
            free, total_gpu = torch.cuda.mem_get_info()
            # the budget: the site's share, else what is free now; set before the model is
            # allocated (beyond it torch raises OutOfMemoryError, a typed failure)
            share = min(options["gpu_memory_bytes"] or free, total_gpu)
            torch.cuda.set_per_process_memory_fraction(share / total_gpu)
            torch.cuda.reset_peak_memory_stats()
            gpu = {"gpu_memory_bytes": share, "gpu_free_bytes": free,
                   "gpu_total_bytes": total_gpu}
        encoder = ModelEncoder(Path(folder), desc, device=device, dtype=dtype,
                               batch_tokens=settings.batch_tokens)
        conn.send(("event", JobEvent("loaded", 0, total, pid)))
        files: dict[str, bytes] = {}
        clipped: dict[str, int] = {}  # pairs whose cosine the mapping changed, by dataset
        done = [0, 0]  # texts embedded, pairs reported
        encode_s = score_s = 0.0

        def texts_done(k: int) -> None:
            done[0] += k
            if done[0] // 2 - done[1] >= 256 or done[0] // 2 == total:
                done[1] = done[0] // 2
                conn.send(("event", JobEvent("encoding", done[1], total, pid)))

        for spec in task.datasets:  # task order: file order never depends on dict order
            if spec.name not in datasets:
                continue
            ids, pairs = datasets[spec.name]
            t0 = time.perf_counter()
            cos = encoder.similarity(pairs, progress=texts_done)
            encode_s += time.perf_counter() - t0
            conn.send(("event", JobEvent("dataset", done[0] // 2, total, pid, spec.name,
                                         round(time.perf_counter() - t0, 3))))
            t1 = time.perf_counter()
            lo, hi = task.score_range(spec.name)  # a dataset may have a range of its own
            scores = cosine_to_scores(cos, lo, hi, options["mapping"])
            clipped[spec.name] = clipped_pairs(cos, options["mapping"])
            name, content = write_run(task, spec.name, ids, scores.tolist(),
                                      run=options["run_name"])
            files[name] = content
            score_s += time.perf_counter() - t1
        encoder.close()  # the tokenising processes, if any
        cuda = encoder.device == "cuda"
        meta: dict[str, Any] = {
            "system": "model", "model_id": desc.architecture,
            # the signature names the folder's digest (config and tokenizer move numbers too)
            "model_digest": desc.digest, "weights_sha256": desc.digest,
            "model_type": desc.model_type, "architecture": desc.architecture,
            "n_parameters": desc.n_parameters, "hidden_size": desc.hidden_size,
            "layers": desc.layers, "weights_dtype": desc.weights_dtype,
            "pooling": desc.pooling, "normalize": desc.normalize, "prompt": desc.prompt,
            "prompt_source": desc.prompt_source, "prompt_name": desc.prompt_name,
            "prompt_b": desc.prompt_b, "prompt_name_b": desc.prompt_name_b,
            "prompts": desc.prompts, "tokenizer_class": desc.tokenizer_class,
            "max_seq_length": desc.max_seq_length,
            "model_max_seq_length": desc.model_max_seq_length,
            "max_seq_length_source": "chosen" if settings.max_seq_length else "model",
            "tokenizer": "tokenizer.json", "tokenizer_sha256": desc.tokenizer_sha256,
            "score_mapping": options["mapping"], "clipped_pairs": clipped,
            "dtype": encoder.dtype,
            "device": encoder.device_name, "device_class": encoder.device,
            "batch_tokens": encoder.batch_tokens, "attention": encoder.attention,
            "n_pairs": total,
            "load_s": round(encoder.load_s, 3), "encode_s": round(encode_s, 6),
            "pairs_per_s": round(total / encode_s, 1) if encode_s > 0 else None,
            # mapping cosines to scores and writing the run files
            "score_s": round(score_s, 6), "feed_processes": encoder.feed_processes,
            "wall_time_s": round(time.perf_counter() - started, 3),
            "libraries": library_versions(), "python": platform.python_version(),
        }
        if cuda:
            meta["cuda"], meta["driver"] = torch.version.cuda, gpu_driver_version()
            meta |= gpu | {"gpu_peak_bytes": torch.cuda.max_memory_allocated()}
        meta["signature"] = baseline_signature(meta)
        # what the page calls "Weights sha256": model.safetensors' own, as GUIDE.md says
        meta |= {"weights_sha256": desc.weights_sha256, "folder_digest": desc.digest}
        conn.send(("done", files, meta))
    except BaseException as exc:  # reported to the parent as the job's failure reason
        kind = "out_of_memory" if isinstance(exc, MemoryError) or "OutOfMemory" in type(
            exc).__name__ else "internal"
        conn.send(("failed", f"{type(exc).__name__}: {exc}", kind))
    finally:
        conn.close()


def _death_reason(exitcode: int | None, log: IO[bytes]) -> str:
    """Why a child that sent no result ended: its signal, or its status and last output line."""
    if exitcode is not None and exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = f"signal {-exitcode}"
        hint = " (the host ran out of memory or an operator stopped it)" if exitcode == -9 else ""
        return f"the encoding process was killed by {name}{hint}"
    log.seek(0)
    lines = log.read()[-4096:].decode("utf-8", "replace").strip().splitlines()
    last = f": {lines[-1]}" if lines else ""
    return f"the encoding process exited with status {exitcode} without a result{last}"


def run_model_job(folder: Path, task: TaskDefinition | str,
                  inputs: Mapping[str, DatasetInputs], *, device: str = "auto",
                  dtype: str | None = None, budget: JobBudget | None = None,
                  limits: ModelLimits | None = None, prompt: str | None = None,
                  prompt_name: str | None = None, pooling: str | None = None,
                  normalize: bool | None = None,
                  mapping: Mapping_ | None = None, threads: int | None = None,
                  run_name: str | None = None,
                  encoding: EncodingSettings | Mapping[str, Any] | None = None,
                  progress: Callable[[JobEvent], None] | None = None,
                  stop: threading.Event | None = None) -> ModelRun:
    """Encode `inputs` with the model in `folder` in a child process; the run files + metadata.

    run_name goes into the file names of a task whose names carry the run ({run}); mapping
    (cosine to score) defaults to the definition's scores.model_mapping. encoding: the
    upload's maximum sequence length, token budget and dtype (its dtype "auto" takes `dtype`,
    the host's choice, else float16 on CUDA and float32 on CPU).

    Raises ModelJobFailed when the model is refused, the child fails or dies, the budget is
    exceeded, or `stop` is set (the job was cancelled or taken from this worker: the child is
    killed at once); ValueError for datasets the task does not have.
    """
    budget = budget or JobBudget()
    task_def = load_task(task) if isinstance(task, str) else task
    unknown = sorted(set(inputs) - {d.name for d in task_def.datasets})
    if unknown:
        raise ValueError(f"task {task_def.name} has no dataset(s) {', '.join(unknown)}")
    problem = model_task_problem(task_def, inputs)
    if problem is not None:
        raise ModelJobFailed(problem)
    chosen: Mapping_ = mapping or cast(Mapping_, task_def.model_mapping)
    datasets = {name: (list(d.ids), [tuple(p) for p in d.texts]) for name, d in inputs.items()}
    options = {"limits": limits or ModelLimits(), "prompt": prompt,
               "prompt_name": prompt_name, "pooling": pooling,
               "normalize": normalize, "device": device, "dtype": dtype, "mapping": chosen,
               "threads": threads, "gpu_memory_bytes": budget.gpu_memory_bytes,
               "run_name": run_name,
               # a job description (the site's own or a remote worker's) carries it as JSON
               "encoding": (encoding if isinstance(encoding, EncodingSettings)
                            else EncodingSettings.from_dict(encoding)).to_dict()}
    with tempfile.TemporaryFile() as log:
        return _supervise((str(Path(folder).resolve()), task_def, datasets, options), budget,
                          log, progress, stop)


def _supervise(request: tuple[Any, ...], budget: JobBudget, log: IO[bytes],
               progress: Callable[[JobEvent], None] | None,
               stop: threading.Event | None = None) -> ModelRun:
    """Start the child, hand it the request, watch its clock and memory, collect its reply."""
    request_r, request_w = os.pipe()
    reply_r, reply_w = os.pipe()
    started = time.monotonic()
    # the child asks the kernel to kill it when this process dies (PR_SET_PDEATHSIG): a worker
    # killed with -9 leaves no orphan encoding on
    proc = subprocess.Popen([sys.executable, "-m", "baselines.models", str(request_r),
                             str(reply_w), str(os.getpid())], pass_fds=(request_r, reply_w),
                            stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                            # -m puts the working folder first on sys.path: the child imports
                            # this very copy of the project, whatever else is installed
                            cwd=PROJECT_ROOT, start_new_session=True)
    os.close(request_r)
    os.close(reply_w)  # the child holds the only writer: EOF here means it is gone
    if progress is not None:
        progress(JobEvent("spawned", 0, sum(len(p) for _, p in request[2].values()), proc.pid))
    receive = Connection(reply_r, writable=False)

    def send_request() -> None:
        # a thread: a large request fills the pipe until the child reads it, and the
        # budget must be watched meanwhile
        with Connection(request_w, readable=False) as send, \
                contextlib.suppress(OSError):  # the child died before reading: seen below
            send.send(request)

    sender = threading.Thread(target=send_request, name="model-job-request", daemon=True)
    sender.start()
    peak = 0
    try:
        while True:
            if receive.poll(POLL_S):
                try:
                    message = receive.recv()
                except EOFError:
                    proc.wait(5)
                    raise ModelJobFailed(_death_reason(proc.returncode, log)) from None
                if message[0] == "event":
                    if progress is not None:
                        message[1].peak_rss = peak
                        progress(message[1])
                    continue
                if message[0] == "done":
                    # the whole job as its supervisor saw it: the process's start and imports,
                    # the check, load, encoding and scoring
                    message[2].update(peak_rss_bytes=peak,
                                      job_s=round(time.monotonic() - started, 3))
                    return ModelRun(message[1], message[2])
                raise ModelJobFailed(message[1], *message[2:3])
            if stop is not None and stop.is_set():
                raise ModelJobFailed("the job was stopped: the model was cancelled or taken "
                                     "from this worker", "cancelled")
            if time.monotonic() - started > budget.time_s:
                raise ModelJobFailed(f"the encoding job exceeded its time budget of "
                                     f"{budget.time_s:g} s and was stopped", "too_slow")
            rss = _rss_bytes(proc.pid)
            peak = max(peak, rss or 0)
            if rss is not None and rss > budget.memory_bytes:
                raise ModelJobFailed(f"the encoding job used {rss / 2**20:,.0f} MiB, over its "
                                     f"memory ceiling of {budget.memory_bytes / 2**20:,.0f} MiB, "
                                     "and was stopped", "out_of_memory")
            if proc.poll() is not None and not receive.poll(0):
                raise ModelJobFailed(_death_reason(proc.returncode, log))
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)
        sender.join(10)
        receive.close()
