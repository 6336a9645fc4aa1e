"""Pods the filter let into room beside a reservation, counted until the cache can show them bound.

kube-scheduler binds asynchronously: it assumes the pod on the node it chose, answers the next
pod's filter call at once, and the binding reaches the extender's cache (through the API server
and the watch) tens to hundreds of milliseconds later. In a burst, several pods that are not
nominated anywhere (their own nodes still launching) are filtered within that window against
the same view of a just-launched node: each fits the room left beside the node's reservation on
its own, kube-scheduler's NodeResourcesFit only counts what is bound or assumed (not the
reservation), and together they take the room held for the node's nominated pods, which then
need another node while the one launched for them hosts others.

:class:`AssumedPods` remembers, per reserved node, the requests of the pods the filter passed
there without a nomination to it, until the cache shows the pod bound (to that node, whose
free room then counts it, or to another) or being deleted, and for :data:`ASSUME_SECONDS` at
most: the filter counts them against the room beside the reservation
(:func:`extender.handlers.reservation_blocks`), so the room is handed out once. Counted until
the binding shows, as kube-scheduler's cache keeps its assumed pods, rather than for a fixed
time: on a loaded API server a binding can take seconds to reach the cache. A pod is counted
on every reserved node it passed (kube-scheduler picks one of them), which errs towards
refusing: a refused pod is retried by kube-scheduler after its
back-off, when the bindings are in the cache. Nodes without a reservation are not tracked:
kube-scheduler's own fit check covers them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable

from provisioner.model.resources import Resources

#: Seconds a pass is counted at most when the cache never shows its pod bound: kube-scheduler
#: failed the pod after the filter (a later plugin, a failed binding) and has not filtered it
#: again, or the pod was deleted. kube-scheduler's own cache keeps an assumed pod until its
#: binding is confirmed; this bound only keeps a lost pass from holding room for long.
ASSUME_SECONDS = 30.0


class AssumedPods:
    """Per reserved node, pods passed there by the filter and not yet visible as bound (thread-safe).

    ``ttl_seconds``: how long a pass is counted (:data:`ASSUME_SECONDS`). Times are epoch seconds,
    the filter's ``now``.
    """

    def __init__(self, ttl_seconds: float = ASSUME_SECONDS) -> None:
        self.ttl_seconds = ttl_seconds
        self._lock = threading.Lock()
        # node name -> pod UID -> (requests, expires at)
        self._passed: dict[str, dict[str, tuple[Resources, float]]] = {}

    def passed(self, pod_uid: str, requests: Resources, nodes: Iterable[str], now: float) -> None:
        """``pod_uid`` (requesting ``requests``) was passed to each of ``nodes`` at ``now``."""
        until = now + self.ttl_seconds
        with self._lock:
            for node in nodes:
                self._passed.setdefault(node, {})[pod_uid] = (requests, until)

    def on(self, node: str, now: float, other_than: str, settled: Callable[[str], bool] | None = None) -> Resources:
        """What the pods passed to ``node`` before ``now`` request together, ``other_than`` (a pod UID) aside.

        ``settled(uid)``: whether the cache shows that pod bound or being deleted
        (:meth:`extender.state.ExtenderState.settled`); its pass is dropped then.
        """
        with self._lock:
            entries = self._passed.get(node)
            if not entries:
                return Resources()
            total = Resources()
            for uid, (requests, until) in list(entries.items()):
                if until <= now or (settled is not None and settled(uid)):
                    del entries[uid]
                elif uid != other_than:
                    total = total + requests
            if not entries:
                del self._passed[node]
            return total
