"""The queue of pods to place (Karpenter's ``queue.go``).

Pods are queued by cpu, then memory, descending (first-fit decreasing), then creation time, UID,
namespace and name, so the plan does not depend on input order. A pod that fits nowhere drops
one preference (:mod:`provisioner.scheduling.solver.preferences`) and goes to the back of the
queue; the queue ends after a full pass in which no pod was placed and none could drop a
preference, so affinity chains settle.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

from provisioner.model.requirements import Requirements
from provisioner.model.resources import ACCELERATORS, CPU, MEMORY
from provisioner.scheduling.pods import Pod
from provisioner.scheduling.solver.memo import Memo
from provisioner.scheduling.solver.preferences import HELD, Relaxation, relax
from provisioner.scheduling.solver.topology import Topology, TopologyGroup
from provisioner.scheduling.solver.vectors import Vector


@dataclass(eq=False, slots=True)
class PodShape:
    """What pods with the same namespace, labels and scheduling constraints share.

    ``base``: node selector and volume topology; ``terms``: the required node affinity terms
    (one empty term when there are none); ``accelerator``: the pod requests an accelerator;
    ``selected_by``: the topology groups that count such a pod; ``anti_affinity_groups``: the
    groups of its required anti-affinity terms.
    """

    base: Requirements
    terms: tuple[Requirements, ...]
    accelerator: bool
    selected_by: tuple[TopologyGroup, ...] = ()
    anti_affinity_groups: tuple[TopologyGroup, ...] = ()


def shape_of(pod: Pod, topology: Topology, memo: Memo) -> PodShape:
    """The shape of ``pod`` (one per distinct shape in a solve; the groups must be registered)."""
    accelerator = any(pod.requests.get(a) > 0 for a in ACCELERATORS)
    identity = (
        pod.namespace, frozenset(pod.labels.items()), frozenset(pod.node_selector.items()),
        pod.required_node_affinity, pod.preferred_node_affinity, pod.tolerations, pod.topology_spread,
        pod.pod_affinity, pod.pod_anti_affinity, pod.preferred_pod_affinity,
        pod.preferred_pod_anti_affinity, pod.host_ports, pod.volume_requirements, accelerator,
    )
    shape = memo.shapes.get(identity)
    if shape is None:
        shape = PodShape(
            base=pod.base_requirements,
            terms=pod.required_node_affinity or (Requirements(),),
            accelerator=accelerator,
            selected_by=topology.selecting(pod.namespace, pod.labels),
            anti_affinity_groups=topology.anti_affinity_groups(pod),
        )
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
        relaxed = relax(self.pod, self.relaxation)
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
