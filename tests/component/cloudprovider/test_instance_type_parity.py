"""``groupless plan``, the AWS provider and the kwok provider derive identical instance types.

One Provisioner (written as YAML and read the way ``groupless plan`` reads it: webhook defaults
and validation) with ``blockDeviceMappings`` and every ``kubeletConfiguration`` knob, for each
``amiFamily`` and both settings of ENI-limited pod density, over the same catalog (the kwok
provider's shipped DescribeInstanceTypes, offerings and prices):

- ``groupless plan``: :func:`provisioner.plan.read_catalog` with ``--instance-types``,
  ``--offerings``, ``--pricing-file`` and ``--eni-limited-pod-density``;
- the AWS provider: :class:`AWSCloudProvider` over an EC2 client that answers
  DescribeInstanceTypes, DescribeInstanceTypeOfferings and DescribeSubnets with the same
  catalog (subnets in every zone of it), ``pricing_file`` the same prices;
- the kwok provider: :class:`KwokCloudProvider` over its default catalog.

Every instance type must be equal in all three: name, capacity, overhead (hence allocatable),
offerings and prices, labels.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from provisioner import plan
from provisioner.api.types import Provisioner
from provisioner.clock import FakeClock
from provisioner.cloudprovider.aws.amifamily import AMI_FAMILIES
from provisioner.cloudprovider.aws.provider import AWSCloudProvider
from provisioner.cloudprovider.aws.settings import AWSSettings
from provisioner.cloudprovider.kwok import (
    DEFAULT_INSTANCE_TYPES,
    DEFAULT_OFFERINGS,
    DEFAULT_PRICES,
    KwokCloudProvider,
    load_catalog,
)
from provisioner.kube.fake import FakeKubeAPI
from provisioner.model.resources import EPHEMERAL_STORAGE, GIB, MIB, PODS
from provisioner.scheduling.instancetypes import InstanceType

SELECTOR = {"kubernetes.io/cluster/karpenter-demo": "*"}
#: One mapping per device any family reads: each family takes its own (AL2/AL2023 /dev/xvda,
#: Ubuntu /dev/sda1, Bottlerocket /dev/xvdb), so each family's ephemeral storage differs.
BLOCK_DEVICES = [
    {"deviceName": "/dev/xvda", "ebs": {"volumeSize": "60Gi", "volumeType": "gp3"}},
    {"deviceName": "/dev/xvdb", "ebs": {"volumeSize": "80Gi", "volumeType": "gp3"}},
    {"deviceName": "/dev/sda1", "ebs": {"volumeSize": "70Gi", "volumeType": "gp3"}},
]
EPHEMERAL_GIB = {"AL2023": 60, "AL2": 60, "Bottlerocket": 80, "Ubuntu": 70}
KUBELET = {
    "maxPods": 40,
    "podsPerCore": 6,
    "kubeReserved": {"cpu": "150m", "memory": "600Mi"},
    "systemReserved": {"cpu": "120m", "memory": "150Mi"},
    "evictionHard": {"memory.available": "5%", "nodefs.available": "15%"},
}


#: Pod settings alone: the default reservations, where the families' kube-reserved memory differs.
PODS_ONLY = {"maxPods": 40, "podsPerCore": 6}


def provisioner_document(family: str, kubelet: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.sh/v1alpha5",
        "kind": "Provisioner",
        "metadata": {"name": f"p-{family.lower()}"},
        "spec": {
            "kubeletConfiguration": dict(kubelet),
            "provider": {
                "subnetSelector": SELECTOR,
                "securityGroupSelector": SELECTOR,
                "amiFamily": family,
                "blockDeviceMappings": BLOCK_DEVICES,
            },
        },
    }


class _Pages:
    """One operation's answer; ``InstanceTypes=[...]`` selects those types, as DescribeInstanceTypes does."""

    def __init__(self, pages: list[dict[str, Any]], requests: list[dict[str, Any]]) -> None:
        self.pages = pages
        self.requests = requests

    def paginate(self, **kwargs: Any) -> Iterator[dict[str, Any]]:
        self.requests.append(kwargs)
        names = kwargs.get("InstanceTypes")
        for page in self.pages:
            if names is None:
                yield page
            else:
                yield {"InstanceTypes": [t for t in page["InstanceTypes"] if t["InstanceType"] in names]}


class CatalogEC2:
    """An EC2 client answering the three reads of ``get_instance_types`` from a saved catalog."""

    def __init__(self, types: list[dict[str, Any]], offerings: list[dict[str, Any]]) -> None:
        zones = sorted({o["Location"] for o in offerings})
        subnets = [{"SubnetId": f"subnet-{i}", "AvailabilityZone": z, "AvailableIpAddressCount": 100}
                   for i, z in enumerate(zones)]
        self.answers = {
            "describe_instance_types": [{"InstanceTypes": types}],
            "describe_instance_type_offerings": [{"InstanceTypeOfferings": offerings}],
            "describe_subnets": [{"Subnets": subnets}],
        }
        self.requests: dict[str, list[dict[str, Any]]] = {operation: [] for operation in self.answers}

    def get_paginator(self, operation: str) -> _Pages:
        return _Pages(self.answers[operation], self.requests[operation])


def read_provisioner(tmp_path: Path, family: str, kubelet: Mapping[str, Any] = KUBELET) -> Provisioner:
    path = tmp_path / f"{family}.yaml"
    path.write_text(yaml.safe_dump(provisioner_document(family, kubelet)))
    (provisioner,) = plan.read_inputs([str(path)]).provisioners
    return provisioner


def planned(provisioner: Provisioner, eni_limited_pod_density: bool) -> list[InstanceType]:
    args = argparse.Namespace(
        instance_types=str(DEFAULT_INSTANCE_TYPES), offerings=str(DEFAULT_OFFERINGS),
        pricing_file=str(DEFAULT_PRICES), region=None, aws_endpoint_url=None,
        eni_limited_pod_density=eni_limited_pod_density)
    return plan.read_catalog(args, [provisioner], []).instance_types[provisioner.name]


def on_aws(provisioner: Provisioner, eni_limited_pod_density: bool) -> list[InstanceType]:
    types = json.loads(DEFAULT_INSTANCE_TYPES.read_text())["InstanceTypes"]
    offerings = json.loads(DEFAULT_OFFERINGS.read_text())["InstanceTypeOfferings"]
    settings = AWSSettings(cluster_name="karpenter-demo", region="ap-south-1", pricing_api=False,
                           pricing_file=str(DEFAULT_PRICES), eni_limited_pod_density=eni_limited_pod_density)
    provider = AWSCloudProvider(settings, CatalogEC2(types, offerings), None, None, FakeClock())
    return provider.get_instance_types(provisioner)


def on_kwok(provisioner: Provisioner, eni_limited_pod_density: bool) -> list[InstanceType]:
    provider = KwokCloudProvider(FakeKubeAPI(), load_catalog(), FakeClock(),
                                 eni_limited_pod_density=eni_limited_pod_density)
    return provider.get_instance_types(provisioner)


def by_name(types: list[InstanceType]) -> Mapping[str, InstanceType]:
    return {t.name: t for t in types}


@pytest.mark.parametrize("kubelet", [KUBELET, PODS_ONLY], ids=["every-knob", "pods-only"])
@pytest.mark.parametrize("eni_limited_pod_density", [True, False], ids=["eni-limited", "110-pods"])
@pytest.mark.parametrize("family", AMI_FAMILIES)
def test_plan_aws_and_kwok_derive_identical_instance_types(tmp_path, family, eni_limited_pod_density, kubelet):
    provisioner = read_provisioner(tmp_path, family, kubelet)
    from_plan = planned(provisioner, eni_limited_pod_density)
    from_aws = on_aws(provisioner, eni_limited_pod_density)
    from_kwok = on_kwok(provisioner, eni_limited_pod_density)

    assert len(from_plan) > 30
    assert [t.name for t in from_aws] == [t.name for t in from_plan] == [t.name for t in from_kwok]
    for name, expected in by_name(from_plan).items():
        for other in (by_name(from_aws)[name], by_name(from_kwok)[name]):
            assert (other.capacity, other.overhead, other.allocatable) == (
                expected.capacity, expected.overhead, expected.allocatable), name
            assert other.offerings == expected.offerings and other.labels == expected.labels, name
    # the Provisioner's knobs took effect: its family's volume, maxPods capped by podsPerCore
    for t in from_plan:
        assert t.capacity[EPHEMERAL_STORAGE] == EPHEMERAL_GIB[family] * GIB
        vcpus = t.capacity["cpu"] // 1000
        expected_pods = 40 if family == "Bottlerocket" else min(40, 6 * vcpus)
        assert t.capacity[PODS] == expected_pods, t.name


def test_the_families_differ_where_karpenter_says_they_do(tmp_path):
    """Same Provisioner but the family: ephemeral storage, pods and kube-reserved memory follow the family."""
    types = {family: by_name(planned(read_provisioner(tmp_path, family), True)) for family in AMI_FAMILIES}
    m5 = {family: catalog["m5.large"] for family, catalog in types.items()}
    assert {f: t.capacity[EPHEMERAL_STORAGE] // GIB for f, t in m5.items()} == EPHEMERAL_GIB
    # m5.large: 2 vCPUs, podsPerCore 6 caps maxPods 40 at 12, except on Bottlerocket
    assert {f: t.capacity[PODS] for f, t in m5.items()} == {"AL2023": 12, "AL2": 12, "Bottlerocket": 40, "Ubuntu": 12}
    # kubeReserved memory is set explicitly, so the memory overhead is the same everywhere
    assert len({t.overhead["memory"] for t in m5.values()}) == 1
    # by default it is 11 MiB x pods + 255 MiB: the ENI-limited 29 pods of m5.large, but
    # Bottlerocket's real 40 (plus 100 MiB system-reserved and 100 MiB eviction threshold)
    defaults = {family: by_name(planned(read_provisioner(tmp_path, family, PODS_ONLY), True))["m5.large"]
                for family in AMI_FAMILIES}
    assert {f: t.overhead["memory"] // MIB for f, t in defaults.items()} == {
        "AL2023": 11 * 29 + 455, "AL2": 11 * 29 + 455, "Bottlerocket": 11 * 40 + 455, "Ubuntu": 11 * 29 + 455}


def test_the_aws_provider_describes_offered_types_by_name_and_converts_them_as_plan_does(tmp_path):
    """The provider keeps only what the conversion reads, yet derives every type ``groupless plan`` does."""
    provisioner = read_provisioner(tmp_path, "AL2023")
    types = json.loads(DEFAULT_INSTANCE_TYPES.read_text())["InstanceTypes"]
    offerings = json.loads(DEFAULT_OFFERINGS.read_text())["InstanceTypeOfferings"]
    unoffered = {**types[0], "InstanceType": "zz9.unoffered"}
    ec2 = CatalogEC2([*types, unoffered], offerings)
    settings = AWSSettings(cluster_name="karpenter-demo", region="ap-south-1", pricing_api=False,
                           pricing_file=str(DEFAULT_PRICES))
    provider = AWSCloudProvider(settings, ec2, None, None, FakeClock())

    from_aws = provider.get_instance_types(provisioner)

    offered = sorted({o["InstanceType"] for o in offerings})
    assert ec2.requests["describe_instance_types"] == [{"InstanceTypes": offered}]  # 42 names: one call
    assert sorted(t["InstanceType"] for t in provider.catalog.types) == offered
    assert from_aws == planned(provisioner, True)  # name, capacity, overhead, offerings and prices, labels
