"""Keeps the extender's state current from the cluster state cache, off the request path.

Why a background rebuild: kube-scheduler waits for every filter call, so a request must never
pay for rebuilding the view of 5,000 nodes. The informers announce each change; a single
thread coalesces them (at most one rebuild per ``min_interval`` seconds) and publishes a new
immutable :class:`~extender.state.ExtenderState`; requests read whichever is current (one
attribute read). Staleness is bounded by ``min_interval`` (or four rebuild times, whichever is
longer, so rebuilds never take more than a fifth of a core) plus one rebuild: about 0.2 s for
5,000 nodes, where a rebuild with one changed node takes ~20 ms.

Gunicorn forks its worker after loading the app (``preload_app``), and threads do not survive
a fork; so the rebuild thread (and, for the standalone extender, the informers) start in the
process that serves: on the first use in a process, and right after a fork.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any

from extender.state import EMPTY_STATE, ExtenderState, PriceLookup, SnapshotAdapter
from provisioner.state.nodes import NodeViews

log = logging.getLogger("groupless.extender")


class LiveState:
    """A state provider over a :class:`provisioner.state.ClusterState`: call it for the current state.

    ``own_informers``: True when this process owns the cache (the standalone extender), so
    :meth:`ensure_started` also starts its list+watch threads; False when the controller
    that shares it runs them. ``ready()`` is True once the cache has synced and a state was
    built from it. Nodes are read through the cache's :class:`~provisioner.state.nodes.NodeViews`
    (``cluster.node_views``), so a process decodes each node once for all its readers.
    """

    def __init__(
        self,
        cluster: Any,
        *,
        price_of: PriceLookup | None = None,
        own_informers: bool = False,
        min_interval: float = 0.2,
    ) -> None:
        self.cluster = cluster
        self.own_informers = own_informers
        self.min_interval = min_interval
        # the cache's own node views (shared with the metrics and, in the controller, the solver
        # input); a price lookup of our own needs views of our own
        shared = getattr(cluster, "node_views", None) if price_of is None else None
        self._adapter = SnapshotAdapter(price_of, views=shared)
        self._current: ExtenderState = EMPTY_STATE
        self._built = False
        self._build_lock = threading.Lock()
        self._start_lock = threading.Lock()
        self._dirty = threading.Event()
        self._stop = threading.Event()
        self._pid: int | None = None
        self._unsubscribe: Any = None
        self._thread: threading.Thread | None = None

    @property
    def node_views(self) -> NodeViews:
        """The node views the state is built from (the cache's own unless a price lookup was given)."""
        return self._adapter.views

    def __call__(self) -> ExtenderState:
        """The current state (starts the machinery on first use in this process)."""
        if self._pid != os.getpid():
            self.ensure_started()
        return self._current

    def ready(self) -> bool:
        """True once the cache has synced and a state was built from it."""
        if self._pid != os.getpid():
            self.ensure_started()
        return self._built and bool(self.cluster.synced())

    def refresh(self) -> ExtenderState:
        """Rebuild now from a fresh snapshot (synchronously) and publish it."""
        with self._build_lock:
            synced = bool(self.cluster.synced())
            state = self._adapter.build(self.cluster.snapshot())
            self._current = state
            self._built = self._built or synced
            return state

    def _changed(self, kind: str, event: Any) -> None:
        self._dirty.set()

    def ensure_started(self) -> None:
        """Start the rebuild thread (and owned informers) in this process, once."""
        with self._start_lock:
            if self._pid == os.getpid():
                return
            self._pid = os.getpid()
            self._stop.clear()
            if self._unsubscribe is None:
                self._unsubscribe = self.cluster.subscribe(self._changed)
            if self.own_informers:
                self.cluster.start()
            self._dirty.set()
            self._thread = threading.Thread(target=self._run, name="extender-state", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """Stop the rebuild thread (and owned informers)."""
        self._stop.set()
        self._dirty.set()
        if self._thread is not None:
            self._thread.join(5.0)
        if self.own_informers:
            self.cluster.stop()
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        self._pid = None

    def _run(self) -> None:
        while not self._stop.is_set():
            if not self._dirty.wait(1.0):
                if not self._built and self.cluster.synced():
                    self._dirty.set()
                continue
            if self._stop.is_set():
                return
            self._dirty.clear()
            started = time.monotonic()
            try:
                before = len(self._current.nodes)
                state = self.refresh()
                if not before and state.nodes:
                    log.info("Extender state built: %d node(s), %d managed, %d Provisioner(s)",
                             len(state.nodes), len(state.managed), len(state.provisioners))
            except Exception:  # a bad snapshot must not end the thread; the old state stays
                log.exception("Rebuilding the extender state failed; keeping the previous one")
            # at most ~20% of a core on rebuilds, however big the cluster and busy its churn
            self._stop.wait(max(self.min_interval, 4 * (time.monotonic() - started)))
