"""What a model submission says of itself beyond its state: its name, and its job's progress.

The name is what the team calls the model: the upload form's, else the folder's own
(`_name_or_path` in config.json, else the README's model-index name or first heading), else the
architecture. Progress is what the running job wrote (jobs.model_progress); the answer adds
nothing computed from input texts.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from semboard.models import ModelSubmission

NAME_CHARS = 120
_HEADING = re.compile(r"^#\s+(.+?)\s*$", re.MULTILINE)
_INDEX_NAME = re.compile(r"^model-index:\s*\n\s*-\s*name:\s*(.+?)\s*$", re.MULTILINE)
PROGRESS_KEYS = ("stage", "done", "total", "pairs_per_s", "eta_s", "elapsed_s", "datasets",
                 "peak_rss_bytes", "log")


def _clean(name: Any) -> str:
    text = " ".join(str(name).split()) if isinstance(name, str) else ""
    # a local path in _name_or_path says where the team trained it, not its name
    if text.startswith(("/", "./", "~")) or "\\" in text:
        text = text.rstrip("/").rsplit("/", 1)[-1]
    return text.strip("'\" ")[:NAME_CHARS]


def folder_model_name(folder: Path) -> str:
    """The model's name from its folder ("" when it gives none); reads two small files."""
    try:
        with (folder / "config.json").open("rb") as f:
            config = json.loads(f.read(1 << 20))
        name = _clean(config.get("_name_or_path")) if isinstance(config, dict) else ""
        if name:
            return name
    except (OSError, ValueError, RecursionError):
        pass
    try:
        with (folder / "README.md").open("rb") as f:
            readme = f.read(64 << 10).decode("utf-8", "replace")
    except OSError:
        return ""
    found = _INDEX_NAME.search(readme) or _HEADING.search(readme)
    return _clean(found.group(1)) if found else ""


def display_name(row: ModelSubmission) -> str:
    """The model's name for pages and the API: the form's, the folder's, else its class."""
    options, desc = row.options or {}, row.description or {}
    return str(options.get("model_name") or desc.get("model_name")
               or desc.get("architecture") or "model")


def public_progress(progress: dict[str, Any] | None, status: str) -> dict[str, Any] | None:
    """The job's progress as the team sees it (None before the job started)."""
    if not progress:
        return None
    shown = {key: progress.get(key) for key in PROGRESS_KEYS}
    if status != "running":
        shown["eta_s"] = None
    return shown
