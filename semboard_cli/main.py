"""The `semboard` command: login, tasks, accept, download, validate, submit, submit-model,
models, publish-model, runs, primary, finals, leaderboard."""

from __future__ import annotations

import argparse
import getpass
import hashlib
import io
import json
import os
import sys
import tempfile
import time
import uuid
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from semboard_cli.client import (
    EXIT_AUTH,
    EXIT_CONFLICT,
    EXIT_ERROR,
    EXIT_FORBIDDEN,
    EXIT_INVALID,
    EXIT_NETWORK,
    EXIT_NOT_FOUND,
    EXIT_OK,
    EXIT_USAGE,
    Api,
    CliError,
    ProgressBody,
    attachment_name,
    draw_progress,
    load_config,
    multipart,
    save_config,
)

EXIT_CODES_HELP = """exit codes:
  0 ok                  5 not found (task, phase, run)
  1 other error         6 invalid run (every problem is printed)
  2 bad command line    7 conflict (run limit reached, already in a team)
  3 not logged in / token refused   8 rate limited
  4 not allowed now (phase closed)  9 site unreachable
"""


def _out(text: str = "") -> None:
    print(text)


def _err(text: str) -> None:
    print(text, file=sys.stderr)


def _api(args: argparse.Namespace, *, need_token: bool = True) -> Api:
    config = load_config()
    url = args.url or os.environ.get("SEMBOARD_URL") or config.get("url")
    token = args.token or os.environ.get("SEMBOARD_TOKEN") or config.get("token")
    if not url:
        raise CliError("no site: run 'semboard login --url URL' first", EXIT_AUTH)
    if need_token and not token:
        raise CliError("not logged in: run 'semboard login --url URL' first", EXIT_AUTH)
    return Api(url, token)


def _table(rows: list[list[str]], header: list[str]) -> str:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(str(v).ljust(w) for v, w in zip(row, widths, strict=True)).rstrip()
             for row in [header, ["-" * w for w in widths], *rows]]
    return "\n".join(lines)


# ----------------------------------------------------------------------------- commands


def cmd_login(args: argparse.Namespace) -> int:
    """Store the site's URL and an API token (checked against the site)."""
    if not args.url:
        raise CliError("give the site: semboard login --url https://...", 2)
    token = args.token or os.environ.get("SEMBOARD_TOKEN")
    if not token:
        _err(f"Create a token on {args.url.rstrip('/')}/profile#tokens and paste it here.")
        token = getpass.getpass("API token: ").strip()
    api = Api(args.url, token)
    me = api.get_json("/me")
    config = load_config()
    config.update({"url": args.url.rstrip("/"), "token": token})
    save_config(config)
    _out(f"Logged in to {args.url.rstrip('/')} as {me['display_name']} <{me['email']}>.")
    return EXIT_OK


def cmd_tasks(args: argparse.Namespace) -> int:
    """List the tasks and their phases."""
    api = _api(args, need_token=False)
    tasks = api.get_json("/tasks", auth=bool(api.token))["tasks"]
    rows = []
    for task in tasks:
        phases = ", ".join(f"{p['slug']}{' (open)' if p['open'] else ''}" for p in task["phases"])
        rows.append([task["name"], task["title"], phases or "-",
                     "yes" if task["gold_released"] else "no"])
    _out(_table(rows, ["TASK", "TITLE", "PHASES", "GOLD"]))
    return EXIT_OK


def _pick_phase(task: dict[str, Any], slug: str | None) -> dict[str, Any]:
    phases = task["phases"]
    if slug:
        for phase in phases:
            if phase["slug"] == slug:
                return phase
        known = ", ".join(p["slug"] for p in phases) or "none"
        raise CliError(f"task {task['name']} has no phase {slug!r} (phases: {known})",
                       EXIT_NOT_FOUND)
    open_now = [p for p in phases if p["open"]]
    if open_now:
        return open_now[-1]
    if not phases:
        raise CliError(f"task {task['name']} has no phases yet", EXIT_NOT_FOUND)
    return phases[-1]


def _window_to_start(task: dict[str, Any], phase: dict[str, Any]) -> bool:
    """Whether my team must start its window in this open windowed phase before downloading."""
    status = ((task.get("team") or {}).get("phases") or {}).get(phase["slug"]) or {}
    return bool(phase.get("team_window_hours") and phase["open"] and task.get("team")
                and not status.get("window_started_at"))


def _start_window(api: Api, args: argparse.Namespace,
                  phase: dict[str, Any]) -> None:
    """--start-window: start the team's window now (or say when the started one ends)."""
    hours, slug = phase.get("team_window_hours"), phase["slug"]
    if not hours:
        _err(f"note: phase {slug} has no per-team windows; nothing to start")
        return
    response = api.request("POST", f"/tasks/{args.task}/phases/{slug}/window")
    window = response.json()
    what = "started now" if response.status_code == 201 else "had already started"
    _out(f"Team {window['team']}'s {hours}-hour window in phase {slug} {what}; "
         f"it ends {window['ends_at']}.")


def cmd_accept(args: argparse.Namespace) -> int:
    """Show a task's terms in force and accept them (the site records it as from the CLI)."""
    api = _api(args)
    terms = api.get_json(f"/tasks/{args.task}/terms")
    ahead = terms.get("scheduled") or []  # changes that take effect later: accepted ahead
    if not terms["versions"] and not ahead:
        _out(f"{args.task} has no terms to accept.")
        return EXIT_OK
    for version in terms["versions"] + ahead:
        where = f"phase {version['phase']}" if version["phase"] else "the task"
        when = f", takes effect {version['effective_at']}" if version in ahead else ""
        grace = (f", the text before counts until {version['covered_until']}"
                 if version.get("covered_until") else "")
        _out(f"Terms of {where} (version {version['digest'][:12]}{when}"
             f"{', accepted' if version['accepted'] else ''}{grace}):\n")
        _out(version["text"])
        _out()
    if terms.get("license"):
        _out(f"Data licence: {terms['license']}")
    if terms.get("terms_document_url"):
        _out(f"Full terms: {terms['terms_document_url']}")
    if terms["accepted"] and all(v["accepted"] for v in ahead):
        _out(f"You have accepted the current terms of {args.task}.")
        return EXIT_OK
    if not args.yes:
        if not sys.stdin.isatty():
            raise CliError("read the terms above, then run again with --yes to accept them",
                           EXIT_USAGE)
        if input("Accept these terms? [y/N] ").strip().lower() not in ("y", "yes"):
            _out("Not accepted.")
            return EXIT_FORBIDDEN
    answer = api.request("POST", f"/tasks/{args.task}/terms/accept", json={
        "client": "cli", "digests": [v["digest"] for v in terms["versions"] + ahead]}).json()
    _out(f"Accepted the terms of {args.task} ({len(answer['accepted'])} version(s)).")
    return EXIT_OK


def _reuse_notes(task: dict[str, Any], folder: Path) -> list[str]:
    """Say the data's licence and how to cite the task; the citation goes beside the data."""
    written = []
    if task.get("license"):
        _out(f"Data licence: {task['license']}")
    if task.get("terms_url"):
        _out(f"Terms: {task['terms_url']}")
    if task.get("citation"):
        (folder / f"{task['name']}.bib").write_text(task["citation"] + "\n", encoding="utf-8")
        written.append(f"{task['name']}.bib")
        _out(f"Cite the task as in {folder / (task['name'] + '.bib')}")
    return written


def cmd_download(args: argparse.Namespace) -> int:
    """Inputs of a phase (and gold once released) and the task definition, into a folder."""
    api = _api(args)
    task = api.get_json(f"/tasks/{args.task}")
    phase = _pick_phase(task, args.phase)
    to_start = _window_to_start(task, phase)
    if args.start_window:
        _start_window(api, args, phase)
    folder = Path(args.output)
    folder.mkdir(parents=True, exist_ok=True)
    definition = api.request("GET", f"/tasks/{args.task}/definition")
    (folder / f"{args.task}.toml").write_bytes(definition.content)
    written = [f"{args.task}.toml"]
    for dataset in task["datasets"]:
        if not dataset["inputs_available"]:
            continue
        if phase.get("track") and dataset.get("track") not in (None, phase["track"]):
            continue
        try:
            response = api.request(
                "GET", f"/tasks/{args.task}/phases/{phase['slug']}/inputs/{dataset['name']}")
        except CliError as err:
            if to_start and not args.start_window and err.code == EXIT_FORBIDDEN:
                hours = phase["team_window_hours"]
                raise CliError(
                    f"your team's {hours}-hour window in phase {phase['slug']} has not started, "
                    f"and its inputs come only after it starts: run again with --start-window "
                    f"to start it now (it ends {hours} h later, never past the close, "
                    f"{phase['closes_at']})", EXIT_FORBIDDEN) from None
            raise
        name = attachment_name(response, f"{dataset['name']}.input.txt")
        (folder / name).write_bytes(response.content)
        written.append(name)
        if task["gold_released"]:
            gold = api.request("GET", f"/tasks/{args.task}/gold/{dataset['name']}")
            gold_name = attachment_name(gold, f"{dataset['name']}.gold.txt")
            (folder / gold_name).write_bytes(gold.content)
            written.append(gold_name)
    config = load_config()
    config.setdefault("downloads", {})[args.task] = {
        "folder": str(folder.resolve()), "team": (task.get("team") or {}).get("name")}
    save_config(config)
    written += _reuse_notes(task, folder)
    for name in written:
        _out(f"  {folder / name}")
    _out(f"Downloaded {len(written)} file(s) of {args.task} ({phase['slug']}) to {folder}.")
    return EXIT_OK


def _print_issues(issues: list[Any]) -> None:
    for issue in issues:
        if isinstance(issue, dict):
            where = ":".join(str(v) for v in (issue.get("file"), issue.get("line")) if v)
            _err(f"  {where + ': ' if where else ''}{issue.get('message', issue)}")
        else:
            _err(f"  {issue}")


# an upload whose answer was lost is sent again this many times, with the same key
UPLOAD_ATTEMPTS = 4


def _upload(api: Any, path: str, body: bytes, content_type: str,
            pause: Callable[[float], None] = time.sleep) -> dict[str, Any]:
    """POST a multipart upload with the progress bar; the answer's JSON (CliError on refusal).

    One Idempotency-Key for every attempt: when the connection drops or the site answers 5xx,
    the upload is sent again and the site answers with the run the first attempt made, if it
    made one, so a retry never spends a second run."""
    key = uuid.uuid4().hex
    for attempt in range(UPLOAD_ATTEMPTS):
        try:
            response = api.request("POST", path, data=ProgressBody(body, draw_progress),
                                   headers={"Content-Type": content_type,
                                            "Idempotency-Key": key})
        except CliError as err:
            if not err.retryable or attempt == UPLOAD_ATTEMPTS - 1:
                raise
            wait = 2.0 ** attempt
            _err(f"{err.message}; sending again in {wait:.0f} s with the same key "
                 f"(attempt {attempt + 2} of {UPLOAD_ATTEMPTS}; it never counts twice)")
            pause(wait)
            continue
        answer = dict(response.json())
        if response.headers.get("Idempotent-Replayed") == "true":
            _err("the site had received an earlier attempt: this is that attempt's run")
        return answer
    raise AssertionError("unreachable")


def _refused(err: CliError) -> int:
    """Say why the site refused an upload, every problem by file and line; the exit code."""
    _err(f"error: {err.message}")
    _print_issues(err.issues)
    return err.code


def _read_run(path: Path) -> dict[str, bytes]:
    """The files of a run folder (top level and below) or a single file/zip, by base name.

    A folder whose files lie in subfolders travels as one zip of it (named for the folder), so a
    task whose run file names have folders (answer/task1/english.txt) reads them where they lie.
    """
    if path.is_dir():
        found = {}
        nested = False
        for p in sorted(path.rglob("*")):
            rel = p.relative_to(path)
            if p.is_file() and not any(part.startswith(".") for part in rel.parts):
                nested = nested or len(rel.parts) > 1
                found[rel.as_posix()] = p.read_bytes()
        if not found:
            raise CliError(f"{path}: the folder has no files")
        if nested:
            top = path.resolve().name or "run"
            buffer = io.BytesIO()
            with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
                for member, data in found.items():
                    zf.writestr(f"{top}/{member}", data)
            return {f"{top}.zip": buffer.getvalue()}
        return found
    if path.is_file():
        return {path.name: path.read_bytes()}
    raise CliError(f"{path}: no such file or folder", EXIT_NOT_FOUND)


def cmd_validate(args: argparse.Namespace) -> int:
    """Check a run offline with the same library checks as the site."""
    from evaluation import (
        TaskDefinitionError,
        ValidationError,
        parse_task,
        read_inputs,
        unpack_upload,
        validate_run,
    )

    saved = load_config().get("downloads", {}).get(args.task, {})
    inputs_dir = Path(args.inputs or saved.get("folder") or "")
    if not (args.inputs or saved.get("folder")):
        raise CliError(f"no inputs of {args.task}: run 'semboard download {args.task} -o DIR' "
                       "first or give --inputs DIR", EXIT_NOT_FOUND)
    toml_path = inputs_dir / f"{args.task}.toml"
    try:
        definition = parse_task(toml_path.read_text(), source=str(toml_path))
    except FileNotFoundError:
        raise CliError(f"{toml_path} is missing: download the task again", EXIT_NOT_FOUND) \
            from None
    except TaskDefinitionError as err:
        raise CliError(str(err)) from None
    stored = {}
    for name in definition.dataset_names:
        path = inputs_dir / definition.input_filename(name)
        if path.is_file():
            stored[name] = read_inputs(definition, name, path.read_bytes(), filename=path.name)
    try:
        files = unpack_upload(_read_run(Path(args.run)), keep_folders=definition.run_folders)
    except ValidationError as err:
        _err(f"{args.run}: the run could not be read")
        _print_issues([i.to_dict() for i in err.issues])
        return EXIT_INVALID
    datasets = definition.track_datasets(args.track) if args.track else None
    team = args.team or saved.get("team")
    result = validate_run(definition, files, stored, team=team, datasets=datasets)
    if not result.ok:
        _err(f"{args.run}: {len(result.issues)} problem(s)")
        _print_issues([i.to_dict() for i in result.issues])
        return EXIT_INVALID
    for issue in result.issues:  # warnings of an accepted run
        _err(f"  note: {issue}")
    _out(f"{args.run}: valid for {args.task} ({len(files)} file(s)).")
    return EXIT_OK


def _names_in_files(api: Api, task: str) -> bool:
    """Whether the task's run file names carry the run's name ({run} in either pattern): the
    site reads it."""
    datasets = api.get_json(f"/tasks/{task}").get("datasets") or []
    return any("{run}" in (d.get(key) or "") for d in datasets
               for key in ("run_filename", "team_run_filename"))


def cmd_submit(args: argparse.Namespace) -> int:
    """Upload a run (folder, file or zip); every problem is printed when it is refused."""
    api = _api(args)
    path = Path(args.run)
    files = _read_run(path)
    fields = {}
    if args.name is not None:
        fields["name"] = args.name
    elif not _names_in_files(api, args.task):
        raise CliError(f"--name is required: the run file names of {args.task} carry no run "
                       "name", EXIT_USAGE)
    if args.phase:
        fields["phase"] = args.phase
    if args.description:
        fields["description"] = args.description
    body, content_type = multipart(fields, files)
    try:
        run = _upload(api, f"/tasks/{args.task}/runs", body, content_type)
    except CliError as err:
        return _refused(err)
    _out(f"Run {run['name']!r} accepted as #{run['id']} ({run['status']}) in phase "
         f"{run['phase']} of {run['task']}.")
    for key, value in (run.get("metrics") or {}).items():
        # four digits, as the board and the other commands show scores
        _out(f"  {key}: {value:.4f}" if isinstance(value, float) else f"  {key}: {value}")
    for issue in run.get("issues") or []:
        _err(f"  note: {issue.get('message', issue)}")
    return EXIT_OK


def model_archive(path: Path, tmp: Path) -> Path:
    """A model to upload: a .zip as it is, or the folder zipped into `tmp` (on disk: a model
    may be larger than memory; the same folder zips to the same bytes, so it can resume)."""
    if path.is_file():
        if path.suffix.lower() != ".zip":
            raise CliError(f"{path}: give the model's folder or a .zip of it", EXIT_USAGE)
        return path
    if not path.is_dir():
        raise CliError(f"{path}: no such folder or file", EXIT_USAGE)
    archive = tmp / f"{path.resolve().name}.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for p in sorted(path.rglob("*")):
            rel = p.relative_to(path)
            if p.is_file() and not any(part.startswith(".") for part in rel.parts):
                # weights barely compress: stored as they are, the rest deflated
                method = zipfile.ZIP_STORED if p.suffix == ".safetensors" else \
                    zipfile.ZIP_DEFLATED
                zf.write(p, rel.as_posix(), compress_type=method)
    return archive


PART_RETRIES = 5  # a part that fails to arrive is sent again this often (from where it stopped)


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def _whole_file_progress(offset: int, size: int) -> Callable[[int, int], None]:
    """A part's progress drawn as the whole file's."""
    return lambda sent, _part: draw_progress(offset + sent, size)


def upload_in_parts(api: Api, task: str, archive: Path, fields: dict[str, Any]) -> dict[str, Any]:
    """Send a model in parts (POST .../model-uploads, PUT each part, POST finish), with the
    progress bar. A broken connection is retried from where the site says the upload stands;
    an upload cut off for good resumes the next time the same file is sent."""
    size = archive.stat().st_size
    sha = _file_sha256(archive)
    config = load_config()
    pending = config.setdefault("model_uploads", {})
    # the same file with the same choices resumes; other choices start a new upload
    resume_key = f"{api.base}|{task}|{sha}|{json.dumps(fields, sort_keys=True)}"
    upload = None
    if resume_key in pending:
        try:
            upload = api.get_json(f"/model-uploads/{int(pending[resume_key])}")
        except CliError:
            upload = None  # expired, or finished elsewhere: start again
        else:
            _err(f"resuming the upload of {archive.name} at byte {upload['next_offset']:,}")
    if upload is None:
        upload = api.request("POST", f"/tasks/{task}/model-uploads", json={
            **fields, "size": size, "sha256": sha, "filename": archive.name}).json()
        pending[resume_key] = upload["id"]
        save_config(config)
    path = f"/model-uploads/{upload['id']}"
    part_bytes = int(upload["part_bytes"])
    offset, failures = int(upload["next_offset"]), 0
    with archive.open("rb") as handle:
        while offset < size:
            handle.seek(offset)
            data = handle.read(part_bytes)
            body = ProgressBody(data, _whole_file_progress(offset, size))
            try:
                answer = api.request("PUT", path, data=body, headers={
                    "Content-Type": "application/octet-stream",
                    "Content-Range": f"bytes {offset}-{offset + len(data) - 1}/{size}"}).json()
            except CliError as err:
                failures += 1
                if err.code not in (EXIT_NETWORK, EXIT_CONFLICT, EXIT_ERROR) or \
                        failures > PART_RETRIES:
                    raise
                answer = api.get_json(path)  # where the upload stands now
                _err(f"\n  part at byte {offset:,} failed ({err.message}); going on from byte "
                     f"{answer['next_offset']:,}")
            offset = int(answer["next_offset"])
    try:
        model = dict(api.request("POST", f"{path}/finish").json())
    finally:
        config = load_config()
        config.get("model_uploads", {}).pop(resume_key, None)
        save_config(config)
    return model


def cmd_submit_model(args: argparse.Namespace) -> int:
    """Upload a sentence encoder (the model track): the site checks it, then runs it itself."""
    api = _api(args)
    fields = {key: value for key, value in (("name", args.name), ("phase", args.phase),
                                            ("prompt", args.prompt),
                                            ("prompt_name", args.prompt_name),
                                            ("pooling", args.pooling),
                                             ("model_name", args.model_name),
                                            ("max_seq_length", args.max_seq_length),
                                            ("batch_tokens", args.batch_tokens),
                                            ("dtype", args.dtype))
              if value is not None}
    if args.publish:
        fields["publish"] = True
    if args.training_data is not None:
        fields["training_data"] = args.training_data
    answers: dict[str, Any] = {}
    for item in args.training_answer or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise CliError(f"--training-answer {item!r}: give KEY=VALUE", EXIT_USAGE)
        previous = answers.get(key.strip())
        answers[key.strip()] = value.strip() if previous is None else [
            *(previous if isinstance(previous, list) else [previous]), value.strip()]
    if answers:
        fields["training_answers"] = answers
    with tempfile.TemporaryDirectory(prefix="semboard-model-") as tmp:
        archive = model_archive(Path(args.model), Path(tmp))
        try:
            model = upload_in_parts(api, args.task, archive, fields)
        except CliError as err:
            return _refused(err)
    where = (f", number {model['queue_position']} in the queue"
             if model.get("queue_position") else "")
    _out(f"Model {model['name']!r} accepted as #{model['id']} ({model['status']}{where}) in "
         f"phase {model['phase']} of {model['task']}; digest {model['digest'][:12]}.")
    if model.get("prompt_note"):
        _out(model["prompt_note"])
    _out(f"Follow it: GET {api.base}/models/{model['id']}")
    return EXIT_OK


def cmd_models(args: argparse.Namespace) -> int:
    """My team's models in a task: state, place in the queue, the run each produced."""
    api = _api(args)
    data = api.get_json(f"/tasks/{args.task}/models")
    if args.format == "json":
        _out(json.dumps(data, indent=2))
        return EXIT_OK
    rows = []
    for model in data["models"]:
        state = model["status"]
        if model.get("queue_position"):
            state += f" (#{model['queue_position']} in the queue)"
        rows.append([str(model["id"]), model["phase"], model["name"], state,
                     model["uploaded_at"][:16].replace("T", " "), model["digest"][:12],
                     "" if model.get("run_id") is None else str(model["run_id"]),
                     "published" if model.get("published_at") else ""])
    _out(f"Team {data['team']} on {data['task']}:")
    _out(_table(rows, ["ID", "PHASE", "NAME", "STATE", "UPLOADED (UTC)", "DIGEST", "RUN",
                       "FILES"]))
    # part of the listing (stdout): a failure's reason, why a queued model waits, a running
    # job's progress
    for model in data["models"]:
        progress = model.get("progress") or {}
        if model["status"] == "running" and progress.get("total"):
            _out(f"  #{model['id']} {model_progress_line(progress)}")
        if model["status"] == "queued" and model.get("waiting"):
            _out(f"  #{model['id']} {model['waiting']}")
        if model["status"] == "failed":
            kind = f" ({model['failure']})" if model.get("failure") else ""
            _out(f"  #{model['id']} failed{kind}: {model['reason']}")
    return EXIT_OK


def model_progress_line(progress: dict[str, Any]) -> str:
    """A running model's job in one line: pairs done of the total, rate, time left, memory,
    and the time each finished dataset took."""
    done, total = int(progress.get("done") or 0), int(progress.get("total") or 0)
    parts = [f"{done:,} of {total:,} pairs ({100 * done / total:.0f}%)" if total else
             f"{done:,} pairs"]
    if progress.get("pairs_per_s"):
        parts.append(f"{progress['pairs_per_s']:,.0f} pairs/s")
    if progress.get("eta_s") is not None:
        parts.append(f"about {progress['eta_s']:,.0f} s left")
    if progress.get("peak_rss_bytes"):
        parts.append(f"peak memory {progress['peak_rss_bytes'] / 2**20:,.0f} MiB")
    datasets = progress.get("datasets") or {}
    if datasets:
        parts.append("datasets: " + ", ".join(f"{name} {seconds:.1f} s"
                                              for name, seconds in datasets.items()))
    return "; ".join(parts)


def cmd_publish_model(args: argparse.Namespace) -> int:
    """Publish a model's files with its run (or withdraw them)."""
    api = _api(args)
    model = api.request("POST", f"/models/{args.model_id}/publish",
                        json={"publish": not args.withdraw}).json()
    if model.get("published_at"):
        _out(f"The files of model {model['name']!r} (#{model['id']}) are published with its "
             "run: whoever sees the run can download them.")
    else:
        _out(f"The files of model {model['name']!r} (#{model['id']}) are private to your team "
             "and the organisers.")
    return EXIT_OK


def cmd_runs(args: argparse.Namespace) -> int:
    """My team's runs in a task."""
    api = _api(args)
    query = {"phase": args.phase} if args.phase else {}
    if args.all:
        query["all"] = "1"
    data = api.get_json(f"/tasks/{args.task}/runs", params=query)
    if args.format == "json":
        _out(json.dumps(data, indent=2))
        return EXIT_OK
    rows = []
    for run in data["runs"]:
        metrics = run.get("metrics") or {}
        primary = next(iter(metrics.items()), None)
        rows.append([str(run["id"]), run["phase"], run["name"], run["status"],
                     run["submitted_at"][:16].replace("T", " "),
                     f"{primary[0]}={primary[1]:.4f}" if primary and primary[1] is not None
                     else "-", "" if run["current"] else "replaced"])
    _out(f"Team {data['team']} on {data['task']}:")
    _out(_table(rows, ["ID", "PHASE", "NAME", "STATUS", "SUBMITTED (UTC)", "SCORE", ""]))
    return EXIT_OK


def cmd_primary(args: argparse.Namespace) -> int:
    """Show the team's primary run in a phase, or mark one (RUN: its id)."""
    api = _api(args)
    phase = _pick_phase(api.get_json(f"/tasks/{args.task}"), args.phase)
    path = f"/tasks/{args.task}/phases/{phase['slug']}/primary"
    if args.run is None:
        data = api.get_json(path)
    else:
        body: dict[str, Any] = {"run": args.run}
        if args.reason:
            body["reason"] = args.reason
        data = api.request("PUT", path, json=body).json()
    if args.format == "json":
        _out(json.dumps(data, indent=2))
        return EXIT_OK
    if data["ranking"] != "primary":
        _out(f"Phase {data['phase']} ranks every run: there is no primary run to mark.")
        return EXIT_OK
    chosen = data["primary"]
    if chosen is None:
        _out(f"Team {data['team']} has no primary run in {data['phase']} yet "
             f"({data['fallback']}).")
    else:
        how = "chosen" if chosen["chosen"] else f"fallback: {data['fallback']}"
        _out(f"Team {data['team']}'s primary run in {data['phase']}: {chosen['run']!r} "
             f"(#{chosen['run_id']}, {how}).")
    if data["changeable"]:
        _out(f"Changeable until the phase closes ({data['closes_at']}); the team's other runs "
             "are contrastive (listed, not ranked).")
    return EXIT_OK


def cmd_finals(args: argparse.Namespace) -> int:
    """Show the team's final runs in a phase with a split test set, or choose them (RUN ids;
    --clear returns to the fallback, the best public runs)."""
    api = _api(args)
    phase = _pick_phase(api.get_json(f"/tasks/{args.task}"), args.phase)
    path = f"/tasks/{args.task}/phases/{phase['slug']}/finals"
    if args.runs or args.clear:
        body: dict[str, Any] = {"runs": [] if args.clear else list(args.runs)}
        if args.reason:
            body["reason"] = args.reason
        data = api.request("PUT", path, json=body).json()
    else:
        data = api.get_json(path)
    if args.format == "json":
        _out(json.dumps(data, indent=2))
        return EXIT_OK
    listed = ", ".join(f"{f['run']!r} (#{f['run_id']})" for f in data["finals"]) or "none yet"
    how = "chosen" if data["chosen"] else f"fallback: {data['fallback']}"
    _out(f"Team {data['team']}'s final runs in {data['phase']}: {listed} ({how}).")
    if data["changeable"]:
        _out(f"At most {data['limit']}; changeable until the phase closes ({data['closes_at']}). "
             "The final board ranks each team's best final run on the private part.")
    return EXIT_OK


def cmd_leaderboard(args: argparse.Namespace) -> int:
    """A phase's leaderboard as a table, CSV or JSON."""
    api = _api(args, need_token=False)
    params = {"phase": args.phase} if args.phase else {}
    if args.format == "csv":
        response = api.request("GET", f"/tasks/{args.task}/leaderboard",
                               params={**params, "format": "csv"}, auth=bool(api.token))
        sys.stdout.write(response.text)
        return EXIT_OK
    board = api.get_json(f"/tasks/{args.task}/leaderboard", params=params,
                         auth=bool(api.token))
    if args.format == "json":
        _out(json.dumps(board, indent=2))
        return EXIT_OK
    metrics = list(board["rows"][0]["metrics"]) if board["rows"] else []
    rows = []
    for row in board["rows"]:
        rows.append([row["team"], row["run"], *(
            "-" if row["metrics"].get(m) is None else f"{row['metrics'][m]:.4f}"
            for m in metrics), " ".join(row["flags"])])
    _out(f"{board['task']} · {board['phase']}")
    _out(_table(rows, ["TEAM", "RUN", *metrics, "FLAGS"]))
    return EXIT_OK


def cmd_worker(args: argparse.Namespace) -> int:
    """A remote model worker (baselines.models.remote) with the options after `worker`; its
    token from a file or the environment, never from the command line."""
    from baselines.models.remote import main as worker_main  # the encoder: only this command

    options = list(args.worker_options)
    site = args.url or os.environ.get("SEMBOARD_URL")  # as every command finds the site
    if site and "--site" not in options:
        options = ["--site", site, *options]
    return worker_main(options, prog="semboard worker")


# ----------------------------------------------------------------------------- parser


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every command."""
    parser = argparse.ArgumentParser(
        prog="semboard", description="Take part in semboard shared tasks from the command line.",
        epilog=EXIT_CODES_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", help="the site (default: the one you logged in to)")
    parser.add_argument("--token", help="an API token (default: the stored one, $SEMBOARD_TOKEN)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(name: str, func: Any, help_text: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.set_defaults(func=func)
        return p

    p = add("login", cmd_login, "store the site and an API token (from your profile page)")
    p.add_argument("--url", dest="url", default=argparse.SUPPRESS)
    p.add_argument("--token", dest="token", default=argparse.SUPPRESS)
    add("tasks", cmd_tasks, "list tasks and their phases")
    p = add("accept", cmd_accept, "read a task's terms and accept them (needed before its "
            "data is served)")
    p.add_argument("task")
    p.add_argument("--yes", action="store_true", help="accept without asking (after reading)")
    p = add("download", cmd_download, "download a phase's inputs (and gold once released); "
            "in a phase with per-team windows, the team starts its window first "
            "(--start-window)")
    p.add_argument("task")
    p.add_argument("--phase", help="phase slug (default: the open one)")
    p.add_argument("-o", "--output", required=True, help="folder to write to")
    p.add_argument("--start-window", action="store_true",
                   help="start your team's window in the phase now, then download: it ends "
                        "the phase's window hours later, never past its close (downloads "
                        "never start it on their own)")
    p = add("validate", cmd_validate, "check a run offline, as the site will")
    p.add_argument("task")
    p.add_argument("run", help="run folder, file or zip")
    p.add_argument("--inputs", help="folder of downloaded inputs (default: the last download)")
    p.add_argument("--team", help="team name, for team-named run files")
    p.add_argument("--track", help="only this track's datasets (for a track's phase)")
    p = add("submit", cmd_submit, "upload a run")
    p.add_argument("task")
    p.add_argument("run", help="run folder, file or zip")
    p.add_argument("--name", help="run name (the same name replaces a run); optional where "
                   "the task's run file names carry it ({run})")
    p.add_argument("--phase", help="phase slug (default: the open one)")
    p.add_argument("--description", help="a description of the system")
    p = add("submit-model", cmd_submit_model, "upload a sentence encoder (Hugging Face "
            "folder or a zip of it, safetensors weights) for the site to run")
    p.add_argument("task")
    p.add_argument("model", help="model folder or .zip")
    p.add_argument("--name", help="run name (default: model- and the model's digest)")
    p.add_argument("--phase", help="phase slug (default: the open one)")
    p.add_argument("--prompt", help="prefix put before every text (overrides the folder's "
                   "default prompt)")
    p.add_argument("--prompt-name", help="one of the folder's prompts by name "
                   "(config_sentence_transformers.json), or two as FIRST,SECOND: one per side "
                   "of each pair")
    p.add_argument("--pooling", help="cls, mean, max, ... (overrides 1_Pooling/config.json)")
    p.add_argument("--model-name", dest="model_name",
                   help="the model's name on the board (else the folder's _name_or_path)")
    # checked by the site against the phase's limits (a clear refusal names them)
    p.add_argument("--max-seq-length", dest="max_seq_length", type=int,
                   help="cut texts after this many tokens (default: the phase's, else the "
                        "model's own); recorded in the run's signature")
    p.add_argument("--batch-tokens", dest="batch_tokens", type=int,
                   help="padded tokens per batch (speed and memory; scores unchanged)")
    p.add_argument("--dtype", help="auto, float32, float16 or bfloat16 (half dtypes on CUDA "
                   "only; default: the phase's)")
    p.add_argument("--publish", action="store_true",
                   help="publish the model's files with its run (anyone who sees the run may "
                        "download them; withdraw on the team page)")
    p.add_argument("--training-data", dest="training_data",
                   help="what the model was trained on (shown with its run; some tasks "
                        "require it)")
    p.add_argument("--training-answer", dest="training_answer", action="append",
                   metavar="KEY=VALUE", help="an answer to one of the task's training-data "
                   "questions, e.g. test_data=no (repeat for several)")
    p = add("models", cmd_models, "list your team's models (state, queue, runs)")
    p.add_argument("task")
    p.add_argument("--format", choices=["table", "json"], default="table")
    p = add("publish-model", cmd_publish_model, "publish a model's files with its run "
            "(--withdraw makes them private again)")
    p.add_argument("model_id", type=int)
    p.add_argument("--withdraw", action="store_true")
    p = add("runs", cmd_runs, "list your team's runs")
    p.add_argument("task")
    p.add_argument("--phase")
    p.add_argument("--all", action="store_true", help="include replaced runs")
    p.add_argument("--format", choices=["table", "json"], default="table")
    p = add("primary", cmd_primary, "show your team's primary run in a phase that ranks one "
            "run per team, or mark one (changeable until the phase closes)")
    p.add_argument("task")
    p.add_argument("run", nargs="?", type=int, help="the id of the run to mark primary")
    p.add_argument("--phase", help="phase slug (default: the open one)")
    p.add_argument("--reason", help="organisers marking a team's run: why (audited)")
    p.add_argument("--format", choices=["table", "json"], default="table")
    p = add("finals", cmd_finals, "show your team's final runs in a phase with a public and "
            "a private board, or choose them (changeable until the phase closes)")
    p.add_argument("task")
    p.add_argument("runs", nargs="*", type=int, help="the ids of the final runs")
    p.add_argument("--clear", action="store_true",
                   help="choose none: the best public runs count (the fallback)")
    p.add_argument("--phase", help="phase slug (default: the open one)")
    p.add_argument("--reason", help="organisers choosing a team's runs: why (audited)")
    p.add_argument("--format", choices=["table", "json"], default="table")
    worker_help = ("run a remote model worker on this (GPU) host: it claims a task's models "
                   "over the site's worker API with a worker token from the task's organisers, "
                   "encodes them here and posts their runs (`semboard worker --help`; "
                   "docs/MODELS.md, GPU host)")
    # its options are the worker's own (baselines.models.remote), read there: importing the
    # encoder to build this parser would slow every other command
    p = sub.add_parser("worker", help=worker_help, add_help=False)
    p.set_defaults(func=cmd_worker)
    p = add("leaderboard", cmd_leaderboard, "show a leaderboard")
    p.add_argument("task")
    p.add_argument("--phase")
    p.add_argument("--format", choices=["table", "csv", "json"], default="table")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one command; the exit code says how it went (see --help)."""
    parser = build_parser()
    args, rest = parser.parse_known_args(argv)
    if args.command == "worker":
        args.worker_options = rest  # the worker reads (and checks) its own options
    elif rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    try:
        return int(args.func(args))
    except BrokenPipeError:
        # the reader stopped early (`semboard leaderboard demo | head`): not an error of ours
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except CliError as err:
        _err(f"error: {err.message}")
        _print_issues(err.issues)
        return err.code
    except KeyboardInterrupt:
        return 130
