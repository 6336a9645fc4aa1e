"""deploy/: the CRD stays structural and permissive and matches the decoder; webhooks and RBAC fit the code."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from marshmallow import Schema, fields

from certs.bootstrap import DEFAULT_CONFIGURATIONS, DEFAULT_NAMESPACE, DEFAULT_SECRET, DEFAULT_SERVICE
from provisioner.api.schemas import ProvisionerSpecSchema, ProvisionerStatusSchema
from tests.builders.admission import load_walkthrough, valid
from webhook.app import create_app
from webhook.handlers import MUTATING_WEBHOOK_NAME, VALIDATING_WEBHOOK_NAME

DEPLOY = Path(__file__).resolve().parents[3] / "deploy"


def docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict)]


CRD = docs(DEPLOY / "crds" / "karpenter.sh_provisioners.yaml")[0]
VERSION = CRD["spec"]["versions"][0]
SCHEMA = VERSION["schema"]["openAPIV3Schema"]


def test_crd_identity() -> None:
    assert CRD["metadata"]["name"] == "provisioners.karpenter.sh"
    assert CRD["spec"]["scope"] == "Cluster"
    assert CRD["spec"]["names"]["kind"] == "Provisioner"
    assert (VERSION["name"], VERSION["served"], VERSION["storage"]) == ("v1alpha5", True, True)
    assert VERSION["subresources"] == {"status": {}}
    assert [c["name"] for c in VERSION["additionalPrinterColumns"]] == [
        "Weight", "CPU", "Memory", "TTL-Empty", "TTL-Expiry", "Age"]


def walk(node: dict[str, Any], path: str = "") -> list[tuple[str, dict[str, Any]]]:
    found = [(path, node)]
    for name, child in (node.get("properties") or {}).items():
        found += walk(child, f"{path}.{name}")
    if isinstance(node.get("items"), dict):
        found += walk(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        found += walk(node["additionalProperties"], f"{path}{{}}")
    return found


def test_crd_schema_is_structural_and_types_only() -> None:
    forbidden = {"enum", "pattern", "minimum", "maximum", "required", "minLength", "maxLength", "minItems",
                 "maxItems", "x-kubernetes-validations", "default"}
    for path, node in walk(SCHEMA):
        assert "type" in node or node.get("x-kubernetes-int-or-string") is True, path
        assert not forbidden & set(node), (path, forbidden & set(node))
    provider = SCHEMA["properties"]["spec"]["properties"]["provider"]
    assert provider == {"description": provider["description"], "type": "object",
                        "x-kubernetes-preserve-unknown-fields": True}


def crd_fields(node: dict[str, Any]) -> set[str]:
    return set(node.get("properties") or {})


def schema_fields(schema: Schema) -> set[str]:
    return {f.data_key or name for name, f in schema.fields.items() if not f.load_only}


@pytest.mark.parametrize(("path", "schema"), [
    (("spec",), ProvisionerSpecSchema()),
    (("status",), ProvisionerStatusSchema()),
])
def test_crd_declares_every_field_the_decoder_accepts(path: tuple[str, ...], schema: Schema) -> None:
    """A field missing from the CRD would be pruned by kube-apiserver before the webhook sees it."""

    def compare(crd: dict[str, Any], marsh: Schema, where: str) -> None:
        assert crd_fields(crd) == schema_fields(marsh), where
        for name, field in marsh.fields.items():
            key = field.data_key or name
            child = crd["properties"][key]
            if isinstance(field, fields.List) and isinstance(field.inner, fields.Nested):
                compare(child["items"], field.inner.schema, f"{where}.{key}[]")
            elif isinstance(field, fields.Nested) and key != "provider":
                compare(child, field.schema, f"{where}.{key}")

    node = SCHEMA
    for segment in path:
        node = node["properties"][segment]
    compare(node, schema, ".".join(path))


def conforms(value: Any, node: dict[str, Any], path: str = "") -> list[str]:
    """Where ``value`` breaks the CRD's types (what kube-apiserver would reject before the webhook)."""
    if node.get("x-kubernetes-int-or-string"):
        ok = isinstance(value, (int, str)) and not isinstance(value, bool)
        return [] if ok else [path]
    kind = node["type"]
    checks = {"object": dict, "array": list, "string": str, "integer": int, "boolean": bool}
    if not isinstance(value, checks[kind]) or (kind == "integer" and isinstance(value, bool)):
        return [path]
    errors: list[str] = []
    if kind == "object" and not node.get("x-kubernetes-preserve-unknown-fields"):
        for key, item in value.items():
            if key in (node.get("properties") or {}):
                errors += conforms(item, node["properties"][key], f"{path}.{key}")
            elif isinstance(node.get("additionalProperties"), dict):
                errors += conforms(item, node["additionalProperties"], f"{path}.{key}")
    if kind == "array":
        for i, item in enumerate(value):
            errors += conforms(item, node["items"], f"{path}[{i}]")
    return errors


def test_walkthrough_and_test_provisioners_pass_the_crd_types() -> None:
    for obj in (load_walkthrough("01-provisioner.yaml"), load_walkthrough("04-provisioner-with-expiry.yaml"), valid()):
        assert conforms(obj, SCHEMA) == []
    broken = valid()
    broken["spec"]["requirements"][0]["operator"] = "Equals"  # a rule, not a type: left to the webhook
    assert conforms(broken, SCHEMA) == []


WEBHOOKS = {d["kind"]: d for d in docs(DEPLOY / "webhooks" / "webhooks.yaml")}


@pytest.mark.parametrize(("kind", "name", "path"), [
    ("MutatingWebhookConfiguration", MUTATING_WEBHOOK_NAME, "/mutate"),
    ("ValidatingWebhookConfiguration", VALIDATING_WEBHOOK_NAME, "/validate"),
])
def test_webhook_configurations(kind: str, name: str, path: str) -> None:
    config = WEBHOOKS[kind]
    assert (kind, config["metadata"]["name"]) in DEFAULT_CONFIGURATIONS
    [webhook] = config["webhooks"]
    assert webhook["name"] == name
    assert webhook["admissionReviewVersions"] == ["v1"]
    assert (webhook["sideEffects"], webhook["failurePolicy"], webhook["timeoutSeconds"]) == ("None", "Fail", 10)
    assert webhook["rules"] == [{"apiGroups": ["karpenter.sh"], "apiVersions": ["v1alpha5"],
                                 "operations": ["CREATE", "UPDATE"], "resources": ["provisioners"],
                                 "scope": "Cluster"}]
    assert webhook["clientConfig"] == {"service": {"name": DEFAULT_SERVICE, "namespace": DEFAULT_NAMESPACE,
                                                   "path": path, "port": 443}}
    assert path in {rule.rule for rule in create_app().url_map.iter_rules()}


def test_rbac_grants_what_the_bootstrap_does() -> None:
    objects = {(d["kind"], d["metadata"]["name"]): d for d in docs(DEPLOY / "rbac.yaml")}
    cluster_rules = objects[("ClusterRole", "groupless")]["rules"]
    for kind, name in DEFAULT_CONFIGURATIONS:
        resource = kind.lower() + "s"
        assert {"apiGroups": ["admissionregistration.k8s.io"], "resources": [resource], "resourceNames": [name],
                "verbs": ["get", "patch", "update"]} in cluster_rules
    role_rules = objects[("Role", "groupless")]["rules"]
    assert {"apiGroups": [""], "resources": ["secrets"], "verbs": ["create"]} in role_rules
    assert {"apiGroups": [""], "resources": ["secrets"], "resourceNames": [DEFAULT_SECRET],
            "verbs": ["get", "update", "patch"]} in role_rules


def test_deployment_runs_the_webhook_with_the_bootstrap_and_the_service_routes_443() -> None:
    objects = {(d["kind"], d["metadata"]["name"]): d for d in docs(DEPLOY / "controller.yaml")}
    pod = objects[("Deployment", "groupless")]["spec"]["template"]["spec"]
    webhook = next(c for c in pod["containers"] if c["name"] == "webhook")
    assert webhook["args"][:3] == ["webhook", "--listen=0.0.0.0:8443", "--bootstrap-certs"]
    assert f"--secret-name={DEFAULT_SECRET}" in webhook["args"]
    assert f"--service-name={DEFAULT_SERVICE}" in webhook["args"]
    service = objects[("Service", DEFAULT_SERVICE)]
    assert {"name": "https-webhook", "port": 443, "targetPort": "https-webhook", "protocol": "TCP"} in \
        service["spec"]["ports"]
    assert pod["serviceAccountName"] == "groupless"
