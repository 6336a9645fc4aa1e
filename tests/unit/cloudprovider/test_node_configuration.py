"""Each Provisioner knob of the one instance-type conversion, with exact capacity and allocatable.

m5.large throughout (2 vCPUs, 8192 MiB, 3 ENIs x 10 IPv4: 29 ENI-limited pods). Without any
knob (AL2023): capacity 2000m / 7577 MiB / 29 pods / 20 GiB; overhead cpu 100m + 70m, memory
(11 x 29 + 255) + 100 + 100 = 774 MiB, ephemeral-storage 1 GiB + 10% of 20 GiB; allocatable
1830m / 6803 MiB / 17 GiB.
"""

from __future__ import annotations

import pytest

from provisioner.api.defaults import default_provisioner
from provisioner.api.schemas import load_provisioner
from provisioner.api.types import EBS, AWSProvider, BlockDeviceMapping, KubeletConfiguration
from provisioner.api.validation import validate_provisioner
from provisioner.cloudprovider.aws.amifamily import ephemeral_block_device, ephemeral_storage_gib
from provisioner.cloudprovider.aws.catalog import NodeConfiguration, instance_types_for
from provisioner.cloudprovider.aws.userdata import al2023, bootstrap_sh, bottlerocket, make_bootstrap
from provisioner.model.resources import GIB, MIB

M5_LARGE = {
    "InstanceType": "m5.large",
    "SupportedUsageClasses": ["on-demand", "spot"],
    "ProcessorInfo": {"SupportedArchitectures": ["x86_64"]},
    "VCpuInfo": {"DefaultVCpus": 2},
    "MemoryInfo": {"SizeInMiB": 8192},
    "NetworkInfo": {"MaximumNetworkInterfaces": 3, "Ipv4AddressesPerInterface": 10},
}
G5G_XLARGE = {
    "InstanceType": "g5g.xlarge",
    "SupportedUsageClasses": ["on-demand"],
    "ProcessorInfo": {"SupportedArchitectures": ["arm64"]},
    "VCpuInfo": {"DefaultVCpus": 4},
    "MemoryInfo": {"SizeInMiB": 8192},
    "GpuInfo": {"Gpus": [{"Name": "T4g", "Manufacturer": "NVIDIA", "Count": 1}]},
    "NetworkInfo": {"MaximumNetworkInterfaces": 4, "Ipv4AddressesPerInterface": 15},
}
OFFERINGS = [{"InstanceType": n, "Location": "ap-south-1a", "LocationType": "availability-zone"}
             for n in ("m5.large", "g5g.xlarge")]


def m5(**config):
    (it,) = [t for t in instance_types_for(NodeConfiguration(**config), [M5_LARGE], OFFERINGS).offered]
    return it


def allocatable(it):
    """(milli-CPU, MiB, pods, GiB of ephemeral storage) a node of ``it`` offers pods."""
    a = it.allocatable
    return a["cpu"], a["memory"] / MIB, a["pods"], a["ephemeral-storage"] / GIB


def test_no_knob():
    it = m5()
    assert (it.capacity["cpu"], it.capacity["memory"] // MIB, it.capacity["pods"]) == (2000, 7577, 29)
    assert allocatable(it) == (1830, 6803, 29, 17.0)


@pytest.mark.parametrize(("family", "mappings", "gib"), [
    ("AL2023", [("/dev/xvda", "100Gi")], 100),
    ("AL2", [("/dev/xvda", "100G")], 94),  # EBS sizes in whole GiB: 100e9 bytes round up to 94 GiB
    ("Ubuntu", [("/dev/sda1", "50Gi")], 50),
    ("Ubuntu", [("/dev/xvda", "100Gi")], 20),  # not Ubuntu's root device: the default
    ("Bottlerocket", [("/dev/xvda", "4Gi"), ("/dev/xvdb", "60Gi")], 60),  # the data volume
    ("Bottlerocket", [("/dev/xvda", "100Gi")], 20),  # the OS volume holds no pod storage
    ("Bottlerocket", [], 20),
])
def test_block_device_mappings_size_ephemeral_storage(family, mappings, gib):
    provider = AWSProvider(ami_family=family, block_device_mappings=tuple(
        BlockDeviceMapping(device, EBS(volume_size=size)) for device, size in mappings) or None)
    assert ephemeral_storage_gib(provider, family) == gib
    it = m5(ami_family=family, ephemeral_storage_gib=gib)
    assert it.capacity["ephemeral-storage"] == gib * GIB
    # 1 GiB kube-reserved and the 10% nodefs.available threshold (rounded up to a byte)
    assert it.allocatable["ephemeral-storage"] == gib * GIB - GIB - -(-gib * GIB // 10)


def test_the_ephemeral_device_of_each_family():
    assert [ephemeral_block_device(f) for f in ("AL2023", "AL2", "Ubuntu", "Bottlerocket")] == [
        "/dev/xvda", "/dev/xvda", "/dev/sda1", "/dev/xvdb"]


def test_max_pods_keeps_the_eni_limited_memory_reservation_except_on_bottlerocket():
    kubelet = KubeletConfiguration(max_pods=10)
    assert allocatable(m5(kubelet=kubelet)) == (1830, 6803, 10, 17.0)
    # Bottlerocket: 11 x 10 + 255 + 200 = 565 MiB
    assert allocatable(m5(kubelet=kubelet, ami_family="Bottlerocket")) == (1830, 7577 - 565, 10, 17.0)


def test_pods_per_core_caps_pods_except_on_bottlerocket():
    assert m5(kubelet=KubeletConfiguration(pods_per_core=4)).capacity["pods"] == 8
    assert m5(kubelet=KubeletConfiguration(pods_per_core=20)).capacity["pods"] == 29
    assert m5(kubelet=KubeletConfiguration(pods_per_core=0)).capacity["pods"] == 29
    assert m5(kubelet=KubeletConfiguration(max_pods=5, pods_per_core=4)).capacity["pods"] == 5
    assert m5(kubelet=KubeletConfiguration(pods_per_core=4), ami_family="Bottlerocket").capacity["pods"] == 29
    # memory stays reserved for the 29 ENI-limited pods
    assert allocatable(m5(kubelet=KubeletConfiguration(pods_per_core=4))) == (1830, 6803, 8, 17.0)


def test_eni_limited_pod_density_off():
    assert allocatable(m5(eni_limited_pod_density=False)) == (1830, 6803, 110, 17.0)
    # Bottlerocket: 11 x 110 + 255 + 200 = 1665 MiB
    assert allocatable(m5(eni_limited_pod_density=False, ami_family="Bottlerocket")) == (1830, 5912, 110, 17.0)


def test_kube_reserved():
    kubelet = KubeletConfiguration(kube_reserved=(("cpu", "500m"), ("memory", "1Gi"), ("ephemeral-storage", "3Gi")))
    # cpu 2000 - 500 - 100; memory 7577 - 1024 - 100 - 100; storage 20 - 3 - 2
    assert allocatable(m5(kubelet=kubelet)) == (1400, 6353, 29, 15.0)


def test_system_reserved():
    kubelet = KubeletConfiguration(system_reserved=(("cpu", "300m"), ("memory", "300Mi")))
    # cpu 2000 - 70 - 300; memory 7577 - 574 - 300 - 100
    assert allocatable(m5(kubelet=kubelet)) == (1630, 6603, 29, 17.0)


def test_eviction_hard():
    kubelet = KubeletConfiguration(eviction_hard=(("memory.available", "500Mi"), ("nodefs.available", "15%")))
    # memory 7577 - 674 - 500; storage 20 - 1 - 3
    assert allocatable(m5(kubelet=kubelet)) == (1830, 6403, 29, 16.0)
    disabled = KubeletConfiguration(eviction_hard=(("nodefs.available", "100%"),))  # 100% disables it
    assert allocatable(m5(kubelet=disabled)) == (1830, 6803, 29, 19.0)
    percent = KubeletConfiguration(eviction_hard=(("memory.available", "10%"),))
    assert m5(kubelet=percent).overhead["memory"] == 674 * MIB + -(-7577 * MIB // 10)


def test_images_of_the_family_decide_what_is_offered():
    offered, missing = instance_types_for(NodeConfiguration(ami_family="AL2"), [M5_LARGE, G5G_XLARGE], OFFERINGS)
    assert [t.name for t in offered] == ["m5.large"]
    assert [str(m) for m in missing] == ["1 instance type(s) have no AL2 image for arm64 with NVIDIA GPUs: g5g.xlarge"]
    every = instance_types_for(NodeConfiguration(ami_family="AL2", launch_template=True), [M5_LARGE, G5G_XLARGE],
                               OFFERINGS)
    assert [t.name for t in every.offered] == ["g5g.xlarge", "m5.large"] and every.missing_images == ()


def test_the_configuration_of_a_provisioner():
    document = {
        "apiVersion": "karpenter.sh/v1alpha5", "kind": "Provisioner", "metadata": {"name": "br"},
        "spec": {
            "kubeletConfiguration": {"podsPerCore": 4, "maxPods": 50},
            "provider": {"subnetSelector": {"a": "*"}, "securityGroupSelector": {"a": "*"},
                         "amiFamily": "Bottlerocket",
                         "blockDeviceMappings": [{"deviceName": "/dev/xvdb", "ebs": {"volumeSize": "80Gi"}}]},
        },
    }
    provisioner = load_provisioner(default_provisioner(document))
    config = NodeConfiguration.of(provisioner, eni_limited_pod_density=False)
    assert config == NodeConfiguration(ami_family="Bottlerocket", kubelet=KubeletConfiguration(max_pods=50, pods_per_core=4),
                                       ephemeral_storage_gib=80, eni_limited_pod_density=False)
    assert config.kubelet_max_pods() == 50
    assert NodeConfiguration(eni_limited_pod_density=False).kubelet_max_pods() == 110
    assert NodeConfiguration().kubelet_max_pods() is None  # the AMI computes the ENI-limited count


def test_pods_per_core_is_validated_and_reaches_the_kubelet():
    bad = {"apiVersion": "karpenter.sh/v1alpha5", "kind": "Provisioner", "metadata": {"name": "x"},
           "spec": {"kubeletConfiguration": {"podsPerCore": -1},
                    "provider": {"subnetSelector": {"a": "*"}, "securityGroupSelector": {"a": "*"}}}}
    result = validate_provisioner(default_provisioner(bad))
    assert [str(e) for e in result.errors] == ["spec.kubeletConfiguration.podsPerCore: invalid value -1: cannot be negative"]
    b = make_bootstrap("c", "https://k", "Q0E=", "10.100.0.0/16", {}, [], kubelet=KubeletConfiguration(pods_per_core=4))
    assert "podsPerCore: 4" in al2023(b)
    assert "--pods-per-core=4" in bootstrap_sh(b)
    assert "pods-per-core" not in bottlerocket(b)
