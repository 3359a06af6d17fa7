"""Command line: `python -m evaluation score|validate|tasks`."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from evaluation.inputs import load_gold, load_inputs
from evaluation.issues import TaskDefinitionError, ValidationError
from evaluation.runs import ValidatedRun, read_run_files, validate_run
from evaluation.scoring import MetricValue, RunScore, score_run
from evaluation.taskdef import TaskDefinition, list_tasks, load_task

EXIT_OK, EXIT_INVALID, EXIT_USAGE = 0, 1, 2
# an undefined value in the table, as the official scorers printed one (pit2015_eval_single.py)
UNDEFINED = "---"


class _Formatter(argparse.HelpFormatter):
    """argparse's help layout, the terminal's width read without shutil: argparse makes a
    formatter for every add_argument, and shutil's import (bz2, lzma) costs the scorer's start."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24,
                 width: int | None = None) -> None:
        super().__init__(prog, indent_increment, max_help_position,
                         _columns() - 2 if width is None else width)


def _columns() -> int:
    """shutil.get_terminal_size().columns: $COLUMNS, else the terminal's, else 80."""
    try:
        columns = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or 80


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m evaluation",
                description="Validate and score runs of semantic similarity shared tasks.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    def common(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--task", required=True,
                        help="a shipped task name (" + ", ".join(list_tasks()) + ") or a .toml")
        sp.add_argument("--run", required=True, type=Path,
                        help="a run folder, one run file, or a .zip")
        sp.add_argument("--team", help="the uploader's team: a different team token in a file "
                        "name is reported")
        sp.add_argument("--track", help="restrict the expected datasets to one track")
        sp.add_argument("--datasets", help="restrict the expected datasets (comma-separated)")
        sp.add_argument("--json", action="store_true", help="print JSON instead of a table")
        sp.add_argument("--split", help="the definition's split (default: its default split)")

    s = sub.add_parser("score", help="validate a run and score it against gold")
    common(s)
    s.add_argument("--gold", required=True, type=Path,
                   help="the official release folder holding the gold (e.g. sts2012/test)")
    s.add_argument("--inputs", type=Path, help="release folder of the inputs (default: --gold)")
    s.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples (1000)")
    s.add_argument("--seed", type=int, default=12345, help="bootstrap seed (12345)")
    s.add_argument("--no-ci", action="store_true", help="skip bootstrap confidence intervals")
    s.add_argument("--parts", type=Path, help="a split file (dataset, id, usage): score the "
                   "public part, the private part and the whole")

    d = sub.add_parser("parts", help="draw a task's split of its test items into public, "
                       "private and ignored parts ([parts] in the definition)")
    d.add_argument("--task", required=True, help="a shipped task name or a .toml with [parts]")
    d.add_argument("--gold", required=True, type=Path, help="the release folder with the gold")
    d.add_argument("--inputs", type=Path, help="release folder of the inputs (default: --gold)")
    d.add_argument("--seed", required=True, type=int, help="the draw's seed")
    d.add_argument("--split", help="the definition's split (default: its default split)")
    d.add_argument("--output", type=Path, help="write the split here (default: print it)")

    v = sub.add_parser("validate", help="check a run against the inputs before uploading")
    common(v)
    v.add_argument("--inputs", required=True, type=Path,
                   help="the release folder with the input files")
    sub.add_parser("tasks", help="list the shipped task definitions")
    return p


def _usage(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return EXIT_USAGE


def _fmt(mv: MetricValue | None) -> str:
    if mv is None:
        return "-"
    if mv.value is None:
        return UNDEFINED  # its warning below says why
    text = f"{mv.value:.4f}"
    if mv.ci:
        text += f" [{mv.ci[0]:.4f}, {mv.ci[1]:.4f}]"
    return text


def render_table(task: TaskDefinition, score: RunScore) -> str:
    """A readable plain-text table of a run's scores."""
    out: list[str] = [f"{task.title}"]
    if score.aggregates:
        out.append("")
        width = max(len(k) for k in score.aggregates)
        for k, mv in score.aggregates.items():
            out.append(f"  {k:<{width}}  {_fmt(mv)}")
    out.append("")
    # every dataset's own metrics (SICK's subtasks differ), in first-seen order
    metric_names = list(dict.fromkeys(m for d in task.dataset_names
                                      for m in task.dataset_metrics(d)))
    name_w = max([len("dataset")] + [len(d) + 2 for d in score.datasets]
                 + [len(g) + 4 for s in score.datasets.values() for g in s.genres])
    col_w = 28
    out.append(f"  {'dataset':<{name_w}} {'n':>6}  " + "".join(f"{m:<{col_w}}"
                                                          for m in metric_names).rstrip())
    for d, s in score.datasets.items():
        cells = "".join(f"{_fmt(s.metrics.get(m)):<{col_w}}" for m in metric_names)
        out.append(f"  {d:<{name_w}} {s.n:>6}  {cells}".rstrip())
        for g, gs in sorted(s.genres.items()):
            cells = "".join(f"{_fmt(gs.metrics.get(m)):<{col_w}}" for m in metric_names)
            out.append(f"    {g:<{name_w - 2}} {gs.n:>6}  {cells}".rstrip())
    partly = [f"{d} ({s.unscored_pairs})" for d, s in score.datasets.items() if s.unscored_pairs]
    if partly:
        out.append(f"\n  n counts scored pairs; pairs without gold left out: {', '.join(partly)}")
    banded = [f"{d} ({s.excluded_pairs})" for d, s in score.datasets.items() if s.excluded_pairs]
    if banded:
        out.append(f"\n  pairs excluded by the gold band (gold.exclude): {', '.join(banded)}")
    if score.unscored:
        out.append(f"\n  unscored (no gold): {', '.join(score.unscored)}")
    if score.skipped:
        out.append(f"  skipped by the run: {', '.join(score.skipped)}")
    if score.warnings:
        out.append("\nwarnings:")
        out.extend(f"  {w}" for w in score.warnings)
    sig = score.signature
    boot = f"boot:{sig['boot']}|seed:{sig['seed']}" if sig.get("boot") else "boot:none"
    out.append(f"\nsignature: {sig['task']}|nan:{sig['nan']}|{boot}|v:{sig['version']}")
    return "\n".join(out)


def _print_invalid(run: ValidatedRun, as_json: bool) -> None:
    if as_json:
        print(json.dumps(run.to_dict(), indent=2))
        return
    print(f"invalid run: {len(run.issues)} problem(s)")
    for issue in run.issues:
        print(str(issue))


def _datasets_for(task: TaskDefinition, track: str | None,
                  names: str | None) -> Sequence[str] | None:
    chosen: list[str] | None = None
    if track is not None:
        chosen = list(task.track_datasets(track))
    if names:
        wanted = [n.strip() for n in names.split(",") if n.strip()]
        for n in wanted:
            task.dataset(n)
        chosen = [n for n in (chosen or wanted) if n in wanted]
    return chosen


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit status (0 ok, 1 invalid run, 2 usage error)."""
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    if args.command == "tasks":
        for name in list_tasks():
            print(f"{name}\t{load_task(name).title}")
        return EXIT_OK
    if args.command == "parts":
        return _draw_parts(args)
    try:
        task = load_task(args.task)
        if args.split:
            task = task.for_split(args.split)
        datasets = _datasets_for(task, args.track, args.datasets)
    except TaskDefinitionError as exc:
        return _usage(str(exc))
    except KeyError as exc:
        return _usage(str(exc.args[0]))
    inputs_dir = args.inputs if args.inputs is not None else args.gold
    if not inputs_dir.is_dir():
        return _usage(f"not a folder: {inputs_dir}")
    try:
        inputs = load_inputs(task, inputs_dir, texts=False)
        files = read_run_files(args.run, keep_folders=task.run_folders)
    except FileNotFoundError as exc:
        return _usage(str(exc))
    except ValidationError as exc:
        if any(i.code == "no-inputs" for i in exc.issues):
            return _usage(str(exc))
        print("\n".join(str(i) for i in exc.issues))
        return EXIT_INVALID
    run = validate_run(task, files, inputs, team=args.team, datasets=datasets)
    if not run.ok:
        _print_invalid(run, args.json)
        return EXIT_INVALID
    if args.command == "validate":
        if args.json:
            print(json.dumps(run.to_dict(), indent=2))
        else:
            names = ", ".join(f"{d} ({p.filename}, {len(p)} pairs)"
                              for d, p in run.predictions.items())
            print(f"valid run for {task.name}: {names}")
            for sub in run.substitutions:
                print(str(sub))
            if run.skipped:
                print(f"skipped: {', '.join(run.skipped)}")
        return EXIT_OK
    if args.resamples < 0:
        return _usage("--resamples must be 0 or more")
    if not args.gold.is_dir():
        return _usage(f"not a folder: {args.gold}")
    try:
        gold = load_gold(task, args.gold, inputs)
    except ValidationError as exc:
        return _usage("bad gold:\n" + "\n".join(str(i) for i in exc.issues))
    if args.parts is not None:
        return _score_parts(task, run, gold, args)
    score = score_run(task, run, gold, resamples=args.resamples, seed=args.seed,
                      confidence_intervals=not args.no_ci)
    if args.json:
        print(json.dumps(score.to_dict(), indent=2))
    else:
        print(render_table(task, score))
    return EXIT_OK


def _rule(task: TaskDefinition) -> Any:
    from evaluation.partsrule import PartsRule, parts_rule  # on use: only these commands need it

    return parts_rule(task) or PartsRule(phases=())


def _draw_parts(args: argparse.Namespace) -> int:
    """`parts`: the seeded split of the gold's items by the definition's rule."""
    from evaluation.parts import draw_parts  # on use: only this command needs it

    try:
        task = load_task(args.task)
        if args.split:
            task = task.for_split(args.split)
        inputs = load_inputs(task, args.inputs or args.gold, texts=False)
        gold = load_gold(task, args.gold, inputs)
    except (TaskDefinitionError, FileNotFoundError, KeyError) as exc:
        return _usage(str(exc))
    except ValidationError as exc:
        return _usage("bad gold:\n" + "\n".join(str(i) for i in exc.issues))
    found = draw_parts(gold, _rule(task), seed=args.seed)
    if args.output:
        args.output.write_text(found.text(), encoding="utf-8")
        print(f"wrote {args.output}: digest {found.digest}; {found.rule}; seed {args.seed}")
    else:
        sys.stdout.write(found.text())
    return EXIT_OK


def _score_parts(task: TaskDefinition, run: ValidatedRun, gold: Any,
                 args: argparse.Namespace) -> int:
    """`score --parts FILE`: the run on the public part, the private part and the whole."""
    from evaluation.parts import read_parts, score_parts  # on use: only this option needs it

    try:
        items = read_parts(args.parts.read_bytes(), {d: g.ids for d, g in gold.items()},
                           filename=args.parts.name, rule=_rule(task))
    except FileNotFoundError as exc:
        return _usage(str(exc))
    except ValidationError as exc:
        print("\n".join(str(i) for i in exc.issues))
        return EXIT_INVALID
    scores = score_parts(task, run, gold, items, resamples=args.resamples, seed=args.seed,
                         confidence_intervals=not args.no_ci)
    if args.json:
        print(json.dumps({part: s.to_dict() for part, s in scores.items()}, indent=2))
    else:
        for part, score in scores.items():
            print(f"== {part} ({items.size(part)} items; split {items.digest[:12]})")
            print(render_table(task, score))
    return EXIT_OK
