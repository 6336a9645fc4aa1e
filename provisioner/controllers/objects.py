"""Reading Nodes and Pods in wire form, and what every lifecycle controller is given.

The lifecycle controllers work on the API server's dicts (not the solver's frozen types): they
patch what they read. These helpers never raise on odd objects: a missing field reads as
"absent", a malformed timestamp as unknown, so a controller skips rather than crashes.

Sources for the pod classes: Karpenter v0.6.3 ``pkg/utils/pod`` (``IsOwnedByDaemonSet``,
``IsOwnedByNode``, ``IsTerminal``, ``IsTerminating``, ``ToleratesUnschedulableTaint``); the
DaemonSet/static/terminal rules are :mod:`provisioner.model.pods`, so the provisioning engine,
the extender and the lifecycle controllers classify pods alike. The metadata accessors are
:mod:`provisioner.model.objects`'s, re-exported here under the names the controllers use.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from provisioner.clock import Clock
from provisioner.cloudprovider.types import CloudProvider
from provisioner.kube.api import KubeAPI, NotFoundError, Object
from provisioner.model import pods
from provisioner.model import taints as model_taints
from provisioner.model.disruption import do_not_evict as do_not_evict
from provisioner.model.labels import PROVISIONER_NAME

# The wire accessors every part shares, under the names the lifecycle controllers call them by.
from provisioner.model.objects import annotations_of as annotations_of
from provisioner.model.objects import created_at as created_at
from provisioner.model.objects import deleting, spec
from provisioner.model.objects import is_ready as is_ready
from provisioner.model.objects import labels as labels
from provisioner.model.objects import launched_at as launched_at
from provisioner.model.objects import meta as meta
from provisioner.model.objects import name as name
from provisioner.model.objects import namespace as namespace
from provisioner.model.objects import owner_kinds as owner_kinds
from provisioner.model.objects import owner_references as owner_references
from provisioner.model.objects import provider_id as provider_id
from provisioner.model.objects import ready_since as ready_since
from provisioner.model.objects import ref as ref
from provisioner.model.pods import is_daemonset_pod as is_daemonset_pod
from provisioner.model.pods import is_static_pod as is_static_pod
from provisioner.model.pods import is_terminal as is_terminal
from provisioner.model.taints import UNSCHEDULABLE_TAINT_KEY

log = logging.getLogger(__name__)

#: Being deleted: ``metadata.deletionTimestamp`` is set (:func:`provisioner.model.objects.deleting`).
is_deleting = deleting

#: Why a controller tainted a node ``karpenter.sh/disrupted`` (set with the taint, in one write):
#: ``provisioner-deleted`` (ownership), ``emptiness`` (emptiness), ``consolidation`` (consolidation).
#: Expiration taints without it.
#: A taint carrying this annotation belongs to the controller that set it: only that controller
#: takes it off again (emptiness when a pod arrived; expiration never lifts one). Read by
#: termination for its metric.
DISRUPTION_REASON_ANNOTATION = "groupless.dev/disruption-reason"
REASON_PROVISIONER_DELETED = "provisioner-deleted"
REASON_EMPTINESS = "emptiness"
REASON_CONSOLIDATION = "consolidation"

CRITICAL_PRIORITY_CLASSES = frozenset({"system-cluster-critical", "system-node-critical"})


class EventSink(Protocol):
    """What the controllers need of :class:`provisioner.kube.events.EventRecorder`."""

    def normal(self, obj: Object, reason: str, message: str) -> None: ...

    def warning(self, obj: Object, reason: str, message: str) -> None: ...


class LogEvents:
    """An :class:`EventSink` that only logs (when no recorder is wired)."""

    def normal(self, obj: Object, reason: str, message: str) -> None:
        log.info("%s %s: %s", reason, ref(obj), message)

    def warning(self, obj: Object, reason: str, message: str) -> None:
        log.warning("%s %s: %s", reason, ref(obj), message)


PodLister = Callable[[str], list[Object]]
#: ``(kind, name) -> object or None``: a read of a cluster-scoped object from a cache.
Reader = Callable[[str, str], "Object | None"]
#: ``kind -> objects``: a list of every object of a kind from a cache.
Lister = Callable[[str], list[Object]]


@dataclass
class Context:
    """The injected dependencies of every lifecycle controller.

    ``pods_on_node(name)`` lists the pods bound to a node; by default it lists every pod through
    ``kube`` (the protocol has no field selector), the process plugs in an index fed by the
    cluster-state cache. ``reader(kind, name)`` reads Nodes and Provisioners; by default a live
    GET, the process plugs in the cache (writes always go to the API server, with the read
    object's resourceVersion where a list is replaced, so a stale read ends in a 409 and a retry).
    ``nominated_until(name)``: epoch seconds until which the provisioning controller counts the
    node as nominated because a round placed pending pods on it
    (:meth:`provisioner.state.inflight.InFlightLedger.nominated_until`, 0.0 when not); None
    outside the controller process (no placements).
    """

    kube: KubeAPI
    cloud: CloudProvider
    clock: Clock
    events: EventSink = field(default_factory=LogEvents)
    pods_on_node: PodLister | None = None
    reader: Reader | None = None
    lister: Lister | None = None
    nominated_until: Callable[[str], float] | None = None
    write_ttl: float = 30.0
    _written: dict[tuple[str, str], tuple[Object, float]] = field(default_factory=dict, init=False, repr=False)
    _written_lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def all(self, kind: str) -> list[Object]:
        """Every object of ``kind`` (from the cache when plugged in)."""
        return self.lister(kind) if self.lister is not None else self.kube.list(kind)[0]

    def nodes(self, provisioner: str | None = None) -> list[Object]:
        """Every Node (from the cache when plugged in), or those labelled with ``provisioner``."""
        if self.lister is not None:
            items = self.lister("Node")
            return items if provisioner is None else [n for n in items if provisioner_of(n) == provisioner]
        selector = None if provisioner is None else f"{PROVISIONER_NAME}={provisioner}"
        return self.kube.list("Node", label_selector=selector)[0]

    def read(self, kind: str, name: str) -> Object | None:
        """The object (cache when plugged in, else a live GET), ``None`` when absent.

        From a cache, this process's own latest :meth:`patch` result wins over an older cached copy.
        """
        if self.reader is None:
            return self.read_live(kind, name)
        cached = self.reader(kind, name)
        with self._written_lock:
            entry = self._written.get((kind, name))
            if entry is None:
                return cached
            written, expires = entry
            if cached is None or self.clock.monotonic() >= expires or not _older(cached, written):
                del self._written[(kind, name)]  # deleted since, expired, or the cache caught up
                return cached
            return written

    def patch(self, kind: str, name: str, patch: dict[str, Any], subresource: str | None = None) -> Object:
        """PATCH a cluster-scoped object and remember the result for :meth:`read` (read-your-writes).

        Raises the API's errors (ConflictError on a failed resourceVersion guard, NotFoundError).
        """
        result = self.kube.patch(kind, name, patch, subresource=subresource)
        if self.reader is not None and isinstance(result, dict):
            with self._written_lock:
                self._written[(kind, name)] = (result, self.clock.monotonic() + self.write_ttl)
        return result

    def read_live(self, kind: str, name: str) -> Object | None:
        """A live GET, ``None`` when absent (to confirm a cache's "absent" before acting on it)."""
        try:
            return self.kube.get(kind, name)
        except NotFoundError:
            return None

    def delete_node(self, name: str) -> None:
        """DELETE the Node; one already gone is success.

        The Node's termination finalizer then cordons, drains and terminates it (Karpenter's
        deletion path), so this is how every lifecycle controller retires a node.
        """
        try:
            self.kube.delete("Node", name)
        except NotFoundError:
            pass

    def pods(self, node_name: str) -> list[Object]:
        if self.pods_on_node is not None:
            return self.pods_on_node(node_name)
        items, _ = self.kube.list("Pod")
        return [p for p in items if (p.get("spec") or {}).get("nodeName") == node_name]


def _older(cached: Object, written: Object) -> bool:
    """Whether ``cached`` predates ``written`` by resourceVersion (unparsable: assume it does not)."""
    try:
        return int(meta(cached).get("resourceVersion") or "") < int(meta(written).get("resourceVersion") or "")
    except ValueError:
        return False


# ---- metadata ----------------------------------------------------------------------------------

def guarded(obj: Object, patch: dict[str, Any]) -> dict[str, Any]:
    """``patch`` (a JSON merge patch) made conditional on ``obj``'s resourceVersion, when it has one.

    The API server then answers 409 Conflict if the object changed since ``obj`` was read, so a
    list replaced from a stale copy (taints, finalizers, ownerReferences) never drops another
    writer's entry. Returns ``patch`` itself, ``metadata.resourceVersion`` added.
    """
    rv = meta(obj).get("resourceVersion")
    if rv:
        patch.setdefault("metadata", {})["resourceVersion"] = rv
    return patch


# ---- nodes ------------------------------------------------------------------------------------

def provisioner_of(node: Object) -> str | None:
    """The ``karpenter.sh/provisioner-name`` label: set on every node Groupless launched."""
    value = labels(node).get(PROVISIONER_NAME)
    return value or None


def taints(node: Object) -> list[dict[str, Any]]:
    """``spec.taints`` as the wire list (to write back with one entry added or removed); odd entries dropped."""
    value = (node.get("spec") or {}).get("taints")
    return [t for t in value if isinstance(t, dict)] if isinstance(value, list) else []


def has_taint(node: Object, key: str) -> bool:
    """The Node has a taint with ``key`` (:func:`provisioner.model.taints.has_taint`)."""
    return model_taints.has_taint(model_taints.readable_taints(spec(node).get("taints")), key)


def disruption_reason(node: Object) -> str | None:
    """The ``groupless.dev/disruption-reason`` annotation (who set the disrupted taint), ``None`` when unset or empty."""
    value = annotations_of(node).get(DISRUPTION_REASON_ANNOTATION)
    return value if isinstance(value, str) and value else None


def is_terminating(pod: Object) -> bool:
    """Being deleted (:func:`provisioner.model.pods.is_deleting`)."""
    return pods.is_deleting(pod)


def tolerates_unschedulable(pod: Object) -> bool:
    """Tolerates ``node.kubernetes.io/unschedulable:NoSchedule`` (DaemonSet pods do; so does ``Exists``)."""
    tolerations = (pod.get("spec") or {}).get("tolerations")
    if not isinstance(tolerations, list):
        return False
    for toleration in tolerations:
        if not isinstance(toleration, dict):
            continue
        key = toleration.get("key") or ""
        effect = toleration.get("effect") or ""
        operator = toleration.get("operator") or "Equal"
        if key not in ("", UNSCHEDULABLE_TAINT_KEY) or effect not in ("", "NoSchedule"):
            continue
        if operator == "Exists" or (key == UNSCHEDULABLE_TAINT_KEY and not toleration.get("value")):
            return True
    return False


def is_critical(pod: Object) -> bool:
    return (pod.get("spec") or {}).get("priorityClassName") in CRITICAL_PRIORITY_CLASSES


def is_occupant(pod: Object) -> bool:
    """A pod that keeps a node from being empty: not DaemonSet-owned, not static, not finished.

    Terminating pods still count (Karpenter v0.6.3 emptiness rule).
    """
    return not (is_daemonset_pod(pod) or is_static_pod(pod) or is_terminal(pod))


def reschedulable(pods: Iterable[Object]) -> list[Object]:
    """Pods that must run elsewhere if their node goes: occupants not already terminating."""
    return [p for p in pods if is_occupant(p) and not is_terminating(p)]
