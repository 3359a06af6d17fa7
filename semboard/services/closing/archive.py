"""A task's permanent record: a static site of what an anonymous visitor may see once it closed.

Boards (HTML, CSV, JSON, LaTeX), charts as SVG with their text versions, run pages, public gold
and inputs, a zip of the runs, the terms in force and an index stating when and from what it
was made. Every page links relatively and loads nothing from outside its folder, so it opens
from the file system. What enters is decided by services.access with no viewer (the read rule):
hidden boards, runs on no visible board, gold not released and data the definition does not
let be shown publicly (`public_inputs`, `public_gold`: inputs, items.csv's texts) stay out.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import shutil
import zipfile
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import jinja2
from sqlalchemy import select
from sqlalchemy.orm import Session, selectinload

from evaluation import __version__ as evaluation_version
from semboard.errors import DomainError, InvalidData, Phrase
from semboard.i18n import vocabulary
from semboard.i18n.catalogues import Words, bdi, native_digits
from semboard.i18n.languages import direction
from semboard.models import Phase, Run, Task
from semboard.services.boards import analysis, charts, chartsvg, leaderboard, reveal
from semboard.services.closing import descriptions
from semboard.services.data import gold, inputs, parts
from semboard.services.tasks import (
    access,
    citation,
    definitions,
    participation,
    tasks,
    terms,
    translations,
)
from semboard.storage import Storage

PROJECT_ROOT = Path(__file__).resolve().parents[3]
TEMPLATES = PROJECT_ROOT / "templates"
STYLESHEET = PROJECT_ROOT / "static" / "archive.css"
FORMAT = 1  # bumped when the archive's layout changes; stated in manifest.json


@dataclass
class Summary:
    """What an archive holds: counts for the command's report, and what was left out and why."""
    folder: Path
    phases: list[str] = field(default_factory=list)
    runs: int = 0
    files: int = 0
    size: int = 0
    left_out: list[str] = field(default_factory=list)


def safe_name(name: str) -> str:
    """A file or folder name that needs no escaping in a URL and is never a path."""
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._")
    return cleaned or "_"


def _environment(words: Words, native: bool = False) -> jinja2.Environment:
    """The archive's templates in words' language (gettext, names isolated, stored codes and
    the site's phrases said in it); scores in ASCII digits unless the task asks for its
    reader's own (native)."""
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)),
                             autoescape=True, undefined=jinja2.StrictUndefined,
                             trim_blocks=True, lstrip_blocks=True)
    words.install(env)
    env.globals.update(language=words.code, direction=direction(words.code))
    env.filters["bdi"] = bdi
    env.filters["word"] = lambda code: vocabulary.word(code, words)
    env.filters["say"] = words.say

    def metric(v: float | None, digits: int = 4) -> str:
        text = "—" if v is None else f"{v:.{digits}f}"
        return native_digits(text, words.code) if native else text

    env.filters["metric"] = metric
    env.filters["utc"] = lambda v: "—" if v is None else f"{v:%Y-%m-%d %H:%M} UTC"
    env.filters["isoutc"] = lambda v: "" if v is None else f"{v:%Y-%m-%dT%H:%M:%SZ}"
    return env


class _Writer:
    """Writes files under the archive folder and remembers each one's digest for the manifest."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.files: dict[str, dict[str, Any]] = {}

    def write(self, relative: str, data: bytes | str) -> None:
        payload = data.encode() if isinstance(data, str) else data
        path = self.folder / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(payload)
        self.files[relative] = {"size": len(payload),
                                "sha256": hashlib.sha256(payload).hexdigest()}


def _prepare_folder(out: Path) -> None:
    """A new or empty folder: an archive is never written over other files."""
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise InvalidData("%(out)s: the archive folder must be new or empty", out=out)
    out.mkdir(parents=True, exist_ok=True)


def _primary(board: leaderboard.Leaderboard) -> leaderboard.Column | None:
    """The column the CI chart shows: the first ranked one (the board's headline)."""
    return next((c for c in board.columns if c.ranked), board.columns[0] if board.columns
                else None)


def _chart(writer: _Writer, folder: str, name: str,
           spec: dict[str, Any] | None) -> dict[str, Any] | None:
    """Write one chart as SVG; what the page shows of it (file, title, text version)."""
    if spec is None:
        return None
    writer.write(f"{folder}/{name}.svg", chartsvg.render(spec))
    header, rows = chartsvg.text_version(spec)
    return {"name": name, "file": f"charts/{name}.svg", "title": spec.get("title", name),
            "description": spec.get("description", ""), "header": header, "rows": rows}


def _public_splits(session: Session, task: Task, now: datetime) -> dict[str, dict[str, bool]]:
    """Per split whose gold is public: whether the read rule lets anyone read its gold and its
    inputs (the definition's redistribution keys)."""
    whole = definitions.definition(task)
    found = {}
    for split in whole.splits:
        shown = {part: access.publicly_readable(session, task=task, part=part, split=split,
                                                now=now) for part in ("gold", "inputs")}
        if any(shown.values()):
            found[split] = shown
    return found


def _terms_text(session: Session, task: Task, now: datetime) -> str:
    """The terms in force when the archive is made: the task's, then each phase's own."""
    parts = []
    for phase in [None, *task.phases]:
        version = terms.current(session, task=task, phase=phase, now=now)
        if version is not None:
            where = f"phase {phase.slug}" if phase else task.name
            parts.append(f"Terms of {where} (version {version.digest}):\n\n{version.text}\n")
    return "\n\n".join(parts)


def _runs_zip(runs: list[Run], storage: Storage, phase_of: dict[int, Phase]) -> bytes:
    """The runs of the archive's boards: files as uploaded, description and scores of each
    (and a model-track run's model facts)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as bundle:
        for run in runs:
            folder = (f"runs/{safe_name(phase_of[run.id].slug)}/{safe_name(run.team.name)}/"
                      f"{safe_name(run.name)}")
            for f in run.files:
                bundle.writestr(f"{folder}/{safe_name(f.filename)}", storage.get(f.storage_key))
            bundle.writestr(f"{folder}/description.json", json.dumps(
                descriptions.to_json(run), indent=2, ensure_ascii=False))
            record = run.current_score
            facts: dict[str, Any] = {
                "run_id": run.id, "late": run.is_late, "post_deadline_fix": run.is_fix,
                "baseline": run.team.is_baseline, "submitted_at": run.submitted_at.isoformat(),
                "files": [{"filename": f.filename, "sha256": f.sha256} for f in run.files],
                "gold_digest": record.gold_digest if record else None,
                "scores": record.scores if record else None}
            model = leaderboard.model_facts(run.meta)
            if model is not None:  # a model-track run: what the site ran (other runs: as before)
                facts["model"] = model
            bundle.writestr(f"{folder}/scores.json",
                            json.dumps(facts, indent=2, ensure_ascii=False))
    return buffer.getvalue()


def write_archive(session: Session, storage: Storage, *, task: Task, out: Path, now: datetime,
                  compute_groups: bool = True, language: str | None = None) -> Summary:
    """Write the task's static archive into `out` (new or empty); what it holds.

    compute_groups: significance groups missing from the cache are computed and flushed (the
    caller commits), as `flask results export` does; False shows only cached groups.
    language: the pages' language (default: the task's own where the site speaks it, else
    English); the task's texts in it where its definition gives them.
    """
    words = Words(language or translations.own_language(task))
    if language and words.code != language:
        raise InvalidData("the site speaks no language %(code)s", code=language)
    _prepare_folder(out)
    writer = _Writer(out)
    env = _environment(words, translations.digits_native(task))
    whole = definitions.definition(task)
    summary = Summary(folder=out)
    all_phases = tasks.phases(session, task)
    shown = [p for p in all_phases if access.can_view_leaderboard(session, None, p)]
    summary.left_out = [Phrase("phase %(phase)s: its results are not published", phase=p.slug)
                        for p in all_phases if p not in shown]
    splits = _public_splits(session, task, now)
    made = {"at": now, "task": task, "definition_digest": task.definition_digest,
            "evaluation_version": evaluation_version, "format": FORMAT,
            "title": translations.task_title(task, words.code),
            "description": translations.task_description(task, words.code)}

    phase_pages = []
    archived_runs: list[Run] = []
    phase_of: dict[int, Phase] = {}
    for phase in shown:
        if access.sees_live(session, None, phase, now):
            board = leaderboard.build_leaderboard(
                session, task=task, phase=phase, viewer=None,
                storage=storage if compute_groups else None, now=now)
        else:  # frozen until its reveal: what a visitor sees is the board at the freeze
            board = reveal.build_board(session, phase=phase, kind="frozen")
        slug = safe_name(phase.slug)
        folder = f"phases/{slug}"
        extras = _beside(session, storage, writer, phase, folder, now, compute_groups, words)
        writer.write(f"{folder}/board.csv", board.to_csv())
        writer.write(f"{folder}/board.json",
                     json.dumps(board.to_json(), indent=2, ensure_ascii=False, allow_nan=False))
        writer.write(f"{folder}/board.tex", board.to_latex())
        primary = _primary(board)
        drawn = [c for c in (
            _chart(writer, f"{folder}/charts", "ci",
                   charts.board_ci_chart(board, board.intervals, primary.key, words)
                   if primary else None),
            _chart(writer, f"{folder}/charts", "heatmap", charts.board_heatmap(board, words)),
        ) if c is not None]
        runs = {r.id: r for r in session.scalars(
            select(Run).where(Run.id.in_([row.run_id for row in board.rows]))
            .options(selectinload(Run.files), selectinload(Run.scores),
                     selectinload(Run.team)))}
        references = leaderboard.bar_references(board)  # once per board, not per run
        for row in board.rows:
            run = runs[row.run_id]
            if not access.can_view_run(session, None, run, now=now):
                continue  # the board lists only visible runs; this keeps the rule in one place
            archived_runs.append(run)
            phase_of[run.id] = phase
            _run_page(session, env, writer, storage, board, row, run, made, phase, words,
                      references)
        writer.write(f"{folder}/index.html", env.get_template("archive/phase.html").render(
            root="../../", made=made, phase=phase, board=board, charts=drawn,
            missing_undefined=leaderboard.MISSING_UNDEFINED, extras=extras))
        phase_pages.append({"phase": phase, "folder": folder, "runs": len(board.rows)})
        summary.phases.append(phase.slug)

    data = _data_files(session, storage, writer, task, splits)
    writer.write("data/index.html", env.get_template("archive/data.html").render(
        root="../", made=made, data=data))
    writer.write("runs.zip", _runs_zip(archived_runs, storage, phase_of))
    writer.write("task.toml", task.definition_text)
    reuse = _licence_and_citation(writer, task, now)
    in_force = _terms_text(session, task, now)
    if in_force:
        writer.write("TERMS.txt", in_force)
    shutil.copyfile(STYLESHEET, out / "archive.css")
    writer.files["archive.css"] = {"size": STYLESHEET.stat().st_size,
                                   "sha256": hashlib.sha256(STYLESHEET.read_bytes()).hexdigest()}
    gold_digests = {split: gold.gold_digest(gold.current_gold(session, task=task, split=split))
                    for split, public in splits.items() if public["gold"]}
    writer.write("index.html", env.get_template("archive/index.html").render(
        root="", made=made, definition=whole, phases=phase_pages, data=data,
        gold_digests=gold_digests, left_out=summary.left_out, n_runs=len(archived_runs),
        reuse=reuse, has_terms=bool(in_force)))
    manifest = {
        "format": FORMAT, "task": task.name, "title": task.title,
        "made_at": now.isoformat(), "definition_digest": task.definition_digest,
        "evaluation_version": evaluation_version, "gold_digests": gold_digests,
        "phases": summary.phases, "left_out": [str(why) for why in summary.left_out],
        "language": words.code,
        "license": reuse["license"], "terms": terms.counts(session, task=task, now=now),
        "redistribution": {f"public_{part}": shown for part, shown in
                           access.shown_publicly(session, task=task, now=now).items()},
        "files": dict(sorted(writer.files.items())),
    }
    writer.write("manifest.json", json.dumps(manifest, indent=2, ensure_ascii=False))
    summary.runs = len(archived_runs)
    summary.files = len(writer.files)
    summary.size = sum(f["size"] for f in writer.files.values())
    return summary


def _beside(session: Session, storage: Storage, writer: _Writer, phase: Phase, folder: str,
            now: datetime, compute: bool, words: Words) -> list[str]:
    """The boards beside the phase's own a visitor may see (frozen; once revealed the private
    and whole boards, the shake-up report and its chart, and the split where its gold is
    public); their file names."""
    if not reveal.kinds_of(phase):
        return []
    if compute:  # as the groups: what is missing is computed now (the caller commits)
        reveal.prepare(session, storage, phase=phase, now=now)
    found = reveal.stored_exports(session, phase=phase, viewer=None, now=now)
    for name, text in found.items():
        writer.write(f"{folder}/{name}", text)
    names = sorted(found)
    if "shakeup.json" in found:
        spec = reveal.report_chart(json.loads(found["shakeup.json"]), words)
        if spec is not None:
            writer.write(f"{folder}/charts/shakeup.svg", chartsvg.render(spec))
            names.append("charts/shakeup.svg")
    try:
        _, data = parts.download_split(session, storage, phase=phase, viewer=None, now=now)
    except DomainError:
        return names
    writer.write(f"{folder}/split.tsv", data)
    return [*names, "split.tsv"]


def _licence_and_citation(writer: _Writer, task: Task, now: datetime) -> dict[str, Any]:
    """LICENSE and CITATION.cff (and the BibTeX entry) where the definition states them."""
    rules = participation.rules(task)
    text = citation.license_text(rules, title=task.title, terms_url=rules.terms_url or None)
    if text:
        writer.write("LICENSE", text)
    if rules.citation:
        writer.write("CITATION.bib", rules.citation + "\n")
    if rules.citation or rules.license:
        writer.write("CITATION.cff", citation.citation_cff(
            title=task.title, rules=rules, url=rules.terms_url or None,
            released=task.gold_released_at or now))
    return {"license": rules.license or None, "license_is_spdx": rules.license_is_spdx,
            "citation": rules.citation or None, "terms_url": rules.terms_url or None,
            "has_license_file": bool(text)}


def _data_files(session: Session, storage: Storage, writer: _Writer, task: Task,
                splits: dict[str, dict[str, bool]]) -> list[dict[str, Any]]:
    """Copy each public split's inputs and gold; the data page's listing."""
    listing = []
    for split, public in splits.items():
        entry: dict[str, Any] = {"split": split, "inputs": [], "gold": [],
                                 "gold_public": public["gold"]}
        kinds: list[tuple[str, dict[str, Any]]] = []
        if public["inputs"]:
            kinds.append(("inputs", inputs.current_inputs(session, task=task, split=split)))
        if public["gold"]:
            kinds.append(("gold", gold.current_gold(session, task=task, split=split)))
        for kind, rows in kinds:
            for dataset, row in sorted(rows.items()):
                path = f"data/{safe_name(split)}/{kind}/{safe_name(row.filename)}"
                writer.write(path, storage.get(row.storage_key))
                entry[kind].append({"dataset": dataset, "file": path.removeprefix("data/"),
                                    "filename": row.filename, "items": row.n_items,
                                    "sha256": row.sha256, "version": row.version})
        listing.append(entry)
    return listing


def _item_charts(session: Session, storage: Storage, writer: _Writer, run: Run,
                 folder: str, words: Words,
                 now: datetime) -> tuple[list[dict[str, Any]], str | None]:
    """The gold charts and the pairs' CSV, where an anonymous visitor may see the run's items
    (their texts only where the read rule lets anyone read the inputs)."""
    if not access.can_view_items(session, None, run, now=now):
        return [], None
    found = analysis.run_items(session, storage, run=run, viewer=None, now=now)
    points = analysis.scatter_points(found)
    drawn = [_chart(writer, f"{folder}/charts", "scatter",
                    charts.gold_scatter(points, analysis.fit_lines(found), words)),
             _chart(writer, f"{folder}/charts", "distribution",
                    charts.distribution(points, words))]
    writer.write(f"{folder}/items.csv", analysis.items_csv(found.largest_errors()))
    return [c for c in drawn if c is not None], "items.csv"


def _run_page(session: Session, env: jinja2.Environment, writer: _Writer, storage: Storage,
              board: leaderboard.Leaderboard, row: leaderboard.Row, run: Run,
              made: dict[str, Any], phase: Phase, words: Words,
              references: leaderboard.BarReferences) -> None:
    """The run's page, its files and its bars chart under runs/ID/."""
    folder = f"runs/{run.id}"
    files = []
    for f in run.files:
        path = f"files/{safe_name(f.filename)}"
        writer.write(f"{folder}/{path}", storage.get(f.storage_key))
        files.append({"path": path, "filename": f.filename, "dataset": f.dataset,
                      "size": f.size, "sha256": f.sha256})
    record = run.current_score
    scores = record.scores if record else {}
    bars = _chart(writer, f"{folder}/charts", "bars",
                  leaderboard.run_bars_spec(board, row, scores, words, references))
    gold_charts, items = _item_charts(session, storage, writer, run, folder, words, made["at"])
    writer.write(f"{folder}/index.html", env.get_template("archive/run.html").render(
        root="../../", made=made, run=run, row=row, phase=phase, record=record, scores=scores,
        phase_folder=f"phases/{safe_name(phase.slug)}",
        files=files, charts=([bars] if bars else []) + gold_charts, items=items,
        description=descriptions.to_json(run)))

