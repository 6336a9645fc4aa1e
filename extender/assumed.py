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
there without a nomination to it, for :data:`ASSUME_SECONDS`: the filter counts them against
the room beside the reservation (:func:`extender.handlers.reservation_blocks`), so the room is
handed out once. A pod is counted on every reserved node it passed (kube-scheduler picks one of
them), which errs towards refusing: a refused pod is retried by kube-scheduler after its
back-off, when the bindings are in the cache. Nodes without a reservation are not tracked:
kube-scheduler's own fit check covers them.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

from provisioner.model.resources import Resources

#: Seconds a pass is counted: longer than a binding takes to reach the extender's cache on a
#: loaded API server, short enough that a pod kube-scheduler placed elsewhere frees the room soon.
ASSUME_SECONDS = 2.0


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

    def on(self, node: str, now: float, other_than: str) -> Resources:
        """What the pods passed to ``node`` before ``now`` request together, ``other_than`` (a pod UID) aside."""
        with self._lock:
            entries = self._passed.get(node)
            if not entries:
                return Resources()
            total = Resources()
            for uid, (requests, until) in list(entries.items()):
                if until <= now:
                    del entries[uid]
                elif uid != other_than:
                    total = total + requests
            if not entries:
                del self._passed[node]
            return total
