"""The ``groupless.dev/nominations`` annotation of the controller's nodes: who is covered, pruning, adding.

A pod nominated to a node is covered (not provisionable) while its nomination is active
(deadline not passed, pod not bound) and the node can still honour it beside its bound pods
(:func:`~provisioner.controllers.provisioning.rules._displaced`). Ended nominations are pruned
at the start of every round; pods the solver places on an in-flight node are added to its
nominations. Every write is a JSON patch with a ``test`` of the value read, so a concurrent
change (the initialization controller moves the deadline) fails instead of being overwritten;
the written Nodes are remembered in the
:class:`~provisioner.state.inflight.InFlightLedger` until a snapshot shows them.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from provisioner.clock import Clock
from provisioner.controllers.provisioning.inputs import SolverInputs
from provisioner.controllers.provisioning.rules import BIND_GRACE_SECONDS, _bound_for, _displaced
from provisioner.kube.api import ApiError, KubeAPI, NotFoundError, Object
from provisioner.model import labels as wk
from provisioner.model import nominations as nom
from provisioner.scheduling.pods import Pod
from provisioner.state.cluster import Snapshot
from provisioner.state.inflight import InFlightLedger

log = logging.getLogger(__name__)


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

    ``inputs`` gives the snapshot's Nodes with the controller's own writes in their place.
    """

    def __init__(self, api: KubeAPI, clock: Clock, ledger: InFlightLedger, inputs: SolverInputs) -> None:
        self.api = api
        self.clock = clock
        self.ledger = ledger
        self.inputs = inputs

    def covered(self, snapshot: Snapshot) -> set[str]:
        """Pods covered by capacity on its way: in flight (ours) or holding a valid nomination."""
        now = self.clock.now()
        result = set(self.ledger.in_flight())
        for node in self.inputs.nodes(snapshot).values():
            raw = ((node.get("metadata") or {}).get("annotations") or {}).get(wk.NOMINATIONS_ANNOTATION)
            if not raw:
                continue
            current = nom.active(nom.decode(raw), now, snapshot.bound_pod_uids)
            name = (node.get("metadata") or {}).get("name") or ""
            result.update(set(current.pods) - _displaced(node, current, snapshot.pods_on(name)))
        return result

    def prune(self, snapshot: Snapshot) -> None:
        """Drop ended reservations (pod bound, deleted, deadline passed) from our nodes' annotations.

        Reads our own latest write of a node when the snapshot does not show it yet, so that
        the ``test`` op of the patch holds the value the API server has.
        """
        now = self.clock.now()
        present = set(snapshot.pods)
        self.ledger.release_displaced(snapshot)
        for name, node in self.inputs.nodes(snapshot).items():
            meta = node.get("metadata") or {}
            raw = (meta.get("annotations") or {}).get(wk.NOMINATIONS_ANNOTATION)
            if raw is None:
                continue
            decoded = nom.decode(raw)
            bound = snapshot.bound_pod_uids
            ended = {
                uid for uid in decoded.pods
                if uid not in present or (uid in bound and _bound_for(snapshot.pods[uid], now) >= BIND_GRACE_SECONDS)
            }
            current = nom.active(decoded, now, ended)
            # the displacement check counts each bound pod once, as bound
            displaced = _displaced(node, nom.active(current, now, bound), snapshot.pods_on(name))
            if displaced:
                log.info("Nominated pod(s) %s no longer fit on node %s beside its bound pods; provisioning again",
                         ", ".join(sorted(current.pods[u].pod for u in displaced)), name)
                current = nom.active(current, now, displaced)
                self.ledger.displaced(displaced, name)
            if current == decoded and not decoded.malformed:
                continue
            patched = patch_nominations(self.api, name, raw, nom.encode(current) if current.pods else None)
            if patched is not None:
                self.ledger.rewrote(name, patched)

    def add(self, node_name: str, pods: Sequence[Pod], snapshot: Snapshot, new_deadline: float) -> Object | None:
        """Add ``pods`` to the nominations of in-flight node ``node_name`` (one patch); the Node as read, or None.

        The deadline stays the node's while it has not passed, else ``new_deadline`` (clock
        wall time). A stale cached copy (the patch's ``test`` fails) is read again once; the
        patched Node and the pods are remembered in the ledger until a snapshot shows them.
        Returns the Node the pods were added to (its labels name the instance type and zone),
        None when nothing was written (logged).
        """
        node = self.inputs.nodes(snapshot).get(node_name)
        if node is None:
            return None
        patched: Object | None = None
        for attempt in range(2):
            if attempt:  # the cached node was stale: read the current one
                try:
                    node = self.api.get("Node", node_name)
                except ApiError as exc:
                    log.warning("Could not nominate %d pod(s) to node %s: %s", len(pods), node_name, exc)
                    return None
            raw = ((node.get("metadata") or {}).get("annotations") or {}).get(wk.NOMINATIONS_ANNOTATION)
            current = nom.active(nom.decode(raw), self.clock.now(), snapshot.bound_pod_uids)
            now = self.clock.now()
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
