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

Left out, as the solver cannot know them cheaply or at all: the resource scores
(NodeResourcesFit, NodeResourcesBalancedAllocation), ImageLocality, PodTopologySpread's scores
(ScheduleAnyway constraints and the system's default spreading, which depends on the pod's
Services and owners), the running pods' own terms that select the incoming pod
(InterPodAffinity's symmetric part), and the extender's packing score. Ties go to the node tried
first (by name), where kube-scheduler would pick among them by those other scores.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from provisioner.scheduling.pods import PREFER_NO_SCHEDULE, Pod, node_affinity_score
from provisioner.scheduling.solver.existing import ExistingNode
from provisioner.scheduling.solver.memo import Memo
from provisioner.scheduling.solver.topology import TopologyGroup

#: kube-scheduler's ``framework.MaxNodeScore``: what each plugin's normalised score reaches.
MAX_NODE_SCORE = 100
#: Default weights of the score plugins the solver computes (``default_plugins.go``).
TAINT_TOLERATION_WEIGHT = 3
NODE_AFFINITY_WEIGHT = 2
INTER_POD_AFFINITY_WEIGHT = 2


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

    def perfect(self, node: ExistingNode, memo: Memo) -> bool:
        """Whether no node can score higher than ``node``.

        Every preferred node affinity term met, no PreferNoSchedule taint to bear, and no pod
        affinity term to weigh (whose best node is only known after seeing them all).
        """
        if self.affinity:
            return False
        node_affinity, taints = self._fixed(node, memo)
        return node_affinity == self.total_weight and taints == 0

    def _inter_pod_affinity(self, node: ExistingNode) -> int:
        total = 0
        for weight, group in self.affinity:
            domain = node.domain(group.key)
            if domain is not None:
                total += weight * group.counts.get(domain, 0)
        return total

    def best(self, nodes: Sequence[ExistingNode], memo: Memo) -> ExistingNode:
        """The node of ``nodes`` (non-empty, in the order tried) with the highest weighted sum; the first of equals."""
        fixed = [self._fixed(node, memo) for node in nodes]
        node_affinity = default_normalize([f[0] for f in fixed], reverse=False)
        taints = default_normalize([f[1] for f in fixed], reverse=True)
        affinity = min_max_normalize([self._inter_pod_affinity(node) for node in nodes]) if self.affinity else None
        best_index, best_total = 0, -1
        for i in range(len(nodes)):
            total = TAINT_TOLERATION_WEIGHT * taints[i] + NODE_AFFINITY_WEIGHT * node_affinity[i]
            if affinity is not None:
                total += INTER_POD_AFFINITY_WEIGHT * affinity[i]
            if total > best_total:
                best_index, best_total = i, total
        return nodes[best_index]


def scorer(pod: Pod, key: object, affinity: tuple[tuple[int, TopologyGroup], ...],
           prefer_no_schedule: bool) -> NodeScorer | None:
    """The :class:`NodeScorer` for ``pod``; None when every node that takes it scores the same.

    ``key``: what identifies the pod's preferences in the memo (its shape). ``prefer_no_schedule``:
    some existing node has a PreferNoSchedule taint.
    """
    if not (pod.preferred_node_affinity or affinity or prefer_no_schedule):
        return None
    return NodeScorer(pod, key, affinity, sum(weight for weight, _ in pod.preferred_node_affinity))
