"""One thread-safe LRU for values keyed by their content or version (never stale, only evicted)."""

from __future__ import annotations

import threading
from collections import OrderedDict, deque
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class LRU(Generic[K, V]):
    """At most `size` entries; the least recently used goes first. Safe across threads.

    Keys must name what the value is computed from (a content digest, a database version), so
    an entry can be evicted but never be wrong.
    """

    def __init__(self, size: int) -> None:
        self.size = size
        self._items: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        """The value for key (now the most recent), or None."""
        with self._lock:
            value = self._items.get(key)
            if value is not None:
                self._items.move_to_end(key)
            return value

    def get_many(self, keys: list[K]) -> list[V | None]:
        """The values for these keys in order (None where missing), under one lock: no step per
        key in Python (a 5,000-row board's rows looked up at once)."""
        with self._lock:
            found = list(map(self._items.get, keys))
            deque(map(self._items.move_to_end, filter(self._items.__contains__, keys)), 0)
            return found

    def put(self, key: K, value: V) -> V:
        """Store value under key, evicting the oldest entries beyond the size; returns value."""
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self.size:
                self._items.popitem(last=False)
        return value

    def get_or_compute(self, key: K, compute: Callable[[], V]) -> V:
        """The cached value, else compute() stored (computed outside the lock: it may be slow)."""
        found = self.get(key)
        return found if found is not None else self.put(key, compute())

    def discard_where(self, drop: Callable[[K], bool]) -> None:
        """Forget every entry whose key drop() accepts (e.g. older versions of one board)."""
        with self._lock:
            for key in [k for k in self._items if drop(k)]:
                del self._items[key]

    def clear(self) -> None:
        """Forget everything (tests; a reload)."""
        with self._lock:
            self._items.clear()

    def values(self) -> list[V]:
        """The values, oldest first."""
        with self._lock:
            return list(self._items.values())

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)
