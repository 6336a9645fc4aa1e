"""LimitRange defaults: a pod's requests and limits as admission would complete them at creation.

A namespace's LimitRanges give containers that set no request or limit a default one. The API
server applies them when a pod is created, so a pod that exists has them already; what Groupless
sizes before any pod exists does not: a DaemonSet's pod template (DaemonSet overhead on every
new node) and the manifests ``groupless plan`` reads. Those are completed here, by the rules the
API server applies, in its order:

1. **Pod defaulting** (``SetDefaults_Pod``, ``pkg/apis/core/v1/defaults.go``), at decode time,
   before admission: a container (or init container) that sets a limit but no request for a
   resource requests its limit (:func:`provisioner.scheduling.pods.requests_defaulted_to_limits`).
2. **LimitRange defaulting** (``SetDefaults_LimitRangeItem``, same file): in an item of
   ``type: Container``, a resource with a ``max`` and no ``default`` gets ``default = max``;
   one with a ``default`` and no ``defaultRequest`` gets ``defaultRequest = default``; then one
   with a ``min`` and still no ``defaultRequest`` gets ``defaultRequest = min``. A LimitRange
   read from the API server carries these already; one from a manifest may not.
3. **The LimitRanger admission plugin** (``plugin/pkg/admission/limitranger/admission.go``):
   for each LimitRange of the pod's namespace in turn, ``defaultContainerResourceRequirements``
   collects the ``defaultRequest`` and ``default`` of its ``type: Container`` items (a later
   item wins within one LimitRange), and ``mergeContainerResources`` gives every container and
   init container each default limit it has no limit for and each default request it has no
   request for. So a later LimitRange only fills what earlier ones left unset. The plugin takes
   a namespace's LimitRanges in its informer's order, which Kubernetes leaves unspecified; here
   they are taken by name, the order the API server lists them in.

``type: Pod`` and ``type: PersistentVolumeClaim`` items carry no defaults. ``min``, ``max`` and
``maxLimitRequestRatio`` are checks admission makes (a pod outside them is refused); only the
defaults they imply (step 2) change a pod's size, so they are not checked here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from provisioner.model import objects
from provisioner.model.quantity import QuantityError, parse_resource_list
from provisioner.scheduling.pods import requests_defaulted_to_limits

#: The LimitRange item type that carries container defaults (``core/v1`` ``LimitTypeContainer``).
CONTAINER = "Container"
#: The item types the API server accepts (``LimitTypePod``, ``LimitTypeContainer``, ``LimitTypePersistentVolumeClaim``).
ITEM_TYPES = frozenset({"Pod", CONTAINER, "PersistentVolumeClaim"})
#: The pod spec lists LimitRanger completes (ephemeral containers take no resources).
CONTAINER_LISTS = ("containers", "initContainers")


class LimitRangeError(ValueError):
    """A LimitRange that cannot be read; the message names it and the field."""


@dataclass(frozen=True)
class ContainerDefaults:
    """What one LimitRange gives a container without its own: resource name -> wire quantity.

    ``requests`` from ``defaultRequest``, ``limits`` from ``default`` (after LimitRange
    defaulting); the values are the LimitRange's own (``"500m"``, ``"1Gi"``), checked to parse.
    """

    name: str
    requests: Mapping[str, Any] = field(default_factory=dict)
    limits: Mapping[str, Any] = field(default_factory=dict)


def _resource_map(value: Any, where: str) -> dict[str, Any]:
    """A LimitRange item's resource list, checked to parse; raises ValueError naming ``where``."""
    if value is None:
        return {}
    try:
        parse_resource_list(value, where)
    except QuantityError as error:
        raise ValueError(str(error)) from error
    return {str(k): v for k, v in value.items()}


def container_defaults(limit_range: Mapping[str, Any]) -> ContainerDefaults:
    """The container defaults of one LimitRange wire object (steps 2 and 3 of the module docstring).

    Raises ValueError naming the field (``spec.limits[0].default.cpu: invalid quantity 'x'``,
    ``spec.limits[1].type: ...``) for a malformed LimitRange.
    """
    if not isinstance(limit_range, Mapping):
        raise ValueError(f"limit range: expected an object, got {type(limit_range).__name__}")
    spec = limit_range.get("spec")
    if spec is None:
        spec = {}
    if not isinstance(spec, Mapping):
        raise ValueError(f"spec: expected an object, got {spec!r}")
    items = spec.get("limits")
    if items is None:
        items = []
    if not isinstance(items, list | tuple):
        raise ValueError(f"spec.limits: expected a list, got {items!r}")
    requests: dict[str, Any] = {}
    limits: dict[str, Any] = {}
    for i, item in enumerate(items):
        where = f"spec.limits[{i}]"
        if not isinstance(item, Mapping):
            raise ValueError(f"{where}: expected an object, got {item!r}")
        kind = item.get("type")
        if kind not in ITEM_TYPES:
            raise ValueError(f"{where}.type: expected one of {', '.join(sorted(ITEM_TYPES))}, got {kind!r}")
        maps = {part: _resource_map(item.get(part), f"{where}.{part}")
                for part in ("default", "defaultRequest", "max", "min", "maxLimitRequestRatio")}
        if kind != CONTAINER:
            continue
        default = {**maps["max"], **maps["default"]}
        default_request = {**maps["min"], **default, **maps["defaultRequest"]}
        requests.update(default_request)
        limits.update(default)
    return ContainerDefaults(objects.name(limit_range), requests, limits)


def namespace_limit_ranges(limit_ranges: Iterable[Mapping[str, Any]], namespace: str) -> list[Mapping[str, Any]]:
    """The LimitRanges of ``namespace`` (an unset namespace reads as ``default``), by name."""
    wanted = namespace or "default"
    found = [lr for lr in limit_ranges if (objects.namespace(lr) or "default") == wanted]
    return sorted(found, key=objects.name)


def _completed(container: Any, where: str, defaults: Sequence[ContainerDefaults]) -> Any:
    if not isinstance(container, Mapping):
        raise ValueError(f"{where}: expected an object, got {container!r}")
    resources = container.get("resources")
    if resources is None:
        resources = {}
    if not isinstance(resources, Mapping):
        raise ValueError(f"{where}.resources: expected an object, got {resources!r}")
    limits = resources.get("limits")
    requests = resources.get("requests")
    for part, value in (("limits", limits), ("requests", requests)):
        if value is not None and not isinstance(value, Mapping):
            raise ValueError(f"{where}.resources.{part}: expected an object, got {value!r}")
    new_limits = dict(limits or {})
    new_requests = requests_defaulted_to_limits(requests or {}, new_limits)
    for one in defaults:
        for name, value in one.limits.items():
            new_limits.setdefault(name, value)
        for name, value in one.requests.items():
            new_requests.setdefault(name, value)
    if new_limits == dict(limits or {}) and new_requests == dict(requests or {}):
        return container
    new_resources = {**resources}
    if new_limits:
        new_resources["limits"] = new_limits
    if new_requests:
        new_resources["requests"] = new_requests
    return {**container, "resources": new_resources}


def apply_limit_range_defaults(pod: Mapping[str, Any], limit_ranges: Iterable[Mapping[str, Any]]) -> Mapping[str, Any]:
    """``pod`` with its namespace's LimitRange defaults applied, as admission applies them at creation.

    ``pod``: a Pod wire object, or a pod template with the namespace it will be created in
    (``metadata.namespace``; unset reads as ``default``). ``limit_ranges``: LimitRange wire
    objects of any namespaces; those of the pod's are applied by name (see the module
    docstring). Returns a new object sharing the unchanged parts of ``pod`` (which is not
    mutated), or ``pod`` itself when its namespace has no LimitRange.

    Raises :class:`LimitRangeError` (a ValueError) naming the LimitRange and the field for a
    malformed LimitRange (``LimitRange team/defaults: spec.limits[0].default.cpu: ...``), ValueError
    naming the field for a malformed pod (``spec.containers[0].resources: ...``).
    """
    if not isinstance(pod, Mapping):
        raise ValueError(f"pod: expected an object, got {type(pod).__name__}")
    ranges = namespace_limit_ranges(limit_ranges, objects.namespace(pod))
    if not ranges:
        return pod
    defaults = []
    for limit_range in ranges:
        try:
            defaults.append(container_defaults(limit_range))
        except ValueError as error:
            raise LimitRangeError(f"LimitRange {objects.key(limit_range)}: {error}") from error
    spec = pod.get("spec")
    if spec is None:
        spec = {}
    if not isinstance(spec, Mapping):
        raise ValueError(f"spec: expected an object, got {spec!r}")
    new_spec = dict(spec)
    for part in CONTAINER_LISTS:
        containers = spec.get(part)
        if containers is None:
            continue
        if not isinstance(containers, list | tuple):
            raise ValueError(f"spec.{part}: expected a list, got {containers!r}")
        new_spec[part] = [_completed(c, f"spec.{part}[{i}]", defaults) for i, c in enumerate(containers)]
    return {**pod, "spec": new_spec}


__all__ = ["CONTAINER", "ContainerDefaults", "LimitRangeError", "apply_limit_range_defaults", "container_defaults",
           "namespace_limit_ranges"]
