"""The cluster state cache: an informer per kind, so that decisions read memory, not the API server.

The provisioning controller solves over every Node, Pod, Provisioner, DaemonSet and
PodDisruptionBudget of the cluster (plus PVs, PVCs and StorageClasses for volume topology, and
LimitRanges for the defaults a DaemonSet's pods will get)
within a second of a burst; asking the API server for them on every batch would cost seconds at
5,000 nodes and load it for nothing. So, as client-go's reflector does, each kind is listed
once, then watched from the list's resourceVersion; a watch that times out is resumed from the
last seen resourceVersion (bookmarks included), and a 410 Gone (the version was compacted away)
relists, announcing the difference as synthetic ADDED/MODIFIED/DELETED events so subscribers
never miss a deletion that happened while the watch was down.

Objects are stored as :func:`provisioner.state.transform.strip` leaves them: the fields
Groupless reads, without managed fields, container images and environments, container
statuses, node images (client-go's transform functions; ``transform=`` changes it). Objects in
the cache are never mutated after they are stored (an update replaces the whole
object), so :meth:`ClusterState.snapshot` hands out fresh containers that share the objects:
a consistent, cheap view of one moment. Callers must not mutate the objects of a snapshot;
copy one before changing it.

Provisioners are decoded (defaulted as the mutating webhook would, then
:func:`~provisioner.api.schemas.load_provisioner`) when they arrive; an object that cannot be
decoded is logged and left out of the decoded map (its raw form stays in the cache and the
error in :attr:`Snapshot.provisioner_errors`): a bad object must never crash a controller.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from provisioner.api.defaults import default_provisioner
from provisioner.api.schemas import ProvisionerDecodeError, load_provisioner
from provisioner.api.types import Provisioner
from provisioner.clock import Clock, RealClock
from provisioner.kube.api import GoneError, KubeAPI, Object, WatchEvent
from provisioner.model import objects, pods
from provisioner.state.nodes import NodeViews
from provisioner.state.transform import Transform, strip

log = logging.getLogger(__name__)

#: The kinds the controllers need, in the order they are synced.
DEFAULT_KINDS: tuple[str, ...] = (
    "Provisioner",
    "Node",
    "Pod",
    "DaemonSet",
    "PodDisruptionBudget",
    "PersistentVolume",
    "PersistentVolumeClaim",
    "StorageClass",
    "LimitRange",
)

ChangeCallback = Callable[[str, WatchEvent], None]
ObjKey = tuple[str, str]  # (namespace or "", name)


def object_key(obj: Mapping[str, Any]) -> ObjKey:
    """The cache's key of an object: ``(namespace or "", name)``."""
    return (objects.namespace(obj), objects.name(obj))


def pod_key(pod: Mapping[str, Any]) -> str:
    """How a pod is indexed: its uid (``<namespace>/<name>`` for a manifest that has none)."""
    return objects.uid(pod) or objects.key(pod)


class _PodIndex:
    """Pods by uid (every one), by node (bound, not finished) and pending (unbound, not finished).

    The one place that decides which pods a :class:`Snapshot` shows where (:func:`provisioner.model.pods`
    classifies them); the cache updates it event by event, :func:`snapshot_of` fills it at once.
    """

    def __init__(self) -> None:
        self.by_uid: dict[str, Object] = {}
        self.by_node: dict[str, dict[str, Object]] = {}
        self.pending: dict[str, Object] = {}

    def add(self, pod: Object) -> None:
        uid = pod_key(pod)
        self.by_uid[uid] = pod
        if pods.is_terminal(pod):
            return
        node = pods.node_name(pod)
        if node:
            self.by_node.setdefault(node, {})[uid] = pod
        else:
            self.pending[uid] = pod

    def remove(self, pod: Object) -> None:
        uid = pod_key(pod)
        self.by_uid.pop(uid, None)
        self.pending.pop(uid, None)
        node = pods.node_name(pod)
        on_node = self.by_node.get(node)
        if on_node is not None:
            on_node.pop(uid, None)
            if not on_node:
                del self.by_node[node]

    def views(self) -> dict[str, Any]:
        """The :class:`Snapshot` fields about pods, in fresh containers that share the pod objects."""
        return {
            "pods": dict(self.by_uid),
            "pods_by_node": {node: tuple(on.values()) for node, on in self.by_node.items()},
            "pending_pods": tuple(self.pending.values()),
            "bound_pod_uids": frozenset(uid for uid, pod in self.by_uid.items() if pods.is_bound(pod)),
        }


@dataclass(frozen=True)
class Snapshot:
    """One consistent moment of the cluster (see the module docstring on sharing).

    ``nodes``: name -> Node. ``pods``: uid -> Pod (every pod, terminal ones included; a manifest
    without a uid under ``<namespace>/<name>``: :func:`pod_key`).
    ``pods_by_node``: node name -> its non-terminal pods. ``pending_pods``: non-terminal pods
    without ``spec.nodeName`` (the provisioning controller narrows them to provisionable ones).
    ``provisioners``: name -> decoded :class:`Provisioner`; ``provisioner_objects``: name ->
    raw object (uid and labels for ownerReferences and events); ``provisioner_errors``: name ->
    why it could not be decoded. ``bound_pod_uids``: uids of pods with a ``nodeName``.
    ``limit_ranges``: every LimitRange (their defaults size DaemonSet pods that do not exist yet).
    ``taken_at``: the clock's wall time. ``resource_versions``: kind -> last seen version.
    """

    nodes: Mapping[str, Object] = field(default_factory=dict)
    pods: Mapping[str, Object] = field(default_factory=dict)
    pods_by_node: Mapping[str, Sequence[Object]] = field(default_factory=dict)
    pending_pods: Sequence[Object] = ()
    bound_pod_uids: frozenset[str] = frozenset()
    provisioners: Mapping[str, Provisioner] = field(default_factory=dict)
    provisioner_objects: Mapping[str, Object] = field(default_factory=dict)
    provisioner_errors: Mapping[str, str] = field(default_factory=dict)
    daemonsets: Sequence[Object] = ()
    pdbs: Sequence[Object] = ()
    persistent_volumes: Sequence[Object] = ()
    persistent_volume_claims: Sequence[Object] = ()
    storage_classes: Sequence[Object] = ()
    limit_ranges: Sequence[Object] = ()
    taken_at: float = 0.0
    resource_versions: Mapping[str, str] = field(default_factory=dict)

    def pods_on(self, node_name: str) -> Sequence[Object]:
        """The non-terminal pods bound to ``node_name`` (empty when none)."""
        return self.pods_by_node.get(node_name, ())


def snapshot_of(
    *,
    nodes: Iterable[Object] = (),
    pods: Iterable[Object] = (),
    provisioners: Iterable[Provisioner] = (),
    daemonsets: Iterable[Object] = (),
    persistent_volumes: Iterable[Object] = (),
    persistent_volume_claims: Iterable[Object] = (),
    storage_classes: Iterable[Object] = (),
    limit_ranges: Iterable[Object] = (),
    taken_at: float = 0.0,
) -> Snapshot:
    """A :class:`Snapshot` of the given objects, indexed as the cache indexes its own.

    For what reads objects from elsewhere than the API server (``groupless plan``'s manifests,
    tests, benchmarks). ``provisioners`` are decoded already. Objects without ``metadata`` are
    left out, as the cache leaves them out; a later Node of the same name replaces an earlier one.
    """
    index = _PodIndex()
    for pod in pods:
        if _has_metadata(pod):
            index.add(pod)
    return Snapshot(
        nodes={objects.name(node): node for node in nodes if _has_metadata(node)},
        **index.views(),
        provisioners={p.name: p for p in provisioners},
        daemonsets=tuple(d for d in daemonsets if _has_metadata(d)),
        persistent_volumes=tuple(persistent_volumes),
        persistent_volume_claims=tuple(persistent_volume_claims),
        storage_classes=tuple(storage_classes),
        limit_ranges=tuple(lr for lr in limit_ranges if _has_metadata(lr)),
        taken_at=taken_at,
    )


def _has_metadata(obj: object) -> bool:
    return isinstance(obj, Mapping) and isinstance(obj.get("metadata"), Mapping)


class ClusterState:
    """An informer-style cache of the kinds in ``kinds`` over any :class:`~provisioner.kube.api.KubeAPI`.

    ``transform`` turns each listed or watched object into what the cache stores and announces
    (default :func:`~provisioner.state.transform.strip`: the fields Groupless reads).

    Use: :meth:`start` runs one list+watch thread per kind (the process); tests call
    :meth:`resync` (a synchronous list of every kind) and feed changes with :meth:`handle`
    (for example ``fake_api.subscribe(state.handle)``), or :meth:`pump` (drain the watches
    without blocking). :meth:`synced` is True once every kind has been listed.
    :attr:`node_views` is the one :class:`~provisioner.state.nodes.NodeViews` of its snapshots.
    """

    def __init__(
        self,
        api: KubeAPI,
        clock: Clock | None = None,
        *,
        kinds: Iterable[str] = DEFAULT_KINDS,
        watch_timeout_seconds: int = 300,
        retry_seconds: float = 1.0,
        max_retry_seconds: float = 30.0,
        transform: Transform | None = None,
    ) -> None:
        self.api = api
        self.transform: Transform = transform if transform is not None else strip
        self.clock: Clock = clock or RealClock()
        self.kinds = tuple(kinds)
        self.watch_timeout_seconds = watch_timeout_seconds
        self.retry_seconds = retry_seconds
        self.max_retry_seconds = max_retry_seconds
        self._lock = threading.RLock()
        self._dispatch = threading.RLock()  # a subscriber may cause a nested announcement
        self._store: dict[str, dict[ObjKey, Object]] = {k: {} for k in self.kinds}
        self._rv: dict[str, str] = {}
        self._synced: set[str] = set()
        self._pods = _PodIndex()
        self._provisioners: dict[str, Provisioner] = {}
        self._provisioner_errors: dict[str, str] = {}
        self._subscribers: list[ChangeCallback] = []
        self._threads: list[threading.Thread] = []
        self._stop = threading.Event()
        self._synced_event = threading.Event()
        #: The node views of this cache's snapshots, shared by every reader of this cache (the
        #: provisioning controller's solver input, the in-process extender, the metrics).
        self.node_views = NodeViews()

    # ------------------------------------------------------------------ subscriptions
    def subscribe(self, callback: ChangeCallback) -> Callable[[], None]:
        """Call ``callback(kind, event)`` after each change is in the cache; returns an unsubscribe.

        Callbacks run on the informer threads, one at a time, after the cache holds the change;
        exceptions are logged and swallowed (a subscriber must not stop an informer).
        """
        with self._lock:
            self._subscribers.append(callback)

        def unsubscribe() -> None:
            with self._lock:
                if callback in self._subscribers:
                    self._subscribers.remove(callback)

        return unsubscribe

    def _announce(self, changes: Sequence[tuple[str, WatchEvent]]) -> None:
        if not changes:
            return
        with self._lock:
            subscribers = list(self._subscribers)
        with self._dispatch:
            for kind, event in changes:
                for cb in subscribers:
                    try:
                        cb(kind, event)
                    except Exception:
                        log.exception("State subscriber failed on %s %s", kind, event.type)

    # ------------------------------------------------------------------ store updates
    def handle(self, kind: str, event: WatchEvent) -> None:
        """Apply one watch event to the cache and announce it; unknown kinds and odd objects are skipped."""
        if kind not in self._store:
            return
        obj = event.object
        if not _has_metadata(obj):
            log.warning("Skipping a %s %s event without metadata", kind, event.type)
            return
        rv = str(obj["metadata"].get("resourceVersion") or "")
        if event.type == "BOOKMARK":
            with self._lock:
                if rv:
                    self._rv[kind] = rv
            return
        if event.type not in ("ADDED", "MODIFIED", "DELETED"):
            return
        obj = self.transform(kind, obj)
        event = WatchEvent(event.type, obj)
        with self._lock:
            if event.type == "DELETED":
                self._delete_locked(kind, obj)
            else:
                self._put_locked(kind, obj)
            if rv:
                self._rv[kind] = rv
        self._announce([(kind, event)])

    def _put_locked(self, kind: str, obj: Object) -> None:
        key = object_key(obj)
        previous = self._store[kind].get(key)
        if kind == "Pod" and previous is not None:
            self._pods.remove(previous)
        self._store[kind][key] = obj
        if kind == "Pod":
            self._pods.add(obj)
        elif kind == "Provisioner":
            self._decode_provisioner(obj)

    def _delete_locked(self, kind: str, obj: Object) -> None:
        key = object_key(obj)
        previous = self._store[kind].pop(key, None)
        if kind == "Pod" and previous is not None:
            self._pods.remove(previous)
        elif kind == "Provisioner":
            self._provisioners.pop(key[1], None)
            self._provisioner_errors.pop(key[1], None)

    def _decode_provisioner(self, obj: Object) -> None:
        name = object_key(obj)[1]
        try:
            self._provisioners[name] = load_provisioner(default_provisioner(obj))
            self._provisioner_errors.pop(name, None)
        except (ProvisionerDecodeError, ValueError, TypeError, KeyError, AttributeError) as exc:
            self._provisioners.pop(name, None)
            self._provisioner_errors[name] = str(exc)
            log.warning("Ignoring Provisioner %s: %s", name, exc)

    def replace(self, kind: str, items: Sequence[Object], resource_version: str) -> None:
        """Replace the cache of ``kind`` with a fresh list, announcing what changed (a relist)."""
        if kind not in self._store:
            return
        changes: list[tuple[str, WatchEvent]] = []
        with self._lock:
            old = self._store[kind]
            fresh: dict[ObjKey, Object] = {}
            for obj in items:
                if _has_metadata(obj):
                    fresh[object_key(obj)] = self.transform(kind, obj)
            for key, obj in old.items():
                if key not in fresh:
                    changes.append((kind, WatchEvent("DELETED", obj)))
            for key, obj in fresh.items():
                prev = old.get(key)
                if prev is None:
                    changes.append((kind, WatchEvent("ADDED", obj)))
                elif prev.get("metadata", {}).get("resourceVersion") != obj["metadata"].get(
                    "resourceVersion"
                ):
                    changes.append((kind, WatchEvent("MODIFIED", obj)))
            for _, event in changes:
                if event.type == "DELETED":
                    self._delete_locked(kind, event.object)
            for _, event in changes:
                if event.type != "DELETED":
                    self._put_locked(kind, event.object)
            self._rv[kind] = resource_version
            self._synced.add(kind)
            if self._synced.issuperset(self.kinds):
                self._synced_event.set()
        self._announce(changes)

    # ------------------------------------------------------------------ reading
    def synced(self) -> bool:
        """True once every kind has been listed at least once."""
        return self._synced_event.is_set()

    def wait_synced(self, timeout: float | None = None) -> bool:
        """Block until :meth:`synced` (or ``timeout`` real seconds); returns whether it is."""
        return self._synced_event.wait(timeout)

    def resource_version(self, kind: str) -> str:
        """The last resourceVersion seen for ``kind`` ("" before its first list)."""
        with self._lock:
            return self._rv.get(kind, "")

    def get(self, kind: str, name: str, namespace: str | None = None) -> Object | None:
        """The cached object or None (never an API call)."""
        with self._lock:
            return self._store.get(kind, {}).get((namespace or "", name))

    def objects(self, kind: str) -> list[Object]:
        """The cached objects of ``kind``."""
        with self._lock:
            return list(self._store.get(kind, {}).values())

    def pod(self, uid: str) -> Object | None:
        """The cached pod with ``uid`` or None."""
        with self._lock:
            return self._pods.by_uid.get(uid)

    def pending_pods(self) -> list[Object]:
        """Non-terminal pods without a nodeName."""
        with self._lock:
            return list(self._pods.pending.values())

    def snapshot(self) -> Snapshot:
        """A consistent view of the cache (fresh containers, shared immutable objects)."""
        with self._lock:
            provisioner_objects = {key[1]: obj for key, obj in self._store.get("Provisioner", {}).items()}
            return Snapshot(
                nodes={key[1]: obj for key, obj in self._store.get("Node", {}).items()},
                **self._pods.views(),
                provisioners=dict(self._provisioners),
                provisioner_objects=provisioner_objects,
                provisioner_errors=dict(self._provisioner_errors),
                daemonsets=tuple(self._store.get("DaemonSet", {}).values()),
                pdbs=tuple(self._store.get("PodDisruptionBudget", {}).values()),
                persistent_volumes=tuple(self._store.get("PersistentVolume", {}).values()),
                persistent_volume_claims=tuple(self._store.get("PersistentVolumeClaim", {}).values()),
                storage_classes=tuple(self._store.get("StorageClass", {}).values()),
                limit_ranges=tuple(self._store.get("LimitRange", {}).values()),
                taken_at=self.clock.now(),
                resource_versions=dict(self._rv),
            )

    # ------------------------------------------------------------------ list + watch
    def resync(self) -> None:
        """List every kind now (synchronously); raises the API's errors."""
        for kind in self.kinds:
            items, rv = self.api.list(kind)
            self.replace(kind, items, rv)

    def pump(self) -> int:
        """Drain pending watch events of every kind without blocking; relists on 410. Returns the event count."""
        count = 0
        for kind in self.kinds:
            if kind not in self._synced:
                items, rv = self.api.list(kind)
                self.replace(kind, items, rv)
                continue
            try:
                for event in self.api.watch(kind, self.resource_version(kind), timeout_seconds=0):
                    self.handle(kind, event)
                    count += 1
            except GoneError:
                items, rv = self.api.list(kind)
                self.replace(kind, items, rv)
        return count

    def start(self) -> None:
        """Start one list+watch thread per kind (daemon threads; :meth:`stop` ends them)."""
        self._stop.clear()
        for kind in self.kinds:
            thread = threading.Thread(
                target=self._reflect, args=(kind,), name=f"informer-{kind}", daemon=True
            )
            thread.start()
            self._threads.append(thread)

    def stop(self, timeout: float = 5.0) -> None:
        """Ask the informer threads to end and wait up to ``timeout`` seconds in all for them.

        A thread blocked in a watch ends at its next event or at the watch timeout; it is a
        daemon thread, so one still blocked does not keep the process alive.
        """
        self._stop.set()
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        self._threads = [t for t in self._threads if t.is_alive()]

    def _reflect(self, kind: str) -> None:
        """client-go's reflector loop for one kind: list, watch, resume, relist on 410, back off on errors."""
        need_list = True
        failures = 0
        while not self._stop.is_set():
            try:
                if need_list:
                    items, rv = self.api.list(kind)
                    self.replace(kind, items, rv)
                    need_list = False
                for event in self.api.watch(kind, self.resource_version(kind), self.watch_timeout_seconds):
                    if self._stop.is_set():
                        return
                    self.handle(kind, event)
                failures = 0
            except GoneError:
                log.info("Watch of %s expired (410 Gone); relisting", kind)
                need_list = True
            except Exception as exc:
                failures += 1
                delay = min(self.max_retry_seconds, self.retry_seconds * 2 ** min(failures - 1, 10))
                log.warning("List/watch of %s failed (%s); retrying in %.1fs", kind, exc, delay)
                if failures >= 3:
                    need_list = True  # the resourceVersion may be the problem
                self._stop.wait(delay)
