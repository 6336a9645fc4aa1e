"""Emptiness: a node that holds nothing but DaemonSet, static or finished pods goes after ``ttlSecondsAfterEmpty``.

Karpenter v0.6.3's node controller, "Emptiness" sub-reconciler: only for a Provisioner with
``ttlSecondsAfterEmpty`` set and a **Ready** node. The moment the node became empty is recorded
on the node itself, in the annotation ``karpenter.sh/emptiness-timestamp`` (RFC3339), so a
restart of the controller keeps the clock running; a pod arriving clears it ("Removed emptiness
TTL from node").

Once timestamp + TTL has passed, the decision is written first, the way Karpenter v1 marks a
disruption candidate: the taint ``karpenter.sh/disrupted:NoSchedule`` and the annotation
``groupless.dev/disruption-reason: emptiness``, in one patch conditional on the resourceVersion
read (a stale read ends in a 409 and a retry). kube-scheduler's own TaintToleration filter then
stops placing pods there, extender consulted or not (the extender also rejects the node). The
node is deleted only on a later reconcile, :data:`TAINT_SETTLE_SECONDS` after the taint, once
emptiness has been checked again: a pod the scheduler bound in the meantime (it decided before
it saw the taint) would otherwise be evicted by the drain, and a bare pod is lost for good. If
such a pod is there, the taint and the annotation come off again with the emptiness timestamp
(one patch): the node is not empty any more. Otherwise the Node is deleted and the termination
finalizer does the rest.

The taint with ``emptiness`` as its reason belongs to this controller: removing or raising the
TTL, or the node turning NotReady, before the deletion takes it off again; expiration never
does. A disrupted taint another controller set (expiration, a deleted Provisioner) already keeps
the scheduler off, so an empty node carrying one is deleted once its TTL has passed, and that
taint is never lifted here.

Terminating pods still count as occupants (they have not left), and so do pods the node is
nominated for: named by ``groupless.dev/nominations`` until its deadline (a node launched for
pods that are about to be bound), or placed there by a provisioning round within the last
nomination window (Karpenter's ``IsNominated``: pending pods the solver put on an existing node
wait in kube-scheduler's queue, and would find the node gone). Nor is a replacement while the
node it replaces exists (:mod:`provisioner.model.replacements`): its pods are still on the old
node, held back by a PodDisruptionBudget or by slow start-up, and retiring it would send them
Pending and launch another node for the same disruption. It carries a ``Replacing`` event
naming that node while it waits.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from provisioner.clock import rfc3339, timestamp
from provisioner.controllers import objects
from provisioner.controllers.objects import Context
from provisioner.controllers.provisioners import get_provisioner, ttl_seconds
from provisioner.controllers.result import Result
from provisioner.kube.api import NotFoundError, Object
from provisioner.model import nominations, replacements
from provisioner.model.labels import (
    DISRUPTED_TAINT_KEY,
    EMPTINESS_TIMESTAMP_ANNOTATION,
    NOMINATIONS_ANNOTATION,
)

log = logging.getLogger(__name__)

#: Seconds between the disrupted taint and the deletion of an empty node: time for a binding
#: kube-scheduler decided before it saw the taint to land (and for the pod cache to show it), so
#: emptiness is checked again on state that includes it. A controller restart in between starts
#: the wait again (it only delays the deletion).
TAINT_SETTLE_SECONDS = 10.0


def is_empty(pods: list[Object]) -> bool:
    """No pod on the node other than DaemonSet-owned, static/mirror or finished ones."""
    return not any(objects.is_occupant(p) for p in pods)


class EmptinessController:
    """``reconcile(node) -> Result``; one patch (or one delete) at most per call."""

    name = "emptiness"

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self._tainted_at: dict[str, float] = {}  # node name -> monotonic seconds of our taint
        self._lock = threading.Lock()

    def reconcile(self, node: Object) -> Result:
        name = objects.name(node)
        if objects.provisioner_of(node) is None or objects.is_deleting(node):
            self._forget(name)
            return Result.done()
        stamp_raw = objects.annotations_of(node).get(EMPTINESS_TIMESTAMP_ANNOTATION)
        ours = objects.disruption_reason(node) == objects.REASON_EMPTINESS
        ttl = ttl_seconds(get_provisioner(self.ctx, node), "ttlSecondsAfterEmpty")
        if ttl is None or not objects.is_ready(node):
            if ours:
                why = "ttlSecondsAfterEmpty removed" if ttl is None else "node is not Ready"
                self._withdraw(node, clear_stamp=ttl is None, why=why)
            elif ttl is None and stamp_raw is not None:
                self._annotate(name, None)
            return Result.done()
        now = self.ctx.clock.now()
        nominated_until = self._nominated_until(node)
        empty = is_empty(self.ctx.pods(name)) and now >= nominated_until
        if empty and self._waits_for_replaced(node):
            empty = False
        if not empty:
            return self._not_empty(node, ours=ours, stamp_raw=stamp_raw, nominated_until=nominated_until, now=now)
        stamp = timestamp(stamp_raw)
        if stamp is None or now < stamp + ttl:
            return self._wait_for_ttl(node, ours=ours, stamp=stamp, ttl=ttl, now=now)
        if not objects.has_taint(node, DISRUPTED_TAINT_KEY):
            return self._taint(node, ttl, stamp_raw or "")
        if ours:
            wait = self._settle_left(name)
            if wait > 0:
                return Result.after(wait)
        log.info("Deleting empty node %s after %ds (empty since %s)", name, ttl, stamp_raw)
        self.ctx.delete_node(name)
        self._forget(name)
        return Result.done()

    def _nominated_until(self, node: Object) -> float:
        """Epoch seconds until which the node counts as nominated (in the past, or 0.0, when it does not).

        Nominated: pods named by its ``groupless.dev/nominations`` until their deadline, or a
        provisioning round placed pending pods on it within the nomination window
        (:attr:`Context.nominated_until <provisioner.controllers.objects.Context>`; Karpenter's
        ``IsNominated``).
        """
        reserved = nominations.decode(objects.annotations_of(node).get(NOMINATIONS_ANNOTATION))
        until = reserved.deadline if reserved.pods else 0.0
        if self.ctx.nominated_until is not None:
            until = max(until, self.ctx.nominated_until(objects.name(node)))
        return until

    def _not_empty(self, node: Object, *, ours: bool, stamp_raw: str | None, nominated_until: float,
                   now: float) -> Result:
        """The node is not empty (a pod, a nomination or a replaced node still there): undo our marks.

        Our taint is withdrawn (with the emptiness timestamp), or else the timestamp alone is
        removed. A nomination wakes the controller again when it ends (``nominated_until``,
        epoch seconds).
        """
        name = objects.name(node)
        if ours:
            self._withdraw(node, clear_stamp=True, why="a pod arrived, the node is not empty")
        elif stamp_raw is not None:
            self._annotate(name, None)
            log.info("Removed emptiness TTL from node %s", name)
        if now < nominated_until:
            return Result.after(nominated_until - now)
        return Result.done()

    def _wait_for_ttl(self, node: Object, *, ours: bool, stamp: float | None, ttl: int, now: float) -> Result:
        """The node is empty but ``ttlSecondsAfterEmpty`` (``ttl``) has not passed since ``stamp`` (epoch seconds).

        Without a timestamp the node gets one now; with our taint already on it (the TTL was
        raised, or the timestamp removed, after the taint) the taint is withdrawn.
        """
        name = objects.name(node)
        if ours:
            self._withdraw(node, clear_stamp=False, why="ttlSecondsAfterEmpty not reached")
            return Result.now()
        if stamp is None:
            self._annotate(name, rfc3339(now))
            log.info("Added TTL to empty node %s", name)
            return Result.after(ttl)
        return Result.after(stamp + ttl - now)

    def _waits_for_replaced(self, node: Object) -> bool:
        """Whether ``node`` replaces a node that still exists; if so, says so in a ``Replacing`` event.

        The manager wakes this controller for the replacements of a node when that node changes
        or goes, so the wait ends as soon as the replaced node is deleted.
        """
        replaced = replacements.replaces(objects.name(node), self.ctx.nodes())
        if not replaced:
            return False
        self.ctx.events.normal(node, "Replacing",
                               f"Replacement for node(s) {', '.join(replaced)}: not empty while they drain")
        return True

    def _taint(self, node: Object, ttl: int, since: str) -> Result:
        """First write of the decision: the disrupted taint and its reason, guarded by resourceVersion."""
        name = objects.name(node)
        patch = objects.guarded(node, {
            "metadata": {"annotations": {objects.DISRUPTION_REASON_ANNOTATION: objects.REASON_EMPTINESS}},
            "spec": {"taints": [*objects.taints(node), {"key": DISRUPTED_TAINT_KEY, "effect": "NoSchedule"}]},
        })
        try:
            self.ctx.patch("Node", name, patch)  # a stale read ends here in a 409: retried, nothing done
        except NotFoundError:
            return Result.done()
        with self._lock:
            self._tainted_at[name] = self.ctx.clock.monotonic()
        log.info("Triggering termination after %ds for empty node %s: tainted %s:NoSchedule", ttl, name,
                 DISRUPTED_TAINT_KEY)
        self.ctx.events.normal(node, "Empty", f"Node empty since {since} (ttlSecondsAfterEmpty={ttl}); deleting")
        return Result.after(TAINT_SETTLE_SECONDS)

    def _settle_left(self, name: str) -> float:
        """Seconds until our taint has settled (a taint this process did not see written starts now)."""
        now = self.ctx.clock.monotonic()
        with self._lock:
            since = self._tainted_at.setdefault(name, now)
        return since + TAINT_SETTLE_SECONDS - now

    def _forget(self, name: str) -> None:
        with self._lock:
            self._tainted_at.pop(name, None)

    def _withdraw(self, node: Object, *, clear_stamp: bool, why: str) -> None:
        """Take our taint and its reason off the node (and the emptiness timestamp when asked), in one guarded patch."""
        name = objects.name(node)
        annotations: dict[str, Any] = {objects.DISRUPTION_REASON_ANNOTATION: None}
        if clear_stamp:
            annotations[EMPTINESS_TIMESTAMP_ANNOTATION] = None
        body: dict[str, Any] = {"metadata": {"annotations": annotations}}
        if objects.has_taint(node, DISRUPTED_TAINT_KEY):
            body["spec"] = {"taints": [t for t in objects.taints(node) if t.get("key") != DISRUPTED_TAINT_KEY]}
        try:
            self.ctx.patch("Node", name, objects.guarded(node, body))
        except NotFoundError:
            pass
        self._forget(name)
        if "spec" in body:
            log.info("Emptiness deletion of node %s cancelled (%s); removed taint %s%s", name, why,
                     DISRUPTED_TAINT_KEY, " and emptiness TTL" if clear_stamp else "")
            self.ctx.events.normal(node, "EmptinessCancelled",
                                   f"Not deleting empty node: {why}; removed taint {DISRUPTED_TAINT_KEY}")

    def _annotate(self, name: str, value: str | None) -> None:
        try:
            self.ctx.patch("Node", name, {"metadata": {"annotations": {EMPTINESS_TIMESTAMP_ANNOTATION: value}}})
        except NotFoundError:
            pass
