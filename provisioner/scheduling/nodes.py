"""Existing and in-flight nodes as the solver sees them.

Pods are packed onto capacity that already exists or is already launching before anything new
is bought (Karpenter v0.10+ in-flight awareness), so a burst never launches twice for the same
pods. A :class:`ClusterNode` carries what that needs: labels and taints (to check a pod's
requirements and tolerations), allocatable and what is already requested on it (bound pods
plus still-valid nominations from the ``groupless.dev/nominations`` annotation), the host
ports in use, and the pods on it (for topology spread and pod (anti-)affinity counting).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from provisioner.model import labels as wk
from provisioner.model import nominations
from provisioner.model.pods import is_terminal
from provisioner.model.quantity import QuantityError, parse_quantity
from provisioner.model.resources import EMPTY, PODS, Resources
from provisioner.model.taints import Taint
from provisioner.scheduling.pods import HostPort, Pod, pod_from_manifest, pod_requests


@dataclass(frozen=True, slots=True)
class ClusterNode:
    """A node that exists (or is launching) in the cluster.

    ``allocatable`` is the node's ``status.allocatable`` (or, before kubelet reports, the
    instance type's allocatable); ``requested`` is the sum of the effective requests of its
    non-terminal pods, still-valid nominations and any ``reserved`` amount. ``in_flight`` is
    True while the node is launched but not yet Ready. ``marked_for_deletion`` nodes (deleting,
    or tainted ``karpenter.sh/disrupted``) receive no pods.
    """

    name: str
    labels: Mapping[str, str] = field(default_factory=dict, compare=False)
    taints: tuple[Taint, ...] = ()
    allocatable: Resources = EMPTY
    requested: Resources = EMPTY
    provisioner: str | None = None
    in_flight: bool = False
    marked_for_deletion: bool = False
    host_ports: tuple[HostPort, ...] = ()
    pods: tuple[Pod, ...] = ()

    @property
    def available(self) -> Resources:
        """Allocatable minus requested (may be negative for an over-committed node)."""
        return self.allocatable - self.requested


def resource_list(obj: Any, where: str) -> Resources:
    """A wire resource list (``{"cpu": "4", "memory": "16Gi"}``) in core units; ValueError naming ``where``."""
    if not obj:
        return EMPTY
    if not isinstance(obj, Mapping):
        raise ValueError(f"{where}: expected a resource map, got {obj!r}")
    result = {}
    for name, value in obj.items():
        try:
            result[str(name)] = parse_quantity(value, str(name))
        except QuantityError as error:
            raise ValueError(f"{where}.{name}: {error}") from error
    return Resources(result)


def nominated_requests(node: Mapping[str, Any], bound_uids: set[str], now: datetime | None = None) -> Resources:
    """Requests of the pods nominated to ``node`` that are not bound yet (core units).

    Reads the ``groupless.dev/nominations`` annotation through :mod:`provisioner.model.nominations`
    (DESIGN.md contract). With ``now``, nothing is counted once the deadline has passed. A
    malformed annotation counts as no nomination: it must never stop scheduling.
    """
    annotations = (node.get("metadata") or {}).get("annotations") or {}
    decoded = nominations.decode(annotations.get(wk.NOMINATIONS_ANNOTATION))
    if now is not None:
        decoded = nominations.active(decoded, now.timestamp(), bound_uids)
    total = EMPTY
    for uid, entry in decoded.pods.items():
        if uid in bound_uids:
            continue
        requests = entry.requests
        total = total + (requests if PODS in requests else requests + {PODS: 1})
    return total


def _is_ready(node: Mapping[str, Any]) -> bool:
    for condition in (node.get("status") or {}).get("conditions") or ():
        if isinstance(condition, Mapping) and condition.get("type") == "Ready":
            return condition.get("status") == "True"
    return False


def node_from_manifest(
    node: Mapping[str, Any], pods: Sequence[Mapping[str, Any]], reserved: Resources = EMPTY,
    now: datetime | None = None,
) -> ClusterNode:
    """A :class:`ClusterNode` from a Node object and the pod objects bound to it.

    ``pods`` may contain pods of other nodes: only those whose ``spec.nodeName`` is this node
    are counted; terminal pods (Succeeded/Failed) are not. ``reserved`` is added to the
    requested amount (capacity held for DaemonSet pods that have not arrived yet). Raises
    ValueError naming the field for a malformed node.
    """
    if not isinstance(node, Mapping):
        raise ValueError(f"node: expected an object, got {type(node).__name__}")
    metadata = node.get("metadata") or {}
    spec = node.get("spec") or {}
    status = node.get("status") or {}
    name = str(metadata.get("name") or "")
    labels = {str(k): str(v) for k, v in (metadata.get("labels") or {}).items()}
    labels.setdefault(wk.HOSTNAME, name)
    taints = []
    for i, taint in enumerate(spec.get("taints") or ()):
        if not isinstance(taint, Mapping) or not taint.get("key") or not taint.get("effect"):
            raise ValueError(f"node {name}: spec.taints[{i}]: expected {{key, effect}}, got {taint!r}")
        taints.append(Taint(str(taint["key"]), str(taint["effect"]), str(taint.get("value") or "")))
    if spec.get("unschedulable") and not any(t.key == "node.kubernetes.io/unschedulable" for t in taints):
        # a cordoned node: kube's node lifecycle controller taints it so; the scheduler honours it
        taints.append(Taint("node.kubernetes.io/unschedulable", "NoSchedule"))
    allocatable = resource_list(status.get("allocatable") or status.get("capacity"), f"node {name}: status.allocatable")
    bound = []
    for obj in pods:
        if (obj.get("spec") or {}).get("nodeName") != name or is_terminal(obj):
            continue
        try:
            bound.append(pod_from_manifest(obj))
        except ValueError:
            # an odd pod must not stop the snapshot; what it requests still counts when readable
            try:
                meta = obj.get("metadata") or {}
                bound.append(Pod(uid=str(meta.get("uid") or meta.get("name") or ""),
                                 namespace=str(meta.get("namespace") or "default"),
                                 name=str(meta.get("name") or ""), requests=pod_requests(obj), node_name=name))
            except (ValueError, AttributeError):
                continue
    uids = {p.uid for p in bound}
    requested = Resources.sum(p.requests for p in bound) + nominated_requests(node, uids, now) + reserved
    disrupted = any(t.key == wk.DISRUPTED_TAINT_KEY for t in taints)
    return ClusterNode(
        name=name,
        labels=labels,
        taints=tuple(taints),
        allocatable=allocatable,
        requested=requested,
        provisioner=labels.get(wk.PROVISIONER_NAME),
        in_flight=not _is_ready(node),
        marked_for_deletion=bool(metadata.get("deletionTimestamp")) or disrupted,
        host_ports=tuple(hp for p in bound for hp in p.host_ports),
        pods=tuple(bound),
    )
