"""The Groupless extender's packing score: one rule, read by the extender's prioritize and by the solver.

The extender (``extender/handlers.py``, ``prioritize``) scores a node it has no other reason to
favour or demote by how full it is after placing the pod, so that fuller nodes win and others
empty out; the solver (:mod:`provisioner.scheduling.solver.scores`) adds the same score to
kube-scheduler's own when it picks among existing nodes. kube-scheduler multiplies an
extender's score (0..:data:`MAX_PRIORITY`) by the extender's ``weight`` times
``MaxNodeScore / MaxExtenderPriority`` (100 / 10) and adds it to its plugins' weighted sum
(``pkg/scheduler/schedule_one.go``, ``prioritizeNodes``).
"""

from __future__ import annotations

#: kube-scheduler's ``extenderv1.MinExtenderPriority`` and ``MaxExtenderPriority``.
MIN_PRIORITY = 0
MAX_PRIORITY = 10
#: The extender's ``weight`` in ``deploy/scheduler/kube-scheduler-config.yaml`` (the local cluster
#: uses that file; a unit test reads it back).
EXTENDER_WEIGHT = 5
#: What kube-scheduler multiplies an extender's score by: ``weight`` × ``MaxNodeScore / MaxExtenderPriority``.
EXTENDER_SCALE = EXTENDER_WEIGHT * (100 // MAX_PRIORITY)


def packing(used_cpu: int, used_memory: int, per_cpu: float, per_memory: float, per_resource: float) -> float:
    """How full a node is, 0.0..1.0: the mean over cpu and memory of the allocatable fraction in use, each capped at 1.

    ``used_cpu`` milli-CPU and ``used_memory`` bytes requested on the node with the pod placed
    (reserved capacity counted); ``per_cpu``, ``per_memory``: 1 / allocatable (0.0 where the
    node reports none); ``per_resource``: 1 / the number of those two the node reports.
    """
    cpu_used = used_cpu * per_cpu
    memory_used = used_memory * per_memory
    return ((cpu_used if cpu_used < 1.0 else 1.0) + (memory_used if memory_used < 1.0 else 1.0)) * per_resource


def packing_priority(fullness: float) -> int:
    """The extender's score for a node as full as ``fullness`` (:func:`packing`): ``1 + 2 × quarter`` (1..7).

    ``quarter`` is how many whole quarters of the node are in use, at most 3. The extender adds
    1 when the node is among the cheapest for the pod (its ``cheap`` rule).
    """
    tier = int(fullness * 4)
    return 1 + 2 * (tier if tier < 3 else 3)


def inverse(amount: int) -> float:
    """``1 / amount``, 0.0 when ``amount`` is not positive (a resource the node does not report)."""
    return 1.0 / amount if amount > 0 else 0.0
