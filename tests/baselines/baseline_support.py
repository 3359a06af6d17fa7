"""Helpers of the baselines tests (synthetic releases, optional-dependency skips)."""

from __future__ import annotations

import csv
import io
import os
from pathlib import Path

import pytest

from evaluation import load_task

TASKS = ("sts2012", "clss2014", "semrel2024")
IN_CI = os.environ.get("CI", "").lower() == "true"

_SENTENCES = [
    ("A man is playing a guitar.", "A man plays the guitar."),
    ("The cat sits on the mat.", "Stock markets fell sharply today."),
    ("Three children run in the park.", "Kids are running in a park."),
    ("A woman slices an onion.", "Someone is cutting an onion."),
    ("The train arrives at noon.", "The weather is cold."),
    ("He reads a book.", "He reads a book."),
]


def missing(reason: str) -> None:
    """Skip for a missing optional dependency, but fail in CI where everything is installed."""
    if IN_CI:
        pytest.fail(f"{reason} (CI=true installs it)")
    pytest.skip(reason)


def write_synthetic_release(task_name: str, root: Path) -> Path:
    """Write six pairs for every dataset of a task, in its official layout and input format."""
    task = load_task(task_name)
    for spec in task.datasets:
        path = root / spec.input_path
        path.parent.mkdir(parents=True, exist_ok=True)
        if task_name == "sts2012":
            text = "".join(f"{a}\t{b}\n" for a, b in _SENTENCES)
        elif task_name == "clss2014" and spec.name == "word2sense":
            rows = [("physicist#n", "daniel_bernoulli%1:18:00::", "Daniel_Bernoulli#n#1"),
                    ("attract#v", "bewitch%2:37:00::", "bewitch#v#1"),
                    ("high#n", "low_spirits%1:26:00::", "low_spirits#n#1"),
                    ("salt#v", "salt%2:30:00::", "salt#v#1"),
                    ("bank#n", "bank%1:14:00::", "bank#n#1"),
                    ("run#v", "operate%2:41:00::", "operate#v#1")]
            text = "".join(f"{w}\t{k}\t{s}\tw2s-{i}\n" for i, (w, k, s) in enumerate(rows, 1))
        elif task_name == "clss2014":
            text = "".join(f"{a} {b}\t{b}\tNewswire-{i}\n"
                           for i, (a, b) in enumerate(_SENTENCES, 1))
        else:
            out = io.StringIO()
            writer = csv.writer(out, lineterminator="\n")
            writer.writerow(["PairID", "Text"])
            for i, (a, b) in enumerate(_SENTENCES, 1):
                writer.writerow([f"{spec.name.upper()}-test-{i:04d}", f"{a}\n{b}"])
            text = out.getvalue()
        path.write_text(text, encoding="utf-8")
    return root


def release_dir(shared_data: Path, task: str) -> Path:
    """The official release folder of a task inside the shared data."""
    return shared_data / "sts2012" / "test" if task == "sts2012" else shared_data / task
