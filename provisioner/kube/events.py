"""Kubernetes Events, the way users follow what Groupless does (``kubectl describe``, ``kubectl get events``).

Modelled on client-go's ``record.EventRecorder`` and its ``EventCorrelator``: ``core/v1``
Events with ``involvedObject`` (kind, name, namespace, uid, apiVersion), ``source.component``
and ``reportingComponent``; an identical event (same object, type, reason and message) within
the aggregation window increments ``count`` and moves ``lastTimestamp`` on the existing Event
instead of creating another one. Events of cluster-scoped objects (Nodes, Provisioners) go to
the ``default`` namespace, as kubelet's and client-go's do.

Recording is synchronous by default (tests read the Events right after a reconcile) and
asynchronous on request (the controller process), never raises: an Event is a courtesy to the user and must not fail a reconcile;
failures are logged at warning level.
"""

from __future__ import annotations

import logging
import os
import queue
import socket
import threading
import uuid
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from provisioner.clock import Clock, RealClock, rfc3339
from provisioner.kube.api import RESOURCES, KubeAPI, NotFoundError

log = logging.getLogger(__name__)

NORMAL = "Normal"
WARNING = "Warning"
_CACHE_SIZE = 4096  # client-go's maxLruCacheEntries


class EventRecorder:
    """Records ``v1`` Events through a :class:`~provisioner.kube.api.KubeAPI`.

    ``component`` becomes ``source.component`` and ``reportingComponent``; ``instance``
    (default: the host name) ``reportingInstance``. ``aggregation_window_seconds`` (default
    600, client-go's) bounds how long an identical event is folded into the previous one.
    """

    def __init__(
        self,
        api: KubeAPI,
        component: str = "groupless",
        clock: Clock | None = None,
        *,
        instance: str | None = None,
        aggregation_window_seconds: float = 600.0,
        asynchronous: bool = False,
    ) -> None:
        self.api = api
        self.component = component
        self.clock: Clock = clock or RealClock()
        self.instance = instance or os.environ.get("POD_NAME") or socket.gethostname()
        self.window = aggregation_window_seconds
        self._lock = threading.Lock()
        # key -> (event name, namespace, count, last time seen)
        self._seen: OrderedDict[tuple[str, ...], tuple[str, str, int, float]] = OrderedDict()
        self._queue: queue.Queue[tuple[Mapping[str, Any], str, str, str] | None] | None = None
        if asynchronous:
            self._queue = queue.Queue(maxsize=_CACHE_SIZE)
            threading.Thread(target=self._drain, name="event-recorder", daemon=True).start()

    def _drain(self) -> None:
        assert self._queue is not None
        while True:
            item = self._queue.get()
            try:
                if item is None:
                    return
                self._safe_record(*item)
            finally:
                self._queue.task_done()

    def flush(self) -> None:
        """Wait until queued events are recorded (asynchronous mode; a no-op otherwise)."""
        if self._queue is not None:
            self._queue.join()

    def normal(self, obj: Mapping[str, Any], reason: str, message: str) -> None:
        """A ``Normal`` event about ``obj`` (a wire-form object with ``kind`` and ``metadata``)."""
        self.event(obj, NORMAL, reason, message)

    def warning(self, obj: Mapping[str, Any], reason: str, message: str) -> None:
        """A ``Warning`` event about ``obj``."""
        self.event(obj, WARNING, reason, message)

    def event(self, obj: Mapping[str, Any], type_: str, reason: str, message: str) -> None:
        """Record (or aggregate) one event; never raises.

        With ``asynchronous=True`` the event is queued for a background thread (as client-go's
        broadcaster does) so that a burst of events never slows a reconcile; a full queue
        drops the event with a log line.
        """
        if self._queue is not None:
            try:
                self._queue.put_nowait((dict(obj), type_, reason, message))
            except queue.Full:
                log.warning("Event queue full, dropping %s %s on %s", type_, reason, obj.get("kind"))
            return
        self._safe_record(obj, type_, reason, message)

    def _safe_record(self, obj: Mapping[str, Any], type_: str, reason: str, message: str) -> None:
        try:
            self._record(obj, type_, reason, message)
        except Exception as exc:  # an Event must never fail the caller
            what = obj if isinstance(obj, Mapping) else {}
            meta = what.get("metadata") or {}
            log.warning(
                "Could not record event %s %s on %s %s: %s",
                type_,
                reason,
                what.get("kind"),
                meta.get("name") if isinstance(meta, Mapping) else None,
                exc,
            )

    def _record(self, obj: Mapping[str, Any], type_: str, reason: str, message: str) -> None:
        kind = str(obj.get("kind") or "")
        meta = obj.get("metadata") or {}
        name = str(meta.get("name") or "")
        if not kind or not name:
            log.warning(
                "Not recording event %s %s: the object has no kind or name (%r)", type_, reason, message
            )
            return
        res = RESOURCES.get(kind)
        namespace = str(meta.get("namespace") or "default") if (res is None or res.namespaced) else "default"
        involved = {
            "kind": kind,
            "name": name,
            "namespace": str(meta.get("namespace") or ""),
            "uid": str(meta.get("uid") or ""),
            "apiVersion": str(obj.get("apiVersion") or (res.api_version if res else "")),
        }
        if not involved["namespace"]:
            del involved["namespace"]
        if meta.get("resourceVersion"):
            involved["resourceVersion"] = str(meta["resourceVersion"])
        message = message[:1024]  # the API server rejects longer event messages
        now = self.clock.now()
        key = (kind, namespace, name, involved["uid"], type_, reason, message)
        with self._lock:
            previous = self._seen.get(key)
        if previous is not None and now - previous[3] <= self.window:
            event_name, event_ns, count, _ = previous
            try:
                self.api.patch(
                    "Event", event_name, {"count": count + 1, "lastTimestamp": rfc3339(now)}, event_ns
                )
                self._remember(key, (event_name, event_ns, count + 1, now))
                return
            except NotFoundError:
                pass  # expired on the server (events have a TTL): create a fresh one
        event_name = f"{name or kind.lower()}.{uuid.uuid4().hex[:16]}"
        body: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": event_name, "namespace": namespace},
            "involvedObject": involved,
            "reason": reason,
            "message": message,
            "type": type_,
            "count": 1,
            "firstTimestamp": rfc3339(now),
            "lastTimestamp": rfc3339(now),
            "source": {"component": self.component},
            "reportingComponent": self.component,
            "reportingInstance": self.instance,
        }
        self.api.create("Event", body)
        self._remember(key, (event_name, namespace, 1, now))

    def _remember(self, key: tuple[str, ...], value: tuple[str, str, int, float]) -> None:
        with self._lock:
            self._seen[key] = value
            self._seen.move_to_end(key)
            while len(self._seen) > _CACHE_SIZE:
                self._seen.popitem(last=False)
