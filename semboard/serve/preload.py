"""What a server process loads at its start rather than on its first large upload (issue 45).

A web worker, the `flask worker` and its kept groups process each load pyarrow's CSV reader
(the fast reader of big runs and gold files, evaluation.fastparse) and the queue client the
first time a large run comes: about 30 MiB resident, which a first upload of 61.5 MiB would
otherwise count against its own peak. Loaded once here, at the process's start, by the
deployed entry points: gunicorn's post_worker_init (semboard.serve.gunicorn_conf, which the
image and docs/DEPLOY.md start gunicorn with), `flask worker` and the groups process.
"""

from __future__ import annotations

import gc
import importlib
import sys

from flask import Flask

from evaluation.fastparse import ARROW_MIN_BYTES, arrow_float_columns

# imported on a large upload's first validation (pyarrow), queueing (rq, in a web worker with
# REDIS_URL) and scoring; every one is a declared dependency
MODULES = ("pyarrow", "pyarrow.csv", "rq", "evaluation.scoring", "evaluation.significance")

# The collector's first threshold (net allocations of tracked objects between young passes).
# Python 3.11's 700 lands a young pass or two in each board page's first GET (0.6-1 ms each at
# 5,000 runs, while the version read and the page's rows are alive), and every 100th is a full
# pass; a server's requests free nearly everything they allocate by reference counting, so
# a larger threshold runs the collector less often for the same garbage (3.12 raised it to 2,000).
YOUNG_THRESHOLD = 10_000


def preload() -> list[str]:
    """Import MODULES, read one small file with the fast reader (its parser's first use loads
    code and sets up its memory pool), freeze what is loaded and raise the collector's first
    threshold; the modules newly loaded."""
    new = [name for name in MODULES if name not in sys.modules]
    for name in MODULES:
        importlib.import_module(name)
    arrow_float_columns(b"0\n" * (ARROW_MIN_BYTES // 2), 1)
    # What is loaded now lives as long as the process (modules, the app: about 170,000 objects
    # the collector tracks). Frozen, a full collection no longer walks them all: without it
    # one lands on some first GET after a board version is read and costs 5-25 ms there,
    # more the more the process holds (Python's gc docs recommend the same for servers).
    gc.collect()
    gc.freeze()
    gc.set_threshold(YOUNG_THRESHOLD, *gc.get_threshold()[1:])
    return new


def compile_templates(app: Flask) -> int:
    """Compile every template of `app` into its Jinja environment's cache (kept: a server does
    not reload templates), so no request compiles one: a worker's first board page compiled
    five, 120 ms, inside the first GET after an upload; how many were compiled."""
    env = app.jinja_env
    names = env.list_templates()
    for name in names:
        env.get_template(name)
    return len(names)
