"""Kubelet's reservations on a node, as Karpenter models them, for every cloud provider.

What a node keeps back from its capacity before pods may use it: kube-reserved (cpu in bands
of the core count, memory by pod density), system-reserved and the hard eviction thresholds.
The figures are Karpenter v0.6.3's (``pkg/cloudprovider/aws/instancetype.go``), which are the
EKS-optimised AMI's kubelet defaults; a Provisioner's ``kubeletConfiguration`` overrides them.
Units: milli-CPU and bytes.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from provisioner.api.types import KubeletConfiguration
from provisioner.model.quantity import parse_decimal, parse_quantity
from provisioner.model.resources import CPU, EPHEMERAL_STORAGE, GIB, MEMORY, MIB, Resources

SYSTEM_RESERVED_CPU_MILLI = 100
SYSTEM_RESERVED_MEMORY_BYTES = 100 * MIB
EVICTION_MEMORY_AVAILABLE_BYTES = 100 * MIB
KUBE_RESERVED_EPHEMERAL_STORAGE_BYTES = 1 * GIB
#: Share of the root volume kept free by kubelet's ``nodefs.available`` eviction threshold.
EVICTION_NODEFS_AVAILABLE_FRACTION = 0.10

#: (first milli-CPU, end milli-CPU, share reserved) bands of kube-reserved cpu.
_CPU_BANDS = ((0, 1000, 0.06), (1000, 2000, 0.01), (2000, 4000, 0.005), (4000, 1 << 31, 0.0025))


def kube_reserved_cpu_milli(cpu_milli: int) -> int:
    """Kube-reserved cpu (milli-CPU): 6% of core 1, 1% of core 2, 0.5% of cores 3-4, 0.25% beyond.

    Each band is truncated to whole milli-CPU (``int64(r*pct)`` in Karpenter v0.6.3), so
    ``kube_reserved_cpu_milli(4000) == 80`` and ``kube_reserved_cpu_milli(96000) == 310``.
    """
    total = 0
    for start, end, fraction in _CPU_BANDS:
        if cpu_milli >= start:
            span = (end - start) if cpu_milli >= end else (cpu_milli - start)
            total += int(span * fraction)
    return total


#: Kube-reserved memory per pod and per node (MiB): ``11 x pods + 255`` (the EKS AMI's formula).
KUBE_RESERVED_MEMORY_PER_POD_MIB = 11
KUBE_RESERVED_MEMORY_BASE_MIB = 255


def _quantity_map(pairs: Iterable[tuple[str, str]] | None) -> dict[str, str]:
    return dict(pairs or ())


def eviction_amount(value: str, capacity: int) -> int:
    """An eviction threshold (``100Mi`` or ``5%`` of ``capacity``) in bytes; ``100%`` disables it (0).

    Kubelet reads ``N%`` of the resource's capacity (Karpenter's ``computeEvictionSignal``).
    Raises QuantityError (a ValueError) when the value does not parse.
    """
    text = value.strip()
    if text.endswith("%"):
        percent = float(parse_decimal(text[:-1]))
        return 0 if percent == 100 else math.ceil(percent / 100.0 * capacity)
    return parse_quantity(text)


def node_overhead(capacity: Resources, reserved_pods: int, kubelet: KubeletConfiguration | None) -> Resources:
    """Kube-reserved + system-reserved + hard eviction thresholds of a node of ``capacity``.

    Defaults: kube-reserved cpu by :func:`kube_reserved_cpu_milli`, memory
    ``(11 x reserved_pods + 255) MiB`` (the cloud provider says which pod count: ENI-limited or
    the node's), ephemeral-storage 1 GiB; system-reserved 100m and 100 MiB; eviction at
    ``memory.available`` 100 MiB and ``nodefs.available`` 10% of the node's ephemeral storage.
    ``kubelet``'s ``kubeReserved``, ``systemReserved`` and ``evictionHard`` (``memory.available``,
    ``nodefs.available``) replace the matching default, resource by resource. Milli-CPU and bytes.
    Raises QuantityError (a ValueError) when a kubelet quantity does not parse.
    """
    kube_reserved: dict[str, int] = {
        CPU: kube_reserved_cpu_milli(capacity.get(CPU)),
        MEMORY: (KUBE_RESERVED_MEMORY_PER_POD_MIB * reserved_pods + KUBE_RESERVED_MEMORY_BASE_MIB) * MIB,
        EPHEMERAL_STORAGE: KUBE_RESERVED_EPHEMERAL_STORAGE_BYTES,
    }
    system_reserved: dict[str, int] = {CPU: SYSTEM_RESERVED_CPU_MILLI, MEMORY: SYSTEM_RESERVED_MEMORY_BYTES}
    eviction: dict[str, int] = {
        MEMORY: EVICTION_MEMORY_AVAILABLE_BYTES,
        EPHEMERAL_STORAGE: math.ceil(capacity.get(EPHEMERAL_STORAGE) * EVICTION_NODEFS_AVAILABLE_FRACTION),
    }
    if kubelet is not None:
        for name, value in _quantity_map(kubelet.kube_reserved).items():
            kube_reserved[name] = parse_quantity(value, name)
        for name, value in _quantity_map(kubelet.system_reserved).items():
            system_reserved[name] = parse_quantity(value, name)
        hard = _quantity_map(kubelet.eviction_hard)
        if "memory.available" in hard:
            eviction[MEMORY] = eviction_amount(hard["memory.available"], capacity.get(MEMORY))
        if "nodefs.available" in hard:
            eviction[EPHEMERAL_STORAGE] = eviction_amount(hard["nodefs.available"], capacity.get(EPHEMERAL_STORAGE))
    return Resources(kube_reserved) + Resources(system_reserved) + Resources(eviction)
