"""EC2's instance-type catalog turned into the solver's :class:`InstanceType` values, without a client.

Why pure, and one: ``groupless plan`` computes packings from JSON files (DescribeInstanceTypes
and DescribeInstanceTypeOfferings answers saved with the AWS CLI, a pricing file), the AWS
provider from live answers and the kwok provider from its catalog files; a plan is only worth
something if the nodes it counts on are the nodes the controller launches, so all three derive
a Provisioner's instance types through :func:`instance_types_for` under its
:class:`NodeConfiguration` (:meth:`NodeConfiguration.of`), over plain dicts in the shape boto3
returns (``InstanceTypes[*]``, ``InstanceTypeOfferings[*]``), and no I/O happens here.

The resource model is Karpenter v0.6.3's (``pkg/cloudprovider/aws/instancetype.go``,
``reference/karpenter-v0.6.3.md`` section 9) with the Provisioner fields of later versions
(``pkg/providers/instancetype/types.go``: ``blockDeviceMappings``, ``podsPerCore``, the AMI
family's rules in :mod:`provisioner.cloudprovider.aws.amifamily`):

- cpu = ``VCpuInfo.DefaultVCpus`` x 1000 milli-CPU;
- memory = floor(``MemoryInfo.SizeInMiB`` x 0.925) MiB (what the hypervisor and kernel leave);
- pods = ``kubeletConfiguration.maxPods`` when set, else ``MaxENI x (IPv4PerENI - 1) + 2``
  (ENI-limited), or 110 when ENI-limited density is off (``--eni-limited-pod-density=false``);
  then at most ``podsPerCore`` x vCPUs when ``podsPerCore`` > 0 (not on Bottlerocket, which
  ignores it);
- overhead cpu = 100m system-reserved + kube-reserved of 6% of the first core, 1% of the
  second, 0.5% of cores 3-4 and 0.25% of each further core (each band truncated to whole
  milli-CPU, as the Go code does);
- overhead memory = (11 MiB x pods + 255 MiB) kube-reserved + 100 MiB system-reserved + 100 MiB
  eviction threshold, where pods is the ENI-limited count even when the pod capacity is 110 or
  ``maxPods`` (AL2, AL2023, Ubuntu: over-reserving on the safe side, as Karpenter does), and the
  node's pod capacity on Bottlerocket;
- ``kubeletConfiguration`` ``systemReserved``, ``kubeReserved`` and ``evictionHard``
  (``memory.available``, ``nodefs.available``; absolute or ``N%`` of capacity, ``100%``
  disabling it) replace the matching default part, resource by resource;
- ephemeral-storage = the volume pods' ephemeral storage lives on: the Provisioner's
  ``blockDeviceMappings`` entry for the family's device (``/dev/xvda``; Ubuntu ``/dev/sda1``;
  Bottlerocket's data volume ``/dev/xvdb``), else 20 GiB; with 1 GiB kube-reserved and a 10%
  ``nodefs.available`` eviction threshold (kubelet's default);
- GPUs keyed by the manufacturer of the first GPU entry (``nvidia.com/gpu``, ``amd.com/gpu``),
  ``aws.amazon.com/neuron`` from ``NeuronInfo`` (or AWS-made ``InferenceAcceleratorInfo``);
- arch ``x86_64 -> amd64``, ``arm64 -> arm64``; os ``linux``;
- FPGA and bare-metal types are excluded, as are types that are not HVM, and types the AMI
  family has no image for (:func:`instance_types_for`).

So r6gd.xlarge (4 vCPU, 32768 MiB, 4 ENIs x 15 IPv4) has capacity 4000m / 30310 MiB / 58 pods
and allocatable 3820m / 29217 MiB; m5.large has 2000m / 7577 MiB / 29 pods.

Prices (USD per hour) come from a :class:`PriceBook`: on-demand from the Pricing API or the
static table shipped in ``data/on-demand-prices.json``, spot from DescribeSpotPriceHistory, a
``--pricing-file`` overriding both; what none of them knows is estimated by
:func:`estimate_price` (logged as a warning once per price book).
"""

from __future__ import annotations

import json
import logging
import math
import re
import sys
import threading
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from importlib import resources as importlib_resources
from pathlib import Path
from typing import Any, NamedTuple

from provisioner.api.types import KubeletConfiguration, Provisioner
from provisioner.cloudprovider.aws.amifamily import (
    DEFAULT_AMI_FAMILY,
    DEFAULT_VOLUME_GIB,
    MissingImage,
    ephemeral_storage_gib,
    family_of,
    offered_instance_types,
    pods_per_core_enabled,
    uses_eni_limited_memory_overhead,
)
from provisioner.cloudprovider.kubelet import kube_reserved_cpu_milli, node_overhead
from provisioner.model import labels as wk
from provisioner.model.quantity import QuantityError
from provisioner.model.resources import (
    AMD_GPU,
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

log = logging.getLogger(__name__)

#: Share of ``SizeInMiB`` a node reports as memory capacity (v0.6.3; later ``VM_MEMORY_OVERHEAD_PERCENT``).
VM_MEMORY_FRACTION = 0.925
#: Pod capacity when ENI-limited pod density is off (kubelet's default maxPods).
DEFAULT_MAX_PODS = 110

#: A spot or on-demand price at or below this (USD per hour) is a placeholder, not a price:
#: moto answers every DescribeSpotPriceHistory with "0.00001", and no real EC2 offering costs
#: a hundredth of a cent per hour. Such prices are ignored (the estimate is used instead).
PLACEHOLDER_PRICE_USD = 0.0001

#: Spot price estimate as a share of the on-demand price when no spot price is known.
SPOT_ESTIMATE_FRACTION = 0.4

_FAMILY = re.compile(r"^([a-z-]+?)(\d+)")

# Labels Karpenter (v0.14+) puts on nodes to describe the shape; pods may select on them.
LABEL_INSTANCE_CATEGORY = "karpenter.k8s.aws/instance-category"
LABEL_INSTANCE_FAMILY = "karpenter.k8s.aws/instance-family"
LABEL_INSTANCE_GENERATION = "karpenter.k8s.aws/instance-generation"
LABEL_INSTANCE_SIZE = "karpenter.k8s.aws/instance-size"
LABEL_INSTANCE_CPU = "karpenter.k8s.aws/instance-cpu"
LABEL_INSTANCE_MEMORY = "karpenter.k8s.aws/instance-memory"
LABEL_INSTANCE_HYPERVISOR = "karpenter.k8s.aws/instance-hypervisor"
LABEL_INSTANCE_GPU_COUNT = "karpenter.k8s.aws/instance-gpu-count"
LABEL_INSTANCE_GPU_NAME = "karpenter.k8s.aws/instance-gpu-name"
LABEL_INSTANCE_GPU_MANUFACTURER = "karpenter.k8s.aws/instance-gpu-manufacturer"
LABEL_INSTANCE_LOCAL_NVME = "karpenter.k8s.aws/instance-local-nvme"


# --------------------------------------------------------------------------- resource model
def arch_of(info: Mapping[str, Any]) -> str | None:
    """Kubernetes arch (``amd64``/``arm64``) of a DescribeInstanceTypes item, None if neither."""
    archs = info.get("ProcessorInfo", {}).get("SupportedArchitectures", [])
    if "arm64" in archs:
        return "arm64"
    if "x86_64" in archs:
        return "amd64"
    return None


def eni_limited_pods(info: Mapping[str, Any]) -> int:
    """``MaximumNetworkInterfaces x (Ipv4AddressesPerInterface - 1) + 2`` (the VPC CNI's limit)."""
    network = info.get("NetworkInfo", {})
    enis = int(network.get("MaximumNetworkInterfaces", 0))
    ips = int(network.get("Ipv4AddressesPerInterface", 0))
    return enis * max(ips - 1, 0) + 2


def gpus_of(info: Mapping[str, Any]) -> dict[str, int]:
    """GPU and Neuron counts by resource name (empty for plain types)."""
    result: dict[str, int] = {}
    gpus = info.get("GpuInfo", {}).get("Gpus", [])
    if gpus:
        manufacturer = str(gpus[0].get("Manufacturer", "")).upper()
        count = sum(int(g.get("Count", 0)) for g in gpus)
        if manufacturer == "NVIDIA":
            result[NVIDIA_GPU] = count
        elif manufacturer == "AMD":
            result[AMD_GPU] = count
    neuron_devices = info.get("NeuronInfo", {}).get("NeuronDevices", [])
    if neuron_devices:
        result[AWS_NEURON] = sum(int(d.get("Count", 0)) for d in neuron_devices)
    else:
        accelerators = info.get("InferenceAcceleratorInfo", {}).get("Accelerators", [])
        count = sum(
            int(a.get("Count", 0)) for a in accelerators if str(a.get("Manufacturer", "")).upper() == "AWS"
        )
        if count:
            result[AWS_NEURON] = count
    return result


def is_supported(info: Mapping[str, Any]) -> bool:
    """False for FPGA, bare-metal, non-HVM types and types of an architecture Kubernetes lacks here."""
    if info.get("FpgaInfo"):
        return False
    if info.get("BareMetal"):
        return False
    virtualization = info.get("SupportedVirtualizationTypes")
    if virtualization is not None and "hvm" not in virtualization:
        return False
    return arch_of(info) is not None


#: What of a DescribeInstanceTypes item the conversion reads: top-level key -> the nested keys
#: read under it, or None for the whole value. Every ``info`` read in this module is listed here;
#: :func:`catalog_fields` keeps only these, so a raw EC2 answer (~5 KiB of EBS, network-card,
#: placement and clock-speed details per type) is not held for as long as the catalog is cached.
CATALOG_FIELDS: Mapping[str, tuple[str, ...] | None] = {
    "InstanceType": None,
    "SupportedUsageClasses": None,
    "SupportedVirtualizationTypes": None,
    "BareMetal": None,
    "Hypervisor": None,
    "FpgaInfo": None,
    "GpuInfo": None,
    "ProcessorInfo": ("SupportedArchitectures",),
    "VCpuInfo": ("DefaultVCpus",),
    "MemoryInfo": ("SizeInMiB",),
    "NetworkInfo": ("MaximumNetworkInterfaces", "Ipv4AddressesPerInterface"),
    "NeuronInfo": ("NeuronDevices",),
    "InferenceAcceleratorInfo": ("Accelerators",),
    "InstanceStorageInfo": ("NvmeSupport", "TotalSizeInGB"),
}


def _interned(value: Any) -> Any:
    """``value`` with every string in it interned (``"x86_64"``, ``"hvm"``, ``"on-demand"`` once per process)."""
    if isinstance(value, str):
        return sys.intern(value)
    if isinstance(value, Mapping):
        return {sys.intern(str(k)): _interned(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_interned(v) for v in value]
    return value


def catalog_fields(info: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a DescribeInstanceTypes item the conversion reads (:data:`CATALOG_FIELDS`), strings interned.

    Converting the result gives the same :class:`InstanceType` as converting ``info``; keys
    ``info`` lacks stay absent (``is_supported`` tells a missing ``SupportedVirtualizationTypes``
    from an empty one).
    """
    result: dict[str, Any] = {}
    for key, nested in CATALOG_FIELDS.items():
        if key not in info:
            continue
        value = info[key]
        if nested is not None and isinstance(value, Mapping):
            value = {k: value[k] for k in nested if k in value}
        result[key] = _interned(value)
    return result


def offering_fields(item: Mapping[str, Any]) -> dict[str, str]:
    """``InstanceType``, ``Location`` and ``LocationType`` of a DescribeInstanceTypeOfferings item, interned."""
    return {k: sys.intern(str(item[k])) for k in ("InstanceType", "Location", "LocationType") if k in item}


@dataclass(frozen=True)
class NodeConfiguration:
    """What of a Provisioner and of the controller's settings changes the nodes it launches.

    ``ami_family``: the Provisioner's ``amiFamily`` (default AL2023); ``kubelet``: its
    ``kubeletConfiguration``; ``ephemeral_storage_gib``: the size of the volume pods' ephemeral
    storage lives on (:func:`~provisioner.cloudprovider.aws.amifamily.ephemeral_storage_gib`
    of its ``blockDeviceMappings``); ``eni_limited_pod_density``: the controller's
    ``--eni-limited-pod-density`` (``groupless plan`` has the same flag); ``launch_template``:
    the Provisioner names its own launch template (its image boots every type).
    Hashable: the providers cache conversions by it.
    """

    ami_family: str = DEFAULT_AMI_FAMILY
    kubelet: KubeletConfiguration | None = None
    ephemeral_storage_gib: int = DEFAULT_VOLUME_GIB
    eni_limited_pod_density: bool = True
    launch_template: bool = False

    @classmethod
    def of(cls, provisioner: Provisioner, eni_limited_pod_density: bool = True) -> NodeConfiguration:
        """The configuration of ``provisioner``'s nodes. Raises QuantityError for a malformed ``volumeSize``."""
        provider = provisioner.spec.provider
        family = family_of(provider)
        return cls(
            ami_family=family,
            kubelet=provisioner.spec.kubelet_configuration,
            ephemeral_storage_gib=ephemeral_storage_gib(provider, family),
            eni_limited_pod_density=eni_limited_pod_density,
            launch_template=bool(provider is not None and provider.launch_template),
        )

    @property
    def ephemeral_storage_bytes(self) -> int:
        return self.ephemeral_storage_gib * GIB

    def kubelet_max_pods(self) -> int | None:
        """The ``maxPods`` the node's kubelet is given (None: the AMI computes the ENI-limited count).

        ``kubeletConfiguration.maxPods``, else 110 when ENI-limited pod density is off, else None.
        """
        if self.kubelet is not None and self.kubelet.max_pods is not None:
            return int(self.kubelet.max_pods)
        return None if self.eni_limited_pod_density else DEFAULT_MAX_PODS


def max_pods(info: Mapping[str, Any], config: NodeConfiguration) -> int:
    """Pod capacity (Karpenter's ``pods``).

    ``maxPods`` if set, else ENI-limited or 110, then at most ``podsPerCore`` x vCPUs when
    ``podsPerCore`` is positive and the AMI family honours it.
    """
    count = config.kubelet_max_pods()
    if count is None:
        count = eni_limited_pods(info)
    kubelet = config.kubelet
    per_core = kubelet.pods_per_core if kubelet is not None else None
    if per_core and per_core > 0 and pods_per_core_enabled(config.ami_family):
        count = min(count, per_core * int(info.get("VCpuInfo", {}).get("DefaultVCpus", 0)))
    return count


def capacity_of(info: Mapping[str, Any], config: NodeConfiguration) -> Resources:
    """Node capacity of a DescribeInstanceTypes item (cpu milli, memory bytes, pods, storage bytes, GPUs)."""
    vcpus = int(info.get("VCpuInfo", {}).get("DefaultVCpus", 0))
    size_mib = int(info.get("MemoryInfo", {}).get("SizeInMiB", 0))
    memory_mib = math.floor(size_mib * VM_MEMORY_FRACTION)
    return Resources(
        {
            CPU: vcpus * 1000,
            MEMORY: memory_mib * MIB,
            PODS: max_pods(info, config),
            EPHEMERAL_STORAGE: config.ephemeral_storage_bytes,
            **gpus_of(info),
        }
    )


def overhead_of(info: Mapping[str, Any], capacity: Resources, config: NodeConfiguration) -> Resources:
    """What kubelet and the system reserve on a node of ``capacity`` (:func:`~provisioner.cloudprovider.kubelet.node_overhead`).

    Kube-reserved memory counts the ENI-limited pods (AL2, AL2023, Ubuntu) or the node's pod
    capacity (Bottlerocket). Raises QuantityError (a ValueError) when a kubelet quantity does not parse.
    """
    if uses_eni_limited_memory_overhead(config.ami_family):
        reserved_pods = eni_limited_pods(info)
    else:
        reserved_pods = capacity.get(PODS)
    return node_overhead(capacity, reserved_pods, config.kubelet)


def shape_labels(info: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    """Karpenter's ``karpenter.k8s.aws/instance-*`` labels for a type, sorted by key."""
    name = str(info["InstanceType"])
    family, _, size = name.partition(".")
    match = _FAMILY.match(family)
    category = match.group(1) if match else family
    generation = match.group(2) if match else ""
    labels: dict[str, str] = {
        LABEL_INSTANCE_CATEGORY: category,
        LABEL_INSTANCE_FAMILY: family,
        LABEL_INSTANCE_SIZE: size,
        LABEL_INSTANCE_CPU: str(int(info.get("VCpuInfo", {}).get("DefaultVCpus", 0))),
        LABEL_INSTANCE_MEMORY: str(int(info.get("MemoryInfo", {}).get("SizeInMiB", 0))),
    }
    if generation:
        labels[LABEL_INSTANCE_GENERATION] = generation
    if info.get("Hypervisor"):
        labels[LABEL_INSTANCE_HYPERVISOR] = str(info["Hypervisor"])
    gpus = info.get("GpuInfo", {}).get("Gpus", [])
    if gpus:
        labels[LABEL_INSTANCE_GPU_COUNT] = str(sum(int(g.get("Count", 0)) for g in gpus))
        labels[LABEL_INSTANCE_GPU_NAME] = str(gpus[0].get("Name", "")).lower().replace(" ", "-")
        labels[LABEL_INSTANCE_GPU_MANUFACTURER] = str(gpus[0].get("Manufacturer", "")).lower()
    storage = info.get("InstanceStorageInfo", {})
    if storage.get("NvmeSupport") in ("required", "supported") and storage.get("TotalSizeInGB"):
        labels[LABEL_INSTANCE_LOCAL_NVME] = str(int(storage["TotalSizeInGB"]))
    return tuple(sorted(labels.items()))


# --------------------------------------------------------------------------- prices
def estimate_price(info: Mapping[str, Any], capacity_type: str) -> float:
    """A rough USD-per-hour price from vCPU, memory, GPUs and architecture, for when no source answers.

    Calibrated on us-east-1 on-demand list prices of general-purpose x86 types
    (m5.large 0.096, r5.large 0.126, c5.large 0.085): 0.033 per vCPU + 0.00375 per GiB; Graviton
    (arm64) x 0.8; + 0.025 per GiB of GPU memory; + 0.10 per Neuron device. Spot is
    ``SPOT_ESTIMATE_FRACTION`` of that. Deterministic; good enough to order types, never billing.
    """
    vcpus = int(info.get("VCpuInfo", {}).get("DefaultVCpus", 0))
    mem_gib = int(info.get("MemoryInfo", {}).get("SizeInMiB", 0)) / 1024.0
    price = 0.033 * vcpus + 0.00375 * mem_gib
    if arch_of(info) == "arm64":
        price *= 0.8
    gpu_mem_mib = int(info.get("GpuInfo", {}).get("TotalGpuMemoryInMiB", 0))
    price += 0.025 * gpu_mem_mib / 1024.0
    price += 0.10 * gpus_of(info).get(AWS_NEURON, 0)
    if capacity_type == wk.CAPACITY_TYPE_SPOT:
        price *= SPOT_ESTIMATE_FRACTION
    return round(price, 6)


def _is_real_price(value: float | None) -> bool:
    return value is not None and math.isfinite(value) and value > PLACEHOLDER_PRICE_USD


@dataclass(frozen=True)
class PriceBook:
    """Known prices of one region, USD per hour.

    ``on_demand`` maps instance type -> price; ``spot`` maps instance type -> zone -> price,
    where zone ``"*"`` means "any zone of the region" (a pricing file without zones).
    ``source`` says where they came from (for logs). Placeholder prices (at or below
    :data:`PLACEHOLDER_PRICE_USD`) are ignored on lookup. Unknown prices are estimated by
    :meth:`price`, and the first estimate is logged as a warning once per book.
    """

    region: str = ""
    on_demand: Mapping[str, float] = field(default_factory=dict)
    spot: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    source: str = "none"
    _warned: set[str] = field(default_factory=set, compare=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, compare=False, repr=False)

    def on_demand_price(self, instance_type: str) -> float | None:
        """The known on-demand price, or None."""
        value = self.on_demand.get(instance_type)
        return value if _is_real_price(value) else None

    def spot_price(self, instance_type: str, zone: str) -> float | None:
        """The known spot price in ``zone`` (or region-wide ``"*"``), or None."""
        zones = self.spot.get(instance_type, {})
        value = zones.get(zone, zones.get("*"))
        return value if _is_real_price(value) else None

    def price(self, info: Mapping[str, Any], zone: str, capacity_type: str) -> float:
        """Price of an offering: the known one, else (spot) a share of on-demand, else an estimate."""
        name = str(info["InstanceType"])
        if capacity_type == wk.CAPACITY_TYPE_SPOT:
            known = self.spot_price(name, zone)
            if known is not None:
                return known
            on_demand = self.on_demand_price(name)
            if on_demand is not None:
                return round(on_demand * SPOT_ESTIMATE_FRACTION, 6)
        else:
            known = self.on_demand_price(name)
            if known is not None:
                return known
        self._warn_once(name, capacity_type)
        return estimate_price(info, capacity_type)

    def _warn_once(self, name: str, capacity_type: str) -> None:
        with self._lock:
            if self._warned:
                self._warned.add(f"{capacity_type}/{name}")
                return
            self._warned.add(f"{capacity_type}/{name}")
        log.warning(
            "No %s price known for %s in %s (prices from %s); estimating prices from vCPU, memory, GPU "
            "and architecture for this and any other unpriced instance type",
            capacity_type,
            name,
            self.region or "this region",
            self.source,
        )

    def estimated(self) -> tuple[str, ...]:
        """``capacity-type/instance-type`` pairs priced by estimate so far, sorted."""
        with self._lock:
            return tuple(sorted(self._warned))

    def merged(self, overrides: PriceBook) -> PriceBook:
        """A new book with ``overrides`` winning wherever it has a price."""
        spot: dict[str, dict[str, float]] = {k: dict(v) for k, v in self.spot.items()}
        for name, zones in overrides.spot.items():
            if "*" in zones:
                spot[name] = dict(zones)
            else:
                spot.setdefault(name, {}).update(zones)
        return PriceBook(
            region=self.region or overrides.region,
            on_demand={**self.on_demand, **overrides.on_demand},
            spot=spot,
            source=f"{overrides.source} over {self.source}" if self.source != "none" else overrides.source,
            _warned=self._warned,  # a refreshed book does not warn again about the same estimates
            _lock=self._lock,
        )


class PricingFileError(ValueError):
    """A pricing file that is not ``{region: {type: usd}}`` or ``{region: {"on-demand"|"spot": ...}}``."""


def _prices(value: Any, where: str) -> dict[str, float]:
    if not isinstance(value, Mapping):
        raise PricingFileError(f"{where}: expected an object of instance type -> USD per hour")
    result: dict[str, float] = {}
    for name, price in value.items():
        if isinstance(price, bool) or not isinstance(price, int | float | str):
            raise PricingFileError(f"{where}.{name}: expected a number (USD per hour), got {price!r}")
        try:
            result[str(name)] = float(price)
        except ValueError as error:
            raise PricingFileError(
                f"{where}.{name}: expected a number (USD per hour), got {price!r}"
            ) from error
    return result


def parse_pricing(document: Mapping[str, Any], region: str, source: str = "pricing file") -> PriceBook:
    """The :class:`PriceBook` of ``region`` from a pricing document.

    Accepted shapes (USD per hour): ``{region: {type: price}}`` (on-demand only), or
    ``{region: {"on-demand": {type: price}, "spot": {type: price | {zone: price}}}}``.
    A region missing from the document gives an empty book. Raises PricingFileError.
    """
    if not isinstance(document, Mapping):
        raise PricingFileError("expected an object of region -> prices")
    section = document.get(region)
    if section is None:
        return PriceBook(region=region, source=source)
    if not isinstance(section, Mapping):
        raise PricingFileError(f"{region}: expected an object")
    if "on-demand" in section or "spot" in section:
        on_demand = _prices(section.get("on-demand", {}), f"{region}.on-demand")
        spot: dict[str, dict[str, float]] = {}
        raw_spot = section.get("spot", {})
        if not isinstance(raw_spot, Mapping):
            raise PricingFileError(f"{region}.spot: expected an object")
        for name, value in raw_spot.items():
            if isinstance(value, Mapping):
                spot[str(name)] = _prices(value, f"{region}.spot.{name}")
            else:
                spot[str(name)] = {"*": _prices({"*": value}, f"{region}.spot.{name}")["*"]}
        return PriceBook(region=region, on_demand=on_demand, spot=spot, source=source)
    return PriceBook(region=region, on_demand=_prices(section, region), source=source)


def load_pricing_file(path: str | Path, region: str) -> PriceBook:
    """Read a ``--pricing-file`` (JSON, see :func:`parse_pricing`) for ``region``.

    Raises OSError when unreadable, PricingFileError when malformed.
    """
    text = Path(path).read_text(encoding="utf-8")
    try:
        document = json.loads(text)
    except json.JSONDecodeError as error:
        raise PricingFileError(f"{path}: not JSON: {error}") from error
    return parse_pricing(document, region, source=f"pricing file {path}")


#: The region whose table stands in for regions the static table lacks.
STATIC_PROXY_REGION = "us-east-1"


def static_price_book(region: str) -> PriceBook:
    """On-demand list prices shipped with Groupless (``data/on-demand-prices.json``) for ``region``.

    The fallback when the Pricing API is unreachable (air-gapped clusters, moto). A region the
    table lacks gets us-east-1's prices, labelled as a proxy in ``source``: regional prices
    differ by a roughly uniform factor, so the order of types (all the solver uses) holds.
    """
    resource = importlib_resources.files("provisioner.cloudprovider.aws").joinpath(
        "data/on-demand-prices.json"
    )
    document = {
        k: v for k, v in json.loads(resource.read_text(encoding="utf-8")).items() if not k.startswith("_")
    }
    if region in document:
        return parse_pricing(document, region, "static table")
    proxy = parse_pricing(document, STATIC_PROXY_REGION, f"static table ({STATIC_PROXY_REGION} as proxy)")
    return PriceBook(region=region, on_demand=proxy.on_demand, spot={}, source=proxy.source)


# --------------------------------------------------------------------------- conversion
def instance_type_from_ec2(
    info: Mapping[str, Any],
    zones: Iterable[str],
    prices: PriceBook,
    config: NodeConfiguration,
    unavailable: frozenset[tuple[str, str, str]] | set[tuple[str, str, str]] = frozenset(),
) -> InstanceType | None:
    """One :class:`InstanceType` offered in ``zones``; None when unsupported or without zones.

    Offerings are ``zones x SupportedUsageClasses (on-demand, spot)``, sorted by capacity type
    then zone; an offering in ``unavailable`` ((type, zone, capacity type) triples, the ICE
    cache) is kept with ``available=False``.
    """
    if not is_supported(info):
        return None
    name = str(info["InstanceType"])
    arch = arch_of(info)
    assert arch is not None  # is_supported checked it
    usage = [c for c in info.get("SupportedUsageClasses", ["on-demand"]) if c in ("on-demand", "spot")]
    offerings = tuple(
        Offering(
            zone=zone,
            capacity_type=capacity_type,
            price=prices.price(info, zone, capacity_type),
            available=(name, zone, capacity_type) not in unavailable,
        )
        for capacity_type in sorted(usage)
        for zone in sorted(set(zones))
    )
    if not offerings:
        return None
    capacity = capacity_of(info, config)
    return InstanceType(
        name=name,
        arch=arch,
        capacity=capacity,
        overhead=overhead_of(info, capacity, config),
        offerings=offerings,
        os="linux",
        labels=shape_labels(info),
    )


def instance_types_from_ec2(
    describe_instance_types: Iterable[Mapping[str, Any]],
    offerings: Iterable[Mapping[str, Any]],
    prices: PriceBook | None = None,
    config: NodeConfiguration | None = None,
    zones: set[str] | frozenset[str] | None = None,
    unavailable: frozenset[tuple[str, str, str]] | set[tuple[str, str, str]] = frozenset(),
) -> list[InstanceType]:
    """Every supported type of EC2's answers as the solver's instance types, sorted by name.

    ``describe_instance_types``: ``DescribeInstanceTypes`` ``InstanceTypes`` items.
    ``offerings``: ``DescribeInstanceTypeOfferings`` items with ``LocationType``
    ``availability-zone`` (``{"InstanceType", "Location", "LocationType"}``); items of another
    location type are ignored. ``config``: the nodes' configuration (default: a Provisioner
    without ``kubeletConfiguration`` or disks, AL2023). ``zones``: keep only these zones (the
    Provisioner's subnets'), None keeps all. ``prices``: a :class:`PriceBook` (None: estimates
    only). ``unavailable``: (type, zone, capacity type) triples marked ``available=False``.
    Types the AMI family has no image for are kept: :func:`instance_types_for` drops them.
    Raises QuantityError when a kubelet quantity is malformed.
    """
    book = prices if prices is not None else PriceBook(source="estimates")
    node = config if config is not None else NodeConfiguration()
    zones_by_type: dict[str, set[str]] = {}
    for item in offerings:
        if item.get("LocationType", "availability-zone") != "availability-zone":
            continue
        zone = str(item["Location"])
        if zones is not None and zone not in zones:
            continue
        zones_by_type.setdefault(str(item["InstanceType"]), set()).add(zone)
    result: list[InstanceType] = []
    for info in describe_instance_types:
        name = str(info.get("InstanceType", ""))
        type_zones = zones_by_type.get(name)
        if not type_zones:
            continue
        instance_type = instance_type_from_ec2(info, type_zones, book, node, unavailable)
        if instance_type is not None:
            result.append(instance_type)
    result.sort(key=lambda t: t.name)
    return result


class OfferedInstanceTypes(NamedTuple):
    """A Provisioner's instance types: those offered to it, and those its ``amiFamily`` cannot boot.

    ``offered`` sorted by name; ``missing_images`` grouped by architecture and accelerator.
    """

    offered: list[InstanceType]
    missing_images: tuple[MissingImage, ...]


def instance_types_for(
    config: NodeConfiguration,
    describe_instance_types: Iterable[Mapping[str, Any]],
    offerings: Iterable[Mapping[str, Any]],
    prices: PriceBook | None = None,
    zones: set[str] | frozenset[str] | None = None,
    unavailable: frozenset[tuple[str, str, str]] | set[tuple[str, str, str]] = frozenset(),
) -> OfferedInstanceTypes:
    """The instance types of a Provisioner whose nodes are ``config`` (:meth:`NodeConfiguration.of`).

    The one conversion ``groupless plan``, the AWS provider and the kwok provider share:
    :func:`instance_types_from_ec2` under ``config`` (disks, kubelet, ENI-limited pods, the AMI
    family's reservations), then only the types the AMI family has an image for
    (:func:`~provisioner.cloudprovider.aws.amifamily.offered_instance_types`; all of them
    with a launch template). Raises QuantityError (a ValueError) when a kubelet quantity is malformed.
    """
    converted = instance_types_from_ec2(describe_instance_types, offerings, prices, config, zones, unavailable)
    return OfferedInstanceTypes(*offered_instance_types(config.ami_family, config.launch_template, converted))



class LatestConversions:
    """The latest :class:`OfferedInstanceTypes` per key (a :class:`NodeConfiguration`, and zones), thread-safe.

    A provider converts its catalog again whenever an input changes (a catalog refresh, a new
    :class:`PriceBook` after each spot-price refresh, an offering marked unavailable); only the
    conversion for the current inputs is kept, replacing the one before (a ~750-type catalog
    converts to ~3 MiB, and past answers are never asked for again). Inputs are compared by
    identity first, then by equality. At most ``limit`` keys are held (then all are dropped).
    """

    def __init__(self, limit: int = 64) -> None:
        self._limit = limit
        self._latest: dict[Hashable, tuple[tuple[Any, ...], OfferedInstanceTypes]] = {}
        self._lock = threading.Lock()

    def get(
        self, key: Hashable, inputs: tuple[Any, ...], convert: Callable[[], OfferedInstanceTypes]
    ) -> OfferedInstanceTypes:
        """The conversion for ``key`` under ``inputs``: the kept one if its inputs are these, else ``convert()``."""
        with self._lock:
            entry = self._latest.get(key)
        if entry is not None and _same_inputs(entry[0], inputs):
            return entry[1]
        converted = convert()
        with self._lock:
            if key not in self._latest and len(self._latest) >= self._limit:
                self._latest.clear()
            self._latest[key] = (inputs, converted)
        return converted

    def __len__(self) -> int:
        with self._lock:
            return len(self._latest)


def _same_inputs(kept: tuple[Any, ...], inputs: tuple[Any, ...]) -> bool:
    return len(kept) == len(inputs) and all(a is b or a == b for a, b in zip(kept, inputs, strict=True))

__all__ = [
    "CATALOG_FIELDS",
    "DEFAULT_MAX_PODS",
    "LatestConversions",
    "NodeConfiguration",
    "OfferedInstanceTypes",
    "PLACEHOLDER_PRICE_USD",
    "PriceBook",
    "PricingFileError",
    "QuantityError",
    "arch_of",
    "capacity_of",
    "catalog_fields",
    "eni_limited_pods",
    "estimate_price",
    "gpus_of",
    "instance_type_from_ec2",
    "instance_types_for",
    "instance_types_from_ec2",
    "is_supported",
    "kube_reserved_cpu_milli",
    "load_pricing_file",
    "max_pods",
    "offering_fields",
    "overhead_of",
    "parse_pricing",
    "shape_labels",
    "static_price_book",
]
