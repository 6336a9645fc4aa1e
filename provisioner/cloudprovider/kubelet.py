"""Kubelet's reservations on a node, as Karpenter models them, for every cloud provider.

What a node keeps back from its capacity before pods may use it: kube-reserved (cpu in bands
of the core count, memory by pod density), system-reserved and the hard eviction thresholds.
The figures are Karpenter v0.6.3's (``pkg/cloudprovider/aws/instancetype.go``), which are the
EKS-optimised AMI's kubelet defaults; a Provisioner's ``kubeletConfiguration`` overrides them.
Units: milli-CPU and bytes.
"""

from __future__ import annotations

from provisioner.model.resources import GIB, MIB

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
