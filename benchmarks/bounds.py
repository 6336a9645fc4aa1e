"""Cost yardsticks for a plan: a lower bound and plain first-fit-decreasing.

Lower bound: pods are split by accelerator need (GPU exclusivity: accelerator types only
serve pods that ask for one); within each part, for every resource, the total request
divided by the best allocatable-per-dollar among the allowed types, taking the max over
resources; the parts are summed. No plan can cost less.

First-fit-decreasing (Karpenter v0.6.3's packer, the FFD the issue compares against): pods by
cpu then memory descending; a node is filled from the largest allowed type in that order
(a pod that does not fit is skipped for the next node), then launched as the cheapest type
that holds what it got. Topology is ignored (it only adds nodes), so this is a generous baseline.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from provisioner.scheduling.instancetypes import InstanceType
from provisioner.scheduling.pods import Pod
from provisioner.scheduling.resources import ACCELERATORS, Resources

TypeFilter = Callable[[Pod, InstanceType], bool]


def _accel(pod: Pod) -> bool:
    return any(pod.requests.get(a) > 0 for a in ACCELERATORS)


def _price(it: InstanceType) -> float | None:
    offering = it.cheapest_offering()
    return offering.price if offering else None


def _parts(pods: Sequence[Pod], types: Sequence[InstanceType]) -> list[tuple[list[Pod], list[InstanceType]]]:
    parts = []
    for accel in (False, True):
        group = [p for p in pods if _accel(p) == accel]
        allowed = [t for t in types if t.has_accelerator == accel and _price(t) is not None]
        if group:
            parts.append((group, allowed))
    return parts


def lower_bound(pods: Sequence[Pod], types: Sequence[InstanceType]) -> float:
    """USD/h no plan for ``pods`` can go below (see module docstring)."""
    total = 0.0
    for group, allowed in _parts(pods, types):
        need = Resources.sum(p.requests for p in group)
        best = 0.0
        for name, amount in need.items():
            per_dollar = max((t.allocatable.get(name) / (_price(t) or 1e-9) for t in allowed), default=0.0)
            if per_dollar > 0:
                best = max(best, amount / per_dollar)
        total += best
    return total


def ffd_price(pods: Sequence[Pod], types: Sequence[InstanceType], allowed: TypeFilter | None = None) -> float:
    """USD/h of Karpenter v0.6.3's first-fit-decreasing packing of ``pods`` (see module docstring)."""
    total = 0.0
    for group, candidates in _parts(pods, types):
        remaining = sorted(group, key=lambda p: (-p.requests.get("cpu"), -p.requests.get("memory"), p.uid))
        ordered = sorted(candidates, key=lambda t: (t.allocatable.get("cpu"), t.allocatable.get("memory"), t.name))
        while remaining:
            pod0 = remaining[0]
            fitting = [t for t in ordered if (allowed is None or allowed(pod0, t)) and pod0.requests.fits(t.allocatable)]
            if not fitting:
                remaining = remaining[1:]
                continue
            largest = fitting[-1]
            used = Resources()
            packed, rest = [], []
            for pod in remaining:
                if (allowed is None or allowed(pod, largest)) and (used + pod.requests).fits(largest.allocatable):
                    used = used + pod.requests
                    packed.append(pod)
                else:
                    rest.append(pod)
            price = min(_price(t) or 0.0 for t in fitting
                        if used.fits(t.allocatable) and (allowed is None or all(allowed(p, t) for p in packed)))
            total += price
            remaining = rest
    return total
