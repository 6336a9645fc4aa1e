"""The Kubernetes API as the controllers use it: plain dict objects, a few verbs, typed errors.

Two implementations share this protocol: :mod:`provisioner.kube.client` speaks to a real
kube-apiserver through the kubernetes client's ``ApiClient`` (REST paths, list+watch), and
:mod:`provisioner.kube.fake` keeps objects in memory for component tests (resource versions,
finalizers and deletion timestamps, the Eviction API's PodDisruptionBudget check, watch
events). Objects are the wire form (``{"apiVersion", "kind", "metadata", "spec", ...}``).

Kinds are addressed by their ``kind`` name; :data:`RESOURCES` maps each to its REST path.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

Object = dict[str, Any]
ObjectList = list[Object]


@dataclass(frozen=True, slots=True)
class Resource:
    """Where a kind lives: ``group`` ("" for core), ``version``, ``plural``, ``namespaced``."""

    group: str
    version: str
    plural: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


RESOURCES: Mapping[str, Resource] = {
    "Node": Resource("", "v1", "nodes", False),
    "Pod": Resource("", "v1", "pods", True),
    "Event": Resource("", "v1", "events", True),
    "Secret": Resource("", "v1", "secrets", True),
    "PersistentVolume": Resource("", "v1", "persistentvolumes", False),
    "PersistentVolumeClaim": Resource("", "v1", "persistentvolumeclaims", True),
    "StorageClass": Resource("storage.k8s.io", "v1", "storageclasses", False),
    "DaemonSet": Resource("apps", "v1", "daemonsets", True),
    "LimitRange": Resource("", "v1", "limitranges", True),
    "PodDisruptionBudget": Resource("policy", "v1", "poddisruptionbudgets", True),
    "Lease": Resource("coordination.k8s.io", "v1", "leases", True),
    "Provisioner": Resource("karpenter.sh", "v1alpha5", "provisioners", False),
    "MutatingWebhookConfiguration": Resource(
        "admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations", False
    ),
    "ValidatingWebhookConfiguration": Resource(
        "admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations", False
    ),
}


class ApiError(Exception):
    """An error status from the API server: ``status`` (HTTP code), ``reason``, ``message``."""

    def __init__(self, status: int, reason: str = "", message: str = "") -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message

    @property
    def transient(self) -> bool:
        """Whether the same request may succeed later.

        True when the server failed or was unreachable (5xx; the client reports a refused or
        reset connection as 503), or asked for a slower pace (429).
        """
        return self.status >= 500 or self.status == 429


def resource_for(kind: str) -> Resource:
    """The :class:`Resource` of ``kind``; an :class:`ApiError` 404 (kubectl's wording) when unknown.

    Both implementations of :class:`KubeAPI` look kinds up through this, so an unknown kind is
    the same NotFound from the fake as from the real client.
    """
    res = RESOURCES.get(kind)
    if res is None:
        raise ApiError(404, "NotFound", f"the server doesn't have a resource type {kind!r}")
    return res


class NotFoundError(ApiError):
    """404: the object does not exist."""

    def __init__(self, message: str = "") -> None:
        super().__init__(404, "NotFound", message)


class AlreadyExistsError(ApiError):
    """409 AlreadyExists on create."""

    def __init__(self, message: str = "") -> None:
        super().__init__(409, "AlreadyExists", message)


class ConflictError(ApiError):
    """409 Conflict: a stale resourceVersion on update."""

    def __init__(self, message: str = "") -> None:
        super().__init__(409, "Conflict", message)


class TooManyRequestsError(ApiError):
    """429 from the Eviction API: the eviction would violate a PodDisruptionBudget."""

    def __init__(self, message: str = "") -> None:
        super().__init__(429, "TooManyRequests", message)


class GoneError(ApiError):
    """410 Gone: a watch's resourceVersion is too old; relist."""

    def __init__(self, message: str = "") -> None:
        super().__init__(410, "Gone", message)


@dataclass(frozen=True, slots=True)
class WatchEvent:
    """One watch event: ``type`` is ADDED, MODIFIED, DELETED or BOOKMARK."""

    type: str
    object: Object


class KubeAPI(Protocol):
    """The verbs the controllers use. Every method raises :class:`ApiError` subclasses."""

    def get(self, kind: str, name: str, namespace: str | None = None) -> Object:
        """The object; NotFoundError when absent."""
        ...

    def list(
        self, kind: str, namespace: str | None = None, label_selector: str | None = None
    ) -> tuple[ObjectList, str]:
        """All objects of ``kind`` (optionally in one namespace) and the list's resourceVersion."""
        ...

    def watch(self, kind: str, resource_version: str, timeout_seconds: int = 60) -> Iterator[WatchEvent]:
        """Events after ``resource_version`` until the timeout; GoneError when it is too old."""
        ...

    def create(self, kind: str, obj: Object) -> Object:
        """Create; AlreadyExistsError when the name is taken."""
        ...

    def patch(
        self,
        kind: str,
        name: str,
        patch: Object | ObjectList,
        namespace: str | None = None,
        subresource: str | None = None,
    ) -> Object:
        """A JSON merge patch (dict) or a JSON patch (list); NotFoundError when absent."""
        ...

    def replace(self, kind: str, obj: Object, subresource: str | None = None) -> Object:
        """PUT with the object's resourceVersion; ConflictError when stale."""
        ...

    def delete(self, kind: str, name: str, namespace: str | None = None) -> None:
        """Delete (finalizers then hold it with a deletionTimestamp); NotFoundError when absent."""
        ...

    def evict(self, name: str, namespace: str) -> None:
        """POST an ``policy/v1`` Eviction; TooManyRequestsError when a PDB forbids it."""
        ...
