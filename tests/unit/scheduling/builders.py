"""Builders for scheduling tests: instance types, provisioners and pod manifests."""

from __future__ import annotations

from typing import Any

from provisioner.api.types import Limits, NodeSelectorRequirement, Provisioner, ProvisionerSpec, Taint
from provisioner.model.resources import MIB, Resources
from provisioner.scheduling.instancetypes import InstanceType, Offering
from provisioner.scheduling.pods import pod_from_manifest

ZONES = ("ap-south-1a", "ap-south-1b", "ap-south-1c")


def instance_type(name, arch, cpu, mem_mib, pods, alloc_cpu, alloc_mem_mib, od_price, spot_price=None,
                  zones=ZONES, extra=None):
    offerings = [Offering(z, "on-demand", od_price) for z in zones]
    if spot_price is not None:
        offerings += [Offering(z, "spot", spot_price) for z in zones]
    capacity = Resources({"cpu": cpu, "memory": mem_mib * MIB, "pods": pods, **(extra or {})})
    overhead = Resources({"cpu": cpu - alloc_cpu, "memory": (mem_mib - alloc_mem_mib) * MIB})
    return InstanceType(name=name, arch=arch, capacity=capacity, overhead=overhead, offerings=tuple(offerings))


def r6gd_xlarge(spot_price=None):
    # issue 3 numbers: capacity 4000m / 30310Mi / 58 pods, allocatable 3820m / 29217Mi, arm64
    return instance_type("r6gd.xlarge", "arm64", 4000, 30310, 58, 3820, 29217, 0.2304, spot_price)


def catalog():
    """A small ap-south-1-like catalog (prices in USD/h, illustrative)."""
    return [
        instance_type("m5.large", "amd64", 2000, 7484, 29, 1930, 6653, 0.101, 0.035),
        instance_type("m5.xlarge", "amd64", 4000, 14968, 58, 3820, 13875, 0.202, 0.07),
        instance_type("m5.2xlarge", "amd64", 8000, 29936, 58, 7810, 28843, 0.404, 0.14),
        instance_type("c5.xlarge", "amd64", 4000, 7484, 58, 3820, 6391, 0.17, 0.06),
        instance_type("r6gd.large", "arm64", 2000, 15155, 29, 1930, 14324, 0.1152, 0.04),
        r6gd_xlarge(0.08),
        instance_type("g4dn.xlarge", "amd64", 4000, 14968, 29, 3820, 13875, 0.579, 0.2,
                      extra={"nvidia.com/gpu": 1}),
    ]


def provisioner(name="default", requirements=(), labels=(), taints=(), startup_taints=(), limits=None, weight=None):
    return Provisioner(
        name=name,
        spec=ProvisionerSpec(
            requirements=tuple(NodeSelectorRequirement(k, o, tuple(v)) for k, o, v in requirements),
            labels=tuple(labels),
            taints=tuple(Taint(*t) for t in taints),
            startup_taints=tuple(Taint(*t) for t in startup_taints),
            limits=Limits(tuple(limits.items())) if limits else None,
            weight=weight,
        ),
    )


WALKTHROUGH_REQUIREMENTS = (
    ("karpenter.sh/capacity-type", "In", ("spot", "on-demand")),
    ("kubernetes.io/arch", "In", ("arm64", "amd64")),
)


def manifest(name, cpu="100m", memory=None, ns="default", labels=None, spec=None, uid=None, **extra: Any):
    requests = {"cpu": cpu}
    if memory:
        requests["memory"] = memory
    body = {"containers": [{"name": "app", "image": "x", "resources": {"requests": requests}}]}
    body.update(spec or {})
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "uid": uid or f"uid-{name}", "labels": labels or {}},
        "spec": body, **extra,
    }


def pod(name, **kw):
    return pod_from_manifest(manifest(name, **kw))
