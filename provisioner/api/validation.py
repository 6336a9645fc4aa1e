"""Semantic validation of a Provisioner (the ``/validate`` webhook and ``groupless plan``).

Why our own validator rather than the CRD's OpenAPI schema: kube-apiserver checks the CRD schema
*before* it calls webhooks and answers in its own words, one rule at a time. The CRD is kept
permissive (types only) so that every rule lives here, and a user who runs ``kubectl apply``
sees all problems of an object at once, each naming the field path and the offending value:

    spec.requirements[1].operator: invalid value "Equals": must be one of In, NotIn, Exists, DoesNotExist, Gt, Lt

Rules: Karpenter v0.6.3's validation table (``reference/karpenter-v0.6.3.md`` section 3),
with rules 11-12 replaced by what Karpenter v0.7+ does (any qualified key outside the restricted
domains; operators In, NotIn, Exists, DoesNotExist, Gt, Lt), plus what later versions added:
``amiFamily`` AL2023, ``weight`` in 1..100, ``startupTaints`` checked like taints (and no
key/effect pair twice across both lists), quantities in limits and kubelet reservations,
non-negative TTLs, ``karpenter.sh/provisioner-name`` reserved for the controller, and
``consolidation.enabled`` refused beside ``ttlSecondsAfterEmpty`` (Karpenter v0.15-v0.31's
``ErrMultipleOneOf``: consolidation removes empty nodes itself).
Structural problems (wrong types, unknown fields) come from the strict decoder in
:mod:`provisioner.api.schemas`; the rules below skip values of the wrong type so that each
problem is reported once.
"""

from __future__ import annotations

import ipaddress
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from provisioner.api.schemas import (
    MapKey,
    ProvisionerDecodeError,
    describe_value,
    document_order,
    error_line,
    format_path,
    load_provisioner,
)
from provisioner.model.labels import (
    ARCH,
    AWS_INSTANCE_LABELS,
    CAPACITY_TYPE,
    CAPACITY_TYPE_ON_DEMAND,
    CAPACITY_TYPE_SPOT,
    LABEL_ALIASES,
    PROVISIONER_NAME,
    RESTRICTED_LABELS,
    is_restricted_domain,
    normalize_label_key,
)
from provisioner.model.quantity import QuantityError, parse_decimal
from provisioner.model.requirements import (
    DOES_NOT_EXIST,
    EXISTS,
    GT,
    IN,
    LT,
    NOT_IN,
    OPERATORS,
    Requirement,
    RequirementError,
    Requirements,
)

__all__ = [
    "AMI_FAMILIES",
    "FieldError",
    "ValidationResult",
    "is_qualified_name",
    "is_valid_label_value",
    "iter_messages",
    "validate_provisioner",
]

AMI_FAMILIES = ("AL2", "AL2023", "Bottlerocket", "Ubuntu")
#: Values the AWS provider offers for well-known keys; other ``In`` values draw a warning.
KNOWN_VALUES: dict[str, tuple[str, ...]] = {
    CAPACITY_TYPE: (CAPACITY_TYPE_ON_DEMAND, CAPACITY_TYPE_SPOT),
    ARCH: ("amd64", "arm64"),
}
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
HTTP_ENDPOINT_VALUES = ("enabled", "disabled")
HTTP_PROTOCOL_IPV6_VALUES = ("enabled", "disabled")
HTTP_TOKENS_VALUES = ("required", "optional")
VOLUME_TYPES = ("standard", "io1", "io2", "gp2", "sc1", "st1", "gp3")
WEIGHT_RANGE = (1, 100)
HOP_LIMIT_RANGE = (1, 64)

# k8s.io/apimachinery/pkg/util/validation
_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_RESOURCE_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9](/([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


@dataclass(frozen=True, slots=True)
class FieldError:
    """One violation: the field ``path`` (``spec.requirements[1].operator``), its value, and why.

    ``value`` is ``None`` for a missing field (``has_value`` False).
    """

    path: str
    value: Any
    message: str
    has_value: bool = True

    def __str__(self) -> str:
        return error_line(self.path, self.value, self.message, has_value=self.has_value)


@dataclass(frozen=True, slots=True)
class ValidationResult:
    """All violations of one object (``errors``) and advice that does not deny it (``warnings``)."""

    errors: list[FieldError] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors

    @property
    def message(self) -> str:
        """Every error on one line, joined by ``"; "`` (what ``kubectl apply`` prints)."""
        return "; ".join(str(e) for e in self.errors)


def is_qualified_name(key: str) -> str | None:
    """None when ``key`` is a Kubernetes qualified name (``[prefix/]name``), else why not.

    The prefix is a DNS-1123 subdomain of at most 253 characters; the name at most 63
    characters of ``[A-Za-z0-9_.-]`` beginning and ending alphanumeric.
    """
    if not key:
        return "must not be empty"
    prefix, _, name = key.rpartition("/")
    if "/" in key and not prefix:
        return "prefix part must not be empty"
    if prefix:
        if len(prefix) > 253:
            return "prefix part must be no more than 253 characters"
        if not _DNS1123_SUBDOMAIN.match(prefix):
            return "prefix part must be a lowercase DNS subdomain (e.g. example.com)"
    if not name:
        return "name part must not be empty"
    if len(name) > 63:
        return "name part must be no more than 63 characters"
    if not _NAME.match(name):
        return ("name part must consist of alphanumeric characters, '-', '_' or '.', "
                "and must start and end with an alphanumeric character")
    return None


def is_valid_label_value(value: str) -> str | None:
    """None when ``value`` is a valid label value (empty, or at most 63 characters of the name alphabet)."""
    if value == "":
        return None
    if len(value) > 63:
        return "must be no more than 63 characters"
    if not _NAME.match(value):
        return ("must consist of alphanumeric characters, '-', '_' or '.', "
                "and must start and end with an alphanumeric character")
    return None


def _is_int(value: Any) -> TypeGuard[float]:
    """A whole number as the strict decoder accepts it: an int (not a bool) or an integral float."""
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and math.isfinite(value) and value.is_integer())


class _Collector:
    def __init__(self, obj: Any) -> None:
        self.obj = obj
        self._errors: list[tuple[tuple[tuple[int, str], ...], FieldError]] = []
        self.warnings: list[str] = []
        self._seen: set[tuple[str, str, str]] = set()

    def error(
        self, path: list[str | int] | tuple[str | int, ...], value: Any, message: str, *, has_value: bool = True
    ) -> None:
        text = format_path(path) or "<root>"
        seen = (text, message, describe_value(value, 200))
        if seen in self._seen:  # the decoder and a rule may both see one problem
            return
        self._seen.add(seen)
        self._errors.append((document_order(self.obj, path), FieldError(text, value, message, has_value)))

    @property
    def errors(self) -> list[FieldError]:
        """Errors in the order their fields appear in the object (stable for one field)."""
        return [error for _, error in sorted(self._errors, key=lambda item: item[0])]

    def alias_warning(self, path: list[str | int], key: str) -> None:
        canonical = LABEL_ALIASES.get(key)
        if canonical is not None:
            warning = f"{format_path(path)}: label {key} is deprecated, use {canonical}"
            if warning not in self.warnings:
                self.warnings.append(warning)


def validate_provisioner(obj: Any) -> ValidationResult:
    """Every violation in the Provisioner wire object ``obj`` (a dict), and deprecation warnings.

    Never raises for any JSON value. ``result.ok`` is True when the object may be admitted;
    ``result.message`` is what the validating webhook answers. Errors come in the order their
    fields appear in ``obj``; one field's errors in the order found (types first, then rules).
    """
    out = _Collector(obj)
    if not isinstance(obj, dict):
        out.error([], obj, "a Provisioner must be a JSON object")
        return ValidationResult(out.errors, out.warnings)
    try:
        _validate_metadata(obj.get("metadata"), out)
        try:
            load_provisioner(obj)
        except ProvisionerDecodeError as error:
            for segments, (_, value, message) in zip(error.segments, error.errors, strict=True):
                missing = value is None and message == "required field is missing"
                out.error(segments, value, message, has_value=not missing)
        spec = obj.get("spec")
        if spec is None:
            out.error(["spec"], None, "required field is missing", has_value=False)
        elif isinstance(spec, dict):
            _validate_spec(spec, out)
    except RecursionError:
        out.error([], None, "the object is nested too deeply", has_value=False)
    return ValidationResult(out.errors, out.warnings)


# ---------------------------------------------------------------------------- metadata (rule 1)
def _validate_metadata(metadata: Any, out: _Collector) -> None:
    if not isinstance(metadata, dict):
        if metadata is None:
            out.error(["metadata"], None, "required field is missing", has_value=False)
        return  # a non-object metadata is the decoder's error
    name = metadata.get("name")
    generate_name = metadata.get("generateName")
    if not name and not generate_name:
        out.error(["metadata", "name"], None, "name or generateName is required", has_value=False)
        return
    if name is not None and not isinstance(name, str):
        out.error(["metadata", "name"], name, "must be a string")
        return
    if name:
        # The name becomes the node label value karpenter.sh/provisioner-name=<name>, so it must
        # be both a DNS subdomain (an object name) and a label value (at most 63 characters).
        if len(name) > 63:
            out.error(["metadata", "name"], name, "must be no more than 63 characters "
                      f"(it becomes the value of the node label {PROVISIONER_NAME})")
        elif not _DNS1123_SUBDOMAIN.match(name):
            out.error(["metadata", "name"], name, "must be a lowercase RFC 1123 subdomain "
                      "(lowercase alphanumeric characters, '-' or '.', starting and ending alphanumeric)")


# ---------------------------------------------------------------------------- spec
def _validate_spec(spec: dict[str, Any], out: _Collector) -> None:
    for name in ("ttlSecondsAfterEmpty", "ttlSecondsUntilExpired"):  # rules 2-3
        value = spec.get(name)
        if _is_int(value) and value < 0:
            out.error(["spec", name], value, "cannot be negative")
    consolidation = spec.get("consolidation")
    if (isinstance(consolidation, dict) and consolidation.get("enabled") is True
            and spec.get("ttlSecondsAfterEmpty") is not None):
        out.error(["spec", "consolidation", "enabled"], True,
                  "expected exactly one, got both: spec.consolidation.enabled and spec.ttlSecondsAfterEmpty "
                  "(consolidation removes empty nodes itself; unset ttlSecondsAfterEmpty)")
    weight = spec.get("weight")
    if _is_int(weight) and not WEIGHT_RANGE[0] <= weight <= WEIGHT_RANGE[1]:
        out.error(["spec", "weight"], weight, f"must be between {WEIGHT_RANGE[0]} and {WEIGHT_RANGE[1]}")
    labels = spec.get("labels")
    if isinstance(labels, dict):
        _validate_labels(labels, out)
    taint_pairs: dict[tuple[str, str], str] = {}
    for name in ("taints", "startupTaints"):
        taints = spec.get(name)
        if isinstance(taints, list):
            _validate_taints(name, taints, taint_pairs, out)
    requirements = spec.get("requirements")
    if isinstance(requirements, list):
        _validate_requirements(requirements, labels if isinstance(labels, dict) else {}, out)
    limits = spec.get("limits")
    if isinstance(limits, dict) and isinstance(limits.get("resources"), dict):
        _validate_resource_list(["spec", "limits", "resources"], limits["resources"], out)
    kubelet = spec.get("kubeletConfiguration")
    if isinstance(kubelet, dict):
        _validate_kubelet(kubelet, out)
    if "provider" not in spec or spec.get("provider") is None:  # rule 17
        out.error(["spec", "provider"], None, "spec.provider is not defined; it must hold the AWS provider block "
                  "(subnetSelector, securityGroupSelector, ...)", has_value=False)
    elif isinstance(spec["provider"], dict):
        _validate_provider(spec["provider"], out)


def _validate_label_key(
    path: list[str | int], key: str, out: _Collector, *, what: str, error_path: list[str | int] | None = None
) -> bool:
    """Rules 4, 6, 7 for one key; True when the key passed.

    Errors name ``error_path`` (default ``path``) with the key as the offending value; a
    deprecation warning names ``path``.
    """
    where = path if error_path is None else error_path
    why = is_qualified_name(key)
    if why is not None:
        out.error(where, key, f"{what} key must be a qualified name: {why}")
        return False
    canonical = normalize_label_key(key)
    if canonical in RESTRICTED_LABELS:
        reason = ("the controller sets it on every node" if canonical == PROVISIONER_NAME
                  else "it is set by Kubernetes or the controller")
        out.error(where, key, f"label {canonical} is restricted: {reason}")
        return False
    if what == "label" and canonical in AWS_INSTANCE_LABELS:
        out.error(where, key, f"label {canonical} is restricted: the cloud provider sets it from the instance "
                  "type; constrain it with a requirement instead")
        return False
    if is_restricted_domain(canonical, requirement=what == "requirement"):
        out.error(where, key, "label domain not allowed: keys under kubernetes.io, k8s.io, karpenter.sh and "
                  "k8s.aws are reserved (except well-known labels, node.kubernetes.io and kops.k8s.io)")
        return False
    out.alias_warning(path, key)
    return True


def _validate_labels(labels: dict[str, Any], out: _Collector) -> None:
    for key, value in labels.items():
        path: list[str | int] = ["spec", "labels", _map_key(key)]
        _validate_label_key(path, key, out, what="label", error_path=["spec", "labels"])
        if isinstance(value, str):
            why = is_valid_label_value(value)
            if why is not None:
                out.error(path, value, f"label value {why}")


def _map_key(key: str) -> str:
    return MapKey(key)


def _validate_taints(
    name: str, taints: list[Any], seen: dict[tuple[str, str], str], out: _Collector
) -> None:
    for i, taint in enumerate(taints):
        if not isinstance(taint, dict):
            continue
        path: list[str | int] = ["spec", name, i]
        key, value, effect = taint.get("key"), taint.get("value"), taint.get("effect")
        if isinstance(key, str):  # rule 8
            why = is_qualified_name(key)
            if why is not None:
                out.error([*path, "key"], key, f"taint key must be a qualified name: {why}")
        if isinstance(value, str) and value:  # rule 9
            why = is_valid_label_value(value)
            if why is not None:
                out.error([*path, "value"], value, f"taint value {why}")
        if isinstance(effect, str) and effect not in TAINT_EFFECTS:  # rule 10
            out.error([*path, "effect"], effect, f"must be one of {', '.join(TAINT_EFFECTS)}")
        if isinstance(key, str) and isinstance(effect, str):
            where = format_path(path)
            first = seen.setdefault((key, effect), where)
            if first != where:
                out.error(path, taint, f"duplicate taint: {first} has the same key and effect")


def _requirement_values_ok(path: list[str | int], item: dict[str, Any], operator: str, values: list[Any],
                           out: _Collector) -> bool:
    """Check one requirement's ``values`` against its (known) ``operator``; True when they are usable.

    In/NotIn need at least one value, Exists/DoesNotExist none, Gt/Lt exactly one integer
    string; every other value must be a valid label value (rule 13). Errors go to ``out``.
    """
    values_ok = True
    if operator in (IN, NOT_IN) and not values:
        out.error([*path, "values"], item.get("values"), f"operator {operator} needs at least one value",
                  has_value="values" in item)
        values_ok = False
    elif operator in (EXISTS, DOES_NOT_EXIST) and values:
        out.error([*path, "values"], values, f"operator {operator} takes no values")
        values_ok = False
    elif operator in (GT, LT):
        if len(values) != 1 or not isinstance(values[0], str) or not re.fullmatch(r"[+-]?\d+", values[0]):
            out.error([*path, "values"], item.get("values"),
                      f"operator {operator} needs exactly one integer value", has_value="values" in item)
            values_ok = False
        return values_ok  # rule 13 does not apply: Gt/Lt values are integers, checked above
    for j, value in enumerate(values):  # rule 13
        if isinstance(value, str):
            why = is_valid_label_value(value)
            if why is not None:
                out.error([*path, "values", j], value, f"label value {why}")
                values_ok = False
        else:
            values_ok = False
    return values_ok


def _warn_unknown_values(path: list[str | int], canonical: str, operator: str, values: list[Any],
                         out: _Collector) -> None:
    """Warn about each ``In`` value of a well-known label key that no offering has (:data:`KNOWN_VALUES`)."""
    known = KNOWN_VALUES.get(canonical)
    if known is None or operator != IN:
        return
    for j, value in enumerate(values):
        if value not in known:
            out.warnings.append(
                f"{format_path([*path, 'values', j])}: {canonical} {value} is not offered "
                f"(known: {', '.join(known)}); no node will have it")


def _check_operator_mix(operators_by_key: dict[str, set[str]], out: _Collector) -> None:
    """Rule 15: DoesNotExist on a key excludes every other operator on the same key."""
    for key in sorted(operators_by_key):
        ops = operators_by_key[key]
        if DOES_NOT_EXIST in ops and len(ops) > 1:
            out.error(["spec", "requirements"], None,
                      f"operator DoesNotExist cannot coexist with other operators for key {key}", has_value=False)


def _check_feasibility(parsed: list[tuple[int, Requirement]], labels: dict[str, Any], out: _Collector) -> None:
    """Rule 16 and the labels: every key needs a feasible value, and each label must satisfy its key's requirements.

    ``parsed``: (index in ``spec.requirements``, requirement) for every well-formed requirement.
    """
    if not parsed:
        return
    requirements_set = Requirements(r for _, r in parsed)
    for key in requirements_set.infeasible_keys():  # rule 16
        indices = [i for i, r in parsed if r.key == key]
        out.error(["spec", "requirements", indices[-1]], None,
                  f"no feasible value for key {key}: the requirements on it ({', '.join(map(str, indices))}) "
                  "have no value in common", has_value=False)
    # A label must satisfy the requirements on its key, or no node could ever carry both.
    for label_key, label_value in labels.items():
        if not isinstance(label_key, str) or not isinstance(label_value, str):
            continue
        canonical = normalize_label_key(label_key)
        if canonical in requirements_set and canonical not in requirements_set.infeasible_keys():
            requirement = requirements_set[canonical]
            if not requirement.has(label_value):
                out.error(["spec", "labels", _map_key(label_key)], label_value,
                          f"conflicts with the requirement {requirement}")


def _validate_requirements(requirements: list[Any], labels: dict[str, Any], out: _Collector) -> None:
    parsed: list[tuple[int, Requirement]] = []
    operators_by_key: dict[str, set[str]] = {}
    for i, item in enumerate(requirements):
        if not isinstance(item, dict):
            continue
        path: list[str | int] = ["spec", "requirements", i]
        key, operator, values = item.get("key"), item.get("operator"), item.get("values")
        values = values if isinstance(values, list) else []
        key_ok = isinstance(key, str) and _validate_label_key([*path, "key"], key, out, what="requirement")
        if not isinstance(operator, str):
            continue
        if operator not in OPERATORS:  # rule 14
            out.error([*path, "operator"], operator, f"must be one of {', '.join(OPERATORS)}")
            continue
        values_ok = _requirement_values_ok(path, item, operator, values, out)
        if key_ok and values_ok and isinstance(key, str):
            canonical = normalize_label_key(key)
            operators_by_key.setdefault(canonical, set()).add(operator)
            _warn_unknown_values(path, canonical, operator, values, out)
            try:
                parsed.append((i, Requirement.of(key, operator, values)))
            except RequirementError:  # pragma: no cover - the checks above are stricter
                continue
    _check_operator_mix(operators_by_key, out)
    _check_feasibility(parsed, labels, out)


def _quantity_errors(path: list[str | int], value: Any, out: _Collector) -> None:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        return
    try:
        amount = parse_decimal(value)
    except QuantityError:
        return  # the decoder reports it
    if amount < 0:
        out.error(path, value, "cannot be negative")


def _validate_resource_list(path: list[str | int], resources: dict[str, Any], out: _Collector) -> None:
    for name, value in resources.items():
        item_path: list[str | int] = [*path, _map_key(name)]
        if not _RESOURCE_NAME.match(name) or len(name) > 316:
            out.error(item_path, name, "resource name must be a qualified name (cpu, memory, nvidia.com/gpu, ...)")
        _quantity_errors(item_path, value, out)


def _validate_kubelet(kubelet: dict[str, Any], out: _Collector) -> None:
    path: list[str | int] = ["spec", "kubeletConfiguration"]
    dns = kubelet.get("clusterDNS")
    if isinstance(dns, list):
        for i, address in enumerate(dns):
            if isinstance(address, str):
                try:
                    ipaddress.ip_address(address)
                except ValueError:
                    out.error([*path, "clusterDNS", i], address, "must be an IP address")
    max_pods = kubelet.get("maxPods")
    if _is_int(max_pods) and max_pods < 0:
        out.error([*path, "maxPods"], max_pods, "cannot be negative")
    pods_per_core = kubelet.get("podsPerCore")
    if _is_int(pods_per_core) and pods_per_core < 0:
        out.error([*path, "podsPerCore"], pods_per_core, "cannot be negative")
    for name in ("systemReserved", "kubeReserved"):
        reserved = kubelet.get(name)
        if isinstance(reserved, dict):
            _validate_resource_list([*path, name], reserved, out)


def _selector_errors(path: list[str | int], selector: Any, out: _Collector) -> None:
    """Rules 20-21: no empty key or value in a subnet or security group selector."""
    if not isinstance(selector, dict):
        return
    if not selector:
        out.error(path, selector, "must not be empty: an empty selector would match nothing useful")
    for key, value in selector.items():
        if key == "":
            out.error([*path, _map_key(key)], value, "selector keys must not be empty")
        elif value == "":
            out.error([*path, _map_key(key)], value, "selector values must not be empty (use \"*\" for any value)")


def _enum(path: list[str | int], value: Any, allowed: tuple[str, ...], out: _Collector) -> None:
    if isinstance(value, str) and value not in allowed:
        out.error(path, value, f"must be one of {', '.join(allowed)}")


def _validate_provider(provider: dict[str, Any], out: _Collector) -> None:
    path: list[str | int] = ["spec", "provider"]
    launch_template = provider.get("launchTemplate")
    if launch_template is not None:  # rule 18
        for other in ("securityGroupSelector", "metadataOptions", "amiFamily", "instanceProfile"):
            if provider.get(other) is not None:
                out.error([*path, other], provider[other],
                          f"expected exactly one, got both: launchTemplate, {other} "
                          "(a launch template defines it)")
        if isinstance(launch_template, str) and not launch_template:
            out.error([*path, "launchTemplate"], launch_template, "must not be empty")
    if provider.get("subnetSelector") is None:  # rule 19
        out.error([*path, "subnetSelector"], None, "required field is missing", has_value=False)
    else:
        _selector_errors([*path, "subnetSelector"], provider["subnetSelector"], out)
    if launch_template is None and provider.get("securityGroupSelector") is None:  # rule 21
        out.error([*path, "securityGroupSelector"], None,
                  "required field is missing (unless launchTemplate is set)", has_value=False)
    elif provider.get("securityGroupSelector") is not None:
        _selector_errors([*path, "securityGroupSelector"], provider["securityGroupSelector"], out)
    tags = provider.get("tags")
    if isinstance(tags, dict):  # rule 22
        for key, value in tags.items():
            if key == "":
                out.error([*path, "tags", _map_key(key)], value, "empty tag keys aren't supported")
    _enum([*path, "amiFamily"], provider.get("amiFamily"), AMI_FAMILIES, out)  # rule 25
    if isinstance(provider.get("instanceProfile"), str) and not provider["instanceProfile"]:
        out.error([*path, "instanceProfile"], "", "must not be empty")
    options = provider.get("metadataOptions")
    if isinstance(options, dict):  # rules 23-24
        opath: list[str | int] = [*path, "metadataOptions"]
        _enum([*opath, "httpEndpoint"], options.get("httpEndpoint"), HTTP_ENDPOINT_VALUES, out)
        _enum([*opath, "httpProtocolIPv6"], options.get("httpProtocolIPv6"), HTTP_PROTOCOL_IPV6_VALUES, out)
        _enum([*opath, "httpTokens"], options.get("httpTokens"), HTTP_TOKENS_VALUES, out)
        hop = options.get("httpPutResponseHopLimit")
        if _is_int(hop) and not HOP_LIMIT_RANGE[0] <= hop <= HOP_LIMIT_RANGE[1]:
            out.error([*opath, "httpPutResponseHopLimit"], hop,
                      f"expected {HOP_LIMIT_RANGE[0]} <= httpPutResponseHopLimit <= {HOP_LIMIT_RANGE[1]}")
    mappings = provider.get("blockDeviceMappings")
    if isinstance(mappings, list):
        _validate_block_devices([*path, "blockDeviceMappings"], mappings, out)


def _validate_block_devices(path: list[str | int], mappings: list[Any], out: _Collector) -> None:
    names: dict[str, int] = {}
    for i, mapping in enumerate(mappings):
        if not isinstance(mapping, dict):
            continue
        device = mapping.get("deviceName")
        if isinstance(device, str):
            if not device:
                out.error([*path, i, "deviceName"], device, "must not be empty")
            elif device in names:
                out.error([*path, i, "deviceName"], device, f"duplicate of {format_path([*path, names[device]])}")
            names.setdefault(device, i)
        ebs = mapping.get("ebs")
        if not isinstance(ebs, dict):
            continue
        _enum([*path, i, "ebs", "volumeType"], ebs.get("volumeType"), VOLUME_TYPES, out)
        size = ebs.get("volumeSize")
        if size is not None and not isinstance(size, bool) and isinstance(size, (str, int, float)):
            try:
                amount = parse_decimal(size)
            except QuantityError:
                amount = None
            if amount is not None and amount <= 0:
                out.error([*path, i, "ebs", "volumeSize"], size, "must be positive")
        for name in ("iops", "throughput"):
            number = ebs.get(name)
            if _is_int(number) and number <= 0:
                out.error([*path, i, "ebs", name], number, "must be positive")


def iter_messages(result: ValidationResult) -> Iterator[str]:
    """Each error of ``result`` as one line (for CLIs that print one per line)."""
    for error in result.errors:
        yield str(error)

