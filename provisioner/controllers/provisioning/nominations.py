"""The ``groupless.dev/nominations`` annotation of the controller's nodes: who is covered, pruning, adding.

The lifecycle is :mod:`provisioner.model.nominations`'s: a pod nominated to a node is covered
(not provisionable, :func:`provisioner.state.solverinput.covered_pods`) while its nomination
holds (:func:`~provisioner.model.nominations.held`) and the node can still honour it beside its
bound pods (:func:`~provisioner.model.nominations.displaced`). Ended nominations
(:func:`~provisioner.model.nominations.pruned`) and displaced ones are pruned at the start of
every round; pods the solver places on an in-flight node are added to its nominations. Every
write is a JSON patch with a ``test`` of the value read, so a concurrent change (the
initialization controller moves the deadline) fails instead of being overwritten; the written
Nodes are remembered in the :class:`~provisioner.state.inflight.InFlightLedger` until a snapshot
shows them.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
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
    """

    def __init__(self, api: KubeAPI, clock: Clock, ledger: InFlightLedger, inputs: SolverInputs) -> None:
        self.api = api
        self.clock = clock
        self.ledger = ledger
        self.inputs = inputs

    def prune(self, snapshot: Snapshot) -> None:
        """Drop ended reservations (pod bound, deleted, deadline passed) from our nodes' annotations.

        Reads our own latest write of a node when the snapshot does not show it yet, so that
        the ``test`` op of the patch holds the value the API server has.
        """
        now = self.clock.now()
        self.ledger.release_displaced(snapshot)
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
