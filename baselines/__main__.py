"""Command line: ``python -m baselines TASK --inputs DIR --system NAME --out DIR``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from baselines.runner import run_system
from baselines.systems import SYSTEM_NAMES
from evaluation import TaskDefinitionError, ValidationError, load_inputs, load_task, validate_run


def main(argv: list[str] | None = None) -> int:
    """Run one baseline over a release folder and write a run folder; print its metadata."""
    parser = argparse.ArgumentParser(prog="python -m baselines", description=__doc__)
    parser.add_argument("task", help="shipped task name (sts2012, ...) or a .toml path")
    parser.add_argument("--inputs", required=True, type=Path,
                        help="official release folder holding the task's input files")
    parser.add_argument("--system", required=True, choices=SYSTEM_NAMES)
    parser.add_argument("--out", required=True, type=Path, help="run folder to create")
    parser.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--datasets", nargs="*", help="only these datasets")
    parser.add_argument("--metadata", type=Path, help="also write the metadata JSON here")
    parser.add_argument("--json", action="store_true",
                        help="print the run's metadata as JSON instead of a one-line summary")
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(argv)
    try:
        task = load_task(args.task)
    except TaskDefinitionError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        inputs = load_inputs(task, args.inputs)
    except ValidationError as exc:
        for issue in exc.issues:
            print(f"error: {issue}", file=sys.stderr)
        return 2
    if args.datasets:
        missing = sorted(set(args.datasets) - set(inputs))
        if missing:
            print(f"error: no inputs for {', '.join(missing)} in {args.inputs}", file=sys.stderr)
            return 2
        inputs = {k: v for k, v in inputs.items() if k in args.datasets}
    total = sum(len(v) for v in inputs.values())
    from tqdm import tqdm

    try:
        with tqdm(total=total, unit="pair", disable=args.no_progress, file=sys.stderr) as bar:
            run = run_system(task, inputs, args.system, device=args.device, seed=args.seed,
                             progress=bar.update)
    except (RuntimeError, ImportError) as exc:  # no GPU for --device cuda, extra missing
        print(f"error: {exc}", file=sys.stderr)
        return 2
    checked = validate_run(task, run.files, inputs, datasets=list(inputs))
    if not checked.ok:
        for issue in checked.issues:
            print(f"error: {issue}", file=sys.stderr)
        return 1
    args.out.mkdir(parents=True, exist_ok=True)
    for name, content in run.files.items():
        (args.out / name).write_bytes(content)
    text = json.dumps(run.metadata, indent=2)
    if args.metadata:
        args.metadata.write_text(text + "\n", encoding="utf-8")
    if args.json:
        print(text)  # stdout stays one JSON document
    else:
        meta = run.metadata
        print(f"{meta.get('system')}: {meta.get('n_pairs')} pairs in {len(run.files)} file(s) "
              f"written to {args.out} ({meta.get('pairs_per_s', 0):.0f} pairs/s)")
    # the signature line is for the person at the terminal
    print(f"signature: {run.metadata.get('signature')}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
