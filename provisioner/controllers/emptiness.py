"""Emptiness: a node that holds nothing but DaemonSet, static or finished pods goes after ``ttlSecondsAfterEmpty``.

Karpenter v0.6.3's node controller, "Emptiness" sub-reconciler: only for a Provisioner with
``ttlSecondsAfterEmpty`` set and a **Ready** node. The moment the node became empty is recorded
on the node itself, in the annotation ``karpenter.sh/emptiness-timestamp`` (RFC3339), so a
restart of the controller keeps the clock running; a pod arriving clears it ("Removed emptiness
TTL from node"). Once timestamp + TTL has passed, the Node is deleted and the termination
finalizer does the rest.

Terminating pods still count as occupants (they have not left), and so do pods the node is
nominated for (``groupless.dev/nominations`` still active): a node launched for pods that are
about to be bound is not empty.
"""

from __future__ import annotations

import logging

from provisioner.api import nominations
from provisioner.api.labels import EMPTINESS_TIMESTAMP_ANNOTATION, NOMINATIONS_ANNOTATION
from provisioner.clock import rfc3339
from provisioner.controllers import objects
from provisioner.controllers.objects import Context
from provisioner.controllers.provisioners import get_provisioner, ttl_seconds
from provisioner.controllers.result import Result
from provisioner.kube.api import NotFoundError, Object

log = logging.getLogger(__name__)


def is_empty(pods: list[Object]) -> bool:
    """No pod on the node other than DaemonSet-owned, static/mirror or finished ones."""
    return not any(objects.is_occupant(p) for p in pods)


class EmptinessController:
    """``reconcile(node) -> Result``; one patch (or one delete) at most per call."""

    name = "emptiness"

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    def reconcile(self, node: Object) -> Result:
        if objects.provisioner_of(node) is None or objects.is_deleting(node):
            return Result.done()
        name = objects.name(node)
        stamp_raw = objects.annotations_of(node).get(EMPTINESS_TIMESTAMP_ANNOTATION)
        ttl = ttl_seconds(get_provisioner(self.ctx, node), "ttlSecondsAfterEmpty")
        if ttl is None or not objects.is_ready(node):
            if ttl is None and stamp_raw is not None:
                self._annotate(name, None)
            return Result.done()
        now = self.ctx.clock.now()
        nominated = nominations.decode(objects.annotations_of(node).get(NOMINATIONS_ANNOTATION))
        empty = is_empty(self.ctx.pods(name)) and not (nominated.pods and now < nominated.deadline)
        if not empty:
            if stamp_raw is not None:
                self._annotate(name, None)
                log.info("Removed emptiness TTL from node %s", name)
            if nominated.pods and now < nominated.deadline:
                return Result.after(nominated.deadline - now)
            return Result.done()
        stamp = objects.timestamp(stamp_raw)
        if stamp is None:
            self._annotate(name, rfc3339(now))
            log.info("Added TTL to empty node %s", name)
            return Result.after(ttl)
        expires = stamp + ttl
        if now < expires:
            return Result.after(expires - now)
        log.info("Triggering termination after %ds for empty node %s", ttl, name)
        self.ctx.events.normal(node, "Empty", f"Node empty since {stamp_raw} (ttlSecondsAfterEmpty={ttl}); deleting")
        self.ctx.delete_node(name)
        return Result.done()

    def _annotate(self, name: str, value: str | None) -> None:
        try:
            self.ctx.patch("Node", name, {"metadata": {"annotations": {EMPTINESS_TIMESTAMP_ANNOTATION: value}}})
        except NotFoundError:
            pass
