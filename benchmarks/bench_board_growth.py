"""Upload to visible, and the first board view after it, as a board grows (in process).

    python benchmarks/bench_board_growth.py [--data ../shared/data] [--runs 20 500 2000 5000]
                                            [--uploads 7] [--before REV] [--site-dir DIR]
                                            [--gzip] [--profile DIR] [--profile-steps N]
                                            [--groups] [--grouped] [--preload]

For each size: a scratch SQLite site with the real sts2012 task and N teams with one run each,
seeded in bulk (seed_site): 10 runs go through the real `submit` (validated, stored, scored
without CIs: they do not change what a board costs), then the other teams, runs and score records
are inserted in three bulk INSERTs, each score a copy of a real one with every value scaled by its
own factor (distinct records and digests, as on a real board; a 5,000-run site in seconds, where
uploading each run took 549 s for 500). No groups, but with --groups: a kept groups process (a
third process, as `jobs.boards`' kept one) computes and stores the board's groups and its version
with them before the first upload and after each, so every board step finds a new grouping (the
bulk runs have no files: their samples are left out, their pairs covered all the same).
With --grouped (implies --groups) the bulk runs get file rows too, each a copy of a template
run's (the same stored files, taken in turn): the groups process then reads real samples for
every run and groups (nearly) every run, as on a real board, and the other worker also takes
the first GET of each version the groups round stores (the grouped one), printed as
"other page+g" / "other api+g" (its site is another folder: runs{N}-grouped).
Then, in a fresh process of this tree (and, with --before, of that commit's semboard/evaluation
unpacked from git, on the same database), a warm web worker in process:

- upload to visible: --uploads runs submitted through the real `submit` service (validated,
  stored and scored, as in the request), then the post-commit step that stores the new board
  version (`jobs.boards.prepare_phase`); p50 of the two together and of the board step alone,
  and the bytes that step sends to store the version (its rows, its row order, the version);
- the first board page view after each upload against a task-list view (Flask test client;
  taken plain, or with --gzip asking for gzip as a browser does).

Then, per upload, the first GET of its version (alternately the board page and the API
whole-board JSON) on that worker and on another process that served the board before (its
memo lacks the version: it reads the changed rows), each in CPU against a task list on the
same process, with the garbage collections that ran inside them (a collection walks what
the young objects hold: a version read that copies lists of every row pays it there); --preload
starts each process as a gunicorn worker does (semboard.serve.preload); --profile DIR keeps
their cProfiles. --profile-steps N prints the board steps'
N most costly functions (cProfile by CPU) and each upload's step CPU.

Prints the figures with the load average, and the ratios of the largest board to the smallest;
nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

PROJECT_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT_ROOT))
sys.path.insert(0, str(PROJECT_ROOT / "benchmarks"))

# What both processes of a measurement start with: the app over the site, its test client, and
# the first GETs of a board version timed in CPU (cProfile'd into --profile's folder).
_APP = r"""
import cProfile, gc, json, statistics, sys, time, uuid
from pathlib import Path
from semboard import create_app
from semboard.jobs import boards

url, uploads, folder, profiles = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[6]
if profiles != "-":
    Path(profiles).mkdir(parents=True, exist_ok=True)
asked = {"Accept-Encoding": "gzip"} if sys.argv[5] == "gzip" else {}  # as a browser asks
app = create_app({"DATABASE_URL": url, "SECRET_KEY": "bench", "SEMBOARD_UPLOAD_DIR": uploads,
                  "SEMBOARD_INSTANCE_PATH": folder + "/instance", "SEMBOARD_BOARD_JOBS": "rq",
                  "REDIS_URL": "redis://127.0.0.1:1/0"})
boards.schedule_groups = lambda app, task_id: "skipped"  # groups are not what is timed here
if sys.argv[10:11] == ["preload"]:  # as gunicorn's post_worker_init does (semboard.serve.preload)
    from semboard.serve.preload import preload
    preload()
client = app.test_client()
page, api = "/tasks/sts2012/leaderboard/eval", "/api/v1/tasks/sts2012/leaderboard?phase=eval"
gets = {"page": page, "api": api, "list": "/tasks"}
profiled = [0]
# the garbage collections during the timed first GETs: (generation, CPU ms) by who/kind
collected, collecting = {}, []


def on_gc(phase, info):
    if collecting and phase == "start":
        collecting[0] = time.process_time()
    elif collecting and collecting[0] is not None:
        collecting[1].append((info["generation"], (time.process_time() - collecting[0]) * 1000))
        collecting[0] = None


gc.callbacks.append(on_gc)
# --spans: named functions timed in CPU inside the other worker's first GETs ("module:name" or
# "module:Class.name", replaced where the module holds them: callers that imported the name
# itself keep the untimed one), with the minor page faults they took (a fresh page of a new
# large buffer: 2-3 us of CPU each, about 920 for a 3.75 MB body)
import resource
spans = {}


def timed(inner, spec):
    def call(*args, **kwargs):
        started = time.process_time()
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        try:
            return inner(*args, **kwargs)
        finally:
            spans.setdefault(spec, []).append((
                (time.process_time() - started) * 1000,
                resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults))
    return call


for spec in sys.argv[11].split() if len(sys.argv) > 11 else ():
    import importlib
    module, _, attribute = spec.partition(":")
    owner_name, _, name = attribute.rpartition(".")
    owner = importlib.import_module(module)
    owner = getattr(owner, owner_name) if owner_name else owner
    setattr(owner, name, timed(getattr(owner, name), spec))


def cpu_get(kind, name=""):
    # one GET of this kind: its CPU ms (profiled as `name` where asked)
    if name:
        collecting[:] = [None, collected.setdefault(f"{name} {kind}", [])]
    started = time.process_time()
    if profiles != "-" and name:
        profile = cProfile.Profile(time.process_time)  # CPU: the machine is shared
        answer = profile.runcall(client.get, gets[kind], headers=asked)
        profiled[0] += 1
        profile.dump_stats(f"{profiles}/{name}-{profiled[0]:02d}-{kind}.prof")
    else:
        answer = client.get(gets[kind], headers=asked)
    assert answer.status_code == 200, (kind, answer.status_code)
    collecting.clear()
    return (time.process_time() - started) * 1000
"""

# The kept groups process (--groups): told a task id, a round of its groups (their grouping and
# the board version with them stored, as jobs.boards' kept process does); prints its CPU ms.
_GROUPS = _APP + r"""
print("ready", flush=True)
for line in sys.stdin:
    started = time.process_time()
    boards.compute_groups(app, int(line))
    print(json.dumps({"cpu": (time.process_time() - started) * 1000}), flush=True)
"""

# The other web worker: it served the board before each upload; told "page" or "api" (after the
# upload's version is stored), it GETs that first, then a task list, and prints both CPU ms.
_OTHER = _APP + r"""
for kind in ("page", "api", "list", "page", "api", "list"):
    cpu_get(kind)
print("ready", flush=True)
for line in sys.stdin:
    kind = line.strip()
    spans.clear()
    first = cpu_get(kind, "other")
    if spans:  # each timed function's CPU ms in this first GET (/ its calls)
        print(f"      other {kind} {first:5.1f} ms: " + ", ".join(
            f"{spec.partition(':')[2]} {sum(ms for ms, _ in found):.2f}/{len(found)}"
            + (f" ({faults} pf)" if (faults := sum(pf for _, pf in found)) else "")
            for spec, found in spans.items()),
            file=sys.stderr, flush=True)
    print(json.dumps({"first": first, "list": cpu_get("list"),
                      "gc": collected.pop(f"other {kind}")}), flush=True)
"""

_MEASURE = _APP + r"""
import subprocess
import numpy as np
from evaluation import load_task, write_run
from semboard.db import make_session_factory
from semboard.services.people import accounts, teams
from semboard.services.data import gold, inputs
from semboard.services.runs import submissions
from semboard.services.tasks import tasks
from semboard.storage import LocalStorage

count = int(sys.argv[4])
steps = None
# the bytes the board steps send to store a version (its rows, its frame and the version row)
from sqlalchemy import event
from sqlalchemy.engine import Engine
sent = [0]


def count_sent(conn, cursor, statement, parameters, context, executemany):
    words = statement.split(None, 3)
    if words[:2] == ["INSERT", "INTO"] and words[2].strip('"').startswith("prepared_board"):
        sent[0] += len(str(parameters))


event.listen(Engine, "before_cursor_execute", count_sent)
if sys.argv[8] != "-":  # --profile-steps: the board steps' functions, written for pstats
    steps = cProfile.Profile(time.process_time)  # CPU: the machine is shared
gold.SCORE_OPTIONS["resamples"] = 0
session = make_session_factory(url)()
storage = LocalStorage(Path(uploads))
definition = load_task("sts2012")
task = tasks.get_task(session, "sts2012")
phase = tasks.get_phase(session, task, "eval")
known = inputs.parsed_inputs(session, storage, task=task)
parsed_gold = gold.parsed_gold(session, storage, task=task)
# read before the commit: a read of the expired task between two writes of this session (a
# groups round commits between them) would hold a snapshot its next write is refused on (WAL)
task_id = task.id
session.commit()  # no read snapshot kept: the warm-up commits (SQLite's WAL would refuse a write)
with app.app_context():
    from semboard.db import job_session_factory
    reader = job_session_factory(app)()
    boards.prepare_phase(reader, reader.merge(phase))  # a warm worker: the board built once
    if hasattr(boards.prepared_boards, "warm"):  # and kept to merge changes into
        boards.prepared_boards.warm(reader, phase=reader.merge(phase), now=phase.opens_at)
    reader.close()
client.get(page); client.get("/tasks")
other = subprocess.Popen([sys.executable, "-c", sys.argv[7], *sys.argv[1:7], "-", "-", "-",
                          *sys.argv[10:12]],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
assert other.stdout.readline().strip() == "ready"
groups, groups_cpu = None, []
if sys.argv[9] != "-":  # --groups: a round after each upload (and one before the first)
    groups = subprocess.Popen([sys.executable, "-c", sys.argv[9], *sys.argv[1:7]],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert groups.stdout.readline().strip() == "ready"


def groups_round():
    # the writer's next step then finds a new grouping and a version of its rows stored
    if groups is not None:
        groups.stdin.write(f"{task_id}\n"); groups.stdin.flush()
        groups_cpu.append(json.loads(groups.stdout.readline())["cpu"])


groups_round()
for kind in ("api", "list", "api", "list"):
    cpu_get(kind)
visible, step, first, listing, step_cpu, first_cpu, step_bytes = [], [], [], [], [], [], []
# the first GET of each new version, alternately a page and the API JSON, by this worker (it
# stored the version) and by the other, with a task list's CPU on each after it
firsts = {(who, kind): [] for who in ("took", "other") for kind in ("page", "api", "list")}
merged = incremental = 0
try:
    from semboard.services.boards import prepared as prepared_boards
    bases = prepared_boards._bases
except AttributeError:  # a tree before merges (--before)
    bases = None
for i in range(count):
    rng = np.random.default_rng(10_000 + i)
    files = dict(write_run(definition, d, known[d].ids,
                           np.clip(g.scores + rng.normal(0, 0.7, len(g)), 0, 5))
                 for d, g in parsed_gold.items())
    tag = uuid.uuid4().hex[:8]
    user = accounts.register_user(session, email=f"g{tag}@example.org", password="password123",
                                  display_name=tag, now=phase.opens_at)
    team = teams.create_team(session, task=task, captain=user, name=f"grow {tag}",
                             affiliation="", now=phase.opens_at)
    session.commit()
    t0 = time.perf_counter()
    submissions.submit(session, storage, team=team, phase=phase, user=user, name="run",
                       files=files, now=phase.opens_at)
    session.commit()
    t1, c1 = time.perf_counter(), time.process_time()
    sent[0] = 0
    if steps is not None and i:  # the first merge after the warm-up reads what it lacks
        steps.enable()
    with app.app_context():
        reader = job_session_factory(app)()
        boards.prepare_phase(reader, reader.merge(phase))
        reader.close()
    if steps is not None:
        steps.disable()
    t2 = time.perf_counter()
    merged += bool(bases is not None and bases.values() and bases.values()[-1].merged)
    incremental += bool(bases is not None and bases.values()
                        and getattr(bases.values()[-1], "incremental", False))
    step_cpu.append((time.process_time() - c1) * 1000)
    step_bytes.append(sent[0])
    visible.append((t2 - t0) * 1000)
    step.append((t2 - t1) * 1000)
    kind = "page" if i % 2 == 0 else "api"
    t3 = time.perf_counter()
    first_cpu.append(cpu_get("page", "took" if kind == "page" else ""))
    t4 = time.perf_counter()
    assert client.get("/tasks").status_code == 200
    first.append((t4 - t3) * 1000)
    listing.append((time.perf_counter() - t4) * 1000)
    if kind == "api":  # this worker's first API JSON of the version (its page came first)
        firsts["took", kind].append(cpu_get(kind, "took"))
    else:
        firsts["took", kind].append(first_cpu[-1])
    firsts["took", "list"].append(cpu_get("list"))
    other.stdin.write(kind + "\n"); other.stdin.flush()
    got = json.loads(other.stdout.readline())
    firsts["other", kind].append(got["first"])
    collected.setdefault(f"other {kind}", []).extend(got["gc"])
    firsts["other", "list"].append(got["list"])
    groups_round()
    if groups is not None and sys.argv[12:13] == ["grouped"]:
        # the version the groups round stored (its rows, the new grouping): the other
        # worker's first GET of it, as each worker's after a real upload's groups came
        other.stdin.write(kind + "\n"); other.stdin.flush()
        got = json.loads(other.stdout.readline())
        firsts.setdefault(("other", kind + "+g"), []).append(got["first"])
        collected.setdefault(f"other {kind}+g", []).extend(got["gc"])
other.stdin.close(); other.wait()
if groups is not None:
    groups.stdin.close(); groups.wait()
if steps is not None:
    steps.dump_stats(sys.argv[8])
print(json.dumps({"visible": statistics.median(visible), "step": statistics.median(step),
                  "first": statistics.median(first), "list": statistics.median(listing),
                  "step_cpu": statistics.median(step_cpu),
                  "step_bytes": statistics.median(step_bytes),
                  "first_cpu": statistics.median(first_cpu), "merged": merged,
                  "incremental": incremental, "steps_cpu": step_cpu,
                  "groups_cpu": statistics.median(groups_cpu) if groups_cpu else None,
                  "firsts": {f"{who} {kind}": statistics.median(found)
                             for (who, kind), found in firsts.items() if found},
                  "gc": collected}))
"""


TEMPLATES = 10


def _scaled(value: Any, factor: float) -> Any:
    """A copy of a stored score with every float scaled (ints, names and flags kept)."""
    if isinstance(value, float):
        return value * factor
    if isinstance(value, dict):
        return {k: _scaled(v, factor) for k, v in value.items()}
    if isinstance(value, list):
        return [_scaled(v, factor) for v in value]
    return value


def bulk_runs(session: Any, runs: int,
              files: list[list[tuple[str, str, str, int, str]]] | None = None,
              grouped: bool = False) -> None:
    """Teams with one scored run each up to `runs` runs in all, inserted in bulk after the
    first TEMPLATES real ones: each score record a scaled copy of a template's (distinct
    records and digests, as on a real board); with `files`, each run's file rows (name,
    dataset, sha256, size, storage key) taken in turn from these sets; grouped (no `files`):
    those of the templates' own runs (their stored files: the groups read their samples).
    Commits."""
    from bench_boards import NOW
    from sqlalchemy import insert, select

    from semboard.models import Run, RunFile, RunScoreRecord, Team, score_digest

    templates = session.execute(
        select(Run, RunScoreRecord).join(RunScoreRecord, RunScoreRecord.run_id == Run.id)
        .order_by(Run.id).limit(TEMPLATES)).all()
    count = runs - len(templates)
    if count <= 0:
        return
    if grouped and not files:
        by_run: dict[int, list[tuple[str, str, str, int, str]]] = {}
        for found in session.execute(
                select(RunFile.run_id, RunFile.filename, RunFile.dataset, RunFile.sha256,
                       RunFile.size, RunFile.storage_key)
                .where(RunFile.run_id.in_([run.id for run, _ in templates]))
                .order_by(RunFile.run_id, RunFile.id)):
            by_run.setdefault(found[0], []).append(tuple(found[1:]))  # type: ignore[arg-type]
        files = list(by_run.values())
    first = templates[0][0]
    session.execute(insert(Team), [
        {"task_id": first.task_id, "name": f"bulk {i:05d}", "affiliation": "",
         "invite_code": f"bulk{i:05d}", "created_at": NOW} for i in range(count)])
    team_ids = list(session.scalars(select(Team.id).where(Team.name.like("bulk %"))
                                    .order_by(Team.id)))
    session.execute(insert(Run), [
        {"task_id": first.task_id, "phase_id": first.phase_id, "team_id": team_id,
         "name": "run", "slot": 1, "is_current": True, "status": "scored",
         "issues": [], "meta": {}, "submitted_at": NOW} for team_id in team_ids])
    run_ids = list(session.scalars(select(Run.id).where(Run.team_id.in_(team_ids))
                                   .order_by(Run.id)))
    if files:
        session.execute(insert(RunFile), [
            {"run_id": run_id, "filename": name, "dataset": dataset, "sha256": digest,
             "size": size, "storage_key": key}
            for i, run_id in enumerate(run_ids)
            for name, dataset, digest, size, key in files[i % len(files)]])
    records = []
    for i, run_id in enumerate(run_ids):
        record = templates[i % len(templates)][1]
        factor = 1.0 - 0.3 * (i + 1) / (len(run_ids) + 1)  # every record distinct
        scores, flat = _scaled(record.scores, factor), _scaled(record.flat, factor)
        records.append({"run_id": run_id, "gold_digest": record.gold_digest,
                        "scores": scores, "flat": flat, "created_at": NOW,
                        "digest": score_digest(scores, flat)})
    session.execute(insert(RunScoreRecord), records)
    session.commit()


def seed_site(folder: Path, release: Path, runs: int, grouped: bool = False) -> dict[str, Any]:
    """A scratch site of `runs` scored runs: TEMPLATES real uploads, the rest bulk copies
    (grouped: with the templates' files, see bulk_runs)."""
    from bench_boards import build_site

    from semboard.db import make_session_factory

    if (folder / "bench.sqlite").exists():  # --site-dir of an earlier run: reused as it is
        from semboard.db import make_engine
        from semboard.models import Base

        engine = make_engine(f"sqlite:///{folder / 'bench.sqlite'}")
        Base.metadata.create_all(engine)  # with the tables a newer tree added
        engine.dispose()
        return {"url": f"sqlite:///{folder / 'bench.sqlite'}", "uploads": str(folder / "uploads"),
                "submit_s": 0.0}
    started = time.perf_counter()
    site = build_site(folder, release, min(runs, TEMPLATES), 0)
    session = make_session_factory(site["url"])()
    bulk_runs(session, runs, grouped=grouped)
    session.close()
    return {**site, "submit_s": time.perf_counter() - started}


def measure(site: dict, folder: Path, root: Path, count: int,
            gzip: bool = False, profiles: Path | None = None,
            steps: Path | None = None, groups: bool = False,
            preload: bool = False, spans: str = "", grouped: bool = False) -> dict[str, Any]:
    """Run the timing script in a fresh process importing the project from root (and the other
    worker's in another; with steps: the board steps profiled into that file; with groups: a
    kept groups process's round after each upload, in a third; with preload: each process
    starts as a gunicorn worker does, semboard.serve.preload; with spans, those functions
    timed in the other worker's first GETs, printed as they come; grouped: the other worker
    also takes the first GET of each version the groups round stores)."""
    env = {**os.environ, "PYTHONPATH": str(root)}
    done = subprocess.run([sys.executable, "-c", _MEASURE, site["url"], site["uploads"],
                           str(folder), str(count), "gzip" if gzip else "plain",
                           str(profiles) if profiles else "-", _OTHER, str(steps or "-"),
                           _GROUPS if groups or grouped else "-", "preload" if preload else "-",
                           spans, "grouped" if grouped else "-"],
                          env=env, cwd=folder, stdout=subprocess.PIPE,
                          stderr=None if spans else subprocess.PIPE, text=True)
    if done.returncode:
        raise SystemExit(f"the timing process failed:\n{(done.stderr or '')[-4000:]}")
    return json.loads(done.stdout.splitlines()[-1])


def print_profile(profile: Any, count: int) -> None:
    """A profile's (cProfile, or the file it wrote) most costly functions by own time, with
    their calls."""
    import pstats

    stats = pstats.Stats(str(profile) if isinstance(profile, Path) else profile)
    found = stats.stats.items()  # type: ignore[attr-defined]
    rows = sorted(found, key=lambda item: -item[1][2])[:count]
    for (filename, line, name), (_, calls, own, total, _) in rows:
        print(f"      {own * 1000:8.1f} ms own {total * 1000:8.1f} ms with callees "
              f"{calls:>9} calls  {Path(filename).name}:{line} {name}", flush=True)


def firsts_line(got: dict[str, Any], name: str) -> str:
    """The first GETs of a new version, CPU ms and × a task list's on the same worker: by the
    worker that stored the version (took) and by the other one (its memo lacks it)."""
    found = got["firsts"]
    cells = [f"{who} {kind} {found[f'{who} {kind}']:.1f} ms "
             f"({found[f'{who} {kind}'] / found[f'{who} list']:.1f}x)"
             for who in ("took", "other") for kind in ("page", "api", "page+g", "api+g")
             if f"{who} {kind}" in found]
    collections = [f"{who} {len(found)} (" + " ".join(f"gen {g} {ms:.1f}" for g, ms in found)
                   + f"), {sum(ms for _, ms in found):.1f} ms"
                   for who, found in sorted(got.get("gc", {}).items())]
    return (f"    first GET of a version, CPU ({name}; task list took {found['took list']:.1f} / "
            f"other {found['other list']:.1f} ms): " + ", ".join(cells)
            + "\n      garbage collections in them, all uploads: " + "; ".join(collections))


def main() -> None:
    """Build each site, time this tree (and --before), print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=PROJECT_ROOT.parent / "shared" / "data")
    parser.add_argument("--runs", type=int, nargs="+", default=[20, 500, 2000, 5000])
    parser.add_argument("--uploads", type=int, default=7)
    parser.add_argument("--before", help="a commit timed side by side on the same sites")
    parser.add_argument("--site-dir", type=Path, help="keep the sites here (reused when there)")
    parser.add_argument("--profile-steps", type=int, default=0, metavar="N",
                        help="profile the board steps (cProfile) and print their N most "
                             "costly functions (own time) at each size")
    parser.add_argument("--groups", action="store_true",
                        help="a kept groups process stores the board's groups (and its version "
                             "with them) after each upload, as deployed: the next board step "
                             "finds a new grouping")
    parser.add_argument("--grouped", action="store_true",
                        help="implies --groups; the bulk-seeded runs get file rows too, each a "
                             "copy of a template run's (the same stored files, in turn), so the "
                             "groups process reads real samples for every run and groups "
                             "(nearly) every run, as on a real board (their groups follow the "
                             "copied files, not their scaled scores); the other worker also "
                             "takes the first GET of each grouped version (other page+g, "
                             "api+g). Its sites are other folders (runsN-grouped)")
    parser.add_argument("--gzip", action="store_true",
                        help="the first view asks for gzip, as a browser does (default: plain)")
    parser.add_argument("--preload", action="store_true",
                        help="each process starts as a gunicorn worker does "
                             "(semboard.serve.preload: gc.freeze() after loading)")
    parser.add_argument("--profile", type=Path,
                        help="cProfile each first GET of a new version into this folder")
    parser.add_argument("--spans", default="", metavar="'MODULE:NAME ...'",
                        help="time these functions (module:name or module:Class.name) in CPU "
                             "inside the other worker's first GETs, printed per GET: e.g. "
                             "'semboard.views.boards:_prepared flask.app:Flask.preprocess_request'")
    args = parser.parse_args()
    if args.profile:
        args.profile.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        base = args.site_dir or Path(tmp)
        old_root = Path(tmp) / "before"
        if args.before:  # that commit's packages, unpacked (the repository is untouched)
            old_root.mkdir()
            archive = subprocess.run(["git", "archive", args.before, "semboard", "evaluation",
                                      "tasks", "templates", "static", "baselines"],
                                     cwd=PROJECT_ROOT, check=True, capture_output=True).stdout
            subprocess.run(["tar", "-x", "-C", str(old_root)], input=archive, check=True)
        print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs; medians in ms "
              f"over {args.uploads} uploads; first view {'gzip' if args.gzip else 'plain'}; "
              f"{'a groups round after each upload; ' if args.groups or args.grouped else ''}"
              f"{'every bulk run grouped; ' if args.grouped else ''}"
              f"this tree" + (f" | {args.before}" if args.before else ""), flush=True)
        figures, before = {}, {}
        for runs in args.runs:
            folder = base / (f"runs{runs}-grouped" if args.grouped else f"runs{runs}")
            folder.mkdir(parents=True, exist_ok=True)
            site = seed_site(folder, args.data / "sts2012" / "test", runs, args.grouped)
            steps = folder / "board-step.prof" if args.profile_steps else None
            now = figures[runs] = measure(site, folder, PROJECT_ROOT, args.uploads, args.gzip,
                                          args.profile and args.profile / f"runs{runs}", steps,
                                          args.groups, args.preload, args.spans, args.grouped)
            line = (f"  {runs:>5} runs: upload->visible p50 {now['visible']:7.0f} ms (board "
                    f"step {now['step']:6.0f}, {now['step_cpu']:4.0f} CPU), first view after "
                    f"upload {now['first'] / now['list']:5.1f}x a task list ({now['first']:.1f} "
                    f"ms, {now['first_cpu']:.1f} CPU); {now['merged']} of {args.uploads} merged, "
                    f"{now['incremental']} row by row; board step CPU each "
                    f"{' '.join(f'{ms:.0f}' for ms in now['steps_cpu'])} ms; a version "
                    f"stored in {now['step_bytes'] / 1000:.1f} kB"
                    + (f"; groups round {now['groups_cpu']:.0f} ms CPU (its process)"
                       if now.get("groups_cpu") is not None else ""))
            if args.before:
                old = before[runs] = measure(site, folder, old_root, args.uploads, args.gzip,
                                             groups=args.groups, preload=args.preload,
                                             grouped=args.grouped)
                line += (f" | {old['visible']:7.0f} ms (step {old['step']:6.0f}, "
                         f"{old['step_cpu']:4.0f} CPU, each "
                         f"{' '.join(f'{ms:.0f}' for ms in old['steps_cpu'])}, stored in "
                         f"{old['step_bytes'] / 1000:.1f} kB), first view "
                         f"{old['first'] / old['list']:5.1f}x ({old['first']:.1f} ms, "
                         f"{old['first_cpu']:.1f} CPU)")
            print(line, flush=True)
            print(firsts_line(now, "this tree"), flush=True)
            if steps is not None:
                print_profile(steps, args.profile_steps)
            if args.before:
                print(firsts_line(before[runs], args.before), flush=True)
            print(f"    (site seeded in {site['submit_s']:.1f} s; load average "
                  f"{os.getloadavg()[0]:.2f})", flush=True)
        if len(figures) > 1:  # the growth: the largest board against the smallest
            for name, got in (("this tree", figures), (args.before, before)):
                if not got:
                    continue
                small, large = got[min(got)], got[max(got)]
                print(f"  {max(got)} / {min(got)} runs, {name}: upload->visible "
                      f"{large['visible'] / small['visible']:.2f}x (board step CPU "
                      f"{large['step_cpu'] / small['step_cpu']:.2f}x), first view "
                      f"{large['first'] / small['first']:.2f}x (CPU "
                      f"{large['first_cpu'] / small['first_cpu']:.2f}x); load average "
                      f"{os.getloadavg()[0]:.2f}", flush=True)


if __name__ == "__main__":
    main()
