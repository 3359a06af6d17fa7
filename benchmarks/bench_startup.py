"""Start-up cost, side by side (interleaved rounds on the same machine, so its load touches both
alike; medians printed with the load average before and after):

- the site: `import flask`, `import semboard`, `flask --help` with FLASK_APP=semboard and with
  the README's `--app app`, and what `flask --help` imports (issue 33: <= 2x `import flask`);
- the scorer: `python -m evaluation score` of a 5-file release (1,000-resample CIs; also
  `--no-ci`) against the STS perl scorer run once per file, as the organisers scored (issues 32
  and 45: <= 1.0x), on two shapes: STS 2012's test release (3,108 pairs; sts2012's metrics) and
  an STS 2016-shaped one written here (9,183 input lines of two texts and two source notes,
  about 3.6 MB, of which 1,186 pairs have gold: the others' gold lines are blank, as STS 2016
  released them; Pearson per dataset and Mean). The perl scorer is the official
  `correlation-noconfidence.pl` from ../shared/tools/sts-perl/ (the `shared` folder beside the
  checkout), or --perl-scorer PATH; where neither is found the benchmark times STAND_IN below,
  a perl script written here to the official one's recipe (blank gold lines left out as it
  leaves them), and says so.

Children run with bytecode caching on (PYTHONDONTWRITEBYTECODE dropped; the first, untimed round
writes the caches), as an installed copy runs.

With --before REV, that commit's tree (app.py, semboard, evaluation, tasks, templates, static)
is unpacked to a temporary folder and its commands are timed in the same rounds ("@REV").

    python benchmarks/bench_startup.py [--rounds 10] [--data ../shared/data] [--perl-scorer PL]
        [--only site|scorer] [--before REV]
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ["sqlalchemy", "numpy", "scipy", "pandas", "boto3", "botocore", "rq", "redis", "argon2",
         "alembic", "pyarrow", "torch", "sklearn", "semboard.views", "semboard.api",
         "semboard.services", "semboard.models"]
DATASETS = ["MSRpar", "MSRvid", "SMTeuroparl", "surprise.OnWN", "surprise.SMTnews"]
STAND_IN = r"""#!/usr/bin/perl
# Stand-in for STS 2012's correlation-noconfidence.pl (benchmarks/bench_startup.py): gs system
use Getopt::Long qw(:config auto_help);
use Pod::Usage;
use warnings;
use strict;
use Math::Complex;
pod2usage if $#ARGV != 1;
my (@gs, @sys, %blank);
my $line = 0;
open(I, $ARGV[0]) or die $!;
while (<I>) {
    chomp; $line++; next if /^\#/;
    if ($_ eq "") { $blank{$line} = 1; next; }  # a pair left out of the scoring
    my ($score) = split(/\s+/, $_); push @gs, $score;
}
close(I);
$line = 0;
open(I, $ARGV[1]) or die $!;
while (<I>) {
    chomp; $line++; next if $blank{$line} or /^\#/;
    my ($score) = split(/\s+/, $_); push @sys, $score;
}
close(I);
my $n = scalar @gs;
my ($sx, $sy) = (0, 0);
for my $i (0 .. $n - 1) { $sx += $sys[$i]; $sy += $gs[$i]; }
my ($mx, $my) = ($sx / $n, $sy / $n);
my ($xy, $xx, $yy) = (0, 0, 0);
for my $i (0 .. $n - 1) {
    my ($dx, $dy) = ($sys[$i] - $mx, $gs[$i] - $my);
    $xy += $dx * $dy; $xx += $dx * $dx; $yy += $dy * $dy;
}
printf "Pearson: %.5f\n", $xy / sqrt($xx * $yy);
"""


def timed(command: list[str] | list[list[str]], env: dict[str, str]) -> tuple[float, float]:
    """Wall time and CPU time (user + system) of one command, or of several run in turn."""
    commands = command if isinstance(command[0], list) else [command]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    for one in commands:
        subprocess.run(one, env=env, check=True, stdout=subprocess.DEVNULL, cwd=ROOT)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def side_by_side(commands: dict[str, list], env: dict[str, str], rounds: int
                 ) -> dict[str, tuple[float, float]]:
    """Median wall and CPU time of each command over interleaved rounds (one untimed first)."""
    for command in commands.values():
        timed(command, env)
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
    for _ in range(rounds):
        order = list(commands.items())
        random.shuffle(order)  # no command always runs just after another
        for name, command in order:
            times[name].append(timed(command, env))
    return {name: (statistics.median(w for w, _ in values),
                   statistics.median(c for _, c in values)) for name, values in times.items()}


def report(medians: dict[str, tuple[float, float]], base: str, unit: str) -> None:
    """Each command's median wall and CPU time and their ratios to the base command's."""
    wall0, cpu0 = medians[base]
    width = max(26, *(len(name) for name in medians))
    print(f"  {'':{width}} {'wall':>7} {'ratio':>6}   {'CPU':>7} {'ratio':>6}   (ratio: x {unit})")
    for name, (wall, cpu) in medians.items():
        print(f"  {name:{width}} {wall:6.3f}s {wall / wall0:5.2f}x   {cpu:6.3f}s "
              f"{cpu / cpu0:5.2f}x")


def load() -> str:
    return " ".join(f"{v:.2f}" for v in os.getloadavg())


TREE = ["app.py", "semboard", "evaluation", "tasks", "templates", "static"]


def unpack(rev: str, folder: Path) -> Path:
    """The project's tree at REV in FOLDER (the repository is untouched)."""
    folder.mkdir()
    archive = subprocess.run(["git", "archive", rev, *TREE], cwd=ROOT, check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    return folder


def at(old: Path, command: list[str]) -> list[str]:
    """COMMAND run in the unpacked tree (its folder first on the path, as ROOT is for ours)."""
    return ["env", "-C", str(old), f"PYTHONPATH={old}", *command]


def site(env: dict[str, str], rounds: int, old: Path | None, rev: str | None) -> None:
    flask = str(Path(sys.executable).parent / "flask")
    commands = {"import flask": [sys.executable, "-c", "import flask"],
                "import semboard": [sys.executable, "-c", "import semboard"],
                "flask --help": [flask, "--help"],
                "flask --app app --help": [flask, "--app", "app", "--help"]}
    if old is not None:
        commands[f"import semboard @{rev}"] = at(old, commands["import semboard"])
        commands[f"flask --help @{rev}"] = at(old, commands["flask --help"])
    before = load()
    medians = side_by_side(commands, env, rounds)
    print(f"site: median of {rounds} interleaved rounds, load average {before} -> {load()}")
    report(medians, "import flask", "import flask")
    probe = ("import sys; from flask.cli import main; sys.argv = ['flask', '--help']\n"
             "try:\n    main()\nexcept SystemExit:\n    pass\n"
             f"print(' '.join(m for m in {HEAVY!r} if m in sys.modules), file=sys.stderr)")
    loaded = subprocess.run([sys.executable, "-c", probe], env=env, check=True, cwd=ROOT,
                            capture_output=True, text=True).stderr.split()
    print(f"  heavy modules `flask --help` imports: {', '.join(loaded) or 'none'}")


# STS 2016's English test release: input lines and pairs with gold per dataset
STS2016_SIZES = {"answer-answer": (1572, 254), "headlines": (1498, 249),
                 "plagiarism": (1271, 230), "postediting": (3287, 244),
                 "question-question": (1555, 209)}
STS2016_TASK = """name = "sts2016-shape"
title = "An STS 2016-shaped release (bench_startup.py)"

[layout]
input = "STS2016.input.{dataset}.txt"
gold = "STS2016.gs.{dataset}.txt"

[scores]
min = 0
max = 5
nan_policy = "reject"

[inputs]
format = "tsv"
columns = ["sentence1", "sentence2"]
extra_columns = 2
id = "line"

[gold]
format = "lines"
unscored = "blank"

[run]
format = "lines"
filename = "STS2016.OUTPUT.{dataset}.txt"
confidence = false

[metrics]
dataset = ["pearson"]
aggregate = ["Mean"]
primary = "Mean"
ranking = "aggregate"
""" + "".join(f'\n[[datasets]]\nname = "{d}"\n' for d in STS2016_SIZES)
WORDS = ["the", "a", "an", "of", "to", "in", "is", "was", "for", "on", "that", "with", "as",
         "by", "at", "from", "his", "her", "their", "new", "two", "one", "man", "woman", "dog",
         "cat", "people", "water", "car", "street", "city", "house", "says", "said", "will",
         "would", "could", "should", "question", "answer", "drink", "workout", "toddler", "plane",
         "market", "police", "court", "year", "day", "government", "minister", "president",
         "killed", "report", "attack", "children", "school"]


def default_perl_scorer() -> Path | None:
    """The official perl scorer in the shared folder beside the checkout, if it is there."""
    path = ROOT.parent / "shared" / "tools" / "sts-perl" / "correlation-noconfidence.pl"
    return path if path.is_file() else None


def sts2016_release(folder: Path) -> tuple[Path, Path, Path]:
    """An STS 2016-shaped release, a definition for it and a run: (release, definition, run)."""
    rng = random.Random(2016)
    release, run = folder / "sts2016", folder / "sts2016-run"
    release.mkdir()
    run.mkdir()

    def sentence() -> str:
        return " ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 23))).capitalize() + "."

    def note() -> str:
        return (f"StackExchange Network: http://{rng.choice(WORDS)}.stackexchange.com/questions/"
                f"{rng.randint(1, 99999)} Author: {rng.choice(WORDS)} "
                f"(http://{rng.choice(WORDS)}.stackexchange.com/users/{rng.randint(1, 9999)})")
    for d, (lines, scored) in STS2016_SIZES.items():
        keep = set(rng.sample(range(lines), scored))
        gold = [round(rng.uniform(0, 5), 1) if i in keep else None for i in range(lines)]
        (release / f"STS2016.input.{d}.txt").write_text("".join(
            f"{sentence()}\t{sentence()}\t{note()}\t{note()}\n" for _ in range(lines)))
        (release / f"STS2016.gs.{d}.txt").write_text("".join(
            "\n" if g is None else f"{g}\n" for g in gold))
        (run / f"STS2016.OUTPUT.{d}.txt").write_text("".join(
            f"{min(5.0, max(0.0, (2.5 if g is None else g) + rng.gauss(0, 1))):.3f}\n"
            for g in gold))
    definition = folder / "sts2016-shape.toml"
    definition.write_text(STS2016_TASK)
    return release, definition, run


def sts2012_run(release: Path, folder: Path) -> Path:
    """A plausible run of the STS 2012 test release: gold plus noise, clipped to [0, 5]."""
    run = folder / "run"
    run.mkdir()
    rng = random.Random(0)
    for d in DATASETS:
        gold = [float(v) for v in (release / f"STS.gs.{d}.txt").read_text().split()]
        (run / f"STS.output.{d}.txt").write_text(
            "".join(f"{min(5.0, max(0.0, g + rng.gauss(0, 1))):.3f}\n" for g in gold))
    return run


def scorer(env: dict[str, str], rounds: int, data: Path, perl_scorer: Path | None,
           folder: Path, old: Path | None, rev: str | None) -> None:
    if perl_scorer is None:
        perl_scorer = folder / "stand-in-correlation.pl"
        perl_scorer.write_text(STAND_IN)
        which = "a stand-in written to its recipe (the official script was not found)"
    else:
        which = str(perl_scorer)
    print(f"scorer: the perl scorer is {which}")
    # shape -> (datasets, gold files, run files, our command)
    shapes: dict[str, tuple[list[str], list[Path], list[Path], list[str]]] = {}
    release = data / "sts2012" / "test"
    if (release / "STS.gs.MSRpar.txt").exists():
        run = sts2012_run(release, folder)
        shapes["sts2012"] = (DATASETS, [release / f"STS.gs.{d}.txt" for d in DATASETS],
                             [run / f"STS.output.{d}.txt" for d in DATASETS],
                             [sys.executable, "-m", "evaluation", "score", "--task", "sts2012",
                              "--gold", str(release), "--run", str(run)])
    else:
        print(f"  STS 2012: skipped, its release is not at {release} (--data)")
    release16, definition, run16 = sts2016_release(folder)
    names16 = list(STS2016_SIZES)
    shapes["sts2016"] = (names16, [release16 / f"STS2016.gs.{d}.txt" for d in names16],
                         [run16 / f"STS2016.OUTPUT.{d}.txt" for d in names16],
                         [sys.executable, "-m", "evaluation", "score", "--task", str(definition),
                          "--gold", str(release16), "--run", str(run16)])
    inputs16 = sum(f.stat().st_size for f in release16.glob("STS2016.input.*"))
    print(f"  the STS 2016-shaped release: {sum(n for n, _ in STS2016_SIZES.values()):,} input "
          f"lines, {inputs16 / 1e6:.1f} MB of inputs, "
          f"{sum(k for _, k in STS2016_SIZES.values()):,} pairs with gold")
    commands: dict[str, list[Any]] = {}
    for shape, (names, golds, runs, score) in shapes.items():
        perl = [["perl", str(perl_scorer), str(g), str(r)] for g, r in zip(golds, runs,
                                                                           strict=True)]
        ours = subprocess.run([*score, "--json", "--no-ci"], env=env, cwd=ROOT, check=True,
                              capture_output=True, text=True).stdout
        theirs = [subprocess.run(c, env=env, check=True, capture_output=True, text=True).stdout
                  for c in perl]
        print(f"  {shape}: perl prints " + ", ".join(t.split()[-1] for t in theirs)
              + f" (ours: {', '.join(f'{v:.5f}' for v in _pearsons(ours, names))})")
        commands[f"{shape}: perl scorer x 5 files"] = perl
        commands[f"{shape}: evaluation score"] = score
        commands[f"{shape}: evaluation score --no-ci"] = [*score, "--no-ci"]
        if old is not None:
            commands[f"{shape}: evaluation score @{rev}"] = at(old, score)
    if "sts2012" in shapes:
        # the command's BLAS left at numpy's default (a thread per CPU)
        commands[f"sts2012: ... BLAS threads {os.cpu_count()}"] = [
            "env", f"OPENBLAS_NUM_THREADS={os.cpu_count()}", *shapes["sts2012"][3]]
    commands["python -c pass"] = [sys.executable, "-c", "pass"]
    commands["python -c 'import numpy'"] = [sys.executable, "-c", "import numpy"]
    before = load()
    medians = side_by_side(commands, env, rounds)
    print(f"scorer: median of {rounds} interleaved rounds, load average {before} -> {load()}")
    for shape in shapes:
        base = f"{shape}: perl scorer x 5 files"
        report({k: v for k, v in medians.items() if k.startswith(f"{shape}:") or ":" not in k},
               base, f"{shape}'s perl scorer")
    probe = [*next(iter(shapes.values()))[3], "--no-ci"]
    imported = subprocess.run(
        [sys.executable, "-c", "import runpy, sys; sys.argv = ['evaluation', *sys.argv[1:]]\n"
         "try:\n    runpy.run_module('evaluation', run_name='__main__')\nexcept SystemExit:\n"
         f"    pass\nprint(' '.join(m for m in {HEAVY!r} if m in sys.modules), file=sys.stderr)",
         *probe[3:]], env=env, cwd=ROOT, capture_output=True, text=True).stderr.split()
    print(f"  heavy modules the scorer imports: {', '.join(imported) or 'none'}")


def _pearsons(text: str, names: list[str]) -> list[float]:
    import json  # only for this check

    datasets = json.loads(text)["datasets"]
    return [datasets[d]["metrics"]["pearson"]["value"] for d in names]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--data", type=Path, default=Path(
        os.environ.get("SEMBOARD_DATA") or ROOT.parent / "shared" / "data"))
    parser.add_argument("--perl-scorer", type=Path, default=default_perl_scorer(),
                        help="the official correlation script (default: ../shared/tools/"
                        "sts-perl/correlation-noconfidence.pl beside the checkout)")
    parser.add_argument("--only", choices=["site", "scorer"])
    parser.add_argument("--before", metavar="REV", help="also time the commands of commit REV")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        instance = Path(folder) / "instance"
        env = {**os.environ, "PYTHONPATH": str(ROOT), "FLASK_APP": "semboard",
               "SEMBOARD_INSTANCE_PATH": str(instance), "SEMBOARD_SCHEDULE_SECONDS": "0"}
        for key in ("DATABASE_URL", "REDIS_URL", "SEMBOARD_STORAGE", "PYTHONDONTWRITEBYTECODE"):
            env.pop(key, None)
        old = unpack(args.before, Path(folder) / "before") if args.before else None
        if args.only != "scorer":
            site(env, args.rounds, old, args.before)
        if args.only != "site":
            scorer(env, args.rounds, args.data, args.perl_scorer, Path(folder), old, args.before)


if __name__ == "__main__":
    main()
