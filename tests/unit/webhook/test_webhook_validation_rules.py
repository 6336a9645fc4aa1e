"""Every validation rule through the flask app: a real AdmissionReview v1 body in, the exact answer out."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.builders.admission import review, valid

UID = "705ab4f5-6393-11e8-b7cc-42010a800002"
Mutation = Callable[[dict[str, Any]], None]

AL_NAME = "a" * 64
QUALIFIED = ("must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
             "alphanumeric character")
DOMAIN = ("label domain not allowed: keys under kubernetes.io, k8s.io, karpenter.sh and k8s.aws are reserved "
          "(except well-known labels, node.kubernetes.io and kops.k8s.io)")


def spec(**fields: Any) -> Mutation:
    def apply(obj: dict[str, Any]) -> None:
        obj["spec"].update(fields)
    return apply


def without_ttl_after_empty(**fields: Any) -> Mutation:
    def apply(obj: dict[str, Any]) -> None:
        obj["spec"].pop("ttlSecondsAfterEmpty", None)
        obj["spec"].update(fields)
    return apply


def provider(**fields: Any) -> Mutation:
    def apply(obj: dict[str, Any]) -> None:
        obj["spec"]["provider"].update(fields)
        for key in [k for k, v in fields.items() if v is ...]:
            del obj["spec"]["provider"][key]
    return apply


def requirement(*items: dict[str, Any]) -> Mutation:
    def apply(obj: dict[str, Any]) -> None:
        obj["spec"]["requirements"].extend(items)
    return apply


def metadata(**fields: Any) -> Mutation:
    def apply(obj: dict[str, Any]) -> None:
        obj["metadata"] = fields
    return apply


def drop_spec(key: str) -> Mutation:
    def apply(obj: dict[str, Any]) -> None:
        del obj["spec"][key]
    return apply


T = {"key": "team", "effect": "NoSchedule"}

# (rule, mutation, exact message)
DENIED: list[tuple[str, Mutation, str]] = [
    ("1 name too long for a label value", metadata(name=AL_NAME),
     f'metadata.name: invalid value "{AL_NAME}": must be no more than 63 characters '
     "(it becomes the value of the node label karpenter.sh/provisioner-name)"),
    ("1 name not a DNS subdomain", metadata(name="Default_1"),
     'metadata.name: invalid value "Default_1": must be a lowercase RFC 1123 subdomain (lowercase alphanumeric '
     "characters, '-' or '.', starting and ending alphanumeric)"),
    ("1 no name", metadata(labels={"a": "b"}), "metadata.name: name or generateName is required"),
    ("2 ttlSecondsUntilExpired negative", spec(ttlSecondsUntilExpired=-1),
     "spec.ttlSecondsUntilExpired: invalid value -1: cannot be negative"),
    ("3 ttlSecondsAfterEmpty negative", spec(ttlSecondsAfterEmpty=-30),
     "spec.ttlSecondsAfterEmpty: invalid value -30: cannot be negative"),
    ("3 ttlSecondsAfterEmpty negative as a float", spec(ttlSecondsAfterEmpty=-30.0),
     "spec.ttlSecondsAfterEmpty: invalid value -30.0: cannot be negative"),
    ("3 ttlSecondsAfterEmpty not an integer", spec(ttlSecondsAfterEmpty="30s"),
     'spec.ttlSecondsAfterEmpty: invalid value "30s": must be an integer'),
    ("consolidation with ttlSecondsAfterEmpty", spec(consolidation={"enabled": True}),
     "spec.consolidation.enabled: invalid value true: expected exactly one, got both: spec.consolidation.enabled "
     "and spec.ttlSecondsAfterEmpty (consolidation removes empty nodes itself; unset ttlSecondsAfterEmpty)"),
    ("consolidation.enabled not a boolean", without_ttl_after_empty(consolidation={"enabled": "true"}),
     'spec.consolidation.enabled: invalid value "true": must be a boolean'),
    ("consolidation unknown field", without_ttl_after_empty(consolidation={"enable": True}),
     "spec.consolidation.enable: invalid value true: unknown field"),
    ("3 ttl fraction", spec(ttlSecondsUntilExpired=1.5),
     "spec.ttlSecondsUntilExpired: invalid value 1.5: must be an integer"),
    ("4 label key not qualified", spec(labels={"team name": "a"}),
     f'spec.labels: invalid value "team name": label key must be a qualified name: name part {QUALIFIED}'),
    ("4 label key prefix", spec(labels={"Example.com/team": "a"}),
     'spec.labels: invalid value "Example.com/team": label key must be a qualified name: '
     "prefix part must be a lowercase DNS subdomain (e.g. example.com)"),
    ("5 label value", spec(labels={"team": "a b"}),
     f'spec.labels["team"]: invalid value "a b": label value {QUALIFIED}'),
    ("5 label value not a string", spec(labels={"team": 1}),
     'spec.labels["team"]: invalid value 1: must be a string'),
    ("6 hostname label", spec(labels={"kubernetes.io/hostname": "n1"}),
     'spec.labels: invalid value "kubernetes.io/hostname": label kubernetes.io/hostname '
     "is restricted: it is set by Kubernetes or the controller"),
    ("6 provisioner-name label", spec(labels={"karpenter.sh/provisioner-name": "x"}),
     'spec.labels: invalid value "karpenter.sh/provisioner-name": label '
     "karpenter.sh/provisioner-name is restricted: the controller sets it on every node"),
    ("6 emptiness-timestamp label", spec(labels={"karpenter.sh/emptiness-timestamp": "x"}),
     'spec.labels: invalid value "karpenter.sh/emptiness-timestamp": label '
     "karpenter.sh/emptiness-timestamp is restricted: it is set by Kubernetes or the controller"),
    ("7 kubernetes.io subdomain", spec(labels={"example.kubernetes.io/x": "y"}),
     f'spec.labels: invalid value "example.kubernetes.io/x": {DOMAIN}'),
    ("7 k8s.io", spec(labels={"k8s.io/x": "y"}), f'spec.labels: invalid value "k8s.io/x": {DOMAIN}'),
    ("7 karpenter.sh", spec(labels={"karpenter.sh/x": "y"}),
     f'spec.labels: invalid value "karpenter.sh/x": {DOMAIN}'),
    ("7 k8s.aws", spec(labels={"karpenter.k8s.aws/x": "y"}),
     f'spec.labels: invalid value "karpenter.k8s.aws/x": {DOMAIN}'),
    ("8 taint key empty", spec(taints=[{"key": "", "effect": "NoSchedule"}]),
     'spec.taints[0].key: invalid value "": taint key must be a qualified name: must not be empty'),
    ("8 taint key missing", spec(taints=[{"effect": "NoSchedule"}]),
     "spec.taints[0].key: required field is missing"),
    ("9 taint value", spec(taints=[{"key": "team", "value": "a/b", "effect": "NoSchedule"}]),
     f'spec.taints[0].value: invalid value "a/b": taint value {QUALIFIED}'),
    ("10 taint effect", spec(taints=[{"key": "team", "effect": "NoRun"}]),
     'spec.taints[0].effect: invalid value "NoRun": must be one of NoSchedule, PreferNoSchedule, NoExecute'),
    ("10 taint effect empty", spec(taints=[{"key": "team", "effect": ""}]),
     'spec.taints[0].effect: invalid value "": must be one of NoSchedule, PreferNoSchedule, NoExecute'),
    ("startupTaints effect", spec(startupTaints=[{"key": "team", "effect": "Later"}]),
     'spec.startupTaints[0].effect: invalid value "Later": must be one of NoSchedule, PreferNoSchedule, NoExecute'),
    ("startupTaints key", spec(startupTaints=[{"key": "a b", "effect": "NoSchedule"}]),
     f'spec.startupTaints[0].key: invalid value "a b": taint key must be a qualified name: name part {QUALIFIED}'),
    ("duplicate taint across lists", spec(taints=[T], startupTaints=[T]),
     'spec.startupTaints[0]: invalid value {"effect": "NoSchedule", "key": "team"}: duplicate taint: '
     "spec.taints[0] has the same key and effect"),
    ("13 requirement key", requirement({"key": "a b", "operator": "Exists"}),
     f'spec.requirements[2].key: invalid value "a b": requirement key must be a qualified name: name part {QUALIFIED}'),
    ("13 requirement value", requirement({"key": "team", "operator": "In", "values": ["a b"]}),
     f'spec.requirements[2].values[0]: invalid value "a b": label value {QUALIFIED}'),
    ("restricted domain in requirement", requirement({"key": "example.k8s.io/x", "operator": "Exists"}),
     f'spec.requirements[2].key: invalid value "example.k8s.io/x": {DOMAIN}'),
    ("provisioner-name in requirement",
     requirement({"key": "karpenter.sh/provisioner-name", "operator": "In", "values": ["x"]}),
     'spec.requirements[2].key: invalid value "karpenter.sh/provisioner-name": label karpenter.sh/provisioner-name '
     "is restricted: the controller sets it on every node"),
    ("14 operator", requirement({"key": "team", "operator": "Equals", "values": ["a"]}),
     'spec.requirements[2].operator: invalid value "Equals": must be one of In, NotIn, Exists, DoesNotExist, Gt, Lt'),
    ("14 operator missing", requirement({"key": "team", "values": ["a"]}),
     "spec.requirements[2].operator: required field is missing"),
    ("Exists takes no values", requirement({"key": "team", "operator": "Exists", "values": ["a"]}),
     'spec.requirements[2].values: invalid value ["a"]: operator Exists takes no values'),
    ("DoesNotExist takes no values", requirement({"key": "team", "operator": "DoesNotExist", "values": ["a"]}),
     'spec.requirements[2].values: invalid value ["a"]: operator DoesNotExist takes no values'),
    ("In needs values", requirement({"key": "team", "operator": "In"}),
     "spec.requirements[2].values: operator In needs at least one value"),
    ("NotIn needs values", requirement({"key": "team", "operator": "NotIn", "values": []}),
     "spec.requirements[2].values: invalid value []: operator NotIn needs at least one value"),
    ("Gt needs an integer", requirement({"key": "example.com/gen", "operator": "Gt", "values": ["five"]}),
     'spec.requirements[2].values: invalid value ["five"]: operator Gt needs exactly one integer value'),
    ("Lt needs exactly one", requirement({"key": "example.com/gen", "operator": "Lt", "values": ["1", "2"]}),
     'spec.requirements[2].values: invalid value ["1", "2"]: operator Lt needs exactly one integer value'),
    ("15 DoesNotExist mixed", requirement({"key": "team", "operator": "DoesNotExist"},
                                          {"key": "team", "operator": "NotIn", "values": ["a"]}),
     "spec.requirements: operator DoesNotExist cannot coexist with other operators for key team"),
    ("16 no feasible value", requirement({"key": "kubernetes.io/arch", "operator": "NotIn",
                                          "values": ["arm64", "amd64"]}),
     "spec.requirements[2]: no feasible value for key kubernetes.io/arch: the requirements on it (1, 2) "
     "have no value in common"),
    ("label conflicts with requirement", spec(labels={"kubernetes.io/arch": "s390x"}),
     'spec.labels["kubernetes.io/arch"]: invalid value "s390x": conflicts with the requirement '
     "kubernetes.io/arch In [amd64, arm64]"),
    ("17 provider missing", drop_spec("provider"),
     "spec.provider: spec.provider is not defined; it must hold the AWS provider block "
     "(subnetSelector, securityGroupSelector, ...)"),
    ("17 provider null", spec(provider=None),
     "spec.provider: spec.provider is not defined; it must hold the AWS provider block "
     "(subnetSelector, securityGroupSelector, ...)"),
    ("17 provider unknown field", provider(subnetSelecter={"a": "b"}),
     'spec.provider.subnetSelecter: invalid value {"a": "b"}: unknown field'),
    ("17 provider not an object", spec(provider="aws"), 'spec.provider: invalid value "aws": must be an object'),
    ("18 launchTemplate with securityGroupSelector", provider(launchTemplate="lt", amiFamily=..., metadataOptions=...),
     'spec.provider.securityGroupSelector: invalid value {"kubernetes.io/cluster/karpenter-demo": "*"}: expected '
     "exactly one, got both: launchTemplate, securityGroupSelector (a launch template defines it)"),
    ("18 launchTemplate with instanceProfile",
     provider(launchTemplate="lt", amiFamily=..., metadataOptions=..., securityGroupSelector=...,
              instanceProfile="KarpenterNodeInstanceProfile"),
     'spec.provider.instanceProfile: invalid value "KarpenterNodeInstanceProfile": expected exactly one, got both: '
     "launchTemplate, instanceProfile (a launch template defines it)"),
    ("19 subnetSelector missing", provider(subnetSelector=...), "spec.provider.subnetSelector: required field is missing"),
    ("20 subnetSelector empty value", provider(subnetSelector={"Name": ""}),
     'spec.provider.subnetSelector["Name"]: invalid value "": selector values must not be empty (use "*" for any value)'),
    ("20 subnetSelector empty key", provider(subnetSelector={"": "x"}),
     'spec.provider.subnetSelector[""]: invalid value "x": selector keys must not be empty'),
    ("20 subnetSelector empty map", provider(subnetSelector={}),
     "spec.provider.subnetSelector: invalid value {}: must not be empty: an empty selector would match nothing useful"),
    ("21 securityGroupSelector missing", provider(securityGroupSelector=...),
     "spec.provider.securityGroupSelector: required field is missing (unless launchTemplate is set)"),
    ("21 securityGroupSelector empty value", provider(securityGroupSelector={"Name": ""}),
     'spec.provider.securityGroupSelector["Name"]: invalid value "": selector values must not be empty '
     '(use "*" for any value)'),
    ("22 empty tag key", provider(tags={"": "v"}),
     'spec.provider.tags[""]: invalid value "v": empty tag keys aren\'t supported'),
    ("23 httpEndpoint", provider(metadataOptions={"httpEndpoint": "on"}),
     'spec.provider.metadataOptions.httpEndpoint: invalid value "on": must be one of enabled, disabled'),
    ("23 httpProtocolIPv6", provider(metadataOptions={"httpProtocolIPv6": "yes"}),
     'spec.provider.metadataOptions.httpProtocolIPv6: invalid value "yes": must be one of enabled, disabled'),
    ("23 httpTokens", provider(metadataOptions={"httpTokens": "v2"}),
     'spec.provider.metadataOptions.httpTokens: invalid value "v2": must be one of required, optional'),
    ("24 hop limit 0", provider(metadataOptions={"httpPutResponseHopLimit": 0}),
     "spec.provider.metadataOptions.httpPutResponseHopLimit: invalid value 0: expected 1 <= httpPutResponseHopLimit <= 64"),
    ("24 hop limit 65", provider(metadataOptions={"httpPutResponseHopLimit": 65}),
     "spec.provider.metadataOptions.httpPutResponseHopLimit: invalid value 65: expected 1 <= httpPutResponseHopLimit <= 64"),
    ("25 amiFamily", provider(amiFamily="Windows2022"),
     'spec.provider.amiFamily: invalid value "Windows2022": must be one of AL2, AL2023, Bottlerocket, Ubuntu'),
    ("weight 0", spec(weight=0), "spec.weight: invalid value 0: must be between 1 and 100"),
    ("weight 101", spec(weight=101), "spec.weight: invalid value 101: must be between 1 and 100"),
    ("limits quantity", spec(limits={"resources": {"cpu": "lots"}}),
     'spec.limits.resources["cpu"]: invalid value "lots": not a quantity (examples: "500m", "2", "1.5Gi", "100M")'),
    ("limits negative", spec(limits={"resources": {"memory": "-1Gi"}}),
     'spec.limits.resources["memory"]: invalid value "-1Gi": cannot be negative'),
    ("kubelet clusterDNS", spec(kubeletConfiguration={"clusterDNS": ["10.100.0.300"]}),
     'spec.kubeletConfiguration.clusterDNS[0]: invalid value "10.100.0.300": must be an IP address'),
    ("kubelet maxPods", spec(kubeletConfiguration={"maxPods": -1}),
     "spec.kubeletConfiguration.maxPods: invalid value -1: cannot be negative"),
    ("kubelet reserved quantity", spec(kubeletConfiguration={"systemReserved": {"cpu": "1 core"}}),
     'spec.kubeletConfiguration.systemReserved["cpu"]: invalid value "1 core": not a quantity '
     '(examples: "500m", "2", "1.5Gi", "100M")'),
    ("blockDeviceMappings volumeType", provider(blockDeviceMappings=[{"deviceName": "/dev/xvda",
                                                                     "ebs": {"volumeType": "gp9"}}]),
     'spec.provider.blockDeviceMappings[0].ebs.volumeType: invalid value "gp9": must be one of standard, io1, io2, '
     "gp2, sc1, st1, gp3"),
    ("unknown spec field", spec(ttlSecondsAfterEmtpy=30),
     "spec.ttlSecondsAfterEmtpy: invalid value 30: unknown field"),
]


@pytest.mark.parametrize(("mutation", "message"), [(m, msg) for _, m, msg in DENIED],
                         ids=[rule for rule, _, _ in DENIED])
def test_rule_denies_with_path_and_value(post: Any, mutation: Mutation, message: str) -> None:
    obj = valid()
    mutation(obj)
    answer = post("/validate", review(obj))
    assert answer["response"] == {
        "uid": UID,
        "allowed": False,
        "status": {"status": "Failure", "code": 422, "reason": "Invalid", "message": message},
    }


ALLOWED: list[tuple[str, Mutation]] = [
    ("walkthrough provisioner", lambda obj: None),
    ("zone and capacity-type labels", spec(labels={"topology.kubernetes.io/zone": "us-west-2a",
                                                   "karpenter.sh/capacity-type": "spot"})),
    ("node.kubernetes.io and kops labels", spec(labels={"node.kubernetes.io/role": "worker",
                                                        "kops.k8s.io/instancegroup": "nodes"})),
    ("custom requirement keys and all operators",
     requirement({"key": "example.com/team", "operator": "NotIn", "values": ["a"]},
                 {"key": "example.com/gpu", "operator": "DoesNotExist"},
                 {"key": "example.com/gen", "operator": "Gt", "values": ["5"]},
                 {"key": "example.com/size", "operator": "Lt", "values": ["-1"]},
                 {"key": "topology.kubernetes.io/zone", "operator": "Exists"})),
    ("label matching a requirement", spec(labels={"kubernetes.io/arch": "arm64"})),
    ("weight 1", spec(weight=1)),
    ("weight 100", spec(weight=100)),
    ("ttls zero", spec(ttlSecondsAfterEmpty=0, ttlSecondsUntilExpired=0)),
    ("consolidation without ttlSecondsAfterEmpty", without_ttl_after_empty(consolidation={"enabled": True})),
    ("consolidation disabled beside ttlSecondsAfterEmpty", spec(consolidation={"enabled": False})),
    ("AL2", provider(amiFamily="AL2")),
    ("Bottlerocket", provider(amiFamily="Bottlerocket")),
    ("Ubuntu", provider(amiFamily="Ubuntu")),
    ("launchTemplate alone", provider(launchTemplate="my-lt", amiFamily=..., metadataOptions=...,
                                      securityGroupSelector=...)),
    ("hop limits 1 and 64 and partial options", provider(metadataOptions={"httpPutResponseHopLimit": 64})),
    ("taints and startupTaints", spec(taints=[{"key": "example.com/gpu", "value": "true", "effect": "NoSchedule"}],
                                      startupTaints=[{"key": "example.com/gpu", "effect": "NoExecute"}])),
    ("full kubelet and limits", spec(limits={"resources": {"cpu": "1k", "memory": "1000Gi", "nvidia.com/gpu": 8}},
                                     kubeletConfiguration={"clusterDNS": ["10.100.0.10", "fd00::a"], "maxPods": 110,
                                                           "systemReserved": {"cpu": "100m", "memory": "100Mi"},
                                                           "kubeReserved": {"cpu": 0.5},
                                                           "evictionHard": {"memory.available": "5%"}})),
    ("block devices and tags", provider(tags={"team": "a"}, instanceProfile="KarpenterNodeInstanceProfile",
                                        blockDeviceMappings=[{"deviceName": "/dev/xvda", "ebs": {
                                            "volumeSize": "100Gi", "volumeType": "gp3", "iops": 3000,
                                            "throughput": 125, "encrypted": True, "deleteOnTermination": True}}])),
    ("provider TypeMeta", provider(apiVersion="extensions.karpenter.sh/v1alpha1", kind="AWS")),
    ("generateName", metadata(generateName="team-")),
]


@pytest.mark.parametrize("mutation", [m for _, m in ALLOWED], ids=[rule for rule, _ in ALLOWED])
def test_valid_provisioners_are_allowed_without_warnings(post: Any, mutation: Mutation) -> None:
    obj = valid()
    mutation(obj)
    assert post("/validate", review(obj))["response"] == {"uid": UID, "allowed": True}


def test_all_violations_are_reported_together_in_field_order(post: Any) -> None:
    obj = valid()
    obj["spec"]["weight"] = 0
    obj["spec"]["requirements"][0]["operator"] = "Equals"
    obj["spec"]["provider"]["amiFamily"] = "AL1"
    obj["spec"]["provider"]["metadataOptions"]["httpPutResponseHopLimit"] = 99
    answer = post("/validate", review(obj))
    assert answer["response"]["status"]["message"] == (  # weight was added last to the spec
        'spec.requirements[0].operator: invalid value "Equals": must be one of In, NotIn, Exists, DoesNotExist, '
        "Gt, Lt; "
        'spec.provider.amiFamily: invalid value "AL1": must be one of AL2, AL2023, Bottlerocket, Ubuntu; '
        "spec.provider.metadataOptions.httpPutResponseHopLimit: invalid value 99: "
        "expected 1 <= httpPutResponseHopLimit <= 64; "
        "spec.weight: invalid value 0: must be between 1 and 100"
    )


def test_deprecated_alias_labels_are_allowed_with_a_warning_naming_the_label(post: Any) -> None:
    obj = valid()
    obj["spec"]["requirements"][1]["key"] = "beta.kubernetes.io/arch"
    obj["spec"]["requirements"].append(
        {"key": "failure-domain.beta.kubernetes.io/zone", "operator": "In", "values": ["us-west-2a"]})
    obj["spec"]["labels"] = {"beta.kubernetes.io/os": "linux"}
    answer = post("/validate", review(obj))
    assert answer["response"] == {
        "uid": UID,
        "allowed": True,
        "warnings": [
            'spec.labels["beta.kubernetes.io/os"]: label beta.kubernetes.io/os is deprecated, use kubernetes.io/os',
            "spec.requirements[1].key: label beta.kubernetes.io/arch is deprecated, use kubernetes.io/arch",
            "spec.requirements[2].key: label failure-domain.beta.kubernetes.io/zone is deprecated, "
            "use topology.kubernetes.io/zone",
        ],
    }
    assert all(len(w) <= 120 for w in answer["response"]["warnings"])


def test_alias_and_canonical_key_are_one_key_for_feasibility(post: Any) -> None:
    obj = valid()
    obj["spec"]["requirements"].append({"key": "beta.kubernetes.io/arch", "operator": "In", "values": ["s390x"]})
    answer = post("/validate", review(obj))
    assert answer["response"]["allowed"] is False
    assert answer["response"]["status"]["message"] == (
        "spec.requirements[2]: no feasible value for key kubernetes.io/arch: the requirements on it (1, 2) "
        "have no value in common"
    )
    assert answer["response"]["warnings"] == [
        "spec.requirements[2].key: label beta.kubernetes.io/arch is deprecated, use kubernetes.io/arch",
        "spec.requirements[2].values[0]: kubernetes.io/arch s390x is not offered (known: amd64, arm64); "
        "no node will have it",
    ]


def test_update_with_an_invalid_spec_is_denied(post: Any) -> None:
    old = valid()
    new = valid()
    new["spec"]["weight"] = 500
    answer = post("/validate", review(new, operation="UPDATE", old=old))
    assert answer["response"]["status"]["message"] == "spec.weight: invalid value 500: must be between 1 and 100"


def test_update_that_leaves_an_invalid_spec_unchanged_is_allowed_with_a_warning(post: Any) -> None:
    old = valid()
    old["spec"]["weight"] = 500
    new = valid()
    new["spec"]["weight"] = 500
    new["metadata"]["finalizers"] = ["example.com/keep"]
    answer = post("/validate", review(new, operation="UPDATE", old=old))
    assert answer["response"] == {
        "uid": UID,
        "allowed": True,
        "warnings": ["Provisioner default is invalid (allowed because its spec did not change): "
                     "spec.weight: invalid value 500: must be between 1 and 100"],
    }


def test_a_denial_spells_out_at_most_50_violations(post: Any) -> None:
    obj = valid()
    obj["spec"]["labels"] = {f"k8s.io/label-{i:02d}": "x" for i in range(60)}
    message = post("/validate", review(obj))["response"]["status"]["message"]
    parts = message.split("; ")
    assert len(parts) == 51
    assert parts[0] == f'spec.labels: invalid value "k8s.io/label-00": {DOMAIN}'
    assert parts[49] == f'spec.labels: invalid value "k8s.io/label-49": {DOMAIN}'
    assert parts[50] == "and 10 more error(s)"


def test_an_invalid_object_being_deleted_may_still_be_updated(post: Any) -> None:
    old = valid()
    new = valid()
    new["spec"]["weight"] = 0
    new["metadata"]["deletionTimestamp"] = "2026-11-30T10:00:00Z"
    new["spec"]["labels"] = {f"k8s.io/label-{i:02d}": "x" for i in range(5)}
    response = post("/validate", review(new, operation="UPDATE", old=old))["response"]
    assert response["allowed"] is True
    [warning] = response["warnings"]
    assert warning.startswith("Provisioner default is invalid (allowed because it is being deleted): spec.weight")
    assert len(warning) == 256 and warning.endswith("...")


def test_unknown_values_of_capacity_type_and_arch_are_allowed_with_a_warning(post: Any) -> None:
    obj = valid()
    obj["spec"]["requirements"][0]["values"] = ["spot", "spot-instance"]
    obj["spec"]["requirements"][1]["values"] = ["x86_64"]
    assert post("/validate", review(obj))["response"] == {
        "uid": UID,
        "allowed": True,
        "warnings": [
            "spec.requirements[0].values[1]: karpenter.sh/capacity-type spot-instance is not offered "
            "(known: on-demand, spot); no node will have it",
            "spec.requirements[1].values[0]: kubernetes.io/arch x86_64 is not offered (known: amd64, arm64); "
            "no node will have it",
        ],
    }
