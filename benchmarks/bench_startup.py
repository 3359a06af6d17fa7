"""Start-up cost of the site's commands against Flask's own, side by side (interleaved rounds on
the same machine, so its load touches both alike): `import flask`, `import semboard`, `flask
--help` with FLASK_APP=semboard (which builds the app), and the heavy modules that app loads."""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ["numpy", "scipy", "pandas", "boto3", "botocore", "rq", "redis", "argon2", "alembic",
         "pyarrow", "torch", "sklearn"]


def timed(command: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, env=env, check=True, stdout=subprocess.DEVNULL, cwd=ROOT)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    flask = str(Path(sys.executable).parent / "flask")
    with tempfile.TemporaryDirectory() as instance:
        env = {**os.environ, "PYTHONPATH": str(ROOT), "FLASK_APP": "semboard",
               "SEMBOARD_INSTANCE_PATH": instance, "SEMBOARD_SCHEDULE_SECONDS": "0"}
        for key in ("DATABASE_URL", "REDIS_URL", "SEMBOARD_STORAGE"):
            env.pop(key, None)
        commands = {"import flask": [sys.executable, "-c", "import flask"],
                    "import semboard": [sys.executable, "-c", "import semboard"],
                    "flask --help": [flask, "--help"]}
        times: dict[str, list[float]] = {name: [] for name in commands}
        timed(commands["flask --help"], env)  # warm the file cache and the instance folder
        for _ in range(args.rounds):
            for name, command in commands.items():
                times[name].append(timed(command, env))
        loaded = subprocess.run(
            [sys.executable, "-c", "import sys; from semboard import create_app; create_app(); "
             f"print(' '.join(m for m in {HEAVY!r} if m in sys.modules))"],
            env=env, check=True, capture_output=True, text=True).stdout.split()
    base = statistics.median(times["import flask"])
    print(f"median of {args.rounds} interleaved rounds")
    for name, values in times.items():
        median = statistics.median(values)
        print(f"{name:16} {median:6.2f} s   {median / base:4.1f}x import flask")
    print(f"heavy modules the built app loads: {', '.join(loaded) or 'none'}")


if __name__ == "__main__":
    main()
