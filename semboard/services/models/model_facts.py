"""What a model submission says of itself beyond its state: its name, the checkpoint it was
built on, the facts its run carries from the site, and its job's progress.

The name is what the team calls the model (the upload's), else what its authors publish: the
model card's (README.md front matter `model_name` or `model-index` name, else its first heading,
unless that heading is sentence-transformers' generic "SentenceTransformer based on X"), else
the folder's own name (the zip's one top folder, else the uploaded file's name, unless either is
a generic word or a hash), else the architecture. The checkpoint it was built on is named apart
(`base_model` of the card, else config.json's `_name_or_path` when that names a published
model): all-MiniLM-L6-v2's config says "nreimers/MiniLM-L6-H384-uncased", which is its base, not
its name. Progress is what the running job wrote (jobs.model_progress); the answer adds nothing
computed from input texts.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from baselines.models.archive import archive_top_folder
from baselines.models.check import weights_digest
from baselines.models.facts import read_facts
from semboard.models import ModelSubmission

NAME_CHARS = 120
_HEADING = re.compile(r"^#\s+(.+?)\s*$", re.MULTILINE)
_INDEX_NAME = re.compile(r"^model-index:\s*\n\s*-\s*name:\s*(.+?)\s*$", re.MULTILINE)
_FRONT = re.compile(r"\A---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|\Z)", re.DOTALL)
_KEY = r"^{key}:[ \t]*(?:(\S.*?)|\n[ \t]*-[ \t]*(\S.*?))[ \t]*$"
_ST_HEADING = re.compile(r"^SentenceTransformer based on (.+)$")
_CARD_HEADING = re.compile(r"^Model Card for (.+)$")
# folder and file names that name nothing: what a tool or a person calls any model, and hashes
# (a Hugging Face cache snapshot's folder is its commit)
_GENERIC = re.compile(r"^(models?|m|upload(ed)?|archive|files?|folder|tmp|temp|downloads?|"
                      r"output|out|checkpoint(-\d+)?|final|snapshot|export|weights|"
                      r"[0-9a-f]{7,64}|\d+)$", re.IGNORECASE)
PROGRESS_KEYS = ("stage", "done", "total", "pairs_per_s", "eta_s", "elapsed_s", "datasets",
                 "peak_rss_bytes", "log")
# facts of the upload's check the site knows itself: a run's come from here, not from the job
DESCRIBED = ("model_type", "architecture", "n_parameters", "hidden_size", "layers",
             "weights_dtype")


def _clean(name: Any) -> str:
    text = " ".join(str(name).split()) if isinstance(name, str) else ""
    # a local path in _name_or_path says where the team trained it, not its name
    if text.startswith(("/", "./", "~")) or "\\" in text:
        text = text.rstrip("/").rsplit("/", 1)[-1]
    return text.strip("'\" ")[:NAME_CHARS]


def _named(text: str) -> str:
    """text as a model's name, or "" when it names nothing (a generic word, a hash)."""
    name = _clean(text)
    return "" if not name or _GENERIC.match(name) else name


def _front_value(front: str, key: str) -> str:
    """A front-matter key's value (or its list's first item), unquoted."""
    found = re.search(_KEY.format(key=re.escape(key)), front, re.MULTILINE)
    return _clean(found.group(1) or found.group(2)) if found else ""


def card_names(readme: str) -> tuple[str, str]:
    """(name, base model) a model card gives ("" for each it does not)."""
    front_match = _FRONT.match(readme)
    front = front_match.group(1) if front_match else ""
    body = readme[front_match.end():] if front_match else readme
    base = _front_value(front, "base_model")
    index = _INDEX_NAME.search(front)
    name = _front_value(front, "model_name") or (_clean(index.group(1)) if index else "")
    heading = _HEADING.search(body)
    if heading and not name:
        title = _clean(heading.group(1))
        generic = _ST_HEADING.match(title)
        if generic:  # a card sentence-transformers wrote: its heading names the base only
            base = base or _clean(generic.group(1))
        else:
            card = _CARD_HEADING.match(title)
            name = _clean(card.group(1)) if card else title
    return name, base


def folder_model_names(folder: Path, *, archive: Path | None = None,
                       filename: str = "") -> tuple[str, str]:
    """(the model's name, the checkpoint it was built on) from its folder, its zip and the
    uploaded file's name ("" for each that nothing gives); reads three small files."""
    try:
        with (folder / "README.md").open("rb") as f:
            name, base = card_names(f.read(64 << 10).decode("utf-8", "replace"))
    except OSError:
        name, base = "", ""
    origin = ""
    try:
        with (folder / "config.json").open("rb") as f:
            config = json.loads(f.read(1 << 20))
        if isinstance(config, dict) and isinstance(config.get("_name_or_path"), str):
            origin = config["_name_or_path"].strip()
    except (OSError, ValueError, RecursionError):
        pass
    saved_at = origin.startswith(("/", "./", "~")) or "\\" in origin
    if origin and not saved_at and not base:
        base = _clean(origin)  # a published checkpoint the weights were loaded from
    name = (name or _named(archive_top_folder(archive) if archive else "")
            or _named(Path(filename.replace("\\", "/")).name.removesuffix(".zip"))
            or (_named(origin) if saved_at else ""))
    return name, base if base != name else ""


def display_name(row: ModelSubmission) -> str:
    """The model's name for pages and the API: the form's, the folder's, else its class."""
    options, desc = row.options or {}, row.description or {}
    return str(options.get("model_name") or desc.get("model_name")
               or desc.get("architecture") or "model")


def base_model(row: ModelSubmission) -> str | None:
    """The checkpoint the model was built on, as its folder names it (None: not named)."""
    base = (row.description or {}).get("base_model")
    return str(base) if base and base != display_name(row) else None


def site_facts(row: ModelSubmission) -> dict[str, Any]:
    """What the site adds to a model run's facts from the upload itself: the model's name and
    base, the submission and zip it came from, and what the upload's check found of the
    weights (the job's own account of these is not taken)."""
    desc = row.description or {}
    facts = {key: desc[key] for key in DESCRIBED if desc.get(key) is not None}
    if desc.get("weights_sha256"):
        facts["weights_sha256"] = desc["weights_sha256"]
    return facts | {"model_submission_id": row.id, "archive_sha256": row.archive_sha256,
                    "model_name": display_name(row), "base_model": base_model(row),
                    # the team's declaration of record, carried with the run's facts
                    "training_data": (row.options or {}).get("training_data")}


def public_progress(progress: dict[str, Any] | None, status: str) -> dict[str, Any] | None:
    """The job's progress as the team sees it (None before the job started)."""
    if not progress:
        return None
    shown = {key: progress.get(key) for key in PROGRESS_KEYS}
    if status != "running":
        # an ended (or re-queued) job's last beat said "encoding": its state says what it is
        shown["eta_s"], shown["stage"] = None, status
    return shown


def run_model_facts(meta: dict[str, Any] | None, row: ModelSubmission | None
                    ) -> dict[str, Any]:
    """A model run's facts as its page shows them: every fact of the schema (None: not
    recorded), the weights' own sha256 apart from the folder's digest (runs made before they
    were told apart recorded the folder's digest as both: the upload's file list answers),
    the model's name and base."""
    facts = read_facts(meta)
    folder = facts.get("folder_digest") or facts.get("model_digest")
    if facts.get("weights_sha256") == folder:
        files = (row.description or {}).get("files") if row is not None else None
        facts["weights_sha256"] = weights_digest(files) if isinstance(files, dict) else None
    facts["folder_digest"] = folder
    return facts
