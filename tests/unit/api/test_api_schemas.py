"""The strict Provisioner decoder: lossless round trips and every problem named with its path and value."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from provisioner.api.schemas import ProvisionerDecodeError, dump_provisioner, format_path, load_provisioner
from provisioner.api.types import (
    EBS,
    AWSProvider,
    BlockDeviceMapping,
    Condition,
    KubeletConfiguration,
    Limits,
    MetadataOptions,
    NodeSelectorRequirement,
    Provisioner,
    ProvisionerSpec,
    ProvisionerStatus,
    Taint,
)

FULL: dict[str, Any] = {
    "apiVersion": "karpenter.sh/v1alpha5",
    "kind": "Provisioner",
    "metadata": {"name": "gpu", "uid": "u-1", "resourceVersion": "42", "labels": {"team": "ml"}},
    "spec": {
        "requirements": [
            {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["p3.2xlarge"]},
            {"key": "example.com/gpu", "operator": "Exists"},
            {"key": "example.com/gen", "operator": "Gt", "values": ["4"]},
        ],
        "labels": {"team": "ml", "example.com/tier": "gpu"},
        "taints": [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}],
        "startupTaints": [{"key": "example.com/agent", "effect": "NoExecute"}],
        "limits": {"resources": {"cpu": "1000", "memory": "1000Gi", "nvidia.com/gpu": "8"}},
        "provider": {
            "subnetSelector": {"karpenter.sh/discovery": "demo"},
            "securityGroupSelector": {"Name": "nodes-*"},
            "instanceProfile": "KarpenterNodeInstanceProfile",
            "amiFamily": "Bottlerocket",
            "tags": {"team": "ml"},
            "metadataOptions": {"httpEndpoint": "enabled", "httpProtocolIPv6": "disabled",
                                "httpPutResponseHopLimit": 2, "httpTokens": "required"},
            "blockDeviceMappings": [{"deviceName": "/dev/xvda", "ebs": {
                "volumeSize": "100Gi", "volumeType": "gp3", "iops": 3000, "throughput": 125, "encrypted": True,
                "kmsKeyID": "arn:aws:kms:us-west-2:111122223333:key/k", "deleteOnTermination": True,
                "snapshotID": "snap-1"}}],
        },
        "kubeletConfiguration": {"clusterDNS": ["10.100.0.10"], "maxPods": 110,
                                 "systemReserved": {"cpu": "100m"}, "kubeReserved": {"memory": "1Gi"},
                                 "evictionHard": {"memory.available": "5%"}},
        "ttlSecondsAfterEmpty": 30,
        "ttlSecondsUntilExpired": 2592000,
        "weight": 50,
    },
    "status": {
        "resources": {"cpu": "16", "memory": "64Gi"},
        "conditions": [{"type": "Active", "status": "True", "lastTransitionTime": "2026-11-30T10:00:00Z"}],
        "lastScaleTime": "2026-11-30T10:00:00Z",
    },
}


def test_full_object_round_trips_losslessly() -> None:
    provisioner = load_provisioner(copy.deepcopy(FULL))
    assert dump_provisioner(provisioner) == FULL
    assert load_provisioner(dump_provisioner(provisioner)) == provisioner
    assert (provisioner.name, provisioner.uid, provisioner.resource_version) == ("gpu", "u-1", "42")
    assert provisioner.spec.requirements[1] == NodeSelectorRequirement("example.com/gpu", "Exists", ())
    assert provisioner.spec.provider is not None
    assert provisioner.spec.provider.subnet_selector_map == {"karpenter.sh/discovery": "demo"}
    assert provisioner.spec.provider.block_device_mappings == (BlockDeviceMapping("/dev/xvda", EBS(
        volume_size="100Gi", volume_type="gp3", iops=3000, throughput=125, encrypted=True,
        kms_key_id="arn:aws:kms:us-west-2:111122223333:key/k", delete_on_termination=True, snapshot_id="snap-1")),)
    assert provisioner.status.conditions[0].last_transition_time == "2026-11-30T10:00:00Z"
    assert provisioner.labels_with_name == {"team": "ml", "example.com/tier": "gpu",
                                            "karpenter.sh/provisioner-name": "gpu"}


def test_numbers_as_quantities_become_their_string_form() -> None:
    obj = copy.deepcopy(FULL)
    obj["spec"]["limits"]["resources"] = {"cpu": 1000, "memory": 1.5}
    provisioner = load_provisioner(obj)
    assert provisioner.spec.limits == Limits((("cpu", "1000"), ("memory", "1.5")))


def test_every_problem_is_reported_with_its_path_and_value() -> None:
    obj = copy.deepcopy(FULL)
    obj["spec"]["weight"] = "high"
    obj["spec"]["labels"]["example.com/x"] = 5
    obj["spec"]["requirements"][0] = {"key": "a"}
    obj["spec"]["provider"]["subnetSelecter"] = {"Name": "x"}
    obj["spec"]["provider"]["metadataOptions"]["httpPutResponseHopLimit"] = True
    obj["spec"]["limits"]["resources"]["cpu"] = "1 core"
    with pytest.raises(ProvisionerDecodeError) as caught:
        load_provisioner(obj)
    assert caught.value.message.split("; ") == [
        "spec.requirements[0].operator: required field is missing",
        'spec.labels["example.com/x"]: invalid value 5: must be a string',
        'spec.limits.resources["cpu"]: invalid value "1 core": not a quantity (examples: "500m", "2", "1.5Gi", "100M")',
        "spec.provider.metadataOptions.httpPutResponseHopLimit: invalid value true: must be an integer, not a boolean",
        'spec.provider.subnetSelecter: invalid value {"Name": "x"}: unknown field',
        'spec.weight: invalid value "high": must be an integer',
    ]
    assert caught.value.errors[0] == ("spec.requirements[0].operator", None, "required field is missing")


@pytest.mark.parametrize(("obj", "message"), [
    ([], "a Provisioner must be a JSON object, got []"),
    ({"apiVersion": "karpenter.sh/v1beta1"}, 'apiVersion: invalid value "karpenter.sh/v1beta1": must be karpenter.sh/v1alpha5'),
    ({"kind": "NodePool"}, 'kind: invalid value "NodePool": must be Provisioner'),
    ({"spec": {"provider": {"kind": "GCP"}}}, 'spec.provider.kind: invalid value "GCP": must be AWS when set'),
    ({"spec": {"taints": [{"key": "a", "effect": "NoSchedule", "timeAdded": "now"}]}},
     'spec.taints[0].timeAdded: invalid value "now": unknown field'),
    ({"spec": {"kubeletConfiguration": {"clusterDNS": "10.0.0.10"}}},
     'spec.kubeletConfiguration.clusterDNS: invalid value "10.0.0.10": must be a list of strings'),
    ({"metadata": "x"}, 'metadata: invalid value "x": must be an object'),
])
def test_structural_errors(obj: Any, message: str) -> None:
    with pytest.raises(ProvisionerDecodeError) as caught:
        load_provisioner(obj)
    assert caught.value.message == message


def test_minimal_object_and_provider_type_meta() -> None:
    provisioner = load_provisioner({"metadata": {"name": "a"}, "spec": {"provider": {
        "apiVersion": "extensions.karpenter.sh/v1alpha1", "kind": "AWS", "subnetSelector": {"a": "b"}}}})
    assert provisioner.spec == ProvisionerSpec(provider=AWSProvider(subnet_selector=(("a", "b"),)))
    assert dump_provisioner(provisioner)["spec"] == {"provider": {"subnetSelector": {"a": "b"}}}


def test_format_path() -> None:
    assert format_path(["spec", "requirements", 1, "operator"]) == "spec.requirements[1].operator"
    assert format_path(["spec", "labels", "kubernetes.io/arch"]) == 'spec.labels["kubernetes.io/arch"]'


# ------------------------------------------------------------------------ property: dump then load
TEXT = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-./", min_size=1, max_size=12)
PAIRS = st.dictionaries(TEXT, TEXT, max_size=3).map(lambda d: tuple(d.items()))
QUANTITIES = st.dictionaries(TEXT, st.sampled_from(["1", "500m", "1Gi", "2.5", "1e3"]), max_size=3).map(
    lambda d: tuple(d.items()))
TAINTS = st.lists(st.builds(Taint, key=TEXT, effect=st.sampled_from(["NoSchedule", "NoExecute"]),
                            value=st.one_of(st.just(""), TEXT)), max_size=2).map(tuple)
PROVISIONERS = st.builds(
    Provisioner,
    name=TEXT,
    spec=st.builds(
        ProvisionerSpec,
        requirements=st.lists(st.builds(NodeSelectorRequirement, key=TEXT, operator=st.sampled_from(
            ["In", "NotIn", "Exists"]), values=st.lists(TEXT, max_size=2).map(tuple)), max_size=3).map(tuple),
        labels=PAIRS, taints=TAINTS, startup_taints=TAINTS,
        limits=st.one_of(st.none(), st.builds(Limits, resources=QUANTITIES)),
        provider=st.one_of(st.none(), st.builds(
            AWSProvider, subnet_selector=st.one_of(st.none(), PAIRS), security_group_selector=st.one_of(st.none(), PAIRS),
            instance_profile=st.one_of(st.none(), TEXT), launch_template=st.one_of(st.none(), TEXT),
            ami_family=st.one_of(st.none(), st.sampled_from(["AL2", "AL2023"])), tags=st.one_of(st.none(), PAIRS),
            metadata_options=st.one_of(st.none(), st.builds(MetadataOptions, http_put_response_hop_limit=st.one_of(
                st.none(), st.integers(1, 64)), http_tokens=st.one_of(st.none(), st.just("required")))),
            block_device_mappings=st.one_of(st.none(), st.lists(st.builds(
                BlockDeviceMapping, device_name=TEXT, ebs=st.one_of(st.none(), st.builds(
                    EBS, volume_size=st.one_of(st.none(), st.just("20Gi")), iops=st.one_of(st.none(), st.integers(1, 9)),
                    encrypted=st.one_of(st.none(), st.booleans())))), max_size=2).map(tuple)))),
        kubelet_configuration=st.one_of(st.none(), st.builds(
            KubeletConfiguration, cluster_dns=st.one_of(st.none(), st.lists(TEXT, max_size=2).map(tuple)),
            max_pods=st.one_of(st.none(), st.integers(0, 500)), system_reserved=st.one_of(st.none(), QUANTITIES),
            eviction_hard=st.one_of(st.none(), PAIRS))),
        ttl_seconds_after_empty=st.one_of(st.none(), st.integers(0, 10**9)),
        ttl_seconds_until_expired=st.one_of(st.none(), st.integers(0, 10**9)),
        weight=st.one_of(st.none(), st.integers(1, 100)),
    ),
    status=st.builds(ProvisionerStatus, resources=QUANTITIES, conditions=st.lists(st.builds(
        Condition, type=TEXT, status=st.sampled_from(["True", "False"]), reason=st.one_of(st.none(), TEXT)),
        max_size=2).map(tuple)),
)


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(PROVISIONERS)
def test_load_of_dump_is_the_identity(provisioner: Provisioner) -> None:
    wire = dump_provisioner(provisioner)
    assert load_provisioner(wire) == provisioner
    assert dump_provisioner(load_provisioner(wire)) == wire


def test_limits_parsed_in_core_units() -> None:
    provisioner = load_provisioner(copy.deepcopy(FULL))
    assert provisioner.spec.limits is not None
    assert provisioner.spec.limits.parsed() == {"cpu": 1_000_000, "memory": 1000 * 2**30, "nvidia.com/gpu": 8}
