"""A delaying, deduplicating work queue with client-go's guarantees, driven by an injected clock.

Semantics of client-go's ``workqueue`` that the controllers rely on:

* a key is in the queue at most once; adding it again keeps the *earlier* due time;
* a key is never handed to two workers at once: added while being processed, it is marked
  dirty and handed out again after :meth:`WorkQueue.done`;
* failures back off per key exponentially (``base`` doubling to ``maximum`` seconds) until the
  key succeeds (:meth:`WorkQueue.forget`).

Tests drive it with a :class:`~provisioner.clock.FakeClock` through :meth:`WorkQueue.pop_due`
(non-blocking); the process uses :meth:`WorkQueue.get`, which blocks on a real clock.
"""

from __future__ import annotations

import heapq
import itertools
import threading
from collections.abc import Hashable

from provisioner.clock import Clock

Key = Hashable


class WorkQueue:
    def __init__(self, clock: Clock, *, base: float = 0.1, maximum: float = 300.0) -> None:
        self.clock = clock
        self.base = base
        self.maximum = maximum
        self._heap: list[tuple[float, int, Key]] = []
        self._due: dict[Key, float] = {}
        self._processing: set[Key] = set()
        self._dirty: dict[Key, float] = {}
        self._failures: dict[Key, int] = {}
        self._seq = itertools.count()
        self._cond = threading.Condition()
        self._shutdown = False

    def __len__(self) -> int:
        with self._cond:
            return len(self._due) + len(self._dirty)

    def add(self, key: Key, delay: float = 0.0) -> None:
        """Queue ``key`` to be processed ``delay`` seconds from now (earliest due time wins)."""
        with self._cond:
            at = self.clock.monotonic() + max(0.0, delay)
            if key in self._processing:
                self._dirty[key] = min(at, self._dirty.get(key, at))
                return
            current = self._due.get(key)
            if current is not None and current <= at:
                return
            self._due[key] = at
            heapq.heappush(self._heap, (at, next(self._seq), key))
            self._cond.notify()

    def add_rate_limited(self, key: Key) -> float:
        """Requeue after a failure: ``base * 2**failures`` seconds, capped at ``maximum``; returns the delay."""
        with self._cond:
            failures = self._failures.get(key, 0)
            self._failures[key] = failures + 1
        delay = float(min(self.maximum, self.base * (2.0**failures)))
        self.add(key, delay)
        return delay

    def forget(self, key: Key) -> None:
        with self._cond:
            self._failures.pop(key, None)

    def _pop_locked(self, now: float) -> Key | None:
        while self._heap:
            at, _, key = self._heap[0]
            if self._due.get(key) != at:
                heapq.heappop(self._heap)  # superseded entry
                continue
            if at > now + 1e-3:  # float slack at epoch magnitudes
                return None
            heapq.heappop(self._heap)
            del self._due[key]
            self._processing.add(key)
            return key
        return None

    def pop_due(self) -> Key | None:
        """A key whose time has come, marked as processing; ``None`` when none is due."""
        with self._cond:
            return self._pop_locked(self.clock.monotonic())

    def next_due(self) -> float | None:
        """Monotonic time of the soonest queued key, ``None`` when empty."""
        with self._cond:
            live = [at for at, _, key in self._heap if self._due.get(key) == at]
            return min(live) if live else None

    def get(self, timeout: float = 1.0) -> Key | None:
        """Block (real clock) up to ``timeout`` seconds for a due key; ``None`` on timeout or shutdown."""
        with self._cond:
            end = self.clock.monotonic() + timeout
            while not self._shutdown:
                now = self.clock.monotonic()
                key = self._pop_locked(now)
                if key is not None:
                    return key
                if now >= end:
                    return None
                nxt = self._heap[0][0] if self._heap else end
                self._cond.wait(max(0.001, min(end, nxt) - now))
            return None

    def done(self, key: Key) -> None:
        """Processing of ``key`` finished; a dirty key is queued again."""
        with self._cond:
            self._processing.discard(key)
            at = self._dirty.pop(key, None)
        if at is not None:
            self.add(key, max(0.0, at - self.clock.monotonic()))

    def shutdown(self) -> None:
        with self._cond:
            self._shutdown = True
            self._cond.notify_all()
