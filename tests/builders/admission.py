"""Builders for the webhook tests: AdmissionReview requests, a valid Provisioner, patch decoding."""

from __future__ import annotations

import base64
import copy
import json
from typing import Any

from tests.builders.walkthrough import walkthrough

METADATA_OPTIONS = {
    "httpEndpoint": "enabled",
    "httpProtocolIPv6": "disabled",
    "httpPutResponseHopLimit": 2,
    "httpTokens": "required",
}

#: A complete, valid, already-defaulted Provisioner: every rule test breaks one thing in it.
VALID: dict[str, Any] = {
    "apiVersion": "karpenter.sh/v1alpha5",
    "kind": "Provisioner",
    "metadata": {"name": "default"},
    "spec": {
        "requirements": [
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot", "on-demand"]},
            {"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64", "amd64"]},
        ],
        "limits": {"resources": {"cpu": 1000}},
        "provider": {
            "subnetSelector": {"kubernetes.io/cluster/karpenter-demo": "*"},
            "securityGroupSelector": {"kubernetes.io/cluster/karpenter-demo": "*"},
            "amiFamily": "AL2023",
            "metadataOptions": dict(METADATA_OPTIONS),
        },
        "ttlSecondsAfterEmpty": 30,
    },
}


def valid() -> dict[str, Any]:
    return copy.deepcopy(VALID)


def _name(obj: Any) -> str:
    metadata = obj.get("metadata") if isinstance(obj, dict) else None
    name = metadata.get("name") if isinstance(metadata, dict) else None
    return name if isinstance(name, str) else ""


def review(obj: Any, *, uid: str = "705ab4f5-6393-11e8-b7cc-42010a800002", operation: str = "CREATE",
           old: Any = None) -> dict[str, Any]:
    """An AdmissionReview v1 request as kube-apiserver sends it for a Provisioner."""
    request: dict[str, Any] = {
        "uid": uid,
        "kind": {"group": "karpenter.sh", "version": "v1alpha5", "kind": "Provisioner"},
        "resource": {"group": "karpenter.sh", "version": "v1alpha5", "resource": "provisioners"},
        "requestKind": {"group": "karpenter.sh", "version": "v1alpha5", "kind": "Provisioner"},
        "requestResource": {"group": "karpenter.sh", "version": "v1alpha5", "resource": "provisioners"},
        "name": _name(obj),
        "operation": operation,
        "userInfo": {"username": "kubernetes-admin", "groups": ["system:masters", "system:authenticated"]},
        "object": obj,
        "oldObject": old,
        "dryRun": False,
        "options": {"apiVersion": "meta.k8s.io/v1", "kind": f"{operation.title()}Options"},
    }
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


def decode_patch(response: dict[str, Any]) -> list[dict[str, Any]]:
    assert response["patchType"] == "JSONPatch"
    patch: list[dict[str, Any]] = json.loads(base64.b64decode(response["patch"]))
    return patch


def load_walkthrough(name: str) -> dict[str, Any]:
    """The walkthrough manifest ``name`` (e.g. ``01-provisioner.yaml``), as a user would apply it."""
    return walkthrough(name)
