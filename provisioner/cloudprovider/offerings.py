"""Offering choice shared by every cloud provider: capacity type, candidate offerings, the ICE cache.

Why a module of its own: the AWS provider and the fake must decide *the same way* which
capacity type a node request gets and which (instance type, zone) pairs a launch may try, or
component tests built on the fake would pass against behaviour the real provider does not
have. Everything here is pure except :class:`UnavailableOfferings`, which only reads the
injected clock.

Rules (Karpenter v0.6.3 ``instance.go`` ``getCapacityType`` / ``getOverrides``, Karpenter v1
``pkg/cache/unavailableofferings.go``):

- spot when the request's requirements allow ``spot`` and at least one option has an available
  spot offering in an allowed zone; otherwise on-demand;
- the candidates are option x offering of that capacity type x allowed zone, minus offerings
  that recently failed with insufficient capacity;
- an offering that failed with insufficient capacity is unavailable for 3 minutes
  (:data:`UNAVAILABLE_OFFERING_TTL_SECONDS`, Karpenter v1's value; v0.6.3 used 45 s).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from provisioner.clock import Clock, RealClock
from provisioner.model import labels as wk
from provisioner.model.requirements import Requirements
from provisioner.scheduling.instancetypes import InstanceType, Offering

#: How long an offering that hit InsufficientInstanceCapacity stays unavailable (seconds).
UNAVAILABLE_OFFERING_TTL_SECONDS = 180.0

#: (instance type, zone, capacity type): the key of an offering in the ICE cache.
OfferingKey = tuple[str, str, str]


class UnavailableOfferings:
    """Offerings that recently failed with insufficient capacity, each for a TTL (thread-safe).

    ``mark`` records a failure at the clock's monotonic time; ``is_unavailable`` is True until
    ``ttl`` seconds have passed. ``snapshot()`` is the live set, for catalog conversion.
    """

    def __init__(self, clock: Clock | None = None, ttl: float = UNAVAILABLE_OFFERING_TTL_SECONDS) -> None:
        self._clock: Clock = clock or RealClock()
        self._ttl = ttl
        self._until: dict[OfferingKey, float] = {}
        self._lock = threading.Lock()

    def mark(self, instance_type: str, zone: str, capacity_type: str) -> None:
        """Record an insufficient-capacity failure of this offering (now, for ``ttl`` seconds)."""
        with self._lock:
            self._until[(instance_type, zone, capacity_type)] = self._clock.monotonic() + self._ttl

    def mark_all(self, keys: Iterable[OfferingKey]) -> None:
        for instance_type, zone, capacity_type in keys:
            self.mark(instance_type, zone, capacity_type)

    def is_unavailable(self, instance_type: str, zone: str, capacity_type: str) -> bool:
        with self._lock:
            until = self._until.get((instance_type, zone, capacity_type))
            if until is None:
                return False
            if self._clock.monotonic() >= until:
                del self._until[(instance_type, zone, capacity_type)]
                return False
            return True

    def snapshot(self) -> frozenset[OfferingKey]:
        """The offerings unavailable right now (expired entries are dropped)."""
        with self._lock:
            now = self._clock.monotonic()
            for key in [k for k, until in self._until.items() if now >= until]:
                del self._until[key]
            return frozenset(self._until)

    def clear(self) -> None:
        with self._lock:
            self._until.clear()


@dataclass(frozen=True, slots=True)
class Candidate:
    """One offering a launch may try: the option's index keeps the caller's (price) order."""

    index: int
    instance_type: InstanceType
    offering: Offering

    @property
    def key(self) -> OfferingKey:
        return (self.instance_type.name, self.offering.zone, self.offering.capacity_type)


def _usable(
    instance_type: InstanceType,
    offering: Offering,
    requirements: Requirements,
    unavailable: UnavailableOfferings | None,
) -> bool:
    if not offering.available:
        return False
    if not requirements.has(wk.ZONE, offering.zone) or not requirements.has(
        wk.CAPACITY_TYPE, offering.capacity_type
    ):
        return False
    return unavailable is None or not unavailable.is_unavailable(
        instance_type.name, offering.zone, offering.capacity_type
    )


def choose_capacity_type(
    options: Sequence[InstanceType],
    requirements: Requirements,
    unavailable: UnavailableOfferings | None = None,
) -> str:
    """``spot`` when allowed and some option offers it in an allowed zone, else ``on-demand``."""
    if requirements.has(wk.CAPACITY_TYPE, wk.CAPACITY_TYPE_SPOT):
        for instance_type in options:
            for offering in instance_type.offerings:
                if offering.capacity_type == wk.CAPACITY_TYPE_SPOT and _usable(
                    instance_type, offering, requirements, unavailable
                ):
                    return wk.CAPACITY_TYPE_SPOT
    return wk.CAPACITY_TYPE_ON_DEMAND


def candidates(
    options: Sequence[InstanceType],
    requirements: Requirements,
    capacity_type: str,
    unavailable: UnavailableOfferings | None = None,
) -> list[Candidate]:
    """Option x offering of ``capacity_type`` x allowed zone, in option order then zone order.

    Offerings marked unavailable (on the instance type or in ``unavailable``) are left out.
    """
    result: list[Candidate] = []
    for index, instance_type in enumerate(options):
        for offering in sorted(instance_type.offerings, key=lambda o: o.zone):
            if offering.capacity_type == capacity_type and _usable(
                instance_type, offering, requirements, unavailable
            ):
                result.append(Candidate(index, instance_type, offering))
    return result


def cheapest_first(tried: Sequence[Candidate]) -> list[Candidate]:
    """``tried`` by price (USD per hour), ties in option then zone order.

    The order the AWS provider lists CreateFleet overrides in and the fake and kwok providers
    try offerings in (Karpenter's kwok provider also takes the cheapest available offering).
    """
    return sorted(tried, key=lambda c: (c.offering.price, c.index, c.offering.zone))


def launch_labels(instance_type: InstanceType, offering: Offering) -> dict[str, str]:
    """The labels a node launched as ``instance_type`` in ``offering`` carries (every provider).

    The well-known ones (``node.kubernetes.io/instance-type``, ``topology.kubernetes.io/zone``,
    ``karpenter.sh/capacity-type``, ``kubernetes.io/arch``, ``kubernetes.io/os``), then the type's
    own (``karpenter.k8s.aws/instance-*``), as Karpenter labels its nodes.
    """
    return {
        wk.INSTANCE_TYPE: instance_type.name,
        wk.ZONE: offering.zone,
        wk.CAPACITY_TYPE: offering.capacity_type,
        wk.ARCH: instance_type.arch,
        wk.OS: instance_type.os,
        **dict(instance_type.labels),
    }
