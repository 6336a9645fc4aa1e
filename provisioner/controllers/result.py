"""The outcome of one reconcile: when to look at the object again.

Karpenter's controllers return controller-runtime's ``reconcile.Result``; sub-reconcilers of one
object merge theirs with ``result.Min`` (the soonest requeue wins). :class:`Result` is that value
here: ``requeue_after`` in seconds, ``None`` for "only when something changes".
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Result:
    """``requeue_after``: seconds until the object must be reconciled again; ``None`` = never by time."""

    requeue_after: float | None = None

    @staticmethod
    def done() -> Result:
        return Result(None)

    @staticmethod
    def after(seconds: float) -> Result:
        """Requeue in ``seconds`` (negative becomes 0: "now")."""
        return Result(max(0.0, float(seconds)))

    @staticmethod
    def now() -> Result:
        return Result(0.0)

    @staticmethod
    def min(results: Iterable[Result]) -> Result:
        """The soonest requeue among ``results`` (Karpenter's ``result.Min``)."""
        times = [r.requeue_after for r in results if r.requeue_after is not None]
        return Result(min(times)) if times else Result(None)
