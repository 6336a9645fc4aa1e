"""marshmallow schemas for the Provisioner wire form, and the one decoder everybody calls.

Why a strict decoder: Karpenter decodes ``spec.provider`` with a strict codec, so a typo such
as ``subnetSelecter`` is an error instead of a silently ignored field that would later launch
nodes into the wrong subnets. We apply the same strictness to the whole object (the CRD is
permissive on purpose, see ``deploy/crds/``), and report *every* problem at once, each with the
field path the user wrote (``spec.requirements[1].values``) and the offending value.

Round trip: ``load_provisioner(dump_provisioner(p)) == p`` for every Provisioner, and
``dump_provisioner(load_provisioner(obj)) == obj`` for every object in canonical form. The
canonical form differs from what a user may type in two harmless ways: quantities are strings
(``cpu: 1000`` becomes ``cpu: "1000"``, as Go's ``resource.Quantity`` marshals them) and empty
``requirements``/``labels``/``taints``/``startupTaints`` lists and maps are omitted.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, ClassVar

from marshmallow import (
    EXCLUDE,
    RAISE,
    Schema,
    ValidationError,
    fields,
    post_dump,
    post_load,
    validates_schema,
)

from provisioner.api.types import (
    EBS,
    AWSProvider,
    BlockDeviceMapping,
    Condition,
    Consolidation,
    KubeletConfiguration,
    Limits,
    MetadataOptions,
    NodeSelectorRequirement,
    Provisioner,
    ProvisionerSpec,
    ProvisionerStatus,
    Taint,
)
from provisioner.model.labels import API_VERSION, KIND
from provisioner.model.quantity import QuantityError, parse_decimal

__all__ = [
    "MapKey",
    "ProvisionerDecodeError",
    "ProvisionerSchema",
    "document_order",
    "dump_provisioner",
    "format_path",
    "load_provisioner",
]

#: The provider block's own TypeMeta, accepted (Karpenter's AWS struct inlines it) but not kept.
PROVIDER_API_VERSION = "extensions.karpenter.sh/v1alpha1"
PROVIDER_KIND = "AWS"


class ProvisionerDecodeError(ValueError):
    """The object is not a well-formed Provisioner.

    ``message`` joins every problem as ``<path>: <what is wrong>``; ``errors`` keeps them as
    ``(path, value, message)`` triples (``value`` is ``None`` when the field is missing).
    """

    def __init__(
        self,
        message: str,
        errors: Iterable[tuple[str, Any, str]] = (),
        segments: Iterable[tuple[str | int, ...]] = (),
    ) -> None:
        super().__init__(message)
        self.message = message
        self.errors: list[tuple[str, Any, str]] = list(errors)
        #: The path of each error as segments (keys and indices), parallel to ``errors``.
        self.segments: list[tuple[str | int, ...]] = list(segments)


class MapKey(str):
    """A map key inside an error path: formatted ``["key"]`` rather than ``.key``."""

    __slots__ = ()


_MISSING = object()
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def format_path(segments: Iterable[str | int]) -> str:
    """``["spec", "requirements", 1, "operator"]`` -> ``spec.requirements[1].operator``.

    Integers become ``[i]``; :class:`MapKey` segments (and keys that are not identifiers)
    become ``["key"]`` so that label keys with dots and slashes stay readable.
    """
    out = ""
    for segment in segments:
        if isinstance(segment, int):
            out += f"[{segment}]"
        elif isinstance(segment, MapKey) or not _IDENTIFIER.match(segment):
            out += "[" + json.dumps(str(segment)) + "]"
        else:
            out += ("." if out else "") + segment
    return out


def describe_value(value: Any, limit: int = 80) -> str:
    """A value as the user wrote it, JSON-quoted, shortened to ``limit`` characters."""
    try:
        text = json.dumps(value, sort_keys=True, default=str)
    except (ValueError, RecursionError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


# ------------------------------------------------------------------------------------ fields
class StrictInteger(fields.Field[int]):
    """A JSON integer: no strings, no floats with a fraction, no booleans."""

    def _deserialize(self, value: Any, attr: str | None, data: Mapping[str, Any] | None, **kwargs: Any) -> int:
        if isinstance(value, bool):
            raise ValidationError("must be an integer, not a boolean")
        if isinstance(value, int):
            return value
        if isinstance(value, float) and math.isfinite(value) and value.is_integer():
            return int(value)
        raise ValidationError("must be an integer")

    def _serialize(self, value: int | None, attr: str | None, obj: Any, **kwargs: Any) -> int | None:
        return value


class StrictBoolean(fields.Field[bool]):
    """A JSON boolean (``"true"`` is refused, as Go's decoder refuses it)."""

    def _deserialize(self, value: Any, attr: str | None, data: Mapping[str, Any] | None, **kwargs: Any) -> bool:
        if not isinstance(value, bool):
            raise ValidationError("must be a boolean")
        return value

    def _serialize(self, value: bool | None, attr: str | None, obj: Any, **kwargs: Any) -> bool | None:
        return value


class StrictString(fields.Field[str]):
    """A JSON string."""

    def _deserialize(self, value: Any, attr: str | None, data: Mapping[str, Any] | None, **kwargs: Any) -> str:
        if not isinstance(value, str):
            raise ValidationError("must be a string")
        return value

    def _serialize(self, value: str | None, attr: str | None, obj: Any, **kwargs: Any) -> str | None:
        return value


def quantity_string(value: Any) -> str:
    """A quantity in its canonical wire form (a string); ValidationError when not a quantity."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ValidationError("must be a quantity (a string such as \"500m\" or \"1Gi\", or a number)")
    try:
        parse_decimal(value)
    except QuantityError as error:
        raise ValidationError('not a quantity (examples: "500m", "2", "1.5Gi", "100M")') from error
    if isinstance(value, str):
        return value
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


class Quantity(fields.Field[str]):
    """A ``resource.Quantity``: a string or a number in, the string form out."""

    def _deserialize(self, value: Any, attr: str | None, data: Mapping[str, Any] | None, **kwargs: Any) -> str:
        return quantity_string(value)

    def _serialize(self, value: str | None, attr: str | None, obj: Any, **kwargs: Any) -> str | None:
        return value


Pairs = tuple[tuple[str, str], ...]


class StringMap(fields.Field[Pairs]):
    """A JSON object of strings, kept as a tuple of ``(key, value)`` pairs in input order.

    With ``quantities=True`` the values are quantities (numbers accepted, kept as strings).
    """

    def __init__(self, *, quantities: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.quantities = quantities

    def _deserialize(self, value: Any, attr: str | None, data: Mapping[str, Any] | None, **kwargs: Any) -> Pairs:
        if not isinstance(value, dict):
            raise ValidationError("must be an object (a map of strings)")
        errors: dict[str, list[str]] = {}
        pairs: list[tuple[str, str]] = []
        for key, item in value.items():
            if self.quantities:
                try:
                    pairs.append((key, quantity_string(item)))
                except ValidationError as error:
                    errors[MapKey(key)] = [str(m) for m in _as_list(error.messages)]
            elif isinstance(item, str):
                pairs.append((key, item))
            else:
                errors[MapKey(key)] = ["must be a string"]
        if errors:
            raise ValidationError(errors)
        return tuple(pairs)

    def _serialize(self, value: Pairs | None, attr: str | None, obj: Any, **kwargs: Any) -> dict[str, str] | None:
        return None if value is None else dict(value)


class StringList(fields.Field[tuple[str, ...]]):
    """A JSON array of strings, kept as a tuple."""

    def _deserialize(
        self, value: Any, attr: str | None, data: Mapping[str, Any] | None, **kwargs: Any
    ) -> tuple[str, ...]:
        if not isinstance(value, list):
            raise ValidationError("must be a list of strings")
        errors = {i: ["must be a string"] for i, item in enumerate(value) if not isinstance(item, str)}
        if errors:
            raise ValidationError(errors)
        return tuple(value)

    def _serialize(self, value: tuple[str, ...] | None, attr: str | None, obj: Any, **kwargs: Any) -> list[str] | None:
        return None if value is None else list(value)


def _as_list(messages: Any) -> list[Any]:
    return messages if isinstance(messages, list) else [messages]


class ObjectField(fields.Field[dict[str, Any]]):
    """A JSON object passed through as it is (``metadata``)."""

    def _deserialize(
        self, value: Any, attr: str | None, data: Mapping[str, Any] | None, **kwargs: Any
    ) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise ValidationError("must be an object")
        return value

    def _serialize(
        self, value: dict[str, Any] | None, attr: str | None, obj: Any, **kwargs: Any
    ) -> dict[str, Any] | None:
        return value


# ------------------------------------------------------------------------------------ schemas
class _Strict(Schema):
    """Unknown fields are errors; ``None`` values and the listed empty collections are not dumped."""

    class Meta:
        unknown = RAISE

    #: Data keys omitted from the dump when their value is an empty list or map.
    OMIT_EMPTY: ClassVar[frozenset[str]] = frozenset()

    @post_dump
    def _drop_unset(self, data: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        return {
            k: v for k, v in data.items() if v is not None and not (k in self.OMIT_EMPTY and v in ([], {}, ()))
        }


def _nested(schema: type[Schema], **kwargs: Any) -> fields.Nested:
    return fields.Nested(schema, error_messages={"type": "must be an object"}, **kwargs)


def _list_of(schema: type[Schema], **kwargs: Any) -> fields.List[Any]:
    return fields.List(_nested(schema), error_messages={"invalid": "must be a list"}, **kwargs)


class NodeSelectorRequirementSchema(_Strict):
    key = StrictString(required=True)
    operator = StrictString(required=True)
    values = StringList()

    OMIT_EMPTY = frozenset({"values"})

    @post_load
    def _make(self, data: dict[str, Any], **kwargs: Any) -> NodeSelectorRequirement:
        return NodeSelectorRequirement(data["key"], data["operator"], tuple(data.get("values", ())))


class TaintSchema(_Strict):
    key = StrictString(required=True)
    value = StrictString()
    effect = StrictString(required=True)

    @post_load
    def _make(self, data: dict[str, Any], **kwargs: Any) -> Taint:
        return Taint(key=data["key"], effect=data["effect"], value=data.get("value", ""))

    @post_dump
    def _drop_empty_value(self, data: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        if data.get("value") == "":
            del data["value"]
        return data


class MetadataOptionsSchema(_Strict):
    http_endpoint = StrictString(data_key="httpEndpoint")
    http_protocol_ipv6 = StrictString(data_key="httpProtocolIPv6")
    http_put_response_hop_limit = StrictInteger(data_key="httpPutResponseHopLimit")
    http_tokens = StrictString(data_key="httpTokens")

    @post_load
    def _make(self, data: dict[str, Any], **kwargs: Any) -> MetadataOptions:
        return MetadataOptions(**data)


class EBSSchema(_Strict):
    volume_size = Quantity(data_key="volumeSize")
    volume_type = StrictString(data_key="volumeType")
    iops = StrictInteger()
    throughput = StrictInteger()
    encrypted = StrictBoolean()
    kms_key_id = StrictString(data_key="kmsKeyID")
    delete_on_termination = StrictBoolean(data_key="deleteOnTermination")
    snapshot_id = StrictString(data_key="snapshotID")

    @post_load
    def _make(self, data: dict[str, Any], **kwargs: Any) -> EBS:
        return EBS(**data)


class BlockDeviceMappingSchema(_Strict):
    device_name = StrictString(data_key="deviceName", required=True)
    ebs = _nested(EBSSchema)

    @post_load
    def _make(self, data: dict[str, Any], **kwargs: Any) -> BlockDeviceMapping:
        return BlockDeviceMapping(**data)


class AWSProviderSchema(_Strict):
    """Karpenter's ``extensions.karpenter.sh/v1alpha1 AWS`` block, decoded strictly."""

    api_version = StrictString(data_key="apiVersion", load_only=True)
    kind = StrictString(load_only=True)
    subnet_selector = StringMap(data_key="subnetSelector")
    security_group_selector = StringMap(data_key="securityGroupSelector")
    instance_profile = StrictString(data_key="instanceProfile")
    launch_template = StrictString(data_key="launchTemplate")
    ami_family = StrictString(data_key="amiFamily")
    tags = StringMap()
    metadata_options = _nested(MetadataOptionsSchema, data_key="metadataOptions")
    block_device_mappings = _list_of(BlockDeviceMappingSchema, data_key="blockDeviceMappings")

    @validates_schema
    def _type_meta(self, data: dict[str, Any], **kwargs: Any) -> None:
        errors: dict[str, list[str]] = {}
        if data.get("api_version", PROVIDER_API_VERSION) != PROVIDER_API_VERSION:
            errors["apiVersion"] = [f"must be {PROVIDER_API_VERSION} when set"]
        if data.get("kind", PROVIDER_KIND) != PROVIDER_KIND:
            errors["kind"] = [f"must be {PROVIDER_KIND} when set"]
        if errors:
            raise ValidationError(errors)

    @post_load
    def _make(self, data: dict[str, Any], **kwargs: Any) -> AWSProvider:
        data.pop("api_version", None)
        data.pop("kind", None)
        if "block_device_mappings" in data:
            data["block_device_mappings"] = tuple(data["block_device_mappings"])
        return AWSProvider(**data)


class KubeletConfigurationSchema(_Strict):
    cluster_dns = StringList(data_key="clusterDNS")
    max_pods = StrictInteger(data_key="maxPods")
    pods_per_core = StrictInteger(data_key="podsPerCore")
    system_reserved = StringMap(data_key="systemReserved", quantities=True)
    kube_reserved = StringMap(data_key="kubeReserved", quantities=True)
    eviction_hard = StringMap(data_key="evictionHard")

    @post_load
    def _make(self, data: dict[str, Any], **kwargs: Any) -> KubeletConfiguration:
        return KubeletConfiguration(**data)


class LimitsSchema(_Strict):
    resources = StringMap(quantities=True, load_default=())

    @post_load
    def _make(self, data: dict[str, Any], **kwargs: Any) -> Limits:
        return Limits(resources=data["resources"])


class ConsolidationSchema(_Strict):
    enabled = StrictBoolean()

    @post_load
    def _make(self, data: dict[str, Any], **kwargs: Any) -> Consolidation:
        return Consolidation(**data)


class ProvisionerSpecSchema(_Strict):
    requirements = _list_of(NodeSelectorRequirementSchema)
    labels = StringMap()
    taints = _list_of(TaintSchema)
    startup_taints = _list_of(TaintSchema, data_key="startupTaints")
    limits = _nested(LimitsSchema)
    provider = _nested(AWSProviderSchema, allow_none=True)
    kubelet_configuration = _nested(KubeletConfigurationSchema, data_key="kubeletConfiguration")
    ttl_seconds_after_empty = StrictInteger(data_key="ttlSecondsAfterEmpty")
    ttl_seconds_until_expired = StrictInteger(data_key="ttlSecondsUntilExpired")
    weight = StrictInteger()
    consolidation = _nested(ConsolidationSchema)

    OMIT_EMPTY = frozenset({"requirements", "labels", "taints", "startupTaints"})

    @post_load
    def _make(self, data: dict[str, Any], **kwargs: Any) -> ProvisionerSpec:
        for key in ("requirements", "taints", "startup_taints"):
            if key in data:
                data[key] = tuple(data[key])
        return ProvisionerSpec(**data)


class ConditionSchema(_Strict):
    type = StrictString(required=True)
    status = StrictString(required=True)
    last_transition_time = StrictString(data_key="lastTransitionTime")
    reason = StrictString()
    message = StrictString()
    severity = StrictString()

    @post_load
    def _make(self, data: dict[str, Any], **kwargs: Any) -> Condition:
        return Condition(**data)


class ProvisionerStatusSchema(_Strict):
    resources = StringMap(quantities=True)
    conditions = _list_of(ConditionSchema)
    last_scale_time = StrictString(data_key="lastScaleTime")

    OMIT_EMPTY = frozenset({"resources", "conditions"})

    @post_load
    def _make(self, data: dict[str, Any], **kwargs: Any) -> ProvisionerStatus:
        if "conditions" in data:
            data["conditions"] = tuple(data["conditions"])
        return ProvisionerStatus(**data)


class ProvisionerSchema(_Strict):
    """The whole object: ``apiVersion``, ``kind``, ``metadata`` (kept as a dict), ``spec``, ``status``."""

    api_version = StrictString(data_key="apiVersion")
    kind = StrictString()
    metadata = ObjectField()
    spec = _nested(ProvisionerSpecSchema)
    status = _nested(ProvisionerStatusSchema)

    @validates_schema
    def _type_meta(self, data: dict[str, Any], **kwargs: Any) -> None:
        errors: dict[str, list[str]] = {}
        if data.get("api_version", API_VERSION) != API_VERSION:
            errors["apiVersion"] = [f"must be {API_VERSION}"]
        if data.get("kind", KIND) != KIND:
            errors["kind"] = [f"must be {KIND}"]
        if errors:
            raise ValidationError(errors)

    @post_load
    def _make(self, data: dict[str, Any], **kwargs: Any) -> Provisioner:
        metadata = data.get("metadata") or {}
        name, uid, version = (metadata.get(k, "") for k in ("name", "uid", "resourceVersion"))
        return Provisioner(
            name=name if isinstance(name, str) else "",
            spec=data.get("spec") or ProvisionerSpec(),
            status=data.get("status") or ProvisionerStatus(),
            uid=uid if isinstance(uid, str) else "",
            resource_version=version if isinstance(version, str) else "",
            metadata=metadata,
        )


class _StatusDump(ProvisionerStatusSchema):
    class Meta:
        unknown = EXCLUDE


_SCHEMA = ProvisionerSchema()

_MESSAGES = {
    "Unknown field.": "unknown field",
    "Missing data for required field.": "required field is missing",
    "Field may not be null.": "may not be null",
    "Invalid input type.": "must be an object",
}


def _flatten(messages: Any, path: tuple[str | int, ...] = ()) -> Iterator[tuple[tuple[str | int, ...], str]]:
    if isinstance(messages, dict):
        for key, value in messages.items():
            if key == "_schema":
                yield from _flatten(value, path)
            else:
                yield from _flatten(value, (*path, key))
    elif isinstance(messages, list):
        for message in messages:
            yield from _flatten(message, path)
    else:
        yield path, _MESSAGES.get(str(messages), str(messages))


def _lookup(obj: Any, path: tuple[str | int, ...]) -> Any:
    for segment in path:
        if isinstance(obj, dict) and segment in obj:
            obj = obj[segment]
        elif isinstance(obj, list) and isinstance(segment, int) and 0 <= segment < len(obj):
            obj = obj[segment]
        else:
            return _MISSING
    return obj


def decode_errors(obj: Any, messages: Any) -> list[tuple[str, Any, str]]:
    """Marshmallow's nested error messages as ``(path, value, message)``, value looked up in ``obj``."""
    result = []
    for path, message in _flatten(messages):
        value = _lookup(obj, path)
        result.append((format_path(path) or "<root>", None if value is _MISSING else value, message))
    return result


def document_order(obj: Any, segments: Iterable[str | int]) -> tuple[tuple[int, str], ...]:
    """A sort key placing a path where it appears in ``obj`` (missing fields after their siblings)."""
    key: list[tuple[int, str]] = []
    for segment in segments:
        if isinstance(obj, dict):
            keys = list(obj)
            key.append((keys.index(segment), "") if segment in obj else (len(keys), str(segment)))
            obj = obj.get(segment) if segment in obj else None
        elif isinstance(obj, list) and isinstance(segment, int) and 0 <= segment < len(obj):
            key.append((segment, ""))
            obj = obj[segment]
        else:
            key.append((0, str(segment)))
            obj = None
    return tuple(key)


def error_line(path: str, value: Any, message: str, *, has_value: bool = True) -> str:
    """One error as users read it: ``spec.weight: invalid value 0: must be between 1 and 100``."""
    if not has_value:
        return f"{path}: {message}"
    return f"{path}: invalid value {describe_value(value)}: {message}"


def load_provisioner(obj: Any) -> Provisioner:
    """Decode a Provisioner wire object (a dict as read from the API server or a YAML file).

    Strict: unknown fields, wrong types and malformed quantities are errors. Raises
    :class:`ProvisionerDecodeError` whose message lists every problem as
    ``<path>: invalid value <json>: <why>`` (or ``<path>: required field is missing``).
    Semantic rules (operators, label syntax, ranges) are :func:`provisioner.api.validation.validate_provisioner`'s.
    """
    if not isinstance(obj, dict):
        raise ProvisionerDecodeError(
            f"a Provisioner must be a JSON object, got {describe_value(obj)}", [("<root>", obj, "must be an object")]
        )
    try:
        result = _SCHEMA.load(obj)
    except ValidationError as error:
        errors = decode_errors(obj, error.messages)
        lines = []
        for path, value, message in errors:
            missing = value is None and message == "required field is missing"
            lines.append(error_line(path, value, message, has_value=not missing))
        segments = [path for path, _ in _flatten(error.messages)]
        raise ProvisionerDecodeError("; ".join(lines), errors, segments) from None
    except RecursionError:
        raise ProvisionerDecodeError("the object is nested too deeply", [("<root>", None, "nested too deeply")]) from None
    assert isinstance(result, Provisioner)
    return result


def dump_provisioner(provisioner: Provisioner) -> dict[str, Any]:
    """The canonical wire form of ``provisioner`` (``load_provisioner`` gives it back unchanged).

    ``metadata`` is the stored dict when there is one, else ``{"name": ...}`` (plus uid and
    resourceVersion when set). ``status`` is omitted when empty.
    """
    metadata = dict(provisioner.metadata)
    if not metadata:
        metadata = {"name": provisioner.name}
        if provisioner.uid:
            metadata["uid"] = provisioner.uid
        if provisioner.resource_version:
            metadata["resourceVersion"] = provisioner.resource_version
    result: dict[str, Any] = {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": metadata,
        "spec": ProvisionerSpecSchema().dump(provisioner.spec),
    }
    status = _StatusDump().dump(provisioner.status)
    if status:
        result["status"] = status
    return result
