"""An in-memory :class:`~provisioner.cloudprovider.types.CloudProvider` for component tests.

Why: the provisioning and lifecycle controllers must be tested for what they *decide* (which
request, which retries, which deletions) without EC2. This fake behaves like the AWS
provider where controllers can tell the difference (Karpenter's ``pkg/cloudprovider/fake`` is
the model):

- ``create`` is idempotent per ``NodeRequest.id`` (a retried launch returns the same machine);
- it picks the capacity type and offering the way the AWS provider does
  (:mod:`provisioner.cloudprovider.offerings`: spot when allowed and offered, then the cheapest
  allowed offering in option order), skipping offerings listed in ``insufficient_capacity``;
  when every allowed offering is listed it raises :class:`InsufficientCapacityError` naming
  them and marks them unavailable for 3 minutes (the injected clock), as the ICE cache does,
  so ``get_instance_types`` then reports them with ``available=False``;
- ``delete`` of an unknown or terminated instance is success; ``get`` of one raises
  :class:`NotFoundError`; ``list`` returns live machines sorted by provider ID;
- a launched machine carries what the AWS provider reads back from its instance's tags
  (:func:`~provisioner.cloudprovider.launchrecord.launch_tags`, read with
  :func:`~provisioner.cloudprovider.launchrecord.read_launch_tags`: Provisioner, node request,
  launch record), and ``create`` raises ConfigurationError for a record too long for them, as
  the AWS provider does;
- every call is recorded (``calls`` in order, and per method lists), and a test can make the
  next call of a method fail (``next_error`` for ``create``, ``next_delete_error``,
  ``next_get_error``, ``next_list_error``, ``next_instance_types_error``).

Provider IDs look like ``aws:///ap-south-1a/i-0123456789abcdef0`` and names like
``ip-10-0-0-1.ap-south-1.compute.internal``, so log lines and Node objects look real.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterable, Mapping, MutableSequence, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from provisioner.api.types import Provisioner
from provisioner.clock import Clock, FakeClock, rfc3339
from provisioner.cloudprovider.kubelet import node_overhead
from provisioner.cloudprovider.launchrecord import launch_tags, read_launch_tags
from provisioner.cloudprovider.offerings import (
    OfferingKey,
    UnavailableOfferings,
    candidates,
    cheapest_first,
    choose_capacity_type,
    launch_labels,
)
from provisioner.cloudprovider.types import (
    CloudProviderError,
    InstanceTypeList,
    InsufficientCapacityError,
    LaunchError,
    Machine,
    MachineList,
    NodeRequest,
    NotFoundError,
)
from provisioner.model import labels as wk
from provisioner.model.resources import (
    AWS_NEURON,
    CPU,
    EPHEMERAL_STORAGE,
    GIB,
    MEMORY,
    MIB,
    NVIDIA_GPU,
    PODS,
    Resources,
)
from provisioner.scheduling.instancetypes import InstanceType, Offering

DEFAULT_REGION = "ap-south-1"
DEFAULT_ZONES = ("ap-south-1a", "ap-south-1b", "ap-south-1c")
#: Spot price as a share of the on-demand price in builder-made types.
FAKE_SPOT_FRACTION = 0.4


def _default_price(cpu_milli: int, memory_bytes: int, gpus: int, arch: str) -> float:
    # Same calibration as aws.catalog.estimate_price: 0.033/vCPU + 0.00375/GiB, arm64 x 0.8, 0.4/GPU.
    price = 0.033 * cpu_milli / 1000 + 0.00375 * memory_bytes / GIB
    if arch == "arm64":
        price *= 0.8
    return round(price + 0.4 * gpus, 6)


def make_instance_type(
    name: str,
    cpu_milli: int = 4000,
    memory_bytes: int = 16 * GIB,
    pods: int = 110,
    arch: str = "amd64",
    zones: Sequence[str] = DEFAULT_ZONES,
    capacity_types: Sequence[str] = (wk.CAPACITY_TYPE_ON_DEMAND, wk.CAPACITY_TYPE_SPOT),
    price: float | Mapping[str, float] | None = None,
    gpus: int = 0,
    overhead: Mapping[str, int] | None = None,
    *,
    gpu_resource: str = NVIDIA_GPU,
    ephemeral_storage_bytes: int = 20 * GIB,
    os: str = "linux",
    labels: Mapping[str, str] | None = None,
    unavailable: Iterable[tuple[str, str]] = (),
    extra_capacity: Mapping[str, int] | None = None,
) -> InstanceType:
    """A builder-made :class:`InstanceType` (Karpenter's ``fake.NewInstanceType``).

    ``cpu_milli`` milli-CPU, ``memory_bytes`` bytes, ``pods`` count, ``gpus`` of
    ``gpu_resource`` (``nvidia.com/gpu``, ``amd.com/gpu`` or ``aws.amazon.com/neuron``).
    ``price`` (USD per hour): a float is the on-demand price (spot = 0.4 x it), a mapping gives
    each capacity type its own; None estimates from cpu, memory, GPUs and arch. Offerings are
    ``capacity_types x zones``, each ``available`` unless ``(zone, capacity type)`` is in
    ``unavailable``. ``overhead`` defaults to nothing reserved, so allocatable == capacity
    (tests then compute expectations by hand); pass :func:`aws_overhead` for the real model.
    """
    capacity: dict[str, int] = {
        CPU: cpu_milli,
        MEMORY: memory_bytes,
        PODS: pods,
        EPHEMERAL_STORAGE: ephemeral_storage_bytes,
    }
    if gpus:
        capacity[gpu_resource] = gpus
    capacity.update(extra_capacity or {})
    if isinstance(price, Mapping):
        prices = dict(price)
    else:
        on_demand = price if price is not None else _default_price(cpu_milli, memory_bytes, gpus, arch)
        prices = {
            wk.CAPACITY_TYPE_ON_DEMAND: on_demand,
            wk.CAPACITY_TYPE_SPOT: round(on_demand * FAKE_SPOT_FRACTION, 6),
        }
    blocked = set(unavailable)
    offerings = tuple(
        Offering(zone=zone, capacity_type=ct, price=prices[ct], available=(zone, ct) not in blocked)
        for ct in sorted(capacity_types)
        for zone in sorted(zones)
    )
    return InstanceType(
        name=name,
        arch=arch,
        capacity=Resources(capacity),
        overhead=Resources(overhead or {}),
        offerings=offerings,
        os=os,
        labels=tuple(sorted((labels or {}).items())),
    )


def aws_overhead(cpu_milli: int, memory_bytes: int, eni_pods: int) -> Resources:
    """The AWS provider's cpu and memory overhead for a shape (AL2023, no kubelet settings), for builder-made types.

    :func:`~provisioner.cloudprovider.kubelet.node_overhead`, the AWS provider's own model, of a
    node of ``cpu_milli`` and ``memory_bytes`` whose kube-reserved memory counts ``eni_pods``:
    cpu 100m + kube-reserved bands; memory 11 MiB x ``eni_pods`` + 455 MiB. Builder-made types
    keep their ephemeral storage whole (only cpu and memory are reserved).
    """
    overhead = node_overhead(Resources({CPU: cpu_milli, MEMORY: memory_bytes}), eni_pods, None)
    return Resources({CPU: overhead.get(CPU), MEMORY: overhead.get(MEMORY)})


def default_instance_types(zones: Sequence[str] = DEFAULT_ZONES) -> list[InstanceType]:
    """A small catalog shaped like EC2's (walkthrough-relevant types, v0.6.3 capacity and overhead).

    Capacities use floor(0.925 x SizeInMiB) memory and ENI-limited pods; prices are us-east-1
    on-demand list prices (spot = 0.4 x). Includes GPU and Neuron types so exclusivity can be tested.
    """

    def mem(size_mib: int) -> int:
        return int(size_mib * 0.925) * MIB

    # name, vcpu, SizeInMiB, eni pods, arch, on-demand price, gpus, gpu resource
    rows: list[tuple[str, int, int, int, str, float, int, str]] = [
        ("c6g.large", 2, 4096, 29, "arm64", 0.068, 0, NVIDIA_GPU),
        ("c5.large", 2, 4096, 29, "amd64", 0.085, 0, NVIDIA_GPU),
        ("m6g.large", 2, 8192, 29, "arm64", 0.077, 0, NVIDIA_GPU),
        ("m5.large", 2, 8192, 29, "amd64", 0.096, 0, NVIDIA_GPU),
        ("m6g.xlarge", 4, 16384, 58, "arm64", 0.154, 0, NVIDIA_GPU),
        ("m5.xlarge", 4, 16384, 58, "amd64", 0.192, 0, NVIDIA_GPU),
        ("r6gd.xlarge", 4, 32768, 58, "arm64", 0.2304, 0, NVIDIA_GPU),
        ("r5.xlarge", 4, 32768, 58, "amd64", 0.252, 0, NVIDIA_GPU),
        ("m5.2xlarge", 8, 32768, 58, "amd64", 0.384, 0, NVIDIA_GPU),
        ("m5.4xlarge", 16, 65536, 234, "amd64", 0.768, 0, NVIDIA_GPU),
        ("g4dn.xlarge", 4, 16384, 29, "amd64", 0.526, 1, NVIDIA_GPU),
        ("inf1.xlarge", 4, 8192, 38, "amd64", 0.228, 1, AWS_NEURON),
    ]
    return [
        make_instance_type(
            name,
            cpu_milli=vcpu * 1000,
            memory_bytes=mem(size_mib),
            pods=pods,
            arch=arch,
            zones=zones,
            price=price,
            gpus=gpus,
            gpu_resource=gpu_resource,
            overhead=aws_overhead(vcpu * 1000, mem(size_mib), pods),
        )
        for name, vcpu, size_mib, pods, arch, price, gpus, gpu_resource in rows
    ]


@dataclass
class FakeInstance:
    """One row of the fake's instance table."""

    machine: Machine
    request_id: str
    terminated: bool = False
    tags: dict[str, str] = field(default_factory=dict)


class FakeCloudProvider:
    """In-memory CloudProvider (thread-safe). See the module docstring for the behaviour.

    Attributes tests read and set: ``instance_types`` (returned by ``get_instance_types``,
    minus offerings in the ICE cache), ``insufficient_capacity`` (set of (instance type, zone,
    capacity type) that fail), ``next_error`` and friends (raised once by the next call),
    ``calls`` (``(method, argument)`` in call order), ``create_calls``, ``delete_calls``,
    ``get_calls``, ``instance_types_calls``, ``launches`` (machines actually launched).
    """

    def __init__(
        self,
        instance_types: Sequence[InstanceType] | None = None,
        clock: Clock | None = None,
        region: str = DEFAULT_REGION,
    ) -> None:
        self.clock: Clock = clock or FakeClock()
        self.region = region
        self.instance_types: list[InstanceType] = (
            list(instance_types) if instance_types is not None else default_instance_types()
        )
        self.insufficient_capacity: set[OfferingKey] = set()
        self.unavailable = UnavailableOfferings(self.clock)
        self.next_error: CloudProviderError | None = None
        self.next_delete_error: CloudProviderError | None = None
        self.next_get_error: CloudProviderError | None = None
        self.next_list_error: CloudProviderError | None = None
        self.next_instance_types_error: CloudProviderError | None = None
        self.calls: list[tuple[str, Any]] = []
        self.create_calls: list[NodeRequest] = []
        self.delete_calls: list[str] = []
        self.get_calls: list[str] = []
        self.instance_types_calls: list[Provisioner] = []
        self.launches: list[Machine] = []
        self._instances: dict[str, FakeInstance] = {}
        self._counter = 0
        self._lock = threading.RLock()

    # ------------------------------------------------------------------ test helpers
    def reset(self) -> None:
        """Forget calls, instances, errors and the ICE cache (instance types are kept)."""
        with self._lock:
            self.insufficient_capacity.clear()
            self.unavailable.clear()
            self.next_error = self.next_delete_error = self.next_get_error = None
            self.next_list_error = self.next_instance_types_error = None
            self.calls.clear()
            self.create_calls.clear()
            self.delete_calls.clear()
            self.get_calls.clear()
            self.instance_types_calls.clear()
            self.launches.clear()
            self._instances.clear()

    @property
    def machines(self) -> list[Machine]:
        """Live machines, sorted by provider ID (same as ``list()`` without recording a call)."""
        with self._lock:
            return sorted(
                (i.machine for i in self._instances.values() if not i.terminated), key=lambda m: m.provider_id
            )

    def terminate_out_of_band(self, provider_id: str) -> None:
        """Simulate an instance vanishing behind the controller's back (spot reclaim, a human)."""
        with self._lock:
            instance = self._instances.get(provider_id)
            if instance is not None:
                instance.terminated = True

    def add_machine(self, machine: Machine) -> None:
        """Put an existing instance into the table (e.g. an orphan for garbage-collection tests)."""
        with self._lock:
            self._instances[machine.provider_id] = FakeInstance(machine, machine.node_request_id or "")

    # ------------------------------------------------------------------ protocol
    def get_instance_types(self, provisioner: Provisioner) -> InstanceTypeList:
        """``instance_types`` with offerings in the ICE cache marked unavailable."""
        with self._lock:
            self._record("get_instance_types", provisioner, self.instance_types_calls, "next_instance_types_error")
            blocked = self.unavailable.snapshot()
            if not blocked:
                return list(self.instance_types)
            return [
                replace(
                    t,
                    offerings=tuple(
                        replace(o, available=False) if (t.name, o.zone, o.capacity_type) in blocked else o
                        for o in t.offerings
                    ),
                )
                for t in self.instance_types
            ]

    def create(self, request: NodeRequest) -> Machine:
        """Launch (in memory) one instance for ``request``; a live one with the same id is returned as is.

        Raises whatever ``next_error`` holds (once), InsufficientCapacityError when every
        allowed offering is in ``insufficient_capacity``, LaunchError when there are no options,
        ConfigurationError when the launch record does not fit in the instance's tags.
        """
        with self._lock:
            self._record("create", request, self.create_calls, "next_error")
            for instance in self._instances.values():
                if instance.request_id == request.id and not instance.terminated:
                    return instance.machine
            options = list(request.instance_type_options)
            if not options:
                raise LaunchError(f"node request {request.id} has no instance type options")
            capacity_type = choose_capacity_type(options, request.requirements, self.unavailable)
            tried = candidates(options, request.requirements, capacity_type, self.unavailable)
            if not tried:
                raise InsufficientCapacityError(
                    f"no offering of [{', '.join(t.name for t in options)}] is available for "
                    f"{capacity_type} in the allowed zones",
                    (),
                )
            failed: list[OfferingKey] = []
            # Cheapest first, ties in option then zone order (CreateFleet's lowest-price / PCO).
            for candidate in cheapest_first(tried):
                if candidate.key in self.insufficient_capacity:
                    failed.append(candidate.key)
                    continue
                self.unavailable.mark_all(failed)
                return self._launch(request, candidate.instance_type, candidate.offering)
            self.unavailable.mark_all(failed)
            raise InsufficientCapacityError(
                "insufficient capacity for " + ", ".join(f"{t}/{z}/{c}" for t, z, c in sorted(failed)),
                sorted(failed),
            )

    def delete(self, provider_id: str) -> None:
        """Terminate; an unknown or terminated instance is success."""
        with self._lock:
            self._record("delete", provider_id, self.delete_calls, "next_delete_error")
            instance = self._instances.get(provider_id)
            if instance is not None:
                instance.terminated = True

    def get(self, provider_id: str) -> Machine:
        """The live machine, or NotFoundError."""
        with self._lock:
            self._record("get", provider_id, self.get_calls, "next_get_error")
            instance = self._instances.get(provider_id)
            if instance is None or instance.terminated:
                raise NotFoundError(f"instance {provider_id} not found")
            return instance.machine

    def list(self) -> MachineList:
        """Live machines, sorted by provider ID."""
        with self._lock:
            self._record("list", None, None, "next_list_error")
            return self.machines

    # ------------------------------------------------------------------ internals
    def _record(
        self, method: str, argument: Any, method_calls: MutableSequence[Any] | None, pending_error: str
    ) -> None:
        """Log the call in ``calls`` (and ``method_calls``), then raise the queued ``pending_error`` once."""
        self.calls.append((method, argument))
        if method_calls is not None:
            method_calls.append(argument)
        self._raise_pending(pending_error)

    def _raise_pending(self, attribute: str) -> None:
        error = getattr(self, attribute)
        if error is not None:
            setattr(self, attribute, None)
            raise error

    def _launch(self, request: NodeRequest, instance_type: InstanceType, offering: Offering) -> Machine:
        self._counter += 1
        n = self._counter
        instance_id = "i-" + hashlib.sha256(f"fake-{n}".encode()).hexdigest()[:17]
        name = f"ip-10-0-{n // 250}-{n % 250 + 1}.{self.region}.compute.internal"
        labels = launch_labels(instance_type, offering)
        tags = launch_tags(request)
        provisioner, request_id, record = read_launch_tags(tags)
        machine = Machine(
            provider_id=f"aws:///{offering.zone}/{instance_id}",
            instance_id=instance_id,
            name=name,
            instance_type=instance_type.name,
            zone=offering.zone,
            capacity_type=offering.capacity_type,
            labels=labels,
            state="running",
            launch_time=rfc3339(self.clock.now()),
            node_request_id=request_id,
            provisioner_name=provisioner,
            record=record,
        )
        self._instances[machine.provider_id] = FakeInstance(machine, request.id, tags=tags)
        self.launches.append(machine)
        return machine


__all__ = [
    "DEFAULT_ZONES",
    "FakeCloudProvider",
    "FakeInstance",
    "aws_overhead",
    "default_instance_types",
    "make_instance_type",
]
