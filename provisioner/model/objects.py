"""Kubernetes objects in wire form: their typed shapes, and accessors that never raise.

Every part reads Nodes, Pods and Provisioners as the API server sends them: JSON-decoded dicts.
Their shapes are spelled out here as ``TypedDict``s (after kopf's ``_cogs/structs/bodies.py``:
``RawMeta``, ``RawBody``, and the few spec/status parts Groupless reads), so a reader names the
fields it relies on. Objects may still be odd (hand-written manifests, a field of the wrong
type), so the accessors below read them defensively: a missing or mistyped field reads as
absent (``""``, ``{}``, ``None``), never as an exception, and one rule decides what "the
name", "the key" or "being deleted" means for every part.

Objects handed around are never mutated (see :mod:`provisioner.state.cluster`); the accessors
return read-only views (``Mapping``) of them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypedDict, cast

from provisioner.model.labels import LAUNCHED_AT_ANNOTATION
from provisioner.model.timestamps import timestamp


class RawOwnerReference(TypedDict, total=False):
    apiVersion: str
    kind: str
    name: str
    uid: str
    controller: bool
    blockOwnerDeletion: bool


class RawMeta(TypedDict, total=False):
    uid: str
    name: str
    generateName: str
    namespace: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    ownerReferences: Sequence[RawOwnerReference]
    finalizers: Sequence[str]
    resourceVersion: str
    creationTimestamp: str
    deletionTimestamp: str


class RawTaint(TypedDict, total=False):
    key: str
    value: str
    effect: str
    timeAdded: str


class RawCondition(TypedDict, total=False):
    type: str
    status: str
    reason: str
    message: str
    lastTransitionTime: str


class RawNodeSpec(TypedDict, total=False):
    providerID: str
    taints: Sequence[RawTaint]
    unschedulable: bool


class RawNodeStatus(TypedDict, total=False):
    capacity: Mapping[str, Any]
    allocatable: Mapping[str, Any]
    conditions: Sequence[RawCondition]


class RawPodSpec(TypedDict, total=False):
    nodeName: str
    containers: Sequence[Mapping[str, Any]]
    initContainers: Sequence[Mapping[str, Any]]
    overhead: Mapping[str, Any]
    tolerations: Sequence[Mapping[str, Any]]
    priorityClassName: str


class RawPodStatus(TypedDict, total=False):
    phase: str
    nominatedNodeName: str
    conditions: Sequence[RawCondition]


class RawBody(TypedDict, total=False):
    apiVersion: str
    kind: str
    metadata: RawMeta
    spec: Mapping[str, Any]
    status: Mapping[str, Any]


_EMPTY: Mapping[str, Any] = {}


def _is_mapping(value: Any) -> bool:
    # a JSON-decoded object is a dict: checked first, the Mapping ABC check costs ten times more
    return type(value) is dict or isinstance(value, Mapping)


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if _is_mapping(value) else _EMPTY


def meta(obj: Any) -> RawMeta:
    """``metadata`` of ``obj`` (``{}`` when absent or not an object)."""
    return cast(RawMeta, _mapping(_mapping(obj).get("metadata")))


def spec(obj: Any) -> Mapping[str, Any]:
    """``spec`` of ``obj`` (``{}`` when absent or not an object)."""
    return _mapping(_mapping(obj).get("spec"))


def status(obj: Any) -> Mapping[str, Any]:
    """``status`` of ``obj`` (``{}`` when absent or not an object)."""
    return _mapping(_mapping(obj).get("status"))


def name(obj: Any) -> str:
    """``metadata.name`` (``""`` when absent)."""
    return str(meta(obj).get("name") or "")


def namespace(obj: Any) -> str:
    """``metadata.namespace`` (``""`` when absent: cluster-scoped, or not defaulted yet)."""
    return str(meta(obj).get("namespace") or "")


def uid(obj: Any) -> str:
    """``metadata.uid`` (``""`` when absent)."""
    return str(meta(obj).get("uid") or "")


def resource_version(obj: Any) -> str:
    """``metadata.resourceVersion`` (``""`` when absent)."""
    return str(meta(obj).get("resourceVersion") or "")


def key(obj: Any) -> str:
    """``<namespace>/<name>`` of a namespaced object, the namespace ``default`` when unset.

    How events, logs and nominations name a pod (kube-apiserver defaults an unset namespace
    to the request's, ``default`` for a bare ``kubectl apply``).
    """
    return f"{namespace(obj) or 'default'}/{name(obj)}"


def ref(obj: Any) -> str:
    """``<namespace>/<name>`` for a namespaced object, ``<name>`` for a cluster-scoped one (log lines)."""
    ns = namespace(obj)
    return f"{ns}/{name(obj)}" if ns else name(obj)


def labels(obj: Any) -> Mapping[str, str]:
    """``metadata.labels`` (``{}`` when absent or not a map)."""
    return cast(Mapping[str, str], _mapping(meta(obj).get("labels")))


def annotations_of(obj: Any) -> Mapping[str, str]:
    """``metadata.annotations`` (``{}`` when absent or not a map)."""
    return cast(Mapping[str, str], _mapping(meta(obj).get("annotations")))


def deleting(obj: Any) -> bool:
    """``metadata.deletionTimestamp`` is set: the object is being deleted (finalizers still run)."""
    return bool(meta(obj).get("deletionTimestamp"))


def created_at(obj: Any) -> float | None:
    """``metadata.creationTimestamp`` in epoch seconds; ``None`` when absent or malformed."""
    return timestamp(meta(obj).get("creationTimestamp"))


def launched_at(node: Any) -> float | None:
    """When a node's instance was launched, in epoch seconds; ``None`` when unknown.

    The ``groupless.dev/launched-at`` annotation, else (absent or malformed: a node written
    before it existed, or not by Groupless) ``metadata.creationTimestamp``.

    A node's age counts from here (``ttlSecondsUntilExpired``, as Karpenter counts from the
    Node's creation): the two differ for an instance adopted after a launch that ended before
    its Node was written, which has been running since its launch.
    """
    launched = timestamp(annotations_of(node).get(LAUNCHED_AT_ANNOTATION))
    return launched if launched is not None else created_at(node)


def owner_references(obj: Any) -> tuple[RawOwnerReference, ...]:
    """``metadata.ownerReferences`` that are objects (odd entries are left out)."""
    refs = meta(obj).get("ownerReferences")
    if not isinstance(refs, list | tuple):
        return ()
    return tuple(cast(RawOwnerReference, r) for r in refs if _is_mapping(r))


def owner_kinds(obj: Any) -> set[str]:
    """The kinds of every owner of ``obj``."""
    return {str(r.get("kind")) for r in owner_references(obj)}


def controller_owner(obj: Any) -> RawOwnerReference | None:
    """``obj``'s controller owner reference (``controller: true``), else its first owner; None when unowned."""
    refs = owner_references(obj)
    for owner in refs:
        if owner.get("controller"):
            return owner
    return refs[0] if refs else None


def controller_owner_kind(obj: Any) -> str | None:
    """The kind of :func:`controller_owner` (``""`` when it names none); None when unowned."""
    owner = controller_owner(obj)
    return None if owner is None else str(owner.get("kind") or "")


def conditions(obj: Any) -> tuple[RawCondition, ...]:
    """``status.conditions`` that are objects (odd entries are left out)."""
    items = status(obj).get("conditions")
    if not isinstance(items, list | tuple):
        return ()
    return tuple(cast(RawCondition, c) for c in items if _is_mapping(c))


def condition(obj: Any, type_: str) -> RawCondition | None:
    """The first ``status.conditions[]`` entry of type ``type_`` (``Ready``, ``PodScheduled``), None when absent."""
    items = status(obj).get("conditions")
    if not isinstance(items, list | tuple):
        return None
    for item in items:
        if _is_mapping(item) and item.get("type") == type_:
            return cast(RawCondition, item)
    return None


def is_ready(node: Any) -> bool:
    """The kubelet reports the Node condition ``Ready=True``."""
    ready = condition(node, "Ready")
    return ready is not None and ready.get("status") == "True"


def ready_since(node: Any) -> float | None:
    """When ``Ready`` last turned True (``lastTransitionTime``, epoch seconds); None if not Ready or unknown."""
    ready = condition(node, "Ready")
    if ready is None or ready.get("status") != "True":
        return None
    return timestamp(ready.get("lastTransitionTime"))


def provider_id(node: Any) -> str:
    """``spec.providerID`` of a Node (``""`` before the cloud provider set it)."""
    return str(spec(node).get("providerID") or "")
