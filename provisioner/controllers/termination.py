"""Termination: a Node being deleted is cordoned, drained through the Eviction API, then its instance terminated.

Every node Groupless launches carries the finalizer ``karpenter.sh/termination``, so deleting
the Node object (by a user, expiration, emptiness, garbage collection or Provisioner deletion)
only sets its ``deletionTimestamp``; this controller then (Karpenter v0.6.3, "Termination
controller"):

1. cordons it (``spec.unschedulable: true``);
2. drains it: evicts, through the policy/v1 Eviction API, every pod except DaemonSet pods,
   static/mirror pods, finished pods and pods already terminating; non-critical pods first,
   ``system-cluster-critical``/``system-node-critical`` pods only once no other pod remains.
   A 429 (PodDisruptionBudget) is retried with per-pod backoff (:mod:`.eviction`). A pod
   annotated ``karpenter.sh/do-not-evict: "true"`` blocks the whole drain (Warning event
   ``DrainBlocked``) until it leaves;
3. terminates the instance (already gone is fine) and removes the finalizer ("Deleted node").

Pods whose ``deletionTimestamp`` has passed (stuck terminating: their kubelet is gone) no
longer hold the drain. It also adds the finalizer to any of our nodes that lacks it (nodes
that registered themselves), as v0.6.3's "Finalizer" sub-reconciler does.

Once the finalizer is gone the Node is gone, but an informer cache can still hold a copy with
the finalizer (the watch event has not arrived, or the last write's response is not newer than
that copy). So the terminate step reads the Node live first, the log line, event and metric
follow only this reconcile's own successful finalizer removal, and finished nodes are remembered
by uid so a stale copy is a no-op.
"""

from __future__ import annotations

import logging
import threading

from provisioner import metrics
from provisioner.clock import timestamp
from provisioner.cloudprovider.types import CloudProviderError
from provisioner.cloudprovider.types import NotFoundError as CloudNotFound
from provisioner.controllers import objects
from provisioner.controllers.eviction import Evictor
from provisioner.controllers.objects import Context
from provisioner.controllers.result import Result
from provisioner.kube.api import NotFoundError, Object
from provisioner.model.labels import (
    DISRUPTED_TAINT_KEY,
    EMPTINESS_TIMESTAMP_ANNOTATION,
    TERMINATION_FINALIZER,
)

log = logging.getLogger(__name__)

#: How often a drain waiting on terminating pods or a do-not-evict pod looks again (seconds).
POLL_INTERVAL = 1.0
BLOCKED_INTERVAL = 10.0
#: How long a finished node's uid is remembered (seconds; far beyond any informer lag).
FINISHED_MEMORY = 600.0


def finalizers(obj: Object) -> list[str]:
    value = objects.meta(obj).get("finalizers")
    return [str(f) for f in value] if isinstance(value, list) else []


def drain_set(pods: list[Object], now: float) -> list[Object]:
    """The pods that must leave before the node is drained.

    Excluded: DaemonSet pods (and any pod tolerating ``node.kubernetes.io/unschedulable``, as
    the DaemonSet controller's pods do), static/mirror pods, finished pods, and pods whose
    deletionTimestamp has passed (stuck terminating). Terminating pods still in their grace
    period stay in the set (they have not left yet) but are never evicted again.
    """
    result = []
    for pod in pods:
        if objects.is_daemonset_pod(pod) or objects.tolerates_unschedulable(pod):
            continue
        if objects.is_static_pod(pod) or objects.is_terminal(pod):
            continue
        deleting = timestamp(objects.meta(pod).get("deletionTimestamp"))
        if deleting is not None and deleting <= now:
            continue
        result.append(pod)
    return result


def eviction_order(pods: list[Object]) -> list[Object]:
    """Which pods to evict now: the non-critical ones; the critical ones once none of those remain.

    ``pods`` is a :func:`drain_set`; terminating pods are never evicted but a terminating
    non-critical pod still holds back the critical ones.
    """
    non_critical = [p for p in pods if not objects.is_critical(p)]
    wave = non_critical if non_critical else pods
    return [p for p in wave if not objects.is_terminating(p)]


def termination_reason(node: Object) -> str:
    """Why a node went, as read from the marks the deciding controller left on it (a metric label)."""
    reason = objects.disruption_reason(node)
    if reason == objects.REASON_PROVISIONER_DELETED:
        return "provisioner_deleted"
    if reason == objects.REASON_CONSOLIDATION:
        return "consolidation"
    tainted = objects.has_taint(node, DISRUPTED_TAINT_KEY)
    # emptiness taints too, and says so in the reason annotation; an untainted node with an
    # emptiness timestamp went the same way (e.g. deleted by hand while its emptiness TTL ran)
    if reason == objects.REASON_EMPTINESS or (
        not tainted and EMPTINESS_TIMESTAMP_ANNOTATION in objects.annotations_of(node)
    ):
        return "emptiness"
    if tainted:
        return "expiration"
    return "deleted"


class TerminationController:
    """``reconcile(node) -> Result`` for nodes being deleted; one patch at most per call."""

    name = "termination"

    def __init__(self, ctx: Context, *, backoff_base: float = 0.1, backoff_max: float = 10.0) -> None:
        self.ctx = ctx
        self.evictor = Evictor(ctx.kube, ctx.clock, ctx.events, base=backoff_base, maximum=backoff_max)
        self._blocked_reported: set[tuple[str, str]] = set()
        self._lock = threading.Lock()  # workers reconcile different nodes at once
        self._finished: dict[str, float] = {}  # uid -> clock time its finalizer was removed here

    def finished(self, node: Object) -> bool:
        """Whether this controller already terminated ``node`` (by uid): a cached copy is stale."""
        uid = str(objects.meta(node).get("uid") or "")
        if not uid:
            return False
        with self._lock:
            return uid in self._finished

    def _remember_finished(self, node: Object) -> None:
        uid = str(objects.meta(node).get("uid") or "")
        if not uid:
            return
        now = self.ctx.clock.now()
        with self._lock:
            self._finished = {u: t for u, t in self._finished.items() if now - t < FINISHED_MEMORY}
            self._finished[uid] = now

    def reconcile(self, node: Object) -> Result:
        if objects.provisioner_of(node) is None and TERMINATION_FINALIZER not in finalizers(node):
            return Result.done()
        if self.finished(node):
            return Result.done()
        if not objects.is_deleting(node):
            return self._ensure_finalizer(node)
        if TERMINATION_FINALIZER not in finalizers(node):
            return Result.done()
        name = objects.name(node)
        if not (node.get("spec") or {}).get("unschedulable"):
            self.ctx.patch("Node", name, {"spec": {"unschedulable": True}})
            log.info("Cordoned node %s", name)
            return Result.now()
        now = self.ctx.clock.now()
        remaining = drain_set(self.ctx.pods(name), now)
        if remaining:
            return self._drain(node, remaining)
        return self._terminate(node)

    def _ensure_finalizer(self, node: Object) -> Result:
        current = finalizers(node)
        if TERMINATION_FINALIZER in current:
            return Result.done()
        patch = objects.guarded(node, {"metadata": {"finalizers": [*current, TERMINATION_FINALIZER]}})
        self.ctx.patch("Node", objects.name(node), patch)
        return Result.done()

    def _drain(self, node: Object, remaining: list[Object]) -> Result:
        name = objects.name(node)
        blocking = [p for p in remaining if objects.do_not_evict(p) and not objects.is_terminating(p)]
        if blocking:
            for pod in blocking:
                key = (name, Evictor.key(pod))
                with self._lock:
                    reported = key in self._blocked_reported
                    self._blocked_reported.add(key)
                if reported:
                    continue
                message = (f"Drain of node {name} blocked by pod {objects.ref(pod)}: "
                           f"annotation karpenter.sh/do-not-evict=true (do-not-evict)")
                log.info("Unable to drain node %s, pod %s has do-not-evict annotation", name, objects.ref(pod))
                self.ctx.events.warning(node, "DrainBlocked", message)
                self.ctx.events.warning(pod, "DrainBlocked", message)
            return Result.after(BLOCKED_INTERVAL)
        now = self.ctx.clock.now()
        for pod in eviction_order(remaining):
            self.evictor.evict(pod, node)
        left = drain_set(self.ctx.pods(name), self.ctx.clock.now())
        if not left:
            return Result.now()
        retry = self.evictor.next_retry(eviction_order(left))
        if retry is None:
            return Result.after(POLL_INTERVAL)
        return Result.after(min(POLL_INTERVAL, max(0.0, retry - now)))

    def _terminate(self, cached: Object) -> Result:
        name = objects.name(cached)
        # the cache may still hold a Node whose finalizer this controller already removed: only
        # the live object says whether there is anything left to terminate
        node = self.ctx.read_live("Node", name)
        if node is None or objects.meta(node).get("uid") != objects.meta(cached).get("uid"):
            self._remember_finished(cached)  # gone (a new Node of that name gets its own reconcile)
            return Result.done()
        if not objects.is_deleting(node) or TERMINATION_FINALIZER not in finalizers(node):
            return Result.done()
        provider_id = objects.provider_id(node)
        if provider_id:
            try:
                self.ctx.cloud.delete(provider_id)
            except CloudNotFound:
                pass
            except CloudProviderError as error:
                log.error("Failed to terminate instance %s of node %s: %s", provider_id, name, error)
                return Result.after(POLL_INTERVAL)
        remaining = [f for f in finalizers(node) if f != TERMINATION_FINALIZER]
        patch = objects.guarded(node, {"metadata": {"finalizers": remaining or None}})
        try:
            self.ctx.patch("Node", name, patch)  # changed since the GET: 409, retried, GET again
        except NotFoundError:
            self._remember_finished(node)  # removed by someone else meanwhile: not ours to report
            return Result.done()
        self._remember_finished(node)
        self.ctx.events.normal(node, "Terminated", f"Terminated instance {provider_id or '(none)'}; deleted node")
        with self._lock:
            self._blocked_reported = {k for k in self._blocked_reported if k[0] != name}
        self.evictor.forget_node(name)
        metrics.NODES_TERMINATED.labels(provisioner=objects.provisioner_of(node) or "", reason=termination_reason(node)).inc()
        log.info("Deleted node %s", name)
        return Result.done()
