"""Instance types and catalogs for tests: two catalogs, each following its own figures.

Tests assert packings, prices and allocatable amounts computed from these numbers, so the two
catalogs stay separate rather than being reconciled:

* :func:`solver_catalog` (with :func:`instance_type` and :func:`solver_r6gd_xlarge`) builds the
  solver's :class:`~provisioner.scheduling.instancetypes.InstanceType` directly from a capacity
  and an allocatable per type. Its figures are the scheduling unit tests' (m5.xlarge: capacity
  4000m / 14968 MiB / 58 pods, allocatable 3820m / 13875 MiB; prices illustrative).
* :func:`fake_cloud_catalog` (with :func:`fake_cloud_r6gd_xlarge`) builds through the fake cloud
  provider's :func:`~provisioner.cloudprovider.fake.make_instance_type` with the figures the
  provisioning component tests assert (m5.xlarge: 4000m / 15300 MiB / 58 pods, 80m cpu and no
  memory reserved; on-demand prices, spot at 0.4 x).

In both, r6gd.xlarge has the AWS catalog's figures for that type (see
``provisioner/cloudprovider/aws/catalog.py``): capacity 4000m / 30310 MiB / 58 pods, allocatable
3820m / 29217 MiB, arm64, on-demand 0.2304 USD per hour in ap-south-1.

Units: cpu in milli-CPU, memory in MiB (``mem_mib``) or bytes (``memory_bytes``), prices in USD
per hour.
"""

from __future__ import annotations

from provisioner.cloudprovider.fake import make_instance_type
from provisioner.model.resources import MIB, Resources
from provisioner.scheduling.instancetypes import InstanceType, Offering

ZONES = ("ap-south-1a", "ap-south-1b", "ap-south-1c")


def instance_type(name, arch, cpu, mem_mib, pods, alloc_cpu, alloc_mem_mib, od_price, spot_price=None,
                  zones=ZONES, extra=None, labels=None):
    """An InstanceType with on-demand (and, given ``spot_price``, spot) offerings in each of ``zones``.

    ``cpu``/``alloc_cpu`` milli-CPU, ``mem_mib``/``alloc_mem_mib`` MiB; the overhead is capacity
    minus allocatable. ``extra``: more capacity (e.g. ``{"nvidia.com/gpu": 1}``), never reserved.
    ``labels``: the provider's labels of the type (``karpenter.k8s.aws/instance-*``).
    """
    offerings = [Offering(z, "on-demand", od_price) for z in zones]
    if spot_price is not None:
        offerings += [Offering(z, "spot", spot_price) for z in zones]
    capacity = Resources({"cpu": cpu, "memory": mem_mib * MIB, "pods": pods, **(extra or {})})
    overhead = Resources({"cpu": cpu - alloc_cpu, "memory": (mem_mib - alloc_mem_mib) * MIB})
    return InstanceType(name=name, arch=arch, capacity=capacity, overhead=overhead, offerings=tuple(offerings),
                        labels=tuple(sorted((labels or {}).items())))


def solver_r6gd_xlarge(spot_price=None):
    """r6gd.xlarge with the AWS catalog's figures; spot offerings only when ``spot_price`` is given."""
    return instance_type("r6gd.xlarge", "arm64", 4000, 30310, 58, 3820, 29217, 0.2304, spot_price)


def solver_catalog():
    """A small ap-south-1-like catalog of seven types for the solver (figures above; prices illustrative)."""
    return [
        instance_type("m5.large", "amd64", 2000, 7484, 29, 1930, 6653, 0.101, 0.035),
        instance_type("m5.xlarge", "amd64", 4000, 14968, 58, 3820, 13875, 0.202, 0.07),
        instance_type("m5.2xlarge", "amd64", 8000, 29936, 58, 7810, 28843, 0.404, 0.14),
        instance_type("c5.xlarge", "amd64", 4000, 7484, 58, 3820, 6391, 0.17, 0.06),
        instance_type("r6gd.large", "arm64", 2000, 15155, 29, 1930, 14324, 0.1152, 0.04),
        solver_r6gd_xlarge(0.08),
        instance_type("g4dn.xlarge", "amd64", 4000, 14968, 29, 3820, 13875, 0.579, 0.2,
                      extra={"nvidia.com/gpu": 1}),
    ]


def fake_cloud_r6gd_xlarge(**kw):
    """r6gd.xlarge for the fake cloud provider: the AWS figures, on-demand 0.2304 and spot 0.0691 USD/h.

    ``kw`` goes to :func:`~provisioner.cloudprovider.fake.make_instance_type` (e.g. ``unavailable``).
    """
    return make_instance_type(
        "r6gd.xlarge",
        cpu_milli=4000,
        memory_bytes=30310 * MIB,
        pods=58,
        arch="arm64",
        zones=ZONES,
        price={"on-demand": 0.2304, "spot": 0.0691},
        overhead={"cpu": 180, "memory": (30310 - 29217) * MIB},
        **kw,
    )


def fake_cloud_catalog():
    """The fake cloud provider's catalog of the provisioning component tests (figures above)."""
    return [
        fake_cloud_r6gd_xlarge(),
        make_instance_type("m5.large", 2000, 7577 * MIB, 29, zones=ZONES, price=0.101, overhead={"cpu": 70}),
        make_instance_type("m5.xlarge", 4000, 15300 * MIB, 58, zones=ZONES, price=0.202, overhead={"cpu": 80}),
        make_instance_type("m5.2xlarge", 8000, 30700 * MIB, 58, zones=ZONES, price=0.404, overhead={"cpu": 90}),
    ]
