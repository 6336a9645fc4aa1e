"""Defaults a Provisioner gets on admission (the ``/mutate`` webhook), as a pure function and a patch.

Why these defaults (Karpenter v0.6.3's AWS ``DefaultHook``, with one update):

- ``kubernetes.io/arch In [amd64]`` and ``karpenter.sh/capacity-type In [on-demand]`` when
  neither the labels nor the requirements name the key (aliases count: a requirement on
  ``beta.kubernetes.io/arch`` names the arch). Without them a Provisioner would launch spot
  and Graviton capacity that the user never asked for.
- When no ``launchTemplate`` is set (a user's launch template owns the AMI and IMDS settings):
  ``provider.amiFamily: AL2023`` (v0.6.3 defaulted ``AL2``, but EKS publishes no AL2 images
  for Kubernetes 1.33 and later) and, when the ``metadataOptions`` block is absent, IMDSv2 with
  a hop limit of 2 so pods cannot reach the node's credentials through IMDSv1. A block that is
  present is left alone: its unset fields fall to EC2's defaults.

Defaulting never fails: anything it cannot understand (no ``spec``, a provider that is not an
object, requirements that are not a list) is left for validation to reject with a message.
The patch only ever *adds*; a second pass over the defaulted object gives no operations.
"""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch

from provisioner.model.labels import ARCH, CAPACITY_TYPE, CAPACITY_TYPE_ON_DEMAND, normalize_label_key

DEFAULT_ARCH = "amd64"
DEFAULT_AMI_FAMILY = "AL2023"
DEFAULT_METADATA_OPTIONS: dict[str, Any] = {
    "httpEndpoint": "enabled",
    "httpProtocolIPv6": "disabled",
    "httpPutResponseHopLimit": 2,
    "httpTokens": "required",
}
#: Requirements added when the key is named nowhere, in this order.
DEFAULT_REQUIREMENTS: tuple[dict[str, Any], ...] = (
    {"key": ARCH, "operator": "In", "values": [DEFAULT_ARCH]},
    {"key": CAPACITY_TYPE, "operator": "In", "values": [CAPACITY_TYPE_ON_DEMAND]},
)


def _named_keys(spec: dict[str, Any]) -> set[str]:
    """Normalised label keys that the spec's labels or requirements name."""
    keys: set[str] = set()
    labels = spec.get("labels")
    if isinstance(labels, dict):
        keys.update(normalize_label_key(k) for k in labels if isinstance(k, str))
    requirements = spec.get("requirements")
    if isinstance(requirements, list):
        for item in requirements:
            if isinstance(item, dict) and isinstance(item.get("key"), str):
                keys.add(normalize_label_key(item["key"]))
    return keys


def defaulting_patch(obj: Any) -> list[dict[str, Any]]:
    """RFC 6902 operations (``add`` only) that default ``obj``, a Provisioner wire object.

    Paths: ``/spec/requirements`` (whole list when absent) or ``/spec/requirements/-`` (append),
    ``/spec/provider/amiFamily``, ``/spec/provider/metadataOptions``. Empty when nothing is
    missing, or when ``obj`` is not an object with an object ``spec``.
    """
    if not isinstance(obj, dict) or not isinstance(obj.get("spec"), dict):
        return []
    spec: dict[str, Any] = obj["spec"]
    ops: list[dict[str, Any]] = []

    named = _named_keys(spec)
    missing = [copy.deepcopy(r) for r in DEFAULT_REQUIREMENTS if r["key"] not in named]
    requirements = spec.get("requirements")
    if missing:
        if requirements is None:
            ops.append({"op": "add", "path": "/spec/requirements", "value": missing})
        elif isinstance(requirements, list):
            ops.extend({"op": "add", "path": "/spec/requirements/-", "value": r} for r in missing)

    provider = spec.get("provider")
    if isinstance(provider, dict) and provider.get("launchTemplate") is None:
        if provider.get("amiFamily") is None:
            ops.append({"op": "add", "path": "/spec/provider/amiFamily", "value": DEFAULT_AMI_FAMILY})
        if provider.get("metadataOptions") is None:
            ops.append(
                {"op": "add", "path": "/spec/provider/metadataOptions", "value": dict(DEFAULT_METADATA_OPTIONS)}
            )
    return ops


def default_provisioner(obj: dict[str, Any]) -> dict[str, Any]:
    """A defaulted copy of the Provisioner wire object ``obj`` (``obj`` is not modified)."""
    ops = defaulting_patch(obj)
    if not ops:
        return copy.deepcopy(obj)
    result: dict[str, Any] = jsonpatch.apply_patch(obj, ops, in_place=False)
    return result
