"""Every default through the flask app's /mutate: the exact JSONPatch, and a second pass that adds nothing."""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch
import pytest

from provisioner.api.defaults import default_provisioner
from tests.builders.admission import METADATA_OPTIONS, decode_patch, load_walkthrough, review, valid

UID = "705ab4f5-6393-11e8-b7cc-42010a800002"
PROVIDER_DEFAULTS = [
    {"op": "add", "path": "/spec/provider/amiFamily", "value": "AL2023"},
    {"op": "add", "path": "/spec/provider/metadataOptions", "value": METADATA_OPTIONS},
]
ARCH = {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}
CAPACITY = {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}


def mutate(post: Any, obj: dict[str, Any]) -> list[dict[str, Any]] | None:
    """The decoded patch /mutate answers for ``obj`` (None when there is none); checks the envelope."""
    response = post("/mutate", review(obj))["response"]
    assert response["uid"] == UID
    assert response["allowed"] is True
    assert set(response) <= {"uid", "allowed", "patch", "patchType"}
    if "patch" not in response:
        assert "patchType" not in response
        return None
    return decode_patch(response)


def second_pass_is_empty(post: Any, obj: dict[str, Any], patch: list[dict[str, Any]]) -> None:
    patched = jsonpatch.apply_patch(obj, patch)
    assert patched == default_provisioner(obj)
    assert mutate(post, patched) is None
    assert post("/validate", review(patched))["response"] == {"uid": UID, "allowed": True}


@pytest.mark.parametrize("name", ["01-provisioner.yaml", "04-provisioner-with-expiry.yaml"])
def test_walkthrough_provisioners_get_exactly_the_provider_defaults(post: Any, name: str) -> None:
    obj = load_walkthrough(name)
    patch = mutate(post, obj)
    assert patch == PROVIDER_DEFAULTS
    second_pass_is_empty(post, obj, patch)


@pytest.mark.parametrize("name", ["01-provisioner.yaml", "04-provisioner-with-expiry.yaml"])
def test_walkthrough_without_requirements_also_gets_both_requirement_defaults(post: Any, name: str) -> None:
    obj = load_walkthrough(name)
    del obj["spec"]["requirements"]
    patch = mutate(post, obj)
    assert patch == [{"op": "add", "path": "/spec/requirements", "value": [ARCH, CAPACITY]}, *PROVIDER_DEFAULTS]
    second_pass_is_empty(post, obj, patch)


CASES: list[tuple[str, dict[str, Any], list[dict[str, Any]] | None]] = [
    ("complete provisioner: no patch", {}, None),
    ("arch missing: appended", {"requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In",
                                                  "values": ["spot"]}]},
     [{"op": "add", "path": "/spec/requirements/-", "value": ARCH}]),
    ("capacity-type missing: appended", {"requirements": [{"key": "kubernetes.io/arch", "operator": "In",
                                                           "values": ["arm64"]}]},
     [{"op": "add", "path": "/spec/requirements/-", "value": CAPACITY}]),
    ("both missing from a list", {"requirements": [{"key": "example.com/team", "operator": "Exists"}]},
     [{"op": "add", "path": "/spec/requirements/-", "value": ARCH},
      {"op": "add", "path": "/spec/requirements/-", "value": CAPACITY}]),
    ("empty list", {"requirements": []},
     [{"op": "add", "path": "/spec/requirements/-", "value": ARCH},
      {"op": "add", "path": "/spec/requirements/-", "value": CAPACITY}]),
    ("named by labels", {"requirements": None, "labels": {"kubernetes.io/arch": "arm64",
                                                          "karpenter.sh/capacity-type": "spot"}}, None),
    ("arch named by a label only", {"requirements": None, "labels": {"kubernetes.io/arch": "arm64"}},
     [{"op": "add", "path": "/spec/requirements", "value": [CAPACITY]}]),
    ("named by a deprecated alias", {"requirements": [{"key": "beta.kubernetes.io/arch", "operator": "Exists"},
                                                      {"key": "karpenter.sh/capacity-type", "operator": "NotIn",
                                                       "values": ["spot"]}]}, None),
]


@pytest.mark.parametrize(("spec", "expected"), [(s, e) for _, s, e in CASES], ids=[c for c, _, _ in CASES])
def test_requirement_defaults(post: Any, spec: dict[str, Any], expected: list[dict[str, Any]] | None) -> None:
    obj = valid()
    for key, value in spec.items():
        if value is None:
            obj["spec"].pop(key, None)
        else:
            obj["spec"][key] = value
    patch = mutate(post, obj)
    assert patch == expected
    if patch:
        second_pass_is_empty(post, obj, patch)


PROVIDER_CASES: list[tuple[str, dict[str, Any], list[dict[str, Any]] | None]] = [
    ("launchTemplate: no provider defaults", {"launchTemplate": "my-lt"}, None),
    ("amiFamily kept", {"amiFamily": "Bottlerocket", "metadataOptions": ...},
     [PROVIDER_DEFAULTS[1]]),
    ("partial metadataOptions kept as they are", {"amiFamily": ..., "metadataOptions": {"httpTokens": "optional"}},
     [PROVIDER_DEFAULTS[0]]),
    ("amiFamily null is defaulted", {"amiFamily": None}, [PROVIDER_DEFAULTS[0]]),
]


@pytest.mark.parametrize(("fields", "expected"), [(f, e) for _, f, e in PROVIDER_CASES],
                         ids=[c for c, _, _ in PROVIDER_CASES])
def test_provider_defaults(post: Any, fields: dict[str, Any], expected: list[dict[str, Any]] | None) -> None:
    obj = valid()
    provider = obj["spec"]["provider"]
    del provider["amiFamily"], provider["metadataOptions"]
    if "launchTemplate" not in fields:
        provider["amiFamily"], provider["metadataOptions"] = "AL2023", copy.deepcopy(METADATA_OPTIONS)
    for key, value in fields.items():
        if value is ...:
            provider.pop(key, None)
        else:
            provider[key] = value
    patch = mutate(post, obj)
    assert patch == expected
    if patch:
        assert mutate(post, jsonpatch.apply_patch(obj, patch)) is None


@pytest.mark.parametrize("provider", ["absent", None, "a-string", ["a", "list"]])
def test_defaulting_never_fails_on_a_missing_or_odd_provider(post: Any, provider: Any) -> None:
    obj = load_walkthrough("01-provisioner.yaml")
    del obj["spec"]["requirements"]
    if provider == "absent":
        del obj["spec"]["provider"]
    else:
        obj["spec"]["provider"] = provider
    assert mutate(post, obj) == [{"op": "add", "path": "/spec/requirements", "value": [ARCH, CAPACITY]}]
    denial = post("/validate", review(obj))["response"]
    assert denial["allowed"] is False
    assert denial["status"]["message"].startswith("spec.provider")


@pytest.mark.parametrize("spec", ["absent", None, "x", 3])
def test_defaulting_leaves_a_missing_or_odd_spec_to_validation(post: Any, spec: Any) -> None:
    obj = valid()
    if spec == "absent":
        del obj["spec"]
    else:
        obj["spec"] = spec
    assert mutate(post, obj) is None
    denial = post("/validate", review(obj))["response"]
    assert denial["allowed"] is False
    assert denial["status"]["message"].startswith("spec")


def test_requirements_that_are_not_a_list_are_not_defaulted(post: Any) -> None:
    obj = valid()
    obj["spec"]["requirements"] = {"key": "kubernetes.io/arch"}
    assert mutate(post, obj) is None
    assert post("/validate", review(obj))["response"]["status"]["message"] == (
        'spec.requirements: invalid value {"key": "kubernetes.io/arch"}: must be a list')


def test_default_provisioner_does_not_modify_its_input() -> None:
    obj = load_walkthrough("01-provisioner.yaml")
    del obj["spec"]["requirements"]
    before = copy.deepcopy(obj)
    result = default_provisioner(obj)
    assert obj == before
    assert result["spec"]["requirements"] == [ARCH, CAPACITY]
    assert result["spec"]["provider"]["amiFamily"] == "AL2023"
    assert result["spec"]["provider"]["metadataOptions"] == METADATA_OPTIONS
