"""Preference relaxation (Karpenter's ``preferences.go``).

A pod's preferences are held at first: preferred pod affinity and anti-affinity terms,
preferred node affinity terms, ScheduleAnyway topology spread and PreferNoSchedule taints are
all treated as required. When the pod fits nowhere, one preference is dropped, in Karpenter's
order (preferred pod affinity, preferred pod anti-affinity, preferred node affinity heaviest
first, ScheduleAnyway spread, then PreferNoSchedule taints), and the pod is tried again. The pod
itself is never changed: a :class:`Relaxation` counts what has been dropped.
"""

from __future__ import annotations

from typing import NamedTuple

from provisioner.model.requirements import Requirements
from provisioner.scheduling.pods import Pod, PodAffinityTerm, TopologySpreadConstraint


class Relaxation(NamedTuple):
    """How many preferences of each kind a pod has dropped (terms are dropped first to last).

    ``prefer_no_schedule``: PreferNoSchedule taints still repel the pod.
    """

    pod_affinity: int = 0
    pod_anti_affinity: int = 0
    node_affinity: int = 0
    spread: int = 0
    prefer_no_schedule: bool = True


#: What a pod starts with: every preference held.
HELD = Relaxation()


def relax(pod: Pod, relaxation: Relaxation) -> tuple[Relaxation, str] | None:
    """``relaxation`` with one more preference dropped and what was dropped; None when none is left."""
    if relaxation.pod_affinity < len(pod.preferred_pod_affinity):
        return relaxation._replace(pod_affinity=relaxation.pod_affinity + 1), "preferred pod affinity"
    if relaxation.pod_anti_affinity < len(pod.preferred_pod_anti_affinity):
        return relaxation._replace(pod_anti_affinity=relaxation.pod_anti_affinity + 1), "preferred pod anti-affinity"
    if relaxation.node_affinity < len(pod.preferred_node_affinity):
        return relaxation._replace(node_affinity=relaxation.node_affinity + 1), "preferred node affinity"
    if relaxation.spread < sum(1 for c in pod.topology_spread if not c.hard):
        return relaxation._replace(spread=relaxation.spread + 1), "ScheduleAnyway topology spread"
    if relaxation.prefer_no_schedule:
        return relaxation._replace(prefer_no_schedule=False), "PreferNoSchedule taints"
    return None


def held_spread(pod: Pod, relaxation: Relaxation) -> list[TopologySpreadConstraint]:
    """The pod's DoNotSchedule constraints and the ScheduleAnyway ones not dropped yet, in order."""
    held = []
    soft_index = 0
    for c in pod.topology_spread:
        if not c.hard:
            soft_index += 1
            if soft_index <= relaxation.spread:
                continue
        held.append(c)
    return held


def held_pod_affinity(pod: Pod, relaxation: Relaxation) -> tuple[PodAffinityTerm, ...]:
    """Required pod affinity terms, then the preferred ones not dropped yet."""
    return pod.pod_affinity + pod.preferred_pod_affinity[relaxation.pod_affinity:]


def held_pod_anti_affinity(pod: Pod, relaxation: Relaxation) -> tuple[PodAffinityTerm, ...]:
    """Required pod anti-affinity terms, then the preferred ones not dropped yet."""
    return pod.pod_anti_affinity + pod.preferred_pod_anti_affinity[relaxation.pod_anti_affinity:]


def requirement_alternatives(
    base: Requirements, terms: tuple[Requirements, ...], pod: Pod, relaxation: Relaxation,
) -> list[Requirements]:
    """The node requirements the pod accepts, one per required node affinity term (duplicates dropped).

    Each is ``base`` (node selector and volume topology) AND the term AND every preferred node
    affinity term not dropped yet.
    """
    preferred = Requirements()
    for _, requirements in pod.preferred_node_affinity[relaxation.node_affinity:]:
        preferred = preferred & requirements
    alternatives = []
    seen: set[Requirements] = set()
    for term in terms:
        alternative = base & term & preferred
        if alternative not in seen:
            seen.add(alternative)
            alternatives.append(alternative)
    return alternatives
