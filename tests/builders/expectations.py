"""Waiting on what a test can observe, never on a fixed sleep (gomega's ``Eventually`` in Karpenter's tests)."""

from __future__ import annotations

import time
from collections.abc import Callable


def eventually(condition: Callable[[], object], timeout: float = 5.0, interval: float = 0.01) -> bool:
    """Poll ``condition`` every ``interval`` seconds until it is truthy (True) or ``timeout`` seconds pass (False).

    Use as ``assert eventually(lambda: ...)``: on a slow machine it waits longer, on a fast one it
    returns at once, and it never passes because time ran out.
    """
    end = time.monotonic() + timeout
    while True:
        if condition():
            return True
        if time.monotonic() >= end:
            return False
        time.sleep(interval)
