"""Existing and in-flight nodes as the solver sees them.

Pods are packed onto capacity that already exists or is already launching before anything new
is bought (Karpenter v0.10+ in-flight awareness), so a burst never launches twice for the same
pods. A :class:`ClusterNode` carries what that needs: labels and taints (to check a pod's
requirements and tolerations), allocatable and what is already requested on it (bound pods
plus still-valid nominations from the ``groupless.dev/nominations`` annotation), the host
ports in use, and the pods on it, bound or nominated there (for topology spread and pod
(anti-)affinity counting).
:func:`provisioner.state.solverinput.cluster_node` builds one from a node's shared view.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from provisioner.model.resources import EMPTY, Resources
from provisioner.model.taints import Taint
from provisioner.scheduling.pods import HostPort, Pod


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
