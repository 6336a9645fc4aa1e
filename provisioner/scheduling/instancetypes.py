"""Instance types and their offerings, as the solver sees them.

The cloud provider builds these from its catalog (``provisioner.cloudprovider.aws`` from EC2's
``DescribeInstanceTypes`` and ``DescribeInstanceTypeOfferings``; the fake from builders). They
are plain frozen values: the solver never calls out.

Units: cpu in milli-CPU, memory and storage in bytes, prices in USD per hour.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from provisioner.model import labels as wk
from provisioner.model.requirements import IN, Requirement, Requirements
from provisioner.model.resources import ACCELERATORS, Resources


@dataclass(frozen=True, slots=True)
class Offering:
    """One place an instance type can be bought: a zone and a capacity type, at a price.

    ``price`` is USD per hour; ``available`` is False while the offering is in the
    insufficient-capacity cache (Karpenter's unavailable offerings).
    """

    zone: str
    capacity_type: str
    price: float
    available: bool = True

    @property
    def requirements(self) -> Requirements:
        return Requirements(
            (Requirement.of(wk.ZONE, IN, (self.zone,)), Requirement.of(wk.CAPACITY_TYPE, IN, (self.capacity_type,)))
        )


@dataclass(frozen=True, slots=True)
class InstanceType:
    """A machine shape.

    ``capacity`` is what the Node reports as capacity (cpu milli, memory bytes, pods, GPUs,
    ephemeral-storage bytes); ``overhead`` what kubelet and the system reserve plus the
    eviction threshold; :attr:`allocatable` is their difference, what pods can request.
    ``labels`` are the node labels the type implies (instance type, arch, os, and any
    provider-specific ones); zone and capacity type come from the chosen :class:`Offering`.
    """

    name: str
    arch: str
    capacity: Resources
    overhead: Resources
    offerings: tuple[Offering, ...]
    os: str = "linux"
    labels: tuple[tuple[str, str], ...] = ()
    allocatable: Resources = field(init=False, compare=False)
    requirements: Requirements = field(init=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "allocatable", self.capacity - self.overhead)
        implied = {wk.INSTANCE_TYPE: self.name, wk.ARCH: self.arch, wk.OS: self.os, **dict(self.labels)}
        reqs = Requirements.from_labels(implied).intersection(
            Requirements(
                (
                    Requirement.of(wk.ZONE, IN, sorted({o.zone for o in self.offerings})),
                    Requirement.of(wk.CAPACITY_TYPE, IN, sorted({o.capacity_type for o in self.offerings})),
                )
            )
        )
        object.__setattr__(self, "requirements", reqs)

    @property
    def has_accelerator(self) -> bool:
        """True for GPU / Neuron types (they only serve pods that ask for an accelerator)."""
        return any(self.capacity.get(name) > 0 for name in ACCELERATORS)

    def available_offerings(self, requirements: Requirements | None = None) -> tuple[Offering, ...]:
        """Available offerings whose zone and capacity type ``requirements`` allow."""
        result = tuple(o for o in self.offerings if o.available)
        if requirements is None:
            return result
        return tuple(
            o
            for o in result
            if requirements.has(wk.ZONE, o.zone) and requirements.has(wk.CAPACITY_TYPE, o.capacity_type)
        )

    def cheapest_offering(self, requirements: Requirements | None = None) -> Offering | None:
        """The cheapest available offering allowed by ``requirements``; ties by zone, capacity type."""
        offerings = self.available_offerings(requirements)
        if not offerings:
            return None
        return min(offerings, key=lambda o: (o.price, o.capacity_type, o.zone))
