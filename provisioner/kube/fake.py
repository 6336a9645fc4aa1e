"""An in-memory Kubernetes API for component tests: the semantics controllers depend on, no server.

Controllers are tested against this instead of mocks, so it behaves like kube-apiserver where
a controller's correctness depends on it:

* every write bumps one cluster-wide ``resourceVersion`` (as etcd's revision does), ``replace``
  with a stale one raises :class:`ConflictError`, ``generateName`` and ``uid`` are filled in,
  ``creationTimestamp`` comes from the injected :class:`~provisioner.clock.Clock`;
* ``patch`` takes a JSON merge patch (RFC 7386, a dict) or a JSON patch (RFC 6902, a list,
  applied with the ``jsonpatch`` library); kinds with a ``status`` subresource keep status and
  spec apart as the API server does (a main-resource write ignores ``status``, a ``status``
  write changes only ``status``). ``create`` accepts a status as given, a test convenience;
* ``delete`` honours finalizers: the object gets a ``deletionTimestamp`` and stays until the
  last finalizer is removed; Pods can have a grace period before they disappear;
* ``evict`` is the policy/v1 Eviction API: a pod covered by a PodDisruptionBudget is only
  deleted when the budget allows one more disruption, else :class:`TooManyRequestsError`
  (429). The budget is computed the way the disruption controller does (healthy = Running and
  Ready and not being deleted; ``minAvailable``/``maxUnavailable`` as an int or a percent of
  the expected pods, rounded up);
* ``watch`` replays a per-kind event log from a resourceVersion and then blocks for new
  events until its timeout; a resourceVersion older than the last :meth:`FakeKubeAPI.compact`
  raises :class:`GoneError` (410), so informers' relist path is exercised.

Test hooks: :meth:`FakeKubeAPI.subscribe` (synchronous callbacks on every change),
:meth:`FakeKubeAPI.on_pod_deleted` (play a ReplicaSet that recreates pods), :meth:`bind`,
:meth:`set_pod_running`, :meth:`set_node_ready`, :meth:`events` and :meth:`reap` (finish
graceful deletions whose grace has passed on the clock).
"""

from __future__ import annotations

import bisect
import copy
import itertools
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import jsonpatch

from provisioner.clock import Clock, RealClock, parse_rfc3339, rfc3339
from provisioner.kube.api import (
    RESOURCES,
    AlreadyExistsError,
    ApiError,
    ConflictError,
    GoneError,
    NotFoundError,
    Object,
    ObjectList,
    TooManyRequestsError,
    WatchEvent,
    resource_for,
)
from provisioner.kube.selectors import parse_selector, selector_matches
from provisioner.model.disruption import budget_status
from provisioner.model.disruption import pod_is_healthy as pod_is_healthy
from provisioner.model.disruption import scaled_value as scaled_value
from provisioner.model.pods import is_terminal, phase

#: Kinds whose ``status`` is a subresource on a real API server.
STATUS_SUBRESOURCE_KINDS = frozenset(
    {
        "Node",
        "Pod",
        "Provisioner",
        "DaemonSet",
        "PodDisruptionBudget",
        "PersistentVolume",
        "PersistentVolumeClaim",
    }
)

Key = tuple[str, str, str]  # (kind, namespace or "", name)
ChangeCallback = Callable[[str, WatchEvent], None]
PodCallback = Callable[[Object], None]
Pending = list[tuple[str, WatchEvent]]  # changes to announce once the store lock is released


@dataclass(frozen=True, slots=True)
class _LogEntry:
    rv: int
    kind: str
    event: WatchEvent


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch: dicts merge recursively, ``None`` removes, anything else replaces."""
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


class FakeKubeAPI:
    """The :class:`~provisioner.kube.api.KubeAPI` protocol in memory; thread-safe.

    ``pod_grace_seconds`` is how long a deleted (or evicted) Pod without finalizers lingers
    with a ``deletionTimestamp`` before it disappears (0: at once, as with
    ``terminationGracePeriodSeconds: 0``); lingering pods are removed by :meth:`reap`, which
    every call runs first, once the clock has moved past their grace.
    """

    def __init__(self, clock: Clock | None = None, *, pod_grace_seconds: float = 0.0) -> None:
        self.clock: Clock = clock or RealClock()
        self.pod_grace_seconds = pod_grace_seconds
        self._lock = threading.RLock()
        self._cond = threading.Condition(self._lock)
        self._dispatch = threading.RLock()
        self._objects: dict[Key, Object] = {}
        self._rv = itertools.count(1)
        self._last_rv = 0
        self._log: list[_LogEntry] = []
        self._log_rvs: list[int] = []  # the log's resourceVersions, ascending (for bisect)
        self._compacted_rv = 0
        self._subscribers: list[ChangeCallback] = []
        self._pod_deleted: list[PodCallback] = []
        self._expected_pods: dict[tuple[str, str], int] = {}
        self._closed = False
        #: Every call as ``(verb, kind, name)``, for tests that count API traffic.
        self.calls: list[tuple[str, str, str]] = []
        #: Errors to raise on the next matching call: ``(verb, kind) -> [ApiError, ...]``.
        self.fail_next: dict[tuple[str, str], list[ApiError]] = {}

    # ------------------------------------------------------------------ helpers
    def _key(self, kind: str, name: str, namespace: str | None) -> Key:
        res = resource_for(kind)
        return (kind, (namespace or "default") if res.namespaced else "", name)

    def _existing_locked(self, kind: str, name: str, namespace: str | None) -> tuple[Key, Object]:
        """The key and stored object (not a copy); NotFoundError worded as kube-apiserver's when absent."""
        key = self._key(kind, name, namespace)
        current = self._objects.get(key)
        if current is None:
            raise NotFoundError(f'{RESOURCES[kind].plural} "{name}" not found')
        return key, current

    def _next_rv(self) -> int:
        self._last_rv = next(self._rv)
        return self._last_rv

    def _record(self, verb: str, kind: str, name: str) -> None:
        self.calls.append((verb, kind, name))
        queued = self.fail_next.get((verb, kind))
        if queued:
            raise queued.pop(0)

    def _emit(self, kind: str, type_: str, obj: Object, pending: Pending) -> None:
        rv = int(obj["metadata"]["resourceVersion"])
        event = WatchEvent(type_, copy.deepcopy(obj))
        self._log.append(_LogEntry(rv, kind, event))
        self._log_rvs.append(rv)
        pending.append((kind, event))
        self._cond.notify_all()

    def _notify(self, pending: Pending) -> None:
        """Run callbacks outside the store lock (they may call back into the API)."""
        if not pending:
            return
        with self._dispatch:
            for kind, event in pending:
                for cb in list(self._subscribers):
                    cb(kind, event)
                if kind == "Pod" and event.type == "DELETED":
                    for pod_cb in list(self._pod_deleted):
                        pod_cb(copy.deepcopy(event.object))

    def _remove(self, key: Key, pending: Pending) -> None:
        obj = self._objects.pop(key)
        obj["metadata"]["resourceVersion"] = str(self._next_rv())
        self._emit(key[0], "DELETED", obj, pending)

    def _store(self, key: Key, obj: Object, type_: str, pending: Pending) -> Object:
        meta = obj["metadata"]
        if meta.get("deletionTimestamp") and not meta.get("finalizers") and not self._lingers(key[0], meta):
            self._objects[key] = obj
            self._remove(key, pending)
            return copy.deepcopy(obj)
        meta["resourceVersion"] = str(self._next_rv())
        self._objects[key] = obj
        self._emit(key[0], type_, obj, pending)
        return copy.deepcopy(obj)

    def _lingers(self, kind: str, meta: Mapping[str, Any]) -> bool:
        """A deleting Pod inside its grace period stays (kubelet has not confirmed yet)."""
        if kind != "Pod" or not meta.get("deletionTimestamp"):
            return False
        grace = float(meta.get("deletionGracePeriodSeconds") or 0)
        return parse_rfc3339(meta["deletionTimestamp"]) > self.clock.now() - 1e-9 and grace > 0

    def _reap_locked(self, pending: Pending) -> None:
        now = self.clock.now()
        for key, obj in list(self._objects.items()):
            meta = obj["metadata"]
            if key[0] == "Pod" and meta.get("deletionTimestamp") and not meta.get("finalizers"):
                if parse_rfc3339(meta["deletionTimestamp"]) <= now:
                    self._remove(key, pending)

    def reap(self) -> None:
        """Remove Pods whose deletion grace period has passed on the clock (kubelet's confirmation)."""
        pending: Pending = []
        with self._lock:
            self._reap_locked(pending)
        self._notify(pending)

    # ------------------------------------------------------------------ KubeAPI
    def get(self, kind: str, name: str, namespace: str | None = None) -> Object:
        """The object (a deep copy); NotFoundError when absent."""
        self.reap()
        with self._lock:
            self._record("get", kind, name)
            return copy.deepcopy(self._existing_locked(kind, name, namespace)[1])

    def list(
        self, kind: str, namespace: str | None = None, label_selector: str | None = None
    ) -> tuple[ObjectList, str]:
        """Copies of the objects of ``kind`` (one namespace or all), sorted by namespace/name, and the store's resourceVersion."""
        self.reap()
        try:
            pred = parse_selector(label_selector)
        except ValueError as exc:
            raise ApiError(400, "BadRequest", f"unable to parse requirement: {exc}") from exc
        with self._lock:
            self._record("list", kind, "")
            resource_for(kind)
            items = [
                copy.deepcopy(obj)
                for (k, ns, _), obj in sorted(self._objects.items())
                if k == kind
                and (namespace is None or ns == namespace)
                and pred(obj["metadata"].get("labels") or {})
            ]
            return items, str(self._last_rv)

    def watch(self, kind: str, resource_version: str, timeout_seconds: int = 60) -> Iterator[WatchEvent]:
        """Events of ``kind`` after ``resource_version``, then new ones until ``timeout_seconds`` pass.

        ``""`` or ``"0"`` starts with a synthetic ADDED for every current object (the API
        server's "any version" start). A version older than the last :meth:`compact` raises
        GoneError. The timeout is in real seconds (0: return once caught up), since a watch is
        I/O and not driven by the fake clock; :meth:`close` ends every watch.
        """
        resource_for(kind)
        deadline = time.monotonic() + timeout_seconds
        with self._lock:
            self._record("watch", kind, "")
            if resource_version in ("", "0"):
                start = self._last_rv
                initial = [
                    WatchEvent("ADDED", copy.deepcopy(o))
                    for (k, _, _), o in sorted(self._objects.items())
                    if k == kind
                ]
            else:
                start = int(resource_version)
                if start < self._compacted_rv:
                    raise GoneError(f"too old resource version: {start} ({self._compacted_rv})")
                initial = []
        yield from initial
        last = start
        while True:
            with self._lock:
                start_at = bisect.bisect_right(self._log_rvs, last)
                batch = [e for e in self._log[start_at:] if e.kind == kind]
                if self._log:
                    last = max(last, self._log[-1].rv)
                if not batch:
                    remaining = deadline - time.monotonic()
                    if self._closed or remaining <= 0:
                        return
                    self._cond.wait(timeout=min(remaining, 0.5))
                    continue
            for entry in batch:
                yield entry.event

    def create(self, kind: str, obj: Object) -> Object:
        """Store a copy with uid, resourceVersion, creationTimestamp (and a name from generateName)."""
        pending: Pending = []
        with self._lock:
            res = resource_for(kind)
            new = copy.deepcopy(obj)
            meta = new.setdefault("metadata", {})
            if not meta.get("name"):
                if not meta.get("generateName"):
                    raise ApiError(
                        422, "Invalid", "metadata.name: Required value: name or generateName is required"
                    )
                meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
            self._record("create", kind, meta["name"])
            if res.namespaced:
                meta["namespace"] = meta.get("namespace") or "default"
            else:
                meta.pop("namespace", None)
            key = self._key(kind, meta["name"], meta.get("namespace"))
            if key in self._objects:
                raise AlreadyExistsError(f'{res.plural} "{meta["name"]}" already exists')
            new["apiVersion"] = res.api_version
            new["kind"] = kind
            meta["uid"] = str(uuid.uuid4())
            meta["creationTimestamp"] = rfc3339(self.clock.now())
            meta.pop("deletionTimestamp", None)
            meta.setdefault("generation", 1)
            stored = self._store(key, new, "ADDED", pending)
        self._notify(pending)
        return stored

    def _write(self, kind: str, current: Object, updated: Object, subresource: str | None) -> Object:
        """Apply the status/spec split of kinds with a status subresource."""
        if kind not in STATUS_SUBRESOURCE_KINDS:
            return updated
        if subresource == "status":
            result = copy.deepcopy(current)
            if "status" in updated:
                result["status"] = updated["status"]
            else:
                result.pop("status", None)
            return result
        if "status" in current:
            updated["status"] = copy.deepcopy(current["status"])
        else:
            updated.pop("status", None)
        return updated

    def _check_subresource(self, kind: str, subresource: str | None) -> None:
        if subresource not in (None, "status"):
            raise ApiError(
                404, "NotFound", f"subresource {subresource!r} of {kind} is not served by the fake"
            )

    def patch(
        self,
        kind: str,
        name: str,
        patch: Object | ObjectList,
        namespace: str | None = None,
        subresource: str | None = None,
    ) -> Object:
        """Merge patch (dict) or JSON patch (list); a failed JSON-patch ``test`` op is 422.

        A ``metadata.resourceVersion`` in a merge patch must match the stored one (409 Conflict
        otherwise), as kube-apiserver enforces it for optimistic concurrency.
        """
        self.reap()
        pending: Pending = []
        self._check_subresource(kind, subresource)
        with self._lock:
            self._record("patch", kind, name)
            key, current = self._existing_locked(kind, name, namespace)
            if isinstance(patch, list):
                try:
                    updated = jsonpatch.apply_patch(current, patch, in_place=False)
                except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as exc:
                    raise ApiError(422, "Invalid", f"the JSON patch cannot be applied: {exc}") from exc
            elif isinstance(patch, Mapping):
                # As kube-apiserver: a resourceVersion in a merge patch is a precondition.
                wanted = (patch.get("metadata") or {}).get("resourceVersion")
                have = current["metadata"].get("resourceVersion")
                if wanted not in (None, "") and str(wanted) != str(have):
                    raise ConflictError(
                        f'Operation cannot be fulfilled on {kind} "{name}": the object has been modified; '
                        "please apply your changes to the latest version and try again"
                    )
                updated = merge_patch(current, patch)
            else:
                raise ApiError(
                    400, "BadRequest", f"patch must be a dict or a list, got {type(patch).__name__}"
                )
            stored = self._update_locked(kind, key, current, updated, subresource, pending)
        self._notify(pending)
        return stored

    def _update_locked(
        self,
        kind: str,
        key: Key,
        current: Object,
        updated: Object,
        subresource: str | None,
        pending: Pending,
    ) -> Object:
        updated = self._write(kind, current, copy.deepcopy(updated), subresource)
        meta = updated.setdefault("metadata", {})
        cur_meta = current["metadata"]
        # Immutable metadata stays as the server has it.
        for field in (
            "uid",
            "creationTimestamp",
            "name",
            "namespace",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
        ):
            if field in cur_meta:
                meta[field] = cur_meta[field]
            else:
                meta.pop(field, None)
        if updated == current:
            return copy.deepcopy(current)  # a no-op write does not bump resourceVersion
        if updated.get("spec") != current.get("spec"):
            meta["generation"] = int(cur_meta.get("generation") or 1) + 1
        return self._store(key, updated, "MODIFIED", pending)

    def replace(self, kind: str, obj: Object, subresource: str | None = None) -> Object:
        """PUT: ConflictError when ``metadata.resourceVersion`` is set and stale; unconditional when unset."""
        self.reap()
        pending: Pending = []
        self._check_subresource(kind, subresource)
        meta = obj.get("metadata") or {}
        with self._lock:
            self._record("replace", kind, meta.get("name", ""))
            key = self._key(kind, meta.get("name", ""), meta.get("namespace"))
            current = self._objects.get(key)
            if current is None:
                raise NotFoundError(f'{RESOURCES[kind].plural} "{meta.get("name")}" not found')
            rv = meta.get("resourceVersion")
            if rv and rv != current["metadata"]["resourceVersion"]:
                raise ConflictError(
                    f'Operation cannot be fulfilled on {RESOURCES[kind].plural} "{meta.get("name")}": '
                    "the object has been modified; please apply your changes to the latest version and try again"
                )
            stored = self._update_locked(kind, key, current, obj, subresource, pending)
        self._notify(pending)
        return stored

    def delete(self, kind: str, name: str, namespace: str | None = None) -> None:
        """Delete; with finalizers (or a Pod grace period) the object stays with a deletionTimestamp."""
        self.reap()
        pending: Pending = []
        with self._lock:
            self._record("delete", kind, name)
            self._delete_locked(kind, name, namespace, pending)
        self._notify(pending)

    def _delete_locked(self, kind: str, name: str, namespace: str | None, pending: Pending) -> None:
        key, current = self._existing_locked(kind, name, namespace)
        meta = current["metadata"]
        grace = 0.0
        if kind == "Pod":
            spec_grace = (current.get("spec") or {}).get("terminationGracePeriodSeconds")
            grace = (
                self.pod_grace_seconds
                if spec_grace is None
                else min(float(spec_grace), self.pod_grace_seconds)
            )
        if not meta.get("finalizers") and grace <= 0:
            self._remove(key, pending)
            return
        if meta.get("deletionTimestamp"):
            return  # already deleting: nothing changes
        updated = copy.deepcopy(current)
        updated["metadata"]["deletionTimestamp"] = rfc3339(self.clock.now() + grace)
        updated["metadata"]["deletionGracePeriodSeconds"] = int(grace)
        self._store(key, updated, "MODIFIED", pending)

    # ------------------------------------------------------------------ eviction
    def set_expected_pods(self, namespace: str, pdb_name: str, count: int) -> None:
        """The scale of the controller behind a PDB (the disruption controller reads it from the owner).

        Without it the expected count is the number of matching, non-terminal pods, deleting
        ones included (their owner still wants them).
        """
        with self._lock:
            self._expected_pods[(namespace, pdb_name)] = count

    def pdb_status(self, name: str, namespace: str) -> dict[str, int]:
        """``{currentHealthy, desiredHealthy, expectedPods, disruptionsAllowed}`` as the disruption controller computes it."""
        with self._lock:
            return self._pdb_status_locked(self._existing_locked("PodDisruptionBudget", name, namespace)[1])

    def _pdb_status_locked(self, pdb: Object) -> dict[str, int]:
        ns = pdb["metadata"]["namespace"]
        spec = pdb.get("spec") or {}
        selector = spec.get("selector")
        pods = [
            o
            for (k, pns, _), o in self._objects.items()
            if k == "Pod"
            and pns == ns
            and selector_matches(selector, o["metadata"].get("labels"))
            and not is_terminal(o)
        ]
        return budget_status(spec, pods, self._expected_pods.get((ns, pdb["metadata"]["name"])))

    def evict(self, name: str, namespace: str) -> None:
        """policy/v1 Eviction: delete the pod unless a PodDisruptionBudget forbids it (429).

        As kube-apiserver: a pod that is already terminating, or whose phase is Pending,
        Succeeded or Failed, is deleted without consulting budgets; more than one budget
        matching the pod is a 500; a budget allowing no disruption is a 429 TooManyRequests.
        """
        self.reap()
        pending: Pending = []
        with self._lock:
            self._record("evict", "Pod", name)
            key, pod = self._existing_locked("Pod", name, namespace)
            if not pod["metadata"].get("deletionTimestamp") and not is_terminal(pod) and phase(pod) != "Pending":
                labels = pod["metadata"].get("labels") or {}
                pdbs = [
                    o
                    for (k, ns, _), o in self._objects.items()
                    if k == "PodDisruptionBudget"
                    and ns == namespace
                    and selector_matches((o.get("spec") or {}).get("selector"), labels)
                ]
                if len(pdbs) > 1:
                    raise ApiError(
                        500,
                        "InternalError",
                        "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
                    )
                if pdbs:
                    pdb = pdbs[0]
                    status = self._pdb_status_locked(pdb)
                    if pod_is_healthy(pod):
                        allowed = status["disruptionsAllowed"] > 0
                    else:
                        # unhealthyPodEvictionPolicy: IfHealthyBudget (default) or AlwaysAllow
                        policy = (pdb.get("spec") or {}).get("unhealthyPodEvictionPolicy", "IfHealthyBudget")
                        allowed = (
                            policy == "AlwaysAllow" or status["currentHealthy"] >= status["desiredHealthy"]
                        )
                    if not allowed:
                        raise TooManyRequestsError(
                            "Cannot evict pod as it would violate the pod's disruption budget. "
                            f"The disruption budget {pdb['metadata']['name']} needs "
                            f"{status['desiredHealthy']} healthy pods and has {status['currentHealthy']} currently"
                        )
            self._delete_locked("Pod", name, namespace, pending)
        self._notify(pending)

    # ------------------------------------------------------------------ watch log
    def compact(self) -> None:
        """Forget the event log: watches from any earlier resourceVersion now get 410 Gone."""
        with self._lock:
            self._log.clear()
            self._log_rvs.clear()
            self._compacted_rv = self._last_rv

    def close(self) -> None:
        """End every open watch (at the end of a test)."""
        with self._lock:
            self._closed = True
            self._cond.notify_all()

    @property
    def resource_version(self) -> str:
        """The latest resourceVersion handed out."""
        with self._lock:
            return str(self._last_rv)

    # ------------------------------------------------------------------ test hooks
    def subscribe(self, callback: ChangeCallback) -> Callable[[], None]:
        """Call ``callback(kind, WatchEvent)`` synchronously after every change; returns an unsubscribe function."""
        with self._dispatch:
            self._subscribers.append(callback)

        def unsubscribe() -> None:
            with self._dispatch:
                if callback in self._subscribers:
                    self._subscribers.remove(callback)

        return unsubscribe

    def on_pod_deleted(self, callback: PodCallback) -> None:
        """Call ``callback(pod)`` once a Pod is gone from the store (play a ReplicaSet or kubelet)."""
        with self._dispatch:
            self._pod_deleted.append(callback)

    def bind(self, name: str, namespace: str, node_name: str) -> Object:
        """What ``pods/binding`` does: set ``spec.nodeName`` and PodScheduled=True. 409 if already bound."""
        pending: Pending = []
        with self._lock:
            self._record("bind", "Pod", name)
            key, pod = self._existing_locked("Pod", name, namespace)
            if (pod.get("spec") or {}).get("nodeName"):
                raise ConflictError(f"pod {name} is already assigned to node {pod['spec']['nodeName']!r}")
            updated = copy.deepcopy(pod)
            updated.setdefault("spec", {})["nodeName"] = node_name
            status = updated.setdefault("status", {})
            status.pop("nominatedNodeName", None)
            _set_condition(status, "PodScheduled", "True", "", self.clock.now())
            stored = self._store(key, updated, "MODIFIED", pending)
        self._notify(pending)
        return stored

    def set_pod_running(self, name: str, namespace: str, *, ready: bool = True) -> Object:
        """Kubelet's report: phase Running and Ready as given."""
        pod = self.get("Pod", name, namespace)
        status = copy.deepcopy(pod.get("status") or {})
        status["phase"] = "Running"
        _set_condition(status, "Ready", "True" if ready else "False", "", self.clock.now())
        _set_condition(status, "ContainersReady", "True" if ready else "False", "", self.clock.now())
        return self.patch("Pod", name, {"status": status}, namespace, subresource="status")

    def set_node_ready(self, name: str, *, ready: bool = True) -> Object:
        """Kubelet's report: condition Ready as given."""
        node = self.get("Node", name)
        status = copy.deepcopy(node.get("status") or {})
        _set_condition(
            status,
            "Ready",
            "True" if ready else "False",
            "KubeletReady" if ready else "KubeletNotReady",
            self.clock.now(),
        )
        return self.patch("Node", name, {"status": status}, subresource="status")

    def events(
        self, *, reason: str | None = None, involved_name: str | None = None, kind: str | None = None
    ) -> ObjectList:
        """Stored Events, filtered by reason, involvedObject name and kind."""
        items, _ = self.list("Event")
        return [
            e
            for e in items
            if (reason is None or e.get("reason") == reason)
            and (involved_name is None or (e.get("involvedObject") or {}).get("name") == involved_name)
            and (kind is None or (e.get("involvedObject") or {}).get("kind") == kind)
        ]


def _set_condition(status: dict[str, Any], type_: str, value: str, reason: str, now: float) -> None:
    conditions = [c for c in status.get("conditions") or [] if c.get("type") != type_]
    conditions.append({"type": type_, "status": value, "reason": reason, "lastTransitionTime": rfc3339(now)})
    status["conditions"] = conditions
