"""Cost yardsticks for a plan: a lower bound and plain first-fit-decreasing.

Lower bound: pods are split by accelerator need (GPU exclusivity: accelerator types only
serve pods that ask for one); within each part, for every resource, the total request
divided by the best allocatable-per-dollar among the allowed types, taking the max over
resources; the parts are summed. A tighter one solves the fractional-node linear program
(minimise the price of a fractional mix of types covering cpu and memory, or a GPU count and
cpu, after a per-node DaemonSet overhead) exactly by enumerating vertices. Both treat resources
as fluid: on a catalog whose cheapest cpu comes with almost no memory (t3a.micro spot) they
assume that cpu can be used by pods that in fact bring memory of their own. The pod-share
bound (``pod_share_bound``) keeps pods whole: each pod pays at least its weighted share of
the cheapest node type it fits. The largest of the three is reported. No plan can cost less.

First-fit-decreasing (Karpenter v0.6.3's packer, the FFD the cost target compares against): pods by
cpu then memory descending; a node is filled from the largest allowed type in that order
(a pod that does not fit is skipped for the next node), then launched as the cheapest type
that holds what it got. Topology is ignored (it only adds nodes), so this is a generous baseline.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from provisioner.model.resources import ACCELERATORS, EMPTY, Resources
from provisioner.scheduling.instancetypes import InstanceType
from provisioner.scheduling.pods import Pod

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


def _pair_lp(need: tuple[float, float], rows: list[tuple[float, float, float]]) -> float:
    """min sum(price x) s.t. sum(alloc x) >= need over two resources, x >= 0 (fractional nodes).

    An optimal vertex uses one type or two types with both constraints tight, so trying every
    single type and every pair solves it exactly (rows: (alloc0, alloc1, price)).
    """
    best = float("inf")
    n0, n1 = need
    for a0, a1, price in rows:
        if (a0 > 0 or n0 <= 0) and (a1 > 0 or n1 <= 0):
            best = min(best, price * max(n0 / a0 if n0 > 0 else 0.0, n1 / a1 if n1 > 0 else 0.0))
    for i, (a0, a1, pa) in enumerate(rows):
        for b0, b1, pb in rows[i + 1:]:
            det = a0 * b1 - a1 * b0
            if abs(det) < 1e-12:
                continue
            xa = (n0 * b1 - n1 * b0) / det
            xb = (a0 * n1 - a1 * n0) / det
            if xa >= 0 and xb >= 0:
                best = min(best, pa * xa + pb * xb)
    return best


def lp_bound(pods: Sequence[Pod], types: Sequence[InstanceType], per_node: Resources = EMPTY) -> float:
    """The fractional-node LP bound over each pair of resources (a relaxation, so still a bound).

    ``per_node`` is an overhead every node carries (a DaemonSet that tolerates everything),
    taken off each type's allocatable.
    """
    total = 0.0
    for group, allowed in _parts(pods, types):
        need = Resources.sum(p.requests for p in group)
        names = [n for n in ("cpu", "memory", "nvidia.com/gpu") if need.get(n)]
        best = 0.0
        for i, r0 in enumerate(names):
            for r1 in names[i + 1:]:
                rows = []
                for t in allowed:
                    price = _price(t)
                    alloc = t.allocatable - per_node
                    if price and alloc.get(r0) > 0 and alloc.get(r1) > 0:
                        rows.append((float(alloc.get(r0)), float(alloc.get(r1)), price))
                best = max(best, _pair_lp((float(need[r0]), float(need[r1])), rows))
        total += best
    return total


def pod_share_bound(pods: Sequence[Pod], types: Sequence[InstanceType], per_node: Resources = EMPTY) -> float:
    """A bound that sees pods as indivisible: each pod pays for its weighted share of a node.

    For weights ``w`` over the resources (w >= 0, summing to 1), a pod ``p`` on a node of type
    ``t`` takes the share ``s(p, t) = sum_r w_r * request_r(p) / (allocatable_r(t) - per_node_r)``.
    The pods on one node fit it in every resource, so their shares add up to at most 1 and the
    node's price is at least the sum of ``price(t) * s(p, t)`` over its pods. Hence every plan
    costs at least ``sum_p min_t price(t) * s(p, t)`` over the types ``p`` fits alone, for any
    ``w``; the best ``w`` on a grid is reported. Unlike the fluid bounds it does not let a
    memory-light type's cheap cpu serve pods that bring their own memory. Resources: cpu,
    memory, pods and any accelerator the part asks for.
    """
    total = 0.0
    for group, allowed in _parts(pods, types):
        need = Resources.sum(p.requests for p in group)
        names = [n for n in ("cpu", "memory", "pods", *ACCELERATORS) if need.get(n)]
        shapes: dict[tuple[int, ...], int] = {}
        for p in group:
            key = tuple(p.requests.get(n) for n in names)
            shapes[key] = shapes.get(key, 0) + 1
        rows = []
        for t in allowed:
            price = _price(t)
            alloc = tuple(t.allocatable.get(n) - per_node.get(n) for n in names)
            if price:
                rows.append((price, alloc))
        # per shape: price * request / allocatable per resource, for each type it fits alone;
        # vectors another one undercuts in every resource can never be the minimum
        costs: list[tuple[int, list[tuple[float, ...]]]] = []
        for shape, count in shapes.items():
            vectors = sorted({tuple(price * q / a if q else 0.0 for q, a in zip(shape, alloc, strict=True))
                              for price, alloc in rows if all(q <= a for q, a in zip(shape, alloc, strict=True))})
            kept = [v for v in vectors if not any(u != v and all(x <= y for x, y in zip(u, v, strict=True)) for u in vectors)]
            if kept:
                costs.append((count, kept))
        best = 0.0
        for w in _simplex(len(names), 20 if len(names) <= 3 else 10):
            value = sum(count * min(sum(wi * x for wi, x in zip(w, v, strict=True)) for v in kept) for count, kept in costs)
            best = max(best, value)
        total += best
    return total


def _simplex(dims: int, steps: int) -> list[tuple[float, ...]]:
    """The points of the probability simplex in ``dims`` dimensions with spacing ``1/steps``."""
    points: list[tuple[float, ...]] = []

    def extend(prefix: tuple[int, ...], left: int) -> None:
        if len(prefix) == dims - 1:
            points.append(tuple(x / steps for x in (*prefix, left)))
            return
        for i in range(left + 1):
            extend((*prefix, i), left - i)

    extend((), steps)
    return points


def lower_bound(pods: Sequence[Pod], types: Sequence[InstanceType], per_node: Resources = EMPTY) -> float:
    """USD/h no plan for ``pods`` can go below: the largest of the per-resource, LP and pod-share bounds."""
    return max(resource_bound(pods, types), lp_bound(pods, types, per_node), pod_share_bound(pods, types, per_node))


def resource_bound(pods: Sequence[Pod], types: Sequence[InstanceType]) -> float:
    """The cost target's bound: per resource, total request / best allocatable-per-dollar; max over resources."""
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
