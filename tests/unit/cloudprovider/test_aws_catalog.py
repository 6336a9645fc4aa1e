"""The pure EC2 catalog conversion: exact v0.6.3 figures, kubelet overrides, prices."""

import json
import logging

import pytest

from provisioner.api.types import KubeletConfiguration
from provisioner.cloudprovider.aws.catalog import (
    LatestConversions,
    NodeConfiguration,
    OfferedInstanceTypes,
    PriceBook,
    PricingFileError,
    catalog_fields,
    estimate_price,
    instance_types_from_ec2,
    load_pricing_file,
    offering_fields,
    static_price_book,
)
from provisioner.cloudprovider.kubelet import kube_reserved_cpu_milli
from provisioner.model.resources import GIB, MIB

R6GD_XLARGE = {
    "InstanceType": "r6gd.xlarge",
    "SupportedUsageClasses": ["on-demand", "spot"],
    "SupportedVirtualizationTypes": ["hvm"],
    "BareMetal": False,
    "Hypervisor": "nitro",
    "ProcessorInfo": {"SupportedArchitectures": ["arm64"]},
    "VCpuInfo": {"DefaultVCpus": 4},
    "MemoryInfo": {"SizeInMiB": 32768},
    "InstanceStorageInfo": {"TotalSizeInGB": 237, "NvmeSupport": "required"},
    "NetworkInfo": {"MaximumNetworkInterfaces": 4, "Ipv4AddressesPerInterface": 15},
}
M5_LARGE = {
    "InstanceType": "m5.large",
    "SupportedUsageClasses": ["on-demand", "spot"],
    "SupportedVirtualizationTypes": ["hvm"],
    "ProcessorInfo": {"SupportedArchitectures": ["i386", "x86_64"]},
    "VCpuInfo": {"DefaultVCpus": 2},
    "MemoryInfo": {"SizeInMiB": 8192},
    "NetworkInfo": {"MaximumNetworkInterfaces": 3, "Ipv4AddressesPerInterface": 10},
}
G4DN_XLARGE = {
    "InstanceType": "g4dn.xlarge",
    "SupportedUsageClasses": ["on-demand", "spot"],
    "ProcessorInfo": {"SupportedArchitectures": ["x86_64"]},
    "VCpuInfo": {"DefaultVCpus": 4},
    "MemoryInfo": {"SizeInMiB": 16384},
    "GpuInfo": {"Gpus": [{"Name": "T4", "Manufacturer": "NVIDIA", "Count": 1}], "TotalGpuMemoryInMiB": 16384},
    "NetworkInfo": {"MaximumNetworkInterfaces": 3, "Ipv4AddressesPerInterface": 10},
}
F1 = {**M5_LARGE, "InstanceType": "f1.2xlarge", "FpgaInfo": {"Fpgas": [{"Count": 1}]}}
METAL = {**M5_LARGE, "InstanceType": "m5.metal", "BareMetal": True}
ZONES = ("ap-south-1a", "ap-south-1b", "ap-south-1c")


def offerings(*names, zones=ZONES):
    return [
        {"InstanceType": n, "Location": z, "LocationType": "availability-zone"} for n in names for z in zones
    ]


def convert(zones=None, unavailable=frozenset(), prices=None, **config):
    types = [R6GD_XLARGE, M5_LARGE, G4DN_XLARGE, F1, METAL]
    names = (t["InstanceType"] for t in types)
    return {
        t.name: t
        for t in instance_types_from_ec2(types, offerings(*names), prices, NodeConfiguration(**config), zones, unavailable)
    }


def test_r6gd_xlarge_exact_capacity_and_allocatable():
    it = convert()["r6gd.xlarge"]
    assert it.arch == "arm64" and it.os == "linux"
    assert (it.capacity["cpu"], it.capacity["memory"], it.capacity["pods"]) == (4000, 30310 * MIB, 58)
    assert (it.allocatable["cpu"], it.allocatable["memory"]) == (3820, 29217 * MIB)
    assert it.capacity["ephemeral-storage"] == 20 * GIB
    assert dict(it.labels)["karpenter.k8s.aws/instance-family"] == "r6gd"
    assert dict(it.labels)["karpenter.k8s.aws/instance-local-nvme"] == "237"


def test_m5_large_exact():
    it = convert()["m5.large"]
    assert it.arch == "amd64"
    assert (it.capacity["cpu"], it.capacity["memory"], it.capacity["pods"]) == (2000, 7577 * MIB, 29)
    # 100m + 60m + 10m; 11*29+255+100+100 MiB
    assert (it.allocatable["cpu"], it.allocatable["memory"]) == (1830, (7577 - 774) * MIB)


def test_fpga_and_metal_excluded_gpu_counted():
    types = convert()
    assert sorted(types) == ["g4dn.xlarge", "m5.large", "r6gd.xlarge"]
    assert types["g4dn.xlarge"].capacity["nvidia.com/gpu"] == 1 and types["g4dn.xlarge"].has_accelerator


@pytest.mark.parametrize(("cpu", "expected"), [(1000, 60), (2000, 70), (4000, 80), (8000, 90), (96000, 310)])
def test_kube_reserved_cpu_bands(cpu, expected):
    assert kube_reserved_cpu_milli(cpu) == expected


def test_pod_density_and_kubelet_overrides():
    assert convert(eni_limited_pod_density=False)["r6gd.xlarge"].capacity["pods"] == 110
    kubelet = KubeletConfiguration(
        max_pods=20,
        system_reserved=(("cpu", "200m"), ("memory", "200Mi")),
        kube_reserved=(("cpu", "1"),),
        eviction_hard=(("memory.available", "5%"),),
    )
    it = convert(kubelet=kubelet)["r6gd.xlarge"]
    assert it.capacity["pods"] == 20
    assert it.allocatable["cpu"] == 4000 - 200 - 1000
    eviction = -(-30310 * MIB * 5 // 100)
    assert it.overhead["memory"] == (11 * 58 + 255 + 200) * MIB + eviction


def test_zones_and_unavailable_offerings():
    types = convert(zones={"ap-south-1a"}, unavailable={("m5.large", "ap-south-1a", "spot")})
    m5 = types["m5.large"]
    assert [(o.zone, o.capacity_type, o.available) for o in m5.offerings] == [
        ("ap-south-1a", "on-demand", True),
        ("ap-south-1a", "spot", False),
    ]


def test_prices_from_book_placeholders_and_estimates(caplog):
    book = PriceBook(
        region="ap-south-1",
        on_demand={"r6gd.xlarge": 0.2304, "m5.large": 0.00001},
        spot={"r6gd.xlarge": {"ap-south-1a": 0.07}},
        source="test",
    )
    with caplog.at_level(logging.WARNING):
        types = convert(prices=book)
    r6 = {(o.zone, o.capacity_type): o.price for o in types["r6gd.xlarge"].offerings}
    assert r6[("ap-south-1a", "on-demand")] == 0.2304
    assert r6[("ap-south-1a", "spot")] == 0.07
    assert r6[("ap-south-1b", "spot")] == pytest.approx(0.2304 * 0.4)
    # placeholder on-demand price ignored -> estimate
    m5 = {(o.zone, o.capacity_type): o.price for o in types["m5.large"].offerings}
    assert m5[("ap-south-1a", "on-demand")] == estimate_price(M5_LARGE, "on-demand") == pytest.approx(0.096)
    assert len([r for r in caplog.records if "estimating prices" in r.getMessage()]) == 1


def test_pricing_file_shapes(tmp_path):
    flat = tmp_path / "flat.json"
    flat.write_text(json.dumps({"ap-south-1": {"r6gd.xlarge": 0.2, "m5.large": "0.1"}}))
    book = load_pricing_file(flat, "ap-south-1")
    assert book.on_demand_price("m5.large") == 0.1 and book.spot_price("m5.large", "ap-south-1a") is None
    split = tmp_path / "split.json"
    split.write_text(
        json.dumps(
            {
                "ap-south-1": {
                    "on-demand": {"m5.large": 0.1},
                    "spot": {"m5.large": 0.03, "c5.large": {"ap-south-1b": 0.02}},
                }
            }
        )
    )
    book = load_pricing_file(split, "ap-south-1")
    assert book.spot_price("m5.large", "ap-south-1c") == 0.03
    assert (
        book.spot_price("c5.large", "ap-south-1b") == 0.02
        and book.spot_price("c5.large", "ap-south-1a") is None
    )
    assert load_pricing_file(split, "us-west-2").on_demand == {}
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"ap-south-1": {"m5.large": [1]}}))
    with pytest.raises(PricingFileError):
        load_pricing_file(bad, "ap-south-1")


def test_static_table_and_proxy():
    assert static_price_book("us-east-1").on_demand_price("m5.large") == 0.096
    proxy = static_price_book("ap-south-1")
    assert proxy.on_demand_price("r6gd.xlarge") == 0.2304 and "proxy" in proxy.source


def test_ordering_is_deterministic():
    first = list(convert())
    assert first == sorted(first)


def test_catalog_fields_keep_what_the_conversion_reads_and_convert_alike():
    """EC2's details the conversion never reads are dropped; the instance types stay the same."""
    noise = {
        "CurrentGeneration": True,
        "EbsInfo": {"EbsOptimizedSupport": "default", "EbsOptimizedInfo": {"BaselineBandwidthInMbps": 650}},
        "PlacementGroupInfo": {"SupportedStrategies": ["cluster", "partition", "spread"]},
    }
    detailed = [
        {
            **item,
            **noise,
            "ProcessorInfo": {**item["ProcessorInfo"], "SustainedClockSpeedInGhz": 3.1},
            "VCpuInfo": {**item["VCpuInfo"], "DefaultCores": 1, "ValidThreadsPerCore": [1, 2]},
            "NetworkInfo": {**item["NetworkInfo"], "NetworkCards": [{"NetworkCardIndex": 0}], "EfaSupported": False},
        }
        for item in (R6GD_XLARGE, M5_LARGE, G4DN_XLARGE, F1, METAL)
    ]
    kept = [catalog_fields(item) for item in detailed]

    assert kept[0] == R6GD_XLARGE
    assert kept[1] == M5_LARGE  # no BareMetal, Hypervisor or InstanceStorageInfo: still absent
    assert kept[2] == G4DN_XLARGE and kept[3]["FpgaInfo"] == F1["FpgaInfo"]
    names = [item["InstanceType"] for item in detailed]
    for config in (NodeConfiguration(), NodeConfiguration(ami_family="Bottlerocket", eni_limited_pod_density=False)):
        assert instance_types_from_ec2(kept, offerings(*names), None, config) == instance_types_from_ec2(
            detailed, offerings(*names), None, config
        )


def test_catalog_fields_intern_strings():
    first = catalog_fields(json.loads(json.dumps(R6GD_XLARGE)))
    second = catalog_fields(json.loads(json.dumps({**R6GD_XLARGE, "InstanceType": "r6gd.2xlarge"})))
    assert first["Hypervisor"] is second["Hypervisor"] == "nitro"
    assert first["ProcessorInfo"]["SupportedArchitectures"][0] is second["ProcessorInfo"]["SupportedArchitectures"][0]


def test_offering_fields():
    item = {"InstanceType": "m5.large", "Location": "ap-south-1a", "LocationType": "availability-zone", "X": 1}
    kept = offering_fields(json.loads(json.dumps(item)))
    assert kept == {"InstanceType": "m5.large", "Location": "ap-south-1a", "LocationType": "availability-zone"}
    assert kept["Location"] is offering_fields(json.loads(json.dumps(item)))["Location"]


def test_latest_conversions_keep_one_conversion_per_key():
    calls: list[str] = []

    def conversion(tag):
        def convert():
            calls.append(tag)
            return OfferedInstanceTypes([], ())

        return convert

    cache = LatestConversions(limit=2)
    book = PriceBook(region="ap-south-1", on_demand={"m5.large": 0.096})
    first = cache.get("a", (1.0, book), conversion("a1"))
    assert cache.get("a", (1.0, book), conversion("unused")) is first
    # an equal book (a refresh that changed nothing) is the same input
    assert cache.get("a", (1.0, PriceBook(region="ap-south-1", on_demand={"m5.large": 0.096})), conversion("x")) is first
    second = cache.get("a", (2.0, book), conversion("a2"))  # new inputs replace the kept conversion
    assert second is not first and len(cache) == 1
    assert cache.get("a", (1.0, book), conversion("a3")) is not first  # the old one is gone
    cache.get("b", (1.0, book), conversion("b1"))
    assert len(cache) == 2
    cache.get("c", (1.0, book), conversion("c1"))  # a third key over the limit drops the others
    assert len(cache) == 1
    assert calls == ["a1", "a2", "a3", "b1", "c1"]
