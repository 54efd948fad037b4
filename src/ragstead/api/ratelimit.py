"""Per-key rate limits: a sustained requests-per-minute window plus a burst window of one second.

Built on `limits` (moving windows, in memory: one server process owns its counters).
"""

from __future__ import annotations

import math
import threading
import time

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
