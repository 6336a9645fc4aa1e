"""Injected clocks: every controller and the batcher take a :class:`Clock`, tests drive a :class:`FakeClock`.

Times are seconds: ``now()`` is wall-clock (UNIX epoch seconds, for comparing with Kubernetes
timestamps), ``monotonic()`` is for durations.
"""

from __future__ import annotations

import threading
import time
from typing import Protocol

# Kubernetes timestamps are read and written in the model; re-exported for the processes' code.
from provisioner.model.timestamps import parse_rfc3339, rfc3339, timestamp

__all__ = ["Clock", "FakeClock", "RealClock", "parse_rfc3339", "rfc3339", "timestamp"]


class Clock(Protocol):
    def now(self) -> float:
        """Wall-clock seconds since the UNIX epoch."""
        ...

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back."""
        ...

    def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` (a fake clock advances instead)."""
        ...


class RealClock:
    def now(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(max(0.0, seconds))


class FakeClock:
    """A clock that only moves when told to (``advance``) or when someone sleeps on it."""

    def __init__(self, start: float = 1_767_225_600.0) -> None:  # 2026-01-01T00:00:00Z
        self._now = start
        self._lock = threading.Lock()

    def now(self) -> float:
        with self._lock:
            return self._now

    def monotonic(self) -> float:
        return self.now()

    def sleep(self, seconds: float) -> None:
        self.advance(seconds)

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._now += max(0.0, seconds)
