"""docs/TASKS.md cannot drift (issue 46): every TOML block in it is loaded, and every worked
example is a shipped definition, printed whole, run by the CLI on a fixture in its release's own
format against figures computed the way the official scorer computes them.

Markers in the Markdown, on the line before a block:
- `<!-- example: tasks/NAME.toml; release: FOLDER -->`: the block is that file; OFFICIAL[NAME]
  scores every run of FOLDER with `python -m evaluation score` and the official rules;
- `<!-- onto: tasks/NAME.toml -->`: a snippet of that shipped definition, merged onto it;
- no marker: a snippet merged onto a minimal definition (BASE).
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from scipy.stats import spearmanr
from sklearn.metrics import accuracy_score

from evaluation import parse_task
from evaluation.cli import main
from tests.evaluation.pit2015_reference import official_scores

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "TASKS.md"
BLOCK = re.compile(r"(?:<!-- (?P<marker>[^>]*) -->\n)?```toml\n(?P<body>.*?)```", re.S)
BASE = """
name = "base"
[layout]
input = "in.{dataset}.txt"
gold = "gs.{dataset}.txt"
[scores]
min = 0
max = 5
[run]
filename = "out.{dataset}.txt"
[metrics]
dataset = ["pearson"]
primary = "pearson"
[[datasets]]
name = "d"
"""


def _blocks() -> list[tuple[int, str, str]]:
    """(line, marker, body) of every TOML block of TASKS.md."""
    text = DOCS.read_text()
    return [(text.count("\n", 0, m.start("body")) + 1, m.group("marker") or "", m.group("body"))
            for m in BLOCK.finditer(text)]


def _merge(base: Any, snippet: Any) -> Any:
    """The snippet's keys over the base's; tables of a list (datasets, splits) by name."""
    if isinstance(base, dict) and isinstance(snippet, dict):
        out = dict(base)
        for key, value in snippet.items():
            out[key] = _merge(base[key], value) if key in base else value
        return out
    if (isinstance(base, list) and isinstance(snippet, list) and snippet
            and all(isinstance(t, dict) and ("name" in t or "key" in t) for t in snippet)):
        key = "name" if "name" in snippet[0] else "key"
        out = list(base)
        for table in snippet:
            at = next((i for i, t in enumerate(out) if t.get(key) == table[key]), None)
            if at is None:
                out.append(table)
            else:
                out[at] = _merge(out[at], table)
        return out
    return snippet


def _toml(doc: dict[str, Any]) -> str:
    """A document as TOML text (enough for definitions: tables, arrays of tables, scalars)."""
    def value(v: Any) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, str):
            return json.dumps(v)
        if isinstance(v, list):
            return "[" + ", ".join(value(x) for x in v) + "]"
        if isinstance(v, dict):
            return "{ " + ", ".join(f"{json.dumps(k)} = {value(x)}" for k, x in v.items()) + " }"
        return repr(v)

    lines: list[str] = []

    def table(prefix: str, t: dict[str, Any], header: str | None) -> None:
        if header:
            lines.append(header)
        for k, v in t.items():
            if not isinstance(v, dict) and not (isinstance(v, list) and v and all(
                    isinstance(x, dict) for x in v) and k in ("datasets", "splits", "questions")):
                lines.append(f"{json.dumps(k)} = {value(v)}")
        for k, v in t.items():
            name = f"{prefix}{json.dumps(k)}"
            if isinstance(v, dict):
                table(f"{name}.", v, f"[{name}]")
            elif isinstance(v, list) and v and all(isinstance(x, dict) for x in v) and k in (
                    "datasets", "splits", "questions"):
                for x in v:
                    table(f"{name}.", x, f"[[{name}]]")

    table("", doc, None)
    return "\n".join(lines) + "\n"


SNIPPETS = [b for b in _blocks() if not b[1].startswith("example:")]


@pytest.mark.parametrize("line,marker,body", SNIPPETS,
                         ids=[f"TASKS.md:{line}" for line, _, _ in SNIPPETS])
def test_every_snippet_loads_where_it_belongs(line, marker, body):
    snippet = tomllib.loads(body)
    onto = marker.removeprefix("onto: ") if marker.startswith("onto: ") else None
    assert onto is None or marker.startswith("onto: "), f"TASKS.md:{line}: unknown {marker!r}"
    base = tomllib.loads((ROOT / onto).read_text() if onto else BASE)
    merged = _merge(base, snippet)
    parse_task(_toml(merged), source=f"TASKS.md:{line}")


def _cli(task: str, release: Path, run: Path, capsys: pytest.CaptureFixture[str]
         ) -> dict[str, float | None]:
    assert main(["score", "--task", task, "--gold", str(release), "--run", str(run), "--json",
                 "--no-ci"]) == 0
    score = json.loads(capsys.readouterr().out)
    return {f"{d}/{m}": v["value"] for d, s in score["datasets"].items()
            for m, v in s["metrics"].items()}


def _pit2015(release: Path, capsys: pytest.CaptureFixture[str]) -> int:
    """Every run of the release against the official scorer's rules (pit2015_reference)."""
    where = {"f1": "binary/f1", "precision": "binary/precision", "recall": "binary/recall",
             "pearson": "degree/pearson", "max_f1": "ranked/max_f1",
             "max_f1_precision": "ranked/max_f1_precision",
             "max_f1_recall": "ranked/max_f1_recall"}
    runs = sorted(release.glob("PIT2015_*.output"))
    for run in runs:
        got = _cli("pit2015", release, run, capsys)
        want = official_scores((release / "test.label").read_text(), run.read_text())
        for column, key in where.items():
            assert got[key] == pytest.approx(want[column], abs=1e-12), (run.name, column)
    return len(runs)


def _lsc2020(release: Path, capsys: pytest.CaptureFixture[str]) -> int:
    """The answer folder against the scoring program's accuracy_score and spearmanr."""
    got = _cli("lsc2020", release, release / "answer", capsys)

    def pairs(path: Path) -> dict[str, str]:
        return dict(line.split("\t") for line in path.read_text("utf-8").splitlines())

    for language in ("english", "german"):
        truth = pairs(release / "test_data_truth/task1" / f"{language}.txt")
        answer = pairs(release / "answer/task1" / f"{language}.txt")
        assert got[f"binary-{language}/accuracy"] == pytest.approx(accuracy_score(
            [int(truth[w]) for w in truth], [int(answer[w]) for w in truth]), abs=1e-12)
        truth = pairs(release / "test_data_truth/task2" / f"{language}.txt")
        answer = pairs(release / "answer/task2" / f"{language}.txt")
        assert got[f"graded-{language}/spearman"] == pytest.approx(spearmanr(
            [float(answer[w]) for w in truth], [float(truth[w]) for w in truth]).statistic,
            abs=1e-12)
    return 1


OFFICIAL: dict[str, Callable[[Path, pytest.CaptureFixture[str]], int]] = {
    "pit2015": _pit2015, "lsc2020": _lsc2020}
"""How each worked example's official scorer computes its figures."""


def _examples() -> list[tuple[int, str, str, Path]]:
    found = []
    for line, marker, body in _blocks():
        if marker.startswith("example:"):
            fields = dict(part.strip().split(": ", 1) for part in marker.split(";"))
            found.append((line, fields["example"], body, ROOT / fields["release"]))
    return found


def test_every_worked_example_has_its_official_scorer():
    names = [Path(shipped).stem for _, shipped, _, _ in _examples()]
    assert sorted(names) == sorted(OFFICIAL)


@pytest.mark.parametrize("line,shipped,body,release", _examples(),
                         ids=[Path(shipped).stem for _, shipped, _, _ in _examples()])
def test_each_worked_example_is_shipped_and_scores_its_release_as_the_official_scorer(
        line, shipped, body, release, capsys):
    assert body == (ROOT / shipped).read_text(), f"TASKS.md:{line} is not {shipped}"
    assert OFFICIAL[Path(shipped).stem](release, capsys) >= 1
