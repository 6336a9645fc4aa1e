"""Expiration: a node older than ``ttlSecondsUntilExpired`` is replaced, then deleted: the groupless upgrade.

Karpenter v0.6.3 simply deleted an expired Node and let the drain push pods to Pending;
Karpenter v1 (disruption orchestration) first taints the candidate ``karpenter.sh/disrupted``,
launches replacements and waits for them to initialize before deleting. This follows v1, in
three restart-safe steps whose state lives on the Node, not in memory:

1. expired and not yet tainted: add ``karpenter.sh/disrupted:NoSchedule`` (kube-scheduler keeps
   new pods off the node even when the extender is not consulted); event ``Expired``;
2. tainted, no replacement recorded: ask the provisioning engine for capacity for the node's
   pods, excluding this node (nothing is launched if they fit elsewhere); record the launched
   node names in the annotation ``groupless.dev/replacements``; event ``Replacing``;
3. every recorded replacement is Ready (and untainted by startup): delete the Node, so the
   termination finalizer drains it through the Eviction API. With no replacement needed, the
   Node is deleted at once. A replacement that vanished (failed to become ready) clears the
   record, so step 2 runs again.
4. while the Node drains (deleting), its replacements are watched still: one that is lost
   (terminated out of band, deleted for not registering) is replaced again for the pods still on
   the draining node, so the pods that a PodDisruptionBudget holds back keep a place to go.
   Replacements are never retired as empty while the node they replace exists
   (:mod:`provisioner.model.replacements`, read by emptiness).

Consolidation (:mod:`provisioner.controllers.consolidation`) reuses steps 3-4: it taints the
nodes of a move with the reason ``consolidation``, launches their replacements together and
records them on each node; from there this controller waits for them and deletes the node, as
for an expired one.

A Provisioner without ``ttlSecondsUntilExpired`` never expires its nodes; removing (or raising)
the TTL before the node is deleted takes the taint and the record off again, unless the taint
carries the annotation ``groupless.dev/disruption-reason``: then another controller set it
(ownership for a deleted Provisioner, emptiness) and only that controller lifts it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Protocol

from provisioner.clock import rfc3339
from provisioner.controllers import objects
from provisioner.controllers.objects import Context
from provisioner.controllers.provisioners import get_provisioner, ttl_seconds
from provisioner.controllers.result import Result
from provisioner.kube.api import Object
from provisioner.model import replacements
from provisioner.model.labels import DISRUPTED_TAINT_KEY, NOT_READY_TAINT_KEY
from provisioner.model.replacements import REPLACEMENTS_ANNOTATION

log = logging.getLogger(__name__)

DISRUPTED_TAINT = {"key": DISRUPTED_TAINT_KEY, "effect": "NoSchedule"}
#: How often to look at replacements that are not Ready yet (seconds).
POLL_INTERVAL = 5.0
#: How long to wait before trying again when launching replacements failed (seconds).
RETRY_INTERVAL = 30.0


class Replacer(Protocol):
    """Launches capacity for ``pods`` anywhere but ``node_name``; returns the new nodes' names.

    An empty list means the pods fit on existing (or in-flight) capacity. The process wires
    :meth:`ProvisioningController.replace <provisioner.controllers.provisioning.ProvisioningController.replace>`.
    """

    def __call__(self, pods: Sequence[Object], node_name: str) -> list[str]: ...


class ExpirationController:
    """``reconcile(node) -> Result``; one write (patch or delete) at most per call."""

    name = "expiration"

    def __init__(self, ctx: Context, replacer: Replacer | None = None) -> None:
        self.ctx = ctx
        self.replacer = replacer

    def reconcile(self, node: Object) -> Result:
        if objects.provisioner_of(node) is None:
            return Result.done()
        if objects.is_deleting(node):
            return self._watch_replacements(node)
        if objects.disruption_reason(node) == objects.REASON_CONSOLIDATION:
            return self._follow_consolidation(node)
        ttl = ttl_seconds(get_provisioner(self.ctx, node), "ttlSecondsUntilExpired")
        launched = objects.launched_at(node)
        if ttl is None or launched is None:
            return self._cancel(node)
        now = self.ctx.clock.now()
        expires = launched + ttl
        if now < expires:
            self._cancel(node)
            return Result.after(expires - now)
        name = objects.name(node)
        if not objects.has_taint(node, DISRUPTED_TAINT_KEY):
            patch = objects.guarded(node, {"spec": {"taints": [*objects.taints(node), DISRUPTED_TAINT]}})
            self.ctx.patch("Node", name, patch)  # a stale read ends here in a 409: no second event
            log.info("Triggering termination for expired node %s after %ds (launched %s)", name, ttl, rfc3339(launched))
            self.ctx.events.normal(node, "Expired", f"Node expired after ttlSecondsUntilExpired={ttl}s; replacing")
            return Result.now()
        recorded = replacements.recorded(node)
        if recorded is None:
            return self._replace(node)
        return self._await_replacements(node, recorded)

    def _follow_consolidation(self, node: Object) -> Result:
        """A node consolidation tainted: once its replacements are recorded, steps 3-4 as for an expired node.

        The consolidation controller launches the replacements of all the nodes of one move
        together and records them on each; until then (no record) the node is its to finish.
        """
        recorded = replacements.recorded(node)
        if recorded is None:
            return Result.done()
        return self._await_replacements(node, recorded)

    def _await_replacements(self, node: Object, recorded: Sequence[str]) -> Result:
        """Step 3: delete the node once every recorded replacement is Ready; a lost one clears the record."""
        name = objects.name(node)
        if self._lost(name, recorded):
            self._record(name, None)
            return Result.now()
        waiting = []
        for replacement in recorded:
            other = self.ctx.read("Node", replacement) or self.ctx.read_live("Node", replacement)
            if other is None or not objects.is_ready(other) or objects.has_taint(other, NOT_READY_TAINT_KEY):
                waiting.append(replacement)
        if waiting:
            return Result.after(POLL_INTERVAL)
        return self._delete(node, f"replacement(s) {', '.join(recorded)} Ready")

    def _lost(self, name: str, recorded: Sequence[str]) -> list[str]:
        """The recorded replacements of node ``name`` that are gone or being deleted (live GET confirms a cache miss)."""
        lost = []
        for replacement in recorded:
            other = self.ctx.read("Node", replacement) or self.ctx.read_live("Node", replacement)
            if other is None or objects.is_deleting(other):
                log.info("Replacement node %s of disrupted node %s is %s; replacing again", replacement, name,
                         "gone" if other is None else "being deleted")
                lost.append(replacement)
        return lost

    def _watch_replacements(self, node: Object) -> Result:
        """A draining node whose replacement is lost gets a new one for the pods still on it.

        Only nodes this controller replaced carry a record; nodes deleted for other reasons
        (emptiness, a deleted Provisioner, a user) are left to the drain and the provisioning
        controller.
        """
        recorded = replacements.recorded(node)
        if not recorded:
            return Result.done()
        name = objects.name(node)
        lost = self._lost(name, recorded)
        if not lost:
            return Result.after(POLL_INTERVAL)
        pods = objects.reschedulable(self.ctx.pods(name))
        kept = [r for r in recorded if r not in lost]
        if not pods:
            self._record(name, replacements.encode(kept) if kept else None)
            return Result.after(POLL_INTERVAL) if kept else Result.done()
        launched, failed = self._launch(node, pods)
        if failed is not None:
            return failed
        self._record(name, replacements.encode([*kept, *launched]) if kept or launched else None)
        return Result.after(POLL_INTERVAL)

    def _launch(self, node: Object, pods: list[Object]) -> tuple[list[str], Result | None]:
        """Ask the replacer for capacity for ``pods`` anywhere but ``node``; events say what came of it.

        Returns the launched node names (empty when the pods fit on existing capacity), and a
        retry Result when the launch failed (logged, Warning event ``ReplacementFailed``).
        """
        name = objects.name(node)
        launched: list[str] = []
        if pods and self.replacer is not None:
            try:
                launched = self.replacer(pods, name)
            except Exception as error:  # capacity, limits, API errors: retry, keep the node meanwhile
                log.error("Failed to launch replacement capacity for expired node %s: %s", name, error)
                self.ctx.events.warning(node, "ReplacementFailed", f"Could not launch replacement capacity: {error}")
                return [], Result.after(RETRY_INTERVAL)
        if launched:
            message = f"Launched replacement node(s) {', '.join(launched)} for {len(pods)} pod(s)"
            self.ctx.events.normal(node, "Replacing", message)
            for pod in pods:  # the owners of the pods see why their pods are about to move
                self.ctx.events.normal(pod, "Replacing",
                                       f"Node {name} expired; replacement capacity: {', '.join(launched)}")
            log.info("Replacing expired node %s: %s", name, message)
        return launched, None

    def _cancel(self, node: Object) -> Result:
        """The TTL was removed or raised before the node went: take our marks off it (one patch)."""
        if not objects.has_taint(node, DISRUPTED_TAINT_KEY) and replacements.recorded(node) is None:
            return Result.done()
        if objects.disruption_reason(node) is not None:
            return Result.done()  # another controller's taint (Provisioner deleted, emptiness): not ours to lift
        name = objects.name(node)
        patch = objects.guarded(node, {
            "metadata": {"annotations": {REPLACEMENTS_ANNOTATION: None}},
            "spec": {"taints": [t for t in objects.taints(node) if t.get("key") != DISRUPTED_TAINT_KEY]},
        })
        self.ctx.patch("Node", name, patch)
        log.info("Expiry of node %s cancelled (ttlSecondsUntilExpired changed); removed taint %s", name,
                 DISRUPTED_TAINT_KEY)
        return Result.done()

    def _replace(self, node: Object) -> Result:
        pods = objects.reschedulable(self.ctx.pods(objects.name(node)))
        launched, failed = self._launch(node, pods)
        if failed is not None:
            return failed
        if not launched:
            return self._delete(node, f"its {len(pods)} pod(s) fit on existing capacity")
        self._record(objects.name(node), replacements.encode(launched))
        return Result.after(POLL_INTERVAL)

    def _record(self, name: str, value: str | None) -> None:
        self.ctx.patch("Node", name, {"metadata": {"annotations": {REPLACEMENTS_ANNOTATION: value}}})

    def _delete(self, node: Object, why: str) -> Result:
        name = objects.name(node)
        what = "consolidated" if objects.disruption_reason(node) == objects.REASON_CONSOLIDATION else "expired"
        log.info("Deleting %s node %s: %s", what, name, why)
        self.ctx.events.normal(node, "Replacing", f"Deleting {what} node: {why}")
        self.ctx.delete_node(name)
        return Result.done()
