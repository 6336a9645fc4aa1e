"""The operator docs match the code: API fields, defaults, rules, metrics, event reasons, chart values."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
import yaml
from marshmallow import Schema

from extender import handlers as extender_handlers
from provisioner import metrics
from provisioner.api import defaults, schemas, types, validation
from provisioner.model import taints
from provisioner.model.requirements import OPERATORS

REPO = Path(__file__).resolve().parents[3]
DOCS = REPO / "docs"
SOURCES = [REPO / d for d in ("provisioner", "extender", "webhook", "certs")]

#: API dataclass -> the schema that loads and dumps its wire form.
SCHEMA_OF: dict[type, type[Schema]] = {
    types.NodeSelectorRequirement: schemas.NodeSelectorRequirementSchema,
    types.Taint: schemas.TaintSchema,
    types.MetadataOptions: schemas.MetadataOptionsSchema,
    types.EBS: schemas.EBSSchema,
    types.BlockDeviceMapping: schemas.BlockDeviceMappingSchema,
    types.AWSProvider: schemas.AWSProviderSchema,
    types.KubeletConfiguration: schemas.KubeletConfigurationSchema,
    types.Limits: schemas.LimitsSchema,
    types.Condition: schemas.ConditionSchema,
    types.ProvisionerStatus: schemas.ProvisionerStatusSchema,
    types.ProvisionerSpec: schemas.ProvisionerSpecSchema,
    types.Consolidation: schemas.ConsolidationSchema,
}


def read(name: str) -> str:
    return (DOCS / name).read_text()


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def wire_name(cls: type, field_name: str) -> str:
    declared = SCHEMA_OF[cls]._declared_fields
    if field_name in declared:
        return declared[field_name].data_key or field_name
    return camel(field_name)


def documented(text: str, wire: str) -> bool:
    return re.search(rf"`(?:[\w.]+\.)?{re.escape(wire)}`", text) is not None


def test_every_api_dataclass_is_mapped_to_its_schema() -> None:
    # Taint lives in the model (with the other taint rules) and is re-exported by the API types
    api_classes = {obj for obj in vars(types).values()
                   if dataclasses.is_dataclass(obj) and isinstance(obj, type)
                   and obj.__module__ in (types.__name__, taints.__name__)}
    assert api_classes - {types.Provisioner} == set(SCHEMA_OF)


@pytest.mark.parametrize("cls", list(SCHEMA_OF), ids=lambda c: c.__name__)
def test_every_field_of_the_schema_is_in_the_reference(cls: type) -> None:
    text = read("provisioner-reference.md")
    missing = [wire_name(cls, f.name) for f in dataclasses.fields(cls) if not documented(text, wire_name(cls, f.name))]
    assert missing == [], f"{cls.__name__}: fields missing from docs/provisioner-reference.md"
    # and every wire field the schema accepts (apiVersion/kind of the provider included)
    for name, field in SCHEMA_OF[cls]._declared_fields.items():
        assert documented(text, field.data_key or name), f"{cls.__name__}.{name}"


def test_wire_name_mapping_uses_the_schema_spelling() -> None:
    assert wire_name(types.EBS, "kms_key_id") == "kmsKeyID"
    assert wire_name(types.KubeletConfiguration, "cluster_dns") == "clusterDNS"
    assert wire_name(types.ProvisionerSpec, "ttl_seconds_after_empty") == "ttlSecondsAfterEmpty"
    assert not documented("`kmsKeyId`", "kmsKeyID")


def test_rules_and_defaults_in_the_reference_match_the_code() -> None:
    text = read("provisioner-reference.md")
    for allowed in (validation.AMI_FAMILIES, validation.VOLUME_TYPES, validation.TAINT_EFFECTS, OPERATORS,
                    validation.HTTP_TOKENS_VALUES, validation.HTTP_ENDPOINT_VALUES):
        for value in allowed:
            assert f"`{value}`" in text, value
    assert f"between {validation.WEIGHT_RANGE[0]} and {validation.WEIGHT_RANGE[1]}" in text
    assert f"{validation.HOP_LIMIT_RANGE[0]} to {validation.HOP_LIMIT_RANGE[1]}" in text
    assert f"`{defaults.DEFAULT_AMI_FAMILY}` (when no `launchTemplate`)" in text
    for requirement in defaults.DEFAULT_REQUIREMENTS:
        assert f"`{requirement['key']} {requirement['operator']} [{', '.join(requirement['values'])}]`" in text
    metadata_rows = {m.group(1): m.group(2) for m in re.finditer(r"^\| `(http\w+)` \| \w+ \| `?([\w]+)`? \|", text, re.M)}
    assert metadata_rows == {k: str(v) for k, v in defaults.DEFAULT_METADATA_OPTIONS.items()}


def test_metrics_list_is_the_generated_table() -> None:
    text = read("metrics.md")
    match = re.search(r"<!-- metrics-table:begin -->\n(.*?)<!-- metrics-table:end -->", text, re.S)
    assert match is not None
    assert match.group(1) == metrics.markdown_table(), "regenerate with: python -m provisioner.metrics"
    for name in metrics.metric_names():
        assert f"`{name}`" in text


def event_reasons() -> dict[str, str]:
    """reason -> type of every Event the product records.

    Two call shapes: ``<events|recorder>.warning/normal(obj, "Reason", ...)`` and a type literal
    followed by the reason literal (``recorder.event(obj, "Warning", "Reason", ...)``, helpers
    such as ``_provisioner_event(name, snapshot, "Warning", "LimitExceeded", ...)``).
    """
    found: dict[str, str] = {}
    method = re.compile(r"\b(?:events|recorder)\.(warning|normal)\(\s*[^,()]+,\s*\"(\w+)\"", re.S)
    literal = re.compile(r"\"(Warning|Normal)\",\s*\"([A-Z]\w+)\"", re.S)
    for root in SOURCES:
        for path in root.rglob("*.py"):
            text = path.read_text()
            for kind, reason in method.findall(text):
                found[reason] = "Warning" if kind == "warning" else "Normal"
            for kind, reason in literal.findall(text):
                found[reason] = kind
    return found


def test_every_event_reason_is_in_troubleshooting() -> None:
    reasons = event_reasons()
    # the scan sees both call shapes
    assert reasons.get("DrainBlocked") == "Warning" and reasons.get("Nominated") == "Normal"
    assert reasons.get("LimitExceeded") == "Warning"
    text = read("troubleshooting.md")
    missing = sorted(r for r in reasons if f"`{r}`" not in text)
    assert missing == [], "event reasons missing from docs/troubleshooting.md"
    for reason, kind in reasons.items():
        rows = re.findall(rf"^\| `{reason}` \|.*$", text, re.M)
        assert rows, f"{reason} has no row in a table of docs/troubleshooting.md"
        for row in rows:
            assert f"| {kind} |" in row, f"{reason} is a {kind} event"


def test_extender_reasons_are_explained() -> None:
    extender_doc, troubleshooting = read("scheduler-extender.md"), read("troubleshooting.md")
    reasons = [v for k, v in vars(extender_handlers).items() if k.startswith("REASON_")]
    assert len(reasons) >= 6
    for reason in [*reasons, extender_handlers.PROVISIONING_SUFFIX.strip()]:
        assert f"`{reason}`" in extender_doc, reason
        assert reason in troubleshooting, reason


def test_every_chart_value_is_documented_in_installation() -> None:
    values = yaml.safe_load((REPO / "deploy" / "chart" / "groupless" / "values.yaml").read_text())
    text = read("installation.md")
    for key, value in values.items():
        if key in ("nameOverride", "fullnameOverride", "imagePullSecrets", "podAnnotations", "podLabels"):
            continue
        assert f"`{key}" in text, key
        if isinstance(value, dict) and key in ("aws", "controller"):
            for sub in value:
                if sub not in ("resources", "extraArgs", "extraEnv", "port"):
                    assert f"`{key}.{sub}`" in text or f".{sub}`" in text, f"{key}.{sub}"


def test_relative_links_resolve() -> None:
    for page in DOCS.glob("*.md"):
        for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", page.read_text()):
            assert (page.parent / target).exists(), f"{page.name} -> {target}"


def test_event_source_in_the_docs_is_the_controllers_component() -> None:
    components = set(re.findall(r"EventRecorder\([^)]*component=\"([\w-]+)\"",
                                (REPO / "provisioner" / "app" / "controller.py").read_text()))
    assert len(components) == 1
    (component,) = components
    for page in ("troubleshooting.md", "installation.md"):
        sources = set(re.findall(r"source=([\w-]+)", read(page)))
        assert sources == {component}, page


def test_every_provisioner_example_in_the_docs_is_admitted() -> None:
    examples = []
    for page in DOCS.glob("*.md"):
        for block in re.findall(r"```yaml\n(.*?)```", page.read_text(), re.S):
            for doc in yaml.safe_load_all(block):
                if isinstance(doc, dict) and doc.get("kind") == "Provisioner":
                    examples.append((page.name, doc))
    assert examples
    for page, example in examples:
        result = validation.validate_provisioner(defaults.default_provisioner(example))
        assert result.ok, f"{page}: {result.message}"
