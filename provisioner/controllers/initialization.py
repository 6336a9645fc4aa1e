"""Initialization: a launched node joins the schedulable pool only once its kubelet reports Ready.

Nodes are launched with the startup taint ``karpenter.sh/not-ready:NoSchedule`` so nothing is
placed on them before they work. This controller (Karpenter v0.6.3 node controller,
"Initialization" sub-reconciler) removes it when the node turns Ready, and terminates a node that
is still not Ready ``registration_timeout`` seconds (15 min) after creation ("failed to become
ready"): such an instance only costs money.

It also keeps nominations honest: when the node turns Ready, the deadline of its
``groupless.dev/nominations`` reservation moves to Ready + ``nomination_ttl`` (the pods now have
that long to be bound), and a reservation past its deadline is pruned, so the capacity is free
for any pod again.
"""

from __future__ import annotations

import logging
from typing import Any

from provisioner.controllers import objects
from provisioner.controllers.objects import Context
from provisioner.controllers.result import Result
from provisioner.kube.api import Object
from provisioner.model import nominations
from provisioner.model.labels import NOMINATIONS_ANNOTATION, NOT_READY_TAINT_KEY

log = logging.getLogger(__name__)


class InitializationController:
    """``reconcile(node) -> Result``; one patch at most per call."""

    name = "initialization"

    def __init__(self, ctx: Context, *, registration_timeout: float = 900.0, nomination_ttl: float = 300.0) -> None:
        self.ctx = ctx
        self.registration_timeout = registration_timeout
        self.nomination_ttl = nomination_ttl

    def reconcile(self, node: Object) -> Result:
        """Untaint a Ready node, terminate one that never became Ready, prune expired nominations.

        Only nodes labelled ``karpenter.sh/provisioner-name`` and not being deleted are handled.
        """
        if objects.provisioner_of(node) is None or objects.is_deleting(node):
            return Result.done()
        now = self.ctx.clock.now()
        if objects.has_taint(node, NOT_READY_TAINT_KEY):
            return self._starting(node, now)
        return self._nominations(node, now)

    def _starting(self, node: Object, now: float) -> Result:
        name = objects.name(node)
        if not objects.is_ready(node):
            created = objects.created_at(node)
            if created is None:
                return Result.after(self.registration_timeout)
            deadline = created + self.registration_timeout
            if now < deadline:
                return Result.after(deadline - now)
            log.info("Triggering termination for node that failed to become ready: %s", name)
            self.ctx.events.warning(
                node, "FailedToBecomeReady",
                f"Node not Ready {int(now - created)}s after creation; terminating",
            )
            self.ctx.delete_node(name)
            return Result.done()
        ready_at = objects.ready_since(node) or now
        patch: dict[str, Any] = {
            "metadata": {"resourceVersion": objects.meta(node).get("resourceVersion")},
            "spec": {"taints": [t for t in objects.taints(node) if t.get("key") != NOT_READY_TAINT_KEY]},
        }
        requeue = Result.done()
        raw = objects.annotations_of(node).get(NOMINATIONS_ANNOTATION)
        if raw is not None:
            current = nominations.decode(raw)
            if current.pods:
                deadline = max(ready_at, now) + self.nomination_ttl
                moved = nominations.Nominations(deadline=deadline, pods=current.pods)
                patch["metadata"]["annotations"] = {NOMINATIONS_ANNOTATION: nominations.encode(moved)}
                requeue = Result.after(deadline - now)
            else:
                patch["metadata"]["annotations"] = {NOMINATIONS_ANNOTATION: None}
        if patch["metadata"]["resourceVersion"] is None:
            del patch["metadata"]["resourceVersion"]
        self.ctx.patch("Node", name, patch)
        log.info("Removed taint %s from Ready node %s", NOT_READY_TAINT_KEY, name)
        return requeue

    def _nominations(self, node: Object, now: float) -> Result:
        raw = objects.annotations_of(node).get(NOMINATIONS_ANNOTATION)
        if raw is None:
            return Result.done()
        current = nominations.decode(raw)
        if current.pods and now < current.deadline:
            return Result.after(current.deadline - now)
        if current.malformed:
            log.warning("Removing unreadable nominations of node %s: %s", objects.name(node), current.error)
        self.ctx.patch("Node", objects.name(node), {"metadata": {"annotations": {NOMINATIONS_ANNOTATION: None}}})
        log.info("Expired nominations of node %s", objects.name(node))
        return Result.done()
