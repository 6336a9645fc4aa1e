"""Validate rendered manifests against the Kubernetes OpenAPI types of the kubernetes client.

The kubernetes Python client is generated from the Kubernetes OpenAPI spec (client 37 = API
1.37): each model lists its fields (``attribute_map``: wire name -> python name) and their types
(``openapi_types``), and its constructor rejects a missing required field or a bad enum value
(client-side validation). Walking a rendered object through these models catches what
``kubectl apply`` would reject or silently drop: unknown or misspelt fields, wrong types
(a string where an int is due, a map where a list is due), missing required fields.
"""

from __future__ import annotations

import re
from typing import Any

from kubernetes.client import models

#: (apiVersion, kind) of every object the chart may render -> client model class name.
KNOWN: dict[tuple[str, str], str] = {
    ("v1", "ServiceAccount"): "V1ServiceAccount",
    ("v1", "Service"): "V1Service",
    ("v1", "ConfigMap"): "V1ConfigMap",
    ("v1", "Secret"): "V1Secret",
    ("apps/v1", "Deployment"): "V1Deployment",
    ("policy/v1", "PodDisruptionBudget"): "V1PodDisruptionBudget",
    ("rbac.authorization.k8s.io/v1", "ClusterRole"): "V1ClusterRole",
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): "V1ClusterRoleBinding",
    ("rbac.authorization.k8s.io/v1", "Role"): "V1Role",
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): "V1RoleBinding",
    ("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration"): "V1MutatingWebhookConfiguration",
    ("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration"): "V1ValidatingWebhookConfiguration",
    ("apiextensions.k8s.io/v1", "CustomResourceDefinition"): "V1CustomResourceDefinition",
}

_PRIMITIVES = {"str": str, "int": int, "bool": bool, "float": (int, float), "object": object, "datetime": str, "date": str}
_LIST = re.compile(r"^(?:list|List)\[(.+)\]$")
_DICT = re.compile(r"^(?:dict\(str, (.+)\)|Dict\[str, (.+)\])$")


class SchemaError(ValueError):
    """An object does not match its Kubernetes type; the message is the JSON path and the problem."""


def _build(value: Any, type_name: str, path: str) -> Any:
    if (m := _LIST.match(type_name)) is not None:
        if not isinstance(value, list):
            raise SchemaError(f"{path}: expected a list ({type_name}), got {type(value).__name__}")
        return [_build(item, m.group(1), f"{path}[{i}]") for i, item in enumerate(value)]
    if (m := _DICT.match(type_name)) is not None:
        if not isinstance(value, dict):
            raise SchemaError(f"{path}: expected a map ({type_name}), got {type(value).__name__}")
        inner = m.group(1) or m.group(2)
        return {k: _build(v, inner, f"{path}.{k}") for k, v in value.items()}
    if type_name in _PRIMITIVES:
        expected = _PRIMITIVES[type_name]
        if value is not None and expected is not object:
            if isinstance(value, bool) and expected is not bool:
                raise SchemaError(f"{path}: expected {type_name}, got bool {value!r}")
            if not isinstance(value, expected):
                raise SchemaError(f"{path}: expected {type_name}, got {type(value).__name__} {value!r}")
        return value
    cls = getattr(models, type_name, None)
    if cls is None:
        raise SchemaError(f"{path}: unknown type {type_name}")
    if not isinstance(value, dict):
        raise SchemaError(f"{path}: expected an object ({type_name}), got {type(value).__name__}")
    wire_to_attr = {wire: attr for attr, wire in cls.attribute_map.items()}
    kwargs = {}
    for key, item in value.items():
        if key not in wire_to_attr:
            raise SchemaError(f"{path}: unknown field {key!r} in {type_name}")
        attr = wire_to_attr[key]
        kwargs[attr] = _build(item, cls.openapi_types[attr], f"{path}.{key}")
    try:
        return cls(**kwargs)
    except ValueError as error:  # required field missing, enum value not allowed
        raise SchemaError(f"{path}: {error}") from error


def validate(obj: dict[str, Any]) -> None:
    """Raise SchemaError unless ``obj`` is a valid object of a kind the chart renders."""
    if not isinstance(obj, dict):
        raise SchemaError(f"not an object: {obj!r}")
    key = (obj.get("apiVersion"), obj.get("kind"))
    if key not in KNOWN:
        raise SchemaError(f"unknown apiVersion/kind {key}")
    name = (obj.get("metadata") or {}).get("name")
    if not name:
        raise SchemaError(f"{key[1]} without metadata.name")
    _build(obj, KNOWN[key], f"{key[1]}/{name}")
