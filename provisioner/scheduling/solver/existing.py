"""Existing and in-flight nodes as places for pending pods (Karpenter's ``existingnode.go``).

Pods are tried on existing nodes before any planned node: initialised nodes first, then
in-flight ones, each group by name. A node takes a pod by the pod's required constraints alone
(kube-scheduler filters on nothing else); which of the nodes that take it the pod goes to is
:mod:`provisioner.scheduling.solver.scores`' answer. A node marked for deletion takes no pod.
An in-flight node's ephemeral taints (:data:`provisioner.model.taints.EPHEMERAL_TAINT_KEYS`) and its Provisioner's
startup taints are ignored: they go away once it is initialised (Karpenter's
``StateNode.Taints``). A node's labels decide its requirements and topology domains.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, NamedTuple

from provisioner.api.types import Provisioner, Taint
from provisioner.model import labels as wk
from provisioner.model.requirements import Requirements
from provisioner.model.resources import CPU, MEMORY
from provisioner.model.taints import EPHEMERAL_TAINT_KEYS
from provisioner.scheduling.nodes import ClusterNode
from provisioner.scheduling.pods import HostPort, Pod, tolerates_all
from provisioner.scheduling.solver.memo import Memo
from provisioner.scheduling.solver.vectors import Dimensions, Vector, fits, plus

if TYPE_CHECKING:
    from provisioner.scheduling.solver.queue import QueuedPod
    from provisioner.scheduling.solver.topology import Topology, TopologyConstraint


class ExistingRefusal(StrEnum):
    """Why an existing node does not take a pod."""

    NO_ROOM = "its allocatable cannot hold the pod's requests"
    UNTOLERATED_TAINT = "the pod does not tolerate one of its taints"
    HOST_PORT_IN_USE = "a host port the pod needs is taken"
    NO_ALTERNATIVE = "its labels or the topology meet none of the pod's requirement alternatives"


class ExistingFit(NamedTuple):
    """A pod that fits an existing node, under one of its requirement alternatives."""

    node: ExistingNode
    alternative: Requirements


#: kube-scheduler's requests for a pod without a cpu or memory request, in its resource scores only
#: (``pkg/scheduler/util``: ``DefaultMilliCPURequest`` 100m, ``DefaultMemoryRequest`` 200 MiB).
SCORED_DEFAULT_CPU = 100
SCORED_DEFAULT_MEMORY = 200 * 1024 * 1024


def scored_defaults(cpu: int, memory: int) -> tuple[int, int]:
    """What kube-scheduler's NodeResourcesFit score adds to a pod's ``(cpu, memory)`` requests (milli-CPU, bytes).

    The default for each of the two the pod does not request (``GetNonzeroRequests``). It applies
    per container; the solver knows a pod's summed requests only, so a pod counts as missing a
    request when its sum is 0.
    """
    return (SCORED_DEFAULT_CPU if cpu == 0 else 0, SCORED_DEFAULT_MEMORY if memory == 0 else 0)


def _undecided_values(key: str) -> frozenset[str]:
    """An existing node's labels are all it has: a key it lacks can take no value."""
    return frozenset()


@dataclass(eq=False, slots=True)
class ExistingNode:
    """An existing or in-flight node and the pending pods the plan puts on it.

    ``taints`` are those that count (ephemeral ones dropped while in flight); ``requested``
    includes the pods placed so far; ``pods`` are those placed by this plan. ``cpu_at`` and
    ``memory_at``: the positions of cpu and memory in the vectors. ``defaulted``: what
    :func:`scored_defaults` adds to ``requested`` for the node's pods and those placed so far
    (milli-CPU, bytes), for kube-scheduler's LeastAllocated score. ``resource_scores``: the
    node's resource scores by the pod's ``(cpu, memory)`` requests
    (:meth:`~provisioner.scheduling.solver.scores.NodeScorer.best`), emptied when a pod is added.
    """

    index: int
    cluster_node: ClusterNode
    hostname: str
    labels: Mapping[str, str]
    taints: tuple[Taint, ...]
    allocatable: Vector
    requested: Vector
    host_ports: list[HostPort]
    pods: list[Pod]
    cpu_at: int
    memory_at: int
    defaulted: tuple[int, int]
    resource_scores: dict[tuple[int, int], tuple[int, int]] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.cluster_node.name

    def domain(self, key: str) -> str | None:
        """The node's value for topology key ``key`` (None: the label is absent)."""
        if key == wk.HOSTNAME:
            return self.hostname
        return self.labels.get(key)

    def can_add(self, queued: QueuedPod, constraints: list[TopologyConstraint], alternatives: list[Requirements],
                topology: Topology, memo: Memo) -> ExistingFit | ExistingRefusal:
        """Whether the node takes ``queued`` now, by the pod's required constraints alone.

        Its room, host ports, NoSchedule and NoExecute taints, labels (``alternatives``) and
        topology; preferences are only scored (:mod:`~provisioner.scheduling.solver.scores`).
        """
        pod = queued.pod
        if not fits(plus(self.requested, queued.requests), self.allocatable):
            return ExistingRefusal.NO_ROOM
        if tolerates_all(pod.tolerations, self.taints) is not None:
            return ExistingRefusal.UNTOLERATED_TAINT
        if any(hp.conflicts(other) for hp in pod.host_ports for other in self.host_ports):
            return ExistingRefusal.HOST_PORT_IN_USE
        for alternative in alternatives:
            key = (self.index, alternative)
            compatible = memo.existing_compatibility.get(key)
            if compatible is None:
                compatible = labels_satisfy(self.labels, alternative) is None
                memo.existing_compatibility[key] = compatible
            if compatible:
                if topology.check(queued.shape, constraints, self, _undecided_values).reason is None:
                    return ExistingFit(self, alternative)
                break  # the topology does not depend on the alternative
        return ExistingRefusal.NO_ALTERNATIVE

    def add(self, queued: QueuedPod) -> None:
        """Put ``queued`` on the node (record it in the topology separately)."""
        self.requested = plus(self.requested, queued.requests)
        self.resource_scores.clear()
        cpu, memory = scored_defaults(queued.requests[self.cpu_at], queued.requests[self.memory_at])
        if cpu or memory:
            self.defaulted = (self.defaulted[0] + cpu, self.defaulted[1] + memory)
        self.host_ports.extend(queued.pod.host_ports)
        self.pods.append(queued.pod)


def labels_satisfy(labels: Mapping[str, str], requirements: Requirements) -> str | None:
    """None when a node with ``labels`` meets ``requirements`` (kube's node affinity match), else why not.

    :meth:`Requirements.mismatch <provisioner.model.requirements.Requirements.mismatch>`: an
    existing node is judged by the labels it really has.
    """
    return requirements.mismatch(labels)


def _counted_taints(node: ClusterNode, startup_taints: Mapping[str, tuple[Taint, ...]]) -> tuple[Taint, ...]:
    """The taints a pod must tolerate: an in-flight node's ephemeral and startup taints go away."""
    if not node.in_flight:
        return node.taints
    startup = startup_taints.get(node.provisioner or "", ())
    return tuple(t for t in node.taints if t.key not in EPHEMERAL_TAINT_KEYS
                 and not any(t.key == s.key and t.effect == s.effect for s in startup))


def _defaulted(pods: Sequence[Pod]) -> tuple[int, int]:
    """The sum of :func:`scored_defaults` over ``pods`` (milli-CPU, bytes)."""
    cpu = memory = 0
    for pod in pods:
        extra_cpu, extra_memory = scored_defaults(pod.requests.get(CPU), pod.requests.get(MEMORY))
        cpu += extra_cpu
        memory += extra_memory
    return cpu, memory


def existing_nodes(nodes: Sequence[ClusterNode], provisioners: Sequence[Provisioner],
                   dimensions: Dimensions) -> list[ExistingNode]:
    """The nodes that may take pods, in the order they are tried (initialised, then in flight, by name)."""
    startup_taints = {p.name: p.spec.startup_taints for p in provisioners}
    cpu_at, memory_at = dimensions.names.index(CPU), dimensions.names.index(MEMORY)
    out: list[ExistingNode] = []
    for node in sorted(nodes, key=lambda n: (n.in_flight, n.name)):
        if node.marked_for_deletion:
            continue
        labels = dict(node.labels)
        labels.setdefault(wk.HOSTNAME, node.name)
        out.append(ExistingNode(
            index=len(out), cluster_node=node, hostname=labels[wk.HOSTNAME], labels=labels,
            taints=_counted_taints(node, startup_taints), allocatable=dimensions.vector(node.allocatable),
            requested=dimensions.vector(node.requested), host_ports=list(node.host_ports), pods=[],
            cpu_at=cpu_at, memory_at=memory_at, defaulted=_defaulted(node.pods),
        ))
    return out
