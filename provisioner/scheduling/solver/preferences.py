"""Preferences: what a pod holds while it is placed, and what it gives up when it fits nowhere.

kube-scheduler never filters on a preference: it binds a pod to one of the nodes that meet its
required constraints, and preferences only score those nodes. The solver follows that on the
two kinds of node:

* **Existing and in-flight nodes** (:func:`required_alternatives`): a pod goes to one only by its
  required constraints (node selector, required node affinity, NoSchedule and NoExecute taints,
  DoNotSchedule spread, required pod affinity and anti-affinity); preferred node affinity,
  preferred pod affinity and anti-affinity, ScheduleAnyway spread and PreferNoSchedule taints
  never keep it off one. Among those that take it, it goes to the one kube-scheduler's scores
  for its preferences rank highest (:mod:`provisioner.scheduling.solver.scores`). A pod an
  existing node can take never gets a new node for a preference.
* **New nodes** are shaped by the preferences (Karpenter's ``preferences.go``): preferred pod
  affinity and anti-affinity terms, ScheduleAnyway topology spread, PreferNoSchedule taints and
  a set of preferred node affinity terms are held as if required. When the pod fits nowhere, one
  preference is dropped, in Karpenter's order (preferred pod affinity, preferred pod
  anti-affinity, preferred node affinity, ScheduleAnyway spread, then PreferNoSchedule taints),
  and the pod is tried again.

**Preferred node affinity** is held as a set of terms, the sets tried in the order kube-scheduler
would score a node meeting them (:func:`preferred_sets`): highest total weight first, so a
heavier term wins over a lighter one it conflicts with and a lighter term is given up before a
heavier one; on equal totals, the set whose weights, heaviest first, are larger (``{60}`` before
``{40, 20}``), then the terms earlier in the pod's spec. Relaxing moves to the next set; the
empty set comes last. A set no new node can meet (its terms conflict with each other, with the
pod's required constraints, or no Provisioner has a matching instance type and offering) is
never tried, so a term that cannot be met on its own is dropped at once. Karpenter instead holds
the heaviest term alone and relaxes from there; with several compatible terms it honours only
one. Only the :data:`MAX_HELD_TERMS` heaviest terms take part (at most 256 sets); lighter ones
still score existing nodes.

The pod itself is never changed: a :class:`Relaxation` counts what has been dropped.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

from provisioner.model.requirements import Requirements
from provisioner.scheduling.pods import Pod, PodAffinityTerm, TopologySpreadConstraint

#: Preferred node affinity terms beyond this many (the lightest) are never held on a new node.
MAX_HELD_TERMS = 8


class Relaxation(NamedTuple):
    """How far a pod has relaxed: preferences of each kind dropped (first to last), and its held set.

    ``node_affinity``: the position, in the pod's :func:`preferred_sets`, of the preferred node
    affinity terms it holds. ``prefer_no_schedule``: PreferNoSchedule taints still repel the pod.
    """

    pod_affinity: int = 0
    pod_anti_affinity: int = 0
    node_affinity: int = 0
    spread: int = 0
    prefer_no_schedule: bool = True


#: What a pod starts with: every preference held.
HELD = Relaxation()


class HeldTerms(NamedTuple):
    """A set of preferred node affinity terms held together.

    ``indices`` into the pod's ``preferred_node_affinity`` (heaviest first); ``requirements`` the
    terms ANDed; ``weight`` their total (what kube-scheduler adds to a node meeting them all).
    """

    indices: tuple[int, ...]
    requirements: Requirements
    weight: int


#: The set of no preferred term: what every pod ends with.
NO_TERMS = HeldTerms((), Requirements(), 0)


class Alternative(NamedTuple):
    """One way a new node may take a pod.

    ``requirements``: what the node must meet (node selector and volume topology, one required
    node affinity term, the preferred terms held); ``required``: the same without the preferred
    terms, what kube-scheduler filters on (the domains topology spread counts follow it).
    """

    requirements: Requirements
    required: Requirements


def preferred_sets(terms: Sequence[tuple[int, Requirements]],
                   feasible: Callable[[Requirements], bool]) -> tuple[HeldTerms, ...]:
    """The sets of preferred node affinity ``terms`` a new node may honour, in the order they are held.

    ``terms``: ``(weight, requirements)``, heaviest first. ``feasible(requirements)``: whether
    some new node can meet the pod's required constraints and ``requirements`` (the terms of a
    set ANDed). Each feasible non-empty set of the :data:`MAX_HELD_TERMS` heaviest terms, by
    total weight descending, then by its weights (heaviest first) descending, then by position;
    a set whose requirements an earlier set already has is left out; :data:`NO_TERMS` last.
    A set that is not feasible is never extended (nor is anything more would be).
    """
    count = min(len(terms), MAX_HELD_TERMS)
    found: list[HeldTerms] = []

    def extend(start: int, held: HeldTerms) -> None:
        for i in range(start, count):
            weight, term = terms[i]
            requirements = held.requirements & term
            if requirements.infeasible_keys() or not feasible(requirements):
                continue
            bigger = HeldTerms(held.indices + (i,), requirements, held.weight + weight)
            found.append(bigger)
            extend(i + 1, bigger)

    extend(0, NO_TERMS)
    found.sort(key=lambda h: (-h.weight, [-terms[i][0] for i in h.indices], h.indices))
    ordered: list[HeldTerms] = []
    seen: set[Requirements] = set()
    for held in found:
        if held.requirements not in seen:
            seen.add(held.requirements)
            ordered.append(held)
    ordered.append(NO_TERMS)
    return tuple(ordered)


def relax(pod: Pod, relaxation: Relaxation, node_affinity_sets: int) -> tuple[Relaxation, str] | None:
    """``relaxation`` with one more preference dropped and what was dropped; None when none is left.

    ``node_affinity_sets``: how many sets of preferred node affinity terms the pod has
    (:func:`preferred_sets`; 1 when it has none: the empty set).
    """
    if relaxation.pod_affinity < len(pod.preferred_pod_affinity):
        return relaxation._replace(pod_affinity=relaxation.pod_affinity + 1), "preferred pod affinity"
    if relaxation.pod_anti_affinity < len(pod.preferred_pod_anti_affinity):
        return relaxation._replace(pod_anti_affinity=relaxation.pod_anti_affinity + 1), "preferred pod anti-affinity"
    if relaxation.node_affinity < node_affinity_sets - 1:
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


def required_alternatives(base: Requirements, terms: Sequence[Requirements]) -> list[Requirements]:
    """What kube-scheduler filters a node on: ``base`` (node selector, volume topology) AND one required term.

    One per required node affinity term, duplicates dropped.
    """
    alternatives: list[Requirements] = []
    for term in terms:
        alternative = base & term
        if alternative not in alternatives:
            alternatives.append(alternative)
    return alternatives


def requirement_alternatives(required: Sequence[Requirements], held: HeldTerms) -> list[Alternative]:
    """The ways a new node may take the pod: each of ``required`` AND the ``held`` preferred terms.

    Duplicates dropped; a combination whose requirements cannot be met together is kept (the
    node checks report why).
    """
    alternatives: list[Alternative] = []
    seen: set[Requirements] = set()
    for alternative in required:
        requirements = alternative & held.requirements
        if requirements not in seen:
            seen.add(requirements)
            alternatives.append(Alternative(requirements, alternative))
    return alternatives
