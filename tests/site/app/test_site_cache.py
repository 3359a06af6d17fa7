"""The one LRU the site's caches share: bounded, least recently used first out, thread-safe."""

from __future__ import annotations

import threading

from semboard.cache import LRU


def test_least_recently_used_goes_first() -> None:
    cache: LRU[str, int] = LRU(2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1  # "a" is now the most recent
    cache.put("c", 3)
    assert cache.get("b") is None and cache.get("a") == 1 and cache.get("c") == 3
    assert len(cache) == 2


def test_compute_once_and_discard_by_key() -> None:
    cache: LRU[tuple[int, str], str] = LRU(8)
    calls: list[int] = []
    for _ in range(3):
        cache.get_or_compute((1, "v1"), lambda: calls.append(1) or "board v1")
    assert calls == [1]
    cache.put((1, "v2"), "board v2")
    cache.discard_where(lambda k: k[0] == 1 and k[1] != "v2")
    assert cache.values() == ["board v2"]


def test_threads_never_exceed_the_size() -> None:
    cache: LRU[int, int] = LRU(50)

    def work(offset: int) -> None:
        for i in range(2000):
            cache.put(offset + i, i)
            cache.get(offset + i // 2)

    threads = [threading.Thread(target=work, args=(k * 10_000,)) for k in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(cache) == 50
