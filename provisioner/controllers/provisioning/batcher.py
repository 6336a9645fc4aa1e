"""The batching window: wait a moment so that a burst of pods is solved once, not pod by pod.

Karpenter v0.6.3's batcher: the window opens on the first pod and closes after an idle
period without a new pod (1 s), at a maximum duration (10 s), or at a maximum size (2,000
pods). Packing a whole burst together gives fewer, larger nodes; the idle timeout keeps the
latency of a single pod at about one second. The clock is injected: tests move a
:class:`~provisioner.clock.FakeClock` and call :meth:`Batcher.ready` / :meth:`Batcher.take`
without waiting; :meth:`Batcher.wait` is the blocking form the controller loop uses.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from provisioner.clock import Clock


@dataclass(frozen=True, slots=True)
class Batch:
    """A closed window: the distinct pod UIDs added, and when it opened and closed (clock seconds)."""

    uids: frozenset[str]
    opened: float
    closed: float
    triggered: bool = False

    @property
    def duration(self) -> float:
        return self.closed - self.opened


class Batcher:
    """Collects pod UIDs into windows (``idle_seconds`` / ``max_seconds`` / ``max_items``); thread-safe.

    ``add(None)`` (a trigger without a pod, e.g. a periodic resync or the extender saying
    "nothing fits") opens a window like a pod does, so the controller looks at every pending
    pod when it closes.
    """

    def __init__(
        self, clock: Clock, idle_seconds: float = 1.0, max_seconds: float = 10.0, max_items: int = 2000
    ) -> None:
        if idle_seconds < 0 or max_seconds < 0 or max_items < 1:
            raise ValueError(
                f"batcher: idle_seconds={idle_seconds}, max_seconds={max_seconds} must be >= 0 and max_items={max_items} >= 1"
            )
        self.clock = clock
        self.idle_seconds = idle_seconds
        self.max_seconds = max_seconds
        self.max_items = max_items
        self._cond = threading.Condition()
        self._uids: set[str] = set()
        self._open = False
        self._triggered = False
        self._opened = 0.0
        self._last = 0.0

    def add(self, uid: str | None) -> None:
        """Add a pod (a new UID resets the idle timer; a repeated one does not) or a bare trigger."""
        with self._cond:
            now = self.clock.monotonic()
            if not self._open:
                self._open = True
                self._opened = now
                self._last = now
            if uid is None:
                self._triggered = True
            elif uid not in self._uids:
                self._uids.add(uid)
                self._last = now
            self._cond.notify_all()

    def poke(self) -> None:
        """Wake :meth:`wait` to re-check the window (after a fake clock moved)."""
        with self._cond:
            self._cond.notify_all()

    def _remaining(self) -> float | None:
        """Seconds until the open window closes (0: closed now); None when no window is open."""
        if not self._open:
            return None
        if len(self._uids) >= self.max_items:
            return 0.0
        now = self.clock.monotonic()
        close_at = min(self._last + self.idle_seconds, self._opened + self.max_seconds)
        return max(0.0, close_at - now)

    def ready(self) -> bool:
        """True when a window is open and due to close."""
        with self._cond:
            return self._remaining() == 0.0

    def is_open(self) -> bool:
        with self._cond:
            return self._open

    def take(self) -> Batch | None:
        """Close and return the window when it is due, else None."""
        with self._cond:
            if self._remaining() != 0.0:
                return None
            return self._close()

    def flush(self) -> Batch | None:
        """Close the open window now, whatever its timers say (None when none is open)."""
        with self._cond:
            return self._close() if self._open else None

    def _close(self) -> Batch:
        batch = Batch(frozenset(self._uids), self._opened, self.clock.monotonic(), self._triggered)
        self._uids = set()
        self._open = False
        self._triggered = False
        return batch

    def wait(self, stop: threading.Event, timeout: float | None = None) -> Batch | None:
        """Block until a window closes (returned), ``stop`` is set or ``timeout`` real seconds pass (None)."""
        deadline = None if timeout is None else self.clock.monotonic() + timeout
        with self._cond:
            while not stop.is_set():
                remaining = self._remaining()
                if remaining == 0.0:
                    return self._close()
                waits = [0.5]  # re-check stop regularly
                if remaining is not None:
                    waits.append(remaining)
                if deadline is not None:
                    left = deadline - self.clock.monotonic()
                    if left <= 0:
                        return None
                    waits.append(left)
                self._cond.wait(min(waits))
        return None
