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
from provisioner.model import nominations, objects
from provisioner.model.pods import is_terminal, node_name
from provisioner.model.quantity import parse_resource_list
from provisioner.model.resources import EMPTY, Resources
from provisioner.model.taints import Taint, decode_taints, is_disrupted, with_cordon
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


def nominated_requests(node: Mapping[str, Any], bound_uids: set[str], now: datetime | None = None) -> Resources:
    """Requests of the pods nominated to ``node`` that are not in ``bound_uids`` (core units, a ``pods`` slot each).

    Reads the ``groupless.dev/nominations`` annotation through :mod:`provisioner.model.nominations`
    (:func:`~provisioner.model.nominations.reserved`). With ``now``, nothing is counted once the
    deadline has passed. A malformed annotation counts as no nomination: it must never stop scheduling.
    """
    decoded = nominations.decode(objects.annotations_of(node).get(wk.NOMINATIONS_ANNOTATION))
    at = float("-inf") if now is None else now.timestamp()
    return nominations.reserved(nominations.active(decoded, at, bound_uids))


def node_from_manifest(
    node: Mapping[str, Any], pods: Sequence[Mapping[str, Any]], reserved: Resources = EMPTY,
    now: datetime | None = None,
) -> ClusterNode:
    """A :class:`ClusterNode` from a Node object and the pod objects bound to it.

    ``pods`` may contain pods of other nodes: only those whose ``spec.nodeName`` is this node
    are counted; terminal pods (Succeeded/Failed) are not. ``reserved`` is added to the
    requested amount (capacity held for DaemonSet pods that have not arrived yet). Raises
    ValueError naming the field for a malformed node.

    The provisioning controller reads Nodes with this; :func:`provisioner.state.solverinput.cluster_node`
    builds the same value from the shared node view.
    """
    if not isinstance(node, Mapping):
        raise ValueError(f"node: expected an object, got {type(node).__name__}")
    status = objects.status(node)
    name = objects.name(node)
    labels = {str(k): str(v) for k, v in objects.labels(node).items()}
    labels.setdefault(wk.HOSTNAME, name)
    taints = with_cordon(decode_taints(objects.spec(node).get("taints"), f"node {name}: spec.taints"),
                         objects.spec(node).get("unschedulable") is True)
    allocatable = parse_resource_list(status.get("allocatable") or status.get("capacity"),
                                      f"node {name}: status.allocatable")
    bound = []
    for obj in pods:
        if node_name(obj) != name or is_terminal(obj):
            continue
        try:
            bound.append(pod_from_manifest(obj))
        except ValueError:
            # an odd pod must not stop the snapshot; what it requests still counts when readable
            try:
                bound.append(Pod(uid=objects.uid(obj) or objects.name(obj), namespace=objects.namespace(obj) or "default",
                                 name=objects.name(obj), requests=pod_requests(obj), node_name=name))
            except ValueError:
                continue
    uids = {p.uid for p in bound}
    requested = Resources.sum(p.requests for p in bound) + nominated_requests(node, uids, now) + reserved
    return ClusterNode(
        name=name,
        labels=labels,
        taints=taints,
        allocatable=allocatable,
        requested=requested,
        provisioner=labels.get(wk.PROVISIONER_NAME),
        in_flight=not objects.is_ready(node),
        marked_for_deletion=objects.deleting(node) or is_disrupted(taints),
        host_ports=tuple(hp for p in bound for hp in p.host_ports),
        pods=tuple(bound),
    )
