"""The ``groupless.dev/nominations`` annotation of the controller's nodes: who is covered, pruning, adding.

The lifecycle is :mod:`provisioner.model.nominations`'s: a pod nominated to a node is covered
(not provisionable, :func:`provisioner.state.solverinput.covered_pods`) while its nomination
holds (:func:`~provisioner.model.nominations.held`) and the node can still honour it beside its
bound pods (:func:`~provisioner.model.nominations.displaced`). Pods the solver places on an
in-flight node are added to its nominations. Every write is a JSON patch with a ``test`` of the
value read, so a concurrent change (the initialization controller moves the deadline) fails
instead of being overwritten; the written Nodes are remembered in the
:class:`~provisioner.state.inflight.InFlightLedger` until a snapshot shows them.

Writes cost a Node update each, which every watcher of Nodes receives (kube-scheduler requeues
its pending pods on it), and take hundreds of milliseconds on a loaded API server, so:

* the round decides what to prune from its snapshot (covered pods are read from the node views,
  not from the writes), and the prune writes run on a pool of ``parallelism`` threads while the
  round goes on; a node whose write is still running is not written again;
* a node's annotation is rewritten only when a reader would see something else: a displaced
  pod (its room is no longer held), an unreadable value, or every entry ended (the annotation
  is removed). An entry that ended while others still hold (its pod bound or deleted) holds no
  room for any reader (:func:`~provisioner.model.nominations.held`) and goes with the last one:
  one removal per node instead of one write per binding;
* the pods of one round placed on several in-flight nodes are added with one patch per node,
  the nodes written concurrently (:meth:`NodeNominations.add_all`);
* writes to one node are serialized (a lock per node), each reading the controller's latest copy.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from provisioner.clock import Clock
from provisioner.controllers.provisioning.inputs import SolverInputs
from provisioner.kube.api import ApiError, KubeAPI, NotFoundError, Object
from provisioner.model import labels as wk
from provisioner.model import nominations as nom
from provisioner.model import objects
from provisioner.scheduling.pods import Pod
from provisioner.state.cluster import Snapshot
from provisioner.state.inflight import InFlightLedger

log = logging.getLogger(__name__)

#: Nomination writes in flight at once (threads of :class:`NodeNominations`' pool).
WRITE_PARALLELISM = 8


def patch_nominations(api: KubeAPI, node_name: str, old: str | None, new: str | None) -> Object | None:
    """Replace the nominations annotation only if it still reads ``old`` (a JSON patch ``test``).

    The initialization controller moves the deadline of the same annotation; the test op
    makes a concurrent change fail (422) instead of being overwritten, and the next round
    starts from the new value. Without an ``old`` value there is nothing to race with and a
    merge patch adds the annotation (the annotations map itself may be absent). Returns the
    patched Node, None when the write failed (logged).
    """
    try:
        if old is None:
            return api.patch("Node", node_name, {"metadata": {"annotations": {wk.NOMINATIONS_ANNOTATION: new}}})
        path = "/metadata/annotations/" + wk.NOMINATIONS_ANNOTATION.replace("~", "~0").replace("/", "~1")
        ops: list[dict[str, Any]] = [{"op": "test", "path": path, "value": old}]
        ops.append({"op": "remove", "path": path} if new is None else {"op": "replace", "path": path, "value": new})
        return api.patch("Node", node_name, ops)
    except NotFoundError:
        log.debug("Node %s is gone; its nominations went with it", node_name)
        return None
    except ApiError as exc:
        log.info(
            "Nominations of node %s changed meanwhile or could not be written (%s); retrying next round",
            node_name,
            exc,
        )
        return None


class NodeNominations:
    """Reads and writes the nominations of the controller's nodes (see the module docstring).

    ``inputs`` gives the snapshot's node views with the controller's own writes in their place.
    ``parallelism``: writes in flight at once. Thread-safe.
    """

    def __init__(
        self,
        api: KubeAPI,
        clock: Clock,
        ledger: InFlightLedger,
        inputs: SolverInputs,
        *,
        parallelism: int = WRITE_PARALLELISM,
    ) -> None:
        self.api = api
        self.clock = clock
        self.ledger = ledger
        self.inputs = inputs
        self._pool = ThreadPoolExecutor(max_workers=max(1, parallelism), thread_name_prefix="nominations")
        self._lock = threading.Lock()
        self._node_locks: dict[str, threading.Lock] = {}
        self._pruning: set[str] = set()  # nodes whose prune write is queued or running
        self._pending: set[Future[Object | None]] = set()  # prune writes queued or running

    def shutdown(self) -> None:
        """Stop taking writes (queued ones still run)."""
        self._pool.shutdown(wait=False)

    def flush(self, timeout: float | None = None) -> None:
        """Wait until the prune writes started so far have ended (tests and a round run to its end)."""
        with self._lock:
            pending = list(self._pending)
        for future in pending:
            future.result(timeout)

    def _node_lock(self, name: str) -> threading.Lock:
        with self._lock:
            lock = self._node_locks.get(name)
            if lock is None:
                lock = self._node_locks[name] = threading.Lock()
            return lock

    # ------------------------------------------------------------------ prune
    def prune(self, snapshot: Snapshot) -> list[Future[Object | None]]:
        """End displaced nominations and remove annotations whose every entry ended; the writes run in the background.

        Decided from ``snapshot`` (with the controller's own writes it does not show yet), on
        the caller's thread: displaced pods are recorded in the ledger at once (a new node
        request for them is salted). The patches run on the pool; returns one future per
        write started (the patched Node, or None when the write failed or the node is gone).
        A node whose earlier prune write is still running is left for the next round.
        """
        now = self.clock.now()
        self.ledger.release_displaced(snapshot)
        futures: list[Future[Object | None]] = []
        for name, view in self.inputs.nodes(snapshot).items():
            raw = objects.annotations_of(view.node).get(wk.NOMINATIONS_ANNOTATION)
            if not isinstance(raw, str):
                continue
            decoded = view.nominations
            current = nom.pruned(decoded, snapshot.pods, now)
            # the displacement check counts each bound pod once, as bound
            displaced = view.displaced(nom.held(current, snapshot.pods, now))
            if displaced:
                log.info("Nominated pod(s) %s no longer fit on node %s beside its bound pods; provisioning again",
                         ", ".join(sorted(current.pods[u].pod for u in displaced)), name)
                current = nom.active(current, now, displaced)
                self.ledger.displaced(displaced, name)
            elif not decoded.malformed and (current.pods or not decoded.pods):
                continue  # what still holds reads the same: the ended entries go with the last one
            with self._lock:
                if name in self._pruning:
                    continue
                self._pruning.add(name)
            new = nom.encode(current) if current.pods else None
            try:
                future = self._pool.submit(self._prune_one, name, raw, new)
            except RuntimeError:  # shut down: the process is stopping
                with self._lock:
                    self._pruning.discard(name)
                break
            with self._lock:
                self._pending.add(future)
            future.add_done_callback(self._written)
            futures.append(future)
        return futures

    def _written(self, future: Future[Object | None]) -> None:
        with self._lock:
            self._pending.discard(future)

    def _prune_one(self, name: str, raw: str, new: str | None) -> Object | None:
        try:
            with self._node_lock(name):
                patched = patch_nominations(self.api, name, raw, new)
                if patched is not None:
                    self.ledger.rewrote(name, patched)
                return patched
        finally:
            with self._lock:
                self._pruning.discard(name)

    # ------------------------------------------------------------------ add
    def add_all(
        self, placements: Sequence[tuple[str, Sequence[Pod]]], snapshot: Snapshot, new_deadline: float
    ) -> list[Object | None]:
        """:meth:`add` for each (node name, pods), the nodes written concurrently; waits for every write.

        Returns, in the order given, the Node each node's pods were added to, or None.
        """
        if len(placements) == 1:
            name, pods = placements[0]
            return [self.add(name, pods, snapshot, new_deadline)]
        futures = [self._pool.submit(self.add, name, pods, snapshot, new_deadline) for name, pods in placements]
        return [future.result() for future in futures]

    def add(self, node_name: str, pods: Sequence[Pod], snapshot: Snapshot, new_deadline: float) -> Object | None:
        """Add ``pods`` to the nominations of in-flight node ``node_name`` (one patch); the Node as read, or None.

        The deadline stays the node's while it has not passed, else ``new_deadline`` (clock
        wall time). Starts from the controller's latest copy of the node; a stale copy (the
        patch's ``test`` fails) is read again once. The patched Node and the pods are
        remembered in the ledger until a snapshot shows them. Returns the Node the pods were
        added to (its labels name the instance type and zone), None when nothing was written
        (logged).
        """
        with self._node_lock(node_name):
            view = self.inputs.node(snapshot, node_name)
            if view is None:
                return None
            node: Object = dict(view.node)
            patched: Object | None = None
            for attempt in range(2):
                if attempt:  # the cached node was stale: read the current one
                    try:
                        node = self.api.get("Node", node_name)
                    except ApiError as exc:
                        log.warning("Could not nominate %d pod(s) to node %s: %s", len(pods), node_name, exc)
                        return None
                raw = objects.annotations_of(node).get(wk.NOMINATIONS_ANNOTATION)
                now = self.clock.now()
                current = nom.held(nom.decode(raw if isinstance(raw, str) else None), snapshot.pods, now)
                deadline = current.deadline if current.deadline > now else new_deadline
                updated = current
                for pod in pods:
                    updated = nom.nominate(updated, pod.uid, pod.key, pod.requests, deadline)
                patched = patch_nominations(self.api, node_name, raw, nom.encode(updated))
                if patched is not None:
                    break
            if patched is None:
                return None
            # until a snapshot shows these nominations
            self.ledger.wrote(node_name, patched, (pod.uid for pod in pods), deadline)
            return node
