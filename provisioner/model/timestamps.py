"""Kubernetes timestamps (``metav1.Time``: RFC 3339, ``2026-01-01T00:00:00Z``) and epoch seconds.

Every wire timestamp (``creationTimestamp``, ``deletionTimestamp``, a condition's
``lastTransitionTime``) is read here, so a malformed one means the same everywhere: unknown.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any


def rfc3339(epoch_seconds: float) -> str:
    """``2026-01-01T00:00:00Z`` for an epoch time (Kubernetes' timestamp form, whole seconds)."""
    return datetime.fromtimestamp(int(epoch_seconds), tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_rfc3339(value: str) -> float:
    """Epoch seconds of a Kubernetes timestamp (``...Z`` or with an offset); ValueError if malformed."""
    text = value.strip()
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    return datetime.fromisoformat(text).timestamp()


def timestamp(value: Any) -> float | None:
    """Epoch seconds of an RFC 3339 string; ``None`` when absent or malformed."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return parse_rfc3339(value)
    except ValueError:
        return None
