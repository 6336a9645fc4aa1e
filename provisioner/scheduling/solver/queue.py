"""The queue of pods to place (Karpenter's ``queue.go``).

Pods are queued by cpu, then memory, descending (first-fit decreasing), then creation time, UID,
namespace and name, so the plan does not depend on input order. A pod that fits nowhere drops
one preference (:mod:`provisioner.scheduling.solver.preferences`) and goes to the back of the
queue; the queue ends after a full pass in which no pod was placed and none could drop a
preference, so affinity chains settle.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from provisioner.model.requirements import Requirements
from provisioner.model.resources import ACCELERATORS, CPU, MEMORY
from provisioner.scheduling.pods import Pod
from provisioner.scheduling.solver.memo import Memo
from provisioner.scheduling.solver.preferences import (
    HELD,
    NO_TERMS,
    HeldTerms,
    Relaxation,
    preferred_sets,
    relax,
    required_alternatives,
)
from provisioner.scheduling.solver.topology import Topology, TopologyGroup
from provisioner.scheduling.solver.vectors import Vector


@dataclass(eq=False, slots=True)
class PodShape:
    """What pods with the same namespace, labels and scheduling constraints share.

    ``base``: node selector and volume topology; ``terms``: the required node affinity terms
    (one empty term when there are none); ``required``: ``base`` AND each term, what
    kube-scheduler filters nodes on; ``preferred_sets``: the sets of preferred node affinity terms
    a new node may hold, in the order held (:func:`~provisioner.scheduling.solver.preferences.preferred_sets`);
    ``accelerator``: the pod requests an accelerator; ``selected_by``: the topology groups that
    count such a pod; ``anti_affinity_groups``: the groups of its required anti-affinity terms.
    """

    base: Requirements
    terms: tuple[Requirements, ...]
    accelerator: bool
    selected_by: tuple[TopologyGroup, ...] = ()
    anti_affinity_groups: tuple[TopologyGroup, ...] = ()
    required: list[Requirements] = field(default_factory=list)
    preferred_sets: tuple[HeldTerms, ...] = (NO_TERMS,)


#: Whether some new node can take a pod of a shape under the given requirements (its required
#: constraints ANDed with a set of preferred terms): the solver's answer from its templates.
Feasible = Callable[[Pod, PodShape, Requirements], bool]


def shape_of(pod: Pod, topology: Topology, memo: Memo, feasible: Feasible) -> PodShape:
    """The shape of ``pod`` (one per distinct shape in a solve; the groups must be registered)."""
    accelerator = any(pod.requests.get(a) > 0 for a in ACCELERATORS)
    identity = (
        pod.namespace, frozenset(pod.labels.items()), frozenset(pod.node_selector.items()),
        pod.required_node_affinity, pod.preferred_node_affinity, pod.tolerations, pod.topology_spread,
        pod.pod_affinity, pod.pod_anti_affinity, pod.preferred_pod_affinity,
        pod.preferred_pod_anti_affinity, pod.host_ports, pod.volume_requirements, accelerator,
    )
    found = memo.shapes.get(identity)
    if found is not None:
        return found
    base = pod.base_requirements
    terms = pod.required_node_affinity or (Requirements(),)
    shape = PodShape(
        base=base,
        terms=terms,
        accelerator=accelerator,
        selected_by=topology.selecting(pod.namespace, pod.labels),
        anti_affinity_groups=topology.anti_affinity_groups(pod),
        required=required_alternatives(base, terms),
    )
    if pod.preferred_node_affinity:
        shape.preferred_sets = preferred_sets(pod.preferred_node_affinity,
                                              lambda requirements: feasible(pod, shape, requirements))
    memo.shapes[identity] = shape
    return shape


@dataclass(eq=False, slots=True)
class QueuedPod:
    """A pod waiting for a place.

    ``requests`` is its requests as a vector; ``relaxation`` what it has dropped so far;
    ``error`` why its last attempt failed (empty before the first).
    """

    pod: Pod
    requests: Vector
    shape: PodShape
    relaxation: Relaxation = HELD
    error: str = ""

    def relax(self) -> str | None:
        """Drop one preference; what was dropped, or None when none is left."""
        relaxed = relax(self.pod, self.relaxation, len(self.shape.preferred_sets))
        if relaxed is None:
            return None
        self.relaxation, dropped = relaxed
        return dropped


def _queue_order(queued: QueuedPod) -> tuple[int, int, str, str, str, str]:
    pod = queued.pod
    return (-pod.requests.get(CPU), -pod.requests.get(MEMORY), pod.creation_timestamp, pod.uid, pod.namespace,
            pod.name)


class PodQueue:
    """Pods in first-fit-decreasing order, each retried after relaxing until no progress is made."""

    def __init__(self, pods: Iterable[QueuedPod]) -> None:
        self._queue = deque(sorted(pods, key=_queue_order))
        self._stalled = 0

    def pop(self) -> QueuedPod | None:
        """The next pod to try; None when the queue is empty or a full pass made no progress."""
        if not self._queue or self._stalled >= len(self._queue):
            return None
        return self._queue.popleft()

    def placed(self) -> None:
        """The pod just popped found a place."""
        self._stalled = 0

    def retry(self, queued: QueuedPod, error: str) -> None:
        """The pod just popped fits nowhere (``error`` says why): relax it and queue it again."""
        queued.error = error
        self._queue.append(queued)
        self._stalled = 0 if queued.relax() is not None else self._stalled + 1

    def remaining(self) -> list[QueuedPod]:
        """The pods left (each has failed at least once), in queue order."""
        return list(self._queue)
