"""Per-key rate limits: a sustained requests-per-minute window plus a burst window of one second.

Built on `limits` (moving windows, in memory: one server process owns its counters).
"""

from __future__ import annotations

import math
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

from limits import RateLimitItemPerMinute, RateLimitItemPerSecond
from limits.storage import MemoryStorage
from limits.strategies import MovingWindowRateLimiter


class RateLimiter:
    """`check(key)` returns 0 when the request may go, or the seconds to wait (for `Retry-After`)."""

    def __init__(self, per_minute: int, burst: int) -> None:
        self.per_minute, self.burst = per_minute, burst
        self._limiter = MovingWindowRateLimiter(MemoryStorage())
        self._items = [item for item in (
            RateLimitItemPerMinute(per_minute) if per_minute > 0 else None,
            RateLimitItemPerSecond(burst) if burst > 0 else None,
        ) if item is not None]
        self._lock = threading.Lock()  # test-then-hit across both windows must be one step

    @property
    def enabled(self) -> bool:
        return bool(self._items)

    def check(self, key: str) -> int:
        with self._lock:
            waits = []
            for item in self._items:
                if not self._limiter.test(item, key):
                    reset = self._limiter.get_window_stats(item, key).reset_time
                    waits.append(max(1, math.ceil(reset - time.time())))
            if waits:
                return max(waits)
            for item in self._items:
                self._limiter.hit(item, key)
            return 0


class PerKey:
    """At most `limit` calls of one kind at once per key (#45: one key's eight parallel findability checks stalled
    other users' queries); `enter` says whether this one may start."""

    def __init__(self, limit: int) -> None:
        self.limit, self._running, self._lock = limit, Counter[str](), threading.Lock()

    @contextmanager
    def enter(self, key: str) -> Iterator[bool]:
        allowed = self.claim(key)
        try:
            yield allowed
        finally:
            if allowed:
                self.release(key)

    def claim(self, key: str) -> bool:
        """Take one of `key`'s places, if one is free (a streamed answer releases it on its own thread)."""
        with self._lock:
            allowed = self._running[key] < self.limit
            if allowed:
                self._running[key] += 1
        return allowed

    def release(self, key: str) -> None:
        with self._lock:
            self._running[key] -= 1


class ByteBudget:
    """The bytes a server's concurrent fetches may hold, reserved whole before a fetch starts (each reserves its
    cap, `fetch_max_mb`): forty 283-byte compression bombs fetched at once held 50 MB each, 2.1 GB in all."""

    def __init__(self, total: int) -> None:
        self.total, self.held, self._lock = total, 0, threading.Lock()

    @contextmanager
    def reserve(self, size: int) -> Iterator[bool]:
        with self._lock:
            allowed = self.held + size <= self.total
            if allowed:
                self.held += size
        try:
            yield allowed
        finally:
            if allowed:
                with self._lock:
                    self.held -= size
