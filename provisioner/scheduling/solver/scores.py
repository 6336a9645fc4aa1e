"""Which of the existing nodes that take a pod kube-scheduler binds it to: its scores, where the solver knows them.

kube-scheduler filters nodes on a pod's required constraints, then binds it to the feasible
node with the highest weighted sum of its score plugins, each normalised to 0..100 over the
feasible nodes (ties broken at random). A pod's preferences are only ever scored, so the solver
places a pod on an existing node by its required constraints alone
(:mod:`provisioner.scheduling.solver.preferences`) and, among the existing nodes that take it,
picks the one these plugins score highest, with their default weights
(``pkg/scheduler/apis/config/v1/default_plugins.go``):

* **TaintToleration** (weight 3): the node's PreferNoSchedule taints the pod does not tolerate,
  counted; normalised in reverse (``DefaultNormalizeScore``): no such taint scores 100.
* **NodeAffinity** (weight 2): the sum of the weights of the pod's preferred node affinity
  terms the node's labels meet (:func:`~provisioner.scheduling.pods.node_affinity_score`);
  normalised so the highest sum scores 100.
* **InterPodAffinity** (weight 2): for each preferred pod affinity term of the pod, its weight
  times the pods it selects in the node's domain of its topology key (anti-affinity terms
  subtract); normalised from the lowest (0) to the highest (100). The counts are the plan's:
  the pods on existing nodes and those placed so far.

* **NodeResourcesFit** (weight 1), its default ``LeastAllocated`` strategy: per resource (cpu,
  memory; weight 1 each) ``(allocatable - requested) × 100 // allocatable`` (0 when requested
  exceeds allocatable or the node reports none), the two averaged (integer division).
  ``requested`` is the node's requests plus the pod's with kube-scheduler's defaults for a
  missing cpu or memory request (100m, 200 MiB: :func:`~provisioner.scheduling.solver.existing.scored_defaults`).
  Not normalised.
* **NodeResourcesBalancedAllocation** (weight 1): the fractions of cpu and memory allocatable
  requested with the pod (real requests, no defaults; each capped at 1), scored
  ``int((1 - |cpu - memory| / 2) × 100)``; skipped (0 everywhere) for a pod requesting neither.
  Not normalised.
* **The Groupless extender's score** (0..10, times its weight 5 and 100 / 10): 0 on a node
  outside the tier NodeAffinity ranks highest, else its packing score
  (:func:`provisioner.scheduling.extenderscore.packing_priority`, the module the extender reads).

Left out, as the solver cannot know them cheaply or at all: ImageLocality, PodTopologySpread's
scores (ScheduleAnyway constraints and the system's default spreading, which depends on the
pod's Services and owners), the running pods' own terms that select the incoming pod
(InterPodAffinity's symmetric part), and the extender's ``cheap`` point (it needs node prices),
its 0 for a node ``ttlSecondsUntilExpired`` retires soon and its 10 for the node a pod is
nominated to. kube-scheduler scores every feasible node, new ones included; the solver scores
the existing nodes that take the pod, when two or more do. Ties, which kube-scheduler breaks
at random, go to the node tried first (by name), so that a plan is deterministic.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from provisioner.scheduling.extenderscore import EXTENDER_SCALE, MIN_PRIORITY, inverse, packing, packing_priority
from provisioner.scheduling.pods import PREFER_NO_SCHEDULE, Pod, node_affinity_score
from provisioner.scheduling.solver.existing import ExistingNode, scored_defaults
from provisioner.scheduling.solver.memo import Memo
from provisioner.scheduling.solver.topology import TopologyGroup

#: kube-scheduler's ``framework.MaxNodeScore``: what each plugin's normalised score reaches.
MAX_NODE_SCORE = 100
#: Default weights of the score plugins the solver computes (``default_plugins.go``).
TAINT_TOLERATION_WEIGHT = 3
NODE_AFFINITY_WEIGHT = 2
INTER_POD_AFFINITY_WEIGHT = 2
NODE_RESOURCES_FIT_WEIGHT = 1
BALANCED_ALLOCATION_WEIGHT = 1


def least_requested(requested: int, allocatable: int) -> int:
    """LeastAllocated's score for one resource (``leastRequestedScore``): the unused share of ``allocatable``, 0..100.

    0 when the node reports none of it or ``requested`` exceeds it; integer division.
    """
    if allocatable == 0 or requested > allocatable:
        return 0
    return (allocatable - requested) * MAX_NODE_SCORE // allocatable


def least_allocated(cpu: int, memory: int, allocatable_cpu: int, allocatable_memory: int) -> int:
    """NodeResourcesFit's LeastAllocated score, 0..100: the mean of :func:`least_requested` over cpu and memory.

    ``cpu`` milli-CPU and ``memory`` bytes requested on the node with the pod placed, every
    request missing counted at kube-scheduler's default (``least_allocated.go``, weights 1 and 1).
    """
    return (least_requested(cpu, allocatable_cpu) + least_requested(memory, allocatable_memory)) // 2


def balanced_allocation(cpu: int, memory: int, allocatable_cpu: int, allocatable_memory: int) -> int:
    """NodeResourcesBalancedAllocation's score, 0..100: ``int((1 - std) × 100)`` over the cpu and memory fractions.

    ``cpu`` milli-CPU and ``memory`` bytes really requested on the node with the pod placed;
    each fraction of allocatable is capped at 1 and a resource the node reports none of is left
    out; with both, ``std = |cpu fraction - memory fraction| / 2``, else 0
    (``balancedResourceScorer`` in ``balanced_allocation.go``).
    """
    fractions = [min(requested / allocatable, 1.0)
                 for requested, allocatable in ((cpu, allocatable_cpu), (memory, allocatable_memory)) if allocatable]
    std = abs(fractions[0] - fractions[1]) / 2 if len(fractions) == 2 else 0.0
    return int((1 - std) * MAX_NODE_SCORE)


def intolerable_prefer_no_schedule(pod: Pod, node: ExistingNode) -> int:
    """TaintToleration's raw score: the node's PreferNoSchedule taints none of the pod's tolerations tolerate.

    Only tolerations with an empty effect or PreferNoSchedule count (``getAllTolerationPreferNoSchedule``).
    """
    count = 0
    for taint in node.taints:
        if taint.effect == PREFER_NO_SCHEDULE and not any(t.tolerates(taint) for t in pod.tolerations):
            count += 1
    return count


def default_normalize(raw: Sequence[int], reverse: bool) -> list[int]:
    """kube-scheduler's ``helper.DefaultNormalizeScore``: ``100 * raw // max`` (reversed: 100 minus that).

    When every raw score is 0: all 0, or all 100 when ``reverse``.
    """
    highest = max(raw, default=0)
    if highest == 0:
        return [MAX_NODE_SCORE if reverse else 0 for _ in raw]
    scaled = [MAX_NODE_SCORE * r // highest for r in raw]
    return [MAX_NODE_SCORE - s for s in scaled] if reverse else scaled


def min_max_normalize(raw: Sequence[int]) -> list[int]:
    """InterPodAffinity's ``NormalizeScore``: the lowest raw score 0, the highest 100, linear between (truncated)."""
    if not raw:
        return []
    lowest, highest = min(raw), max(raw)
    if highest == lowest:
        return [0 for _ in raw]
    return [int(MAX_NODE_SCORE * (r - lowest) / (highest - lowest)) for r in raw]


@dataclass(frozen=True, slots=True)
class NodeScorer:
    """The scores of existing nodes for one pod.

    ``affinity``: ``(weight, group)`` per preferred pod affinity term (anti-affinity terms with
    a negative weight), the group counting the pods the term selects.
    """

    pod: Pod
    key: object
    affinity: tuple[tuple[int, TopologyGroup], ...]
    total_weight: int

    def _fixed(self, node: ExistingNode, memo: Memo) -> tuple[int, int]:
        """(NodeAffinity raw, TaintToleration raw): they depend on the node's labels and taints alone."""
        cache_key = (node.index, self.key)
        found = memo.existing_scores.get(cache_key)
        if found is None:
            found = (node_affinity_score(self.pod.preferred_node_affinity, node.labels),
                     intolerable_prefer_no_schedule(self.pod, node))
            memo.existing_scores[cache_key] = found
        return found

    def _inter_pod_affinity(self, node: ExistingNode) -> int:
        total = 0
        for weight, group in self.affinity:
            domain = node.domain(group.key)
            if domain is not None:
                total += weight * group.counts.get(domain, 0)
        return total

    def _resources(self, node: ExistingNode, requests: tuple[int, int]) -> tuple[int, int]:
        """(LeastAllocated + BalancedAllocation, weighted; the extender's packing score 1..7) on ``node``.

        Kept on the node until a pod is added to it.
        """
        found = node.resource_scores.get(requests)
        if found is not None:
            return found
        cpu_at, memory_at = node.cpu_at, node.memory_at
        allocatable_cpu, allocatable_memory = node.allocatable[cpu_at], node.allocatable[memory_at]
        cpu = node.requested[cpu_at] + requests[0]
        memory = node.requested[memory_at] + requests[1]
        default_cpu, default_memory = scored_defaults(*requests)
        total = NODE_RESOURCES_FIT_WEIGHT * least_allocated(
            cpu + node.defaulted[0] + default_cpu, memory + node.defaulted[1] + default_memory,
            allocatable_cpu, allocatable_memory)
        if requests[0] or requests[1]:
            total += BALANCED_ALLOCATION_WEIGHT * balanced_allocation(cpu, memory, allocatable_cpu, allocatable_memory)
        present = inverse((allocatable_cpu > 0) + (allocatable_memory > 0))
        found = total, packing_priority(packing(cpu, memory, inverse(allocatable_cpu), inverse(allocatable_memory),
                                                present))
        node.resource_scores[requests] = found
        return found

    def best(self, nodes: Sequence[ExistingNode], requests: tuple[int, int], memo: Memo) -> ExistingNode:
        """The node of ``nodes`` (non-empty, in the order tried) with the highest weighted sum; the first of equals.

        ``requests``: the pod's real cpu (milli-CPU) and memory (bytes) requests.
        """
        fixed = [self._fixed(node, memo) for node in nodes]
        top_affinity = max(f[0] for f in fixed)
        node_affinity = default_normalize([f[0] for f in fixed], reverse=False)
        taints = default_normalize([f[1] for f in fixed], reverse=True)
        affinity = min_max_normalize([self._inter_pod_affinity(node) for node in nodes]) if self.affinity else None
        best_index, best_total = 0, -1
        for i, node in enumerate(nodes):
            total = TAINT_TOLERATION_WEIGHT * taints[i] + NODE_AFFINITY_WEIGHT * node_affinity[i]
            if affinity is not None:
                total += INTER_POD_AFFINITY_WEIGHT * affinity[i]
            plugins, extender = self._resources(node, requests)
            if self.pod.preferred_node_affinity and fixed[i][0] < top_affinity:
                extender = MIN_PRIORITY  # the extender scores a node outside NodeAffinity's top tier lowest
            total += plugins + EXTENDER_SCALE * extender
            if total > best_total:
                best_index, best_total = i, total
        return nodes[best_index]


def scorer(pod: Pod, key: object, affinity: tuple[tuple[int, TopologyGroup], ...]) -> NodeScorer:
    """The :class:`NodeScorer` for ``pod``.

    ``key``: what identifies the pod's preferences in the memo (its shape).
    """
    return NodeScorer(pod, key, affinity, sum(weight for weight, _ in pod.preferred_node_affinity))
