"""The provisioning controller: pending pods in, right-sized nodes launched and nominated out.

The loop (DESIGN.md "Data flow"): pods that kube-scheduler marked Unschedulable (seen through
the cluster state cache, or signalled by the extender) open a batching window; when it closes,
the controller takes a snapshot of the cluster, solves (pure :func:`provisioner.scheduling.solver.solve`
over pods, Provisioners, instance types, existing and in-flight nodes, DaemonSets), checks
limits, launches each planned node through the CloudProvider and creates its Node object at
once, with the ``groupless.dev/nominations`` annotation naming the pods it was launched for.

Decisions and their sources:

* In-flight awareness (Karpenter v0.10+): nodes already launched count as capacity, with what
  their nominated pods still need set aside, so a second burst that fits launches nothing; a
  pod placed on an in-flight node is added to its nominations. Pods holding a valid
  nomination are not provisionable; a nomination is valid only while the pod still fits
  beside the pods bound to the node (kube-scheduler may bind others there first), else it
  ends and the pod gets a new node (see :func:`_displaced`). The cache lags our own
  writes, so the controller also keeps the pods it is launching for ("in flight": from the
  plan until a round's snapshot shows their nomination on the Node, or the launch fails) and the Nodes it wrote (their
  capacity and nominations count until a snapshot shows them); only a snapshot releases
  them, never a watch event that may arrive after a round took its snapshot. So nothing is
  launched twice for one pod. Node requests carry a stable id (Provisioner + pod UIDs) so a
  retried launch is idempotent at the cloud too.
* Limits are enforced twice: by the solver while packing, and before each launch against the
  capacity of the Provisioner's nodes (existing, in flight, launched in this round), dropping
  instance type options that would overshoot (Karpenter v0.6.3 checked once per packing and
  could overshoot; we do not).
* Insufficient capacity (Karpenter's ICE handling): the failed offerings are marked
  unavailable and the same pods are solved again with the remaining offerings, up to
  ``ice_retries`` rounds. Other launch errors back off per Provisioner (exponential, capped),
  visible as Warning events on the Provisioner.
* A launch whose Node cannot be created is not leaked: the instance is terminated at once
  (the garbage collector would find it later, but an orphan costs money until then).
* Events: ``Nominated`` on each pod, ``Launched`` on the Provisioner, ``FailedProvisioning``
  (Warning) on a pod no Provisioner can serve; log lines as the walkthrough shows them.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from provisioner import metrics
from provisioner.api.types import Provisioner
from provisioner.clock import Clock, parse_rfc3339
from provisioner.cloudprovider.types import (
    CloudProvider,
    CloudProviderError,
    InsufficientCapacityError,
    LoggingCloudProvider,
    Machine,
    NodeRequest,
)
from provisioner.controllers.provisioning.batcher import Batch, Batcher
from provisioner.controllers.provisioning.nodes import (
    node_manifest,
    node_request_id,
    quantity_string,
    taint_dicts,
)
from provisioner.controllers.provisioning.selection import not_provisionable_reason, owner_kind
from provisioner.kube.api import (
    AlreadyExistsError,
    ApiError,
    KubeAPI,
    NotFoundError,
    Object,
    WatchEvent,
)
from provisioner.kube.events import EventRecorder
from provisioner.model import labels as wk
from provisioner.model import nominations as nom
from provisioner.model.quantity import parse_quantity, parse_resource_list
from provisioner.model.resources import CPU, MEMORY, PODS, Resources
from provisioner.scheduling.daemonsets import daemonset_pod
from provisioner.scheduling.instancetypes import InstanceType
from provisioner.scheduling.nodes import ClusterNode, node_from_manifest
from provisioner.scheduling.pods import Pod, pod_from_manifest, pod_requests
from provisioner.scheduling.provisioners import provisioner_limits
from provisioner.scheduling.solver import Plan, PlannedNode, SolverInput, solve
from provisioner.scheduling.volumes import volume_requirements
from provisioner.settings import ProvisioningSettings
from provisioner.state.cluster import ClusterState, Snapshot

log = logging.getLogger(__name__)

_RESOURCE_PARSE_ERRORS = (ValueError, TypeError, KeyError, AttributeError)
#: Taints that only last until a node is Ready.
_TRANSIENT_TAINTS = frozenset(
    {wk.NOT_READY_TAINT_KEY, "node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"}
)


@dataclass(frozen=True)
class LaunchedNode:
    """One node launched: its Node name, the machine, the pods nominated to it."""

    name: str
    provisioner: str
    machine: Machine
    pod_uids: tuple[str, ...]


@dataclass(frozen=True)
class ProvisionResult:
    """What one provisioning round did.

    ``nodes``: names of the Nodes created (launch order). ``nominated_existing``: node name ->
    pod UIDs added to an in-flight node's nominations. ``placed_existing``: node name -> pod
    UIDs the solver placed on existing capacity (in flight or Ready). ``unschedulable``: pod
    key (``ns/name``) -> reason no Provisioner could serve it. ``failed``: pod key -> why its
    launch failed (limits, back-off, cloud errors). ``pods``: how many pods were considered.
    """

    nodes: tuple[str, ...] = ()
    launched: tuple[LaunchedNode, ...] = ()
    nominated_existing: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    placed_existing: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    unschedulable: Mapping[str, str] = field(default_factory=dict)
    failed: Mapping[str, str] = field(default_factory=dict)
    pods: int = 0


class ReplacementError(RuntimeError):
    """Replacement capacity could not be provided for every pod (the message names one and why)."""


@dataclass
class _Backoff:
    failures: int = 0
    until: float = 0.0


@dataclass(frozen=True)
class _InFlight:
    """A pod capacity is on its way for: covered, so no later round launches for it again.

    ``node``: the Node it is nominated to, ``""`` while its launch is still running. ``until``:
    clock wall time when this memory ends at the latest (the nomination's deadline). Released
    earlier when a snapshot shows the nomination on the Node, the pod bound or gone, the Node
    gone, or (``node == ""``) when the round that launches it ends without a node for it.
    """

    node: str
    until: float


@dataclass
class _Round:
    """Mutable bookkeeping of one provisioning round."""

    snapshot: Snapshot
    usage: dict[str, Resources]
    exclude: frozenset[str]
    pod_objects: dict[str, Object]
    launched: list[LaunchedNode] = field(default_factory=list)
    nominated_existing: dict[str, list[str]] = field(default_factory=dict)
    placed_existing: dict[str, list[str]] = field(default_factory=dict)
    unschedulable: dict[str, str] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)
    unavailable: set[tuple[str, str, str]] = field(default_factory=set)
    nominate: bool = True  # False for replacement capacity: the pods are bound elsewhere


def _format_duration(seconds: float) -> str:
    return f"{seconds:.3g}s" if seconds < 10 else f"{seconds:.1f}s"


def _without_ended_nominations(node: Object, snapshot: Snapshot, now: float) -> Object:
    """``node`` with only the nominations of pods that exist and are not bound anywhere yet.

    The annotation may still name pods that bound (kept :data:`BIND_GRACE_SECONDS` for the
    extender) or that were deleted since the last prune; the solver must not hold room for them.
    """
    annotations = (node.get("metadata") or {}).get("annotations") or {}
    raw = annotations.get(wk.NOMINATIONS_ANNOTATION)
    if raw is None:
        return node
    decoded = nom.decode(raw)
    ended = {uid for uid in decoded.pods if uid in snapshot.bound_pod_uids or uid not in snapshot.pods}
    live = nom.active(decoded, now, ended)
    if live == decoded:
        return node
    kept = {k: v for k, v in annotations.items() if k != wk.NOMINATIONS_ANNOTATION}
    if live.pods:
        kept[wk.NOMINATIONS_ANNOTATION] = nom.encode(live)
    return {**node, "metadata": {**(node.get("metadata") or {}), "annotations": kept}}


#: Seconds a nomination outlives its pod's binding. The extender learns of bindings and of
#: nomination changes through two different watches (Pods, Nodes); were a nomination pruned the
#: moment the pod binds, an extender that has seen the pruned annotation but not yet the binding
#: would count the pod nowhere and offer its room to another pod (seen in the 200-pod e2e burst:
#: the last pods nominated to a node no longer fitted on it). While both are visible the extender
#: counts the pod once, as bound (``nominations.active`` drops bound UIDs).
BIND_GRACE_SECONDS = 30.0


def _bound_for(pod: Mapping[str, Any], now: float) -> float:
    """Seconds since ``pod`` was bound (its PodScheduled=True transition); infinity when unknown."""
    for condition in (pod.get("status") or {}).get("conditions") or ():
        if condition.get("type") == "PodScheduled" and condition.get("status") == "True":
            try:
                return now - parse_rfc3339(str(condition.get("lastTransitionTime")))
            except ValueError:
                break
    return float("inf")


def _displaced(node: Mapping[str, Any], nominations: nom.Nominations, bound: Sequence[Object]) -> set[str]:
    """UIDs of nominated pods that no longer fit on ``node`` beside the pods bound to it.

    Why: the extender holds a node's nominated capacity against the pods it sees bound, but
    kube-scheduler binds asynchronously and places several pods at once from its own cache
    (assumed pods), so under a burst other pods can still take a nominated node's room. The
    nominated pod then fits nowhere (``Insufficient memory`` on every node), and while its
    nomination held (``nomination_ttl_seconds``, 5 min) it was not provisionable: nothing
    launched and no cluster event requeued it. A nomination the node can no longer honour
    therefore ends now. Nominations are kept in UID order while they fit in the node's
    allocatable minus what its bound pods request; a node without a readable allocatable
    (not registered yet) displaces nothing.
    """
    status = node.get("status") or {}
    raw = status.get("allocatable") or status.get("capacity")
    if not nominations.pods or not raw:
        return set()
    try:
        free = Resources(parse_resource_list(raw))
        used = Resources.sum(pod_requests(p) for p in bound)
    except (ValueError, TypeError, AttributeError):
        return set()
    free = free - used
    displaced: set[str] = set()
    for uid, entry in sorted(nominations.pods.items()):
        wanted = entry.requests if entry.requests.get(PODS) else entry.requests + {PODS: 1}
        if wanted.fits(free):
            free = free - wanted
        else:
            displaced.add(uid)
    return displaced


def _nominated_on(node: Mapping[str, Any]) -> Collection[str]:
    """UIDs of the pods in the node's nominations annotation (deadline not considered)."""
    raw = ((node.get("metadata") or {}).get("annotations") or {}).get(wk.NOMINATIONS_ANNOTATION)
    return nom.decode(raw).pods if raw else ()


def _disrupted(node: Mapping[str, Any]) -> bool:
    """Whether the node carries ``karpenter.sh/disrupted`` (expiring or emptied: going away)."""
    taints = (node.get("spec") or {}).get("taints") or ()
    return any(isinstance(t, Mapping) and t.get("key") == wk.DISRUPTED_TAINT_KEY for t in taints)


def _uid(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("uid") or "")


def _key(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace') or 'default'}/{meta.get('name') or ''}"


def _capacity(node: Mapping[str, Any]) -> Resources:
    status = node.get("status") or {}
    raw = status.get("capacity") or status.get("allocatable") or {}
    values: dict[str, int] = {}
    if isinstance(raw, Mapping):
        for name, value in raw.items():
            try:
                values[str(name)] = parse_quantity(value, str(name))
            except Exception:  # a malformed quantity counts as nothing, never a crash
                continue
    return Resources(values)


class ProvisioningController:
    """Launches nodes for provisionable pods. See the module docstring.

    ``trigger(uid)`` signals a pending pod (or, with None, "look at every pending pod");
    ``run(stop)`` is the loop; ``reconcile_once()`` one round now (tests, no batching);
    ``provision(pods, exclude_nodes=...)`` launches replacement capacity for given pods.
    """

    def __init__(
        self,
        api: KubeAPI,
        state: ClusterState,
        cloud: CloudProvider,
        clock: Clock,
        recorder: EventRecorder,
        settings: ProvisioningSettings | None = None,
        *,
        solver: Callable[[SolverInput], Plan] = solve,
    ) -> None:
        self.api = api
        self.state = state
        self.cloud = LoggingCloudProvider.around(cloud)  # the walkthrough's launch line
        self.clock = clock
        self.recorder = recorder
        self.settings = settings or ProvisioningSettings()
        self.solver = solver
        self.batcher = Batcher(
            clock,
            self.settings.batching.idle_seconds,
            self.settings.batching.max_seconds,
            self.settings.batching.max_pods,
        )
        self._round_lock = threading.RLock()  # one provisioning round at a time
        self._lock = threading.Lock()  # the bookkeeping below, shared with launch threads
        self._backoff: dict[str, _Backoff] = {}
        # pods being launched for, or nominated where the cache may not show it yet (see _InFlight)
        self._in_flight: dict[str, _InFlight] = {}
        # node name -> the latest Node object we wrote (created, nominations patched), until a
        # snapshot shows that write (see _release_in_flight)
        self._written: dict[str, Object] = {}
        # pod UID -> the nodes whose nomination of it ended because they filled up (see _displaced);
        # salts the pod's next node request, whose ClientToken would otherwise return that node
        self._displaced_from: dict[str, frozenset[str]] = {}
        self._warming: set[str] = set()  # Provisioners whose instance types are being fetched ahead
        self._warm_new_provisioners = False  # set by run(): tests drive rounds without threads
        self._pool = ThreadPoolExecutor(
            max_workers=max(1, self.settings.launch_parallelism), thread_name_prefix="launch"
        )
        self._unsubscribe: Callable[[], None] | None = None
        self._node_cache: dict[str, tuple[tuple[Any, ...], ClusterNode]] = {}
        # replacement capacity promised to an expiring node's pods, held until that node is gone:
        # replacement (or existing) node name -> expiring node name -> summed pod requests
        self._promised: dict[str, dict[str, Resources]] = {}

    # ------------------------------------------------------------------ signals
    def trigger(self, pod_uid: str | None = None) -> None:
        """Signal a pod that nothing fits (``pod_uid``) or ask for a look at every pending pod (None)."""
        self.batcher.add(pod_uid)

    def watch_state(self) -> None:
        """Subscribe to the cluster state cache: provisionable pods open or extend a batch."""
        if self._unsubscribe is None:
            self._unsubscribe = self.state.subscribe(self._on_change)

    def _on_change(self, kind: str, event: WatchEvent) -> None:
        if kind == "Node":
            # Only a deletion ends our memory of a node here. An ADDED/MODIFIED event is not
            # enough: a round may have taken its snapshot just before the event arrived, and
            # must still see the node (and its nominations) through our memory; the next
            # round's snapshot releases it (_release_in_flight).
            if event.type == "DELETED":
                name = str((event.object.get("metadata") or {}).get("name") or "")
                with self._lock:
                    self._written.pop(name, None)
            return
        if kind == "Provisioner" and event.type == "ADDED" and self._warm_new_provisioners:
            name = str((event.object.get("metadata") or {}).get("name") or "")
            provisioner = self.state.snapshot().provisioners.get(name) if name else None
            if provisioner is not None:
                self._warm_async([provisioner])
            return
        if kind != "Pod" or event.type == "DELETED":
            return
        if not_provisionable_reason(event.object) is None:
            uid = _uid(event.object)
            with self._lock:
                if uid in self._in_flight:
                    return  # capacity is on its way: no new window for it
            self.batcher.add(uid)

    # ------------------------------------------------------------------ warm-up
    def warm_up(self, provisioners: Sequence[Provisioner] | None = None) -> None:
        """Fetch the instance types of ``provisioners`` (default: every one cached) once, ahead of a batch.

        A cloud provider builds its instance-type catalog lazily (EC2: DescribeInstanceTypes and
        offerings, ~1,400 types, seconds); doing it before the first burst takes it off the
        first packing's latency. Errors are logged at debug level: the round reports them.
        """
        if provisioners is None:
            provisioners = list(self.state.snapshot().provisioners.values())
        for provisioner in provisioners:
            started = self.clock.monotonic()
            try:
                with metrics.time_call(metrics.CLOUDPROVIDER_DURATION, method="get_instance_types"):
                    count = len(self.cloud.get_instance_types(provisioner))
            except Exception as exc:  # the first round reports it properly
                log.debug("Could not warm the instance types of %s: %s", provisioner.name, exc)
                continue
            finally:
                with self._lock:
                    self._warming.discard(provisioner.name)
            log.info(
                "Fetched %d instance types for Provisioner %s in %s",
                count,
                provisioner.name,
                _format_duration(self.clock.monotonic() - started),
            )

    def _warm_async(self, provisioners: Sequence[Provisioner]) -> None:
        """:meth:`warm_up` on a daemon thread (health, readiness and the loop never wait for it)."""
        with self._lock:
            todo = [p for p in provisioners if p.name not in self._warming]
            self._warming.update(p.name for p in todo)
        if todo:
            threading.Thread(target=self.warm_up, args=(todo,), name="warm-up", daemon=True).start()

    # ------------------------------------------------------------------ loop
    def run(self, stop: threading.Event) -> None:
        """Batch and provision until ``stop`` is set. Waits for the state cache to sync first."""
        self.watch_state()
        while not stop.is_set() and not self.state.wait_synced(1.0):
            pass
        self._warm_new_provisioners = True
        self._warm_async(list(self.state.snapshot().provisioners.values()))
        log.info("Waiting for unschedulable pods")
        self.trigger(None)  # pods pending since before we started
        while not stop.is_set():
            batch = self.batcher.wait(stop, timeout=self._next_wake())
            if stop.is_set():
                break
            if batch is None:
                self.trigger(None)  # periodic resync: a missed event only delays
                continue
            try:
                result = self._process(batch)
            except Exception:
                log.exception("Provisioning failed")
                continue
            if result.pods:
                log.info("Waiting for unschedulable pods")
        self._pool.shutdown(wait=False)

    def _next_wake(self) -> float:
        """Seconds until the loop looks again unprompted.

        The resync period, or sooner when a Provisioner's back-off ends (its pods still wait).
        """
        now = self.clock.monotonic()
        with self._lock:
            ends = [b.until - now for b in self._backoff.values() if b.until > now]
        return max(0.05, min([self.settings.resync_seconds, *ends]))

    def _process(self, batch: Batch) -> ProvisionResult:
        return self.reconcile_once(batch)

    def step(self) -> ProvisionResult | None:
        """Process the batching window if it is due (tests drive it with a fake clock); None otherwise."""
        batch = self.batcher.take()
        return None if batch is None else self._process(batch)

    def reconcile_once(self, batch: Batch | None = None) -> ProvisionResult:
        """One round now: prune ended nominations, then provision every provisionable pod.

        ``batch`` is the window that led here (for the "Batched N pods in D" line and the
        batch metrics; N counts the provisionable pods found, which includes pods still
        pending from earlier rounds).
        """
        if not self.state.synced():
            log.info("Cluster state is not synced yet; not provisioning")
            return ProvisionResult()
        with self._round_lock:
            snapshot = self.state.snapshot()
            self._release_in_flight(snapshot)
            self._prune_nominations(snapshot)
            nominated = self._nominated_uids(snapshot)
            pods = [p for p in snapshot.pending_pods if not_provisionable_reason(p, nominated) is None]
            if batch is not None:
                if pods:
                    metrics.BATCH_SIZE.observe(len(pods))
                    metrics.BATCH_DURATION.observe(batch.duration)
                    log.info("Batched %d pods in %s", len(pods), _format_duration(batch.duration))
                else:
                    log.debug("No provisionable pods after a %s window", _format_duration(batch.duration))
            if not pods:
                # keep the decoded-node cache warm, so that the next burst only pays for changes
                self._cluster_nodes(snapshot, frozenset())
                return ProvisionResult()
            return self._provision(snapshot, pods, frozenset(), warn_unschedulable=True, nominate=True)

    def provision(self, pods: Sequence[Object], *, exclude_nodes: Collection[str] = ()) -> ProvisionResult:
        """Launch capacity for ``pods`` (wire-form objects, bound or not) treating ``exclude_nodes`` as unavailable.

        The expiration controller calls this to get replacement capacity before draining a
        node: the pods are solved as if pending (their ``nodeName`` is ignored); placements on
        existing capacity other than the excluded nodes launch nothing. Returns the created
        node names in :attr:`ProvisionResult.nodes`.
        """
        if not self.state.synced():
            return ProvisionResult(
                failed={_key(p): "the cluster state is not synced yet" for p in pods}, pods=len(pods)
            )
        with self._round_lock:
            snapshot = self.state.snapshot()
            self._release_in_flight(snapshot)
            pending = []
            for obj in pods:
                if owner_kind(obj) in ("DaemonSet", "Node"):
                    continue  # their controller puts them on every node, the replacement included
                copy = dict(obj)
                spec = dict(copy.get("spec") or {})
                spec.pop("nodeName", None)
                copy["spec"] = spec
                status = dict(copy.get("status") or {})
                status.pop("nominatedNodeName", None)
                status["phase"] = "Pending"
                copy["status"] = status
                pending.append(copy)
            return self._provision(
                snapshot, pending, frozenset(exclude_nodes), warn_unschedulable=False, nominate=False
            )

    def replace_capacity(self, pods: Sequence[Object], node_name: str) -> list[str]:
        """The expiration controller's ``Replacer``: :meth:`provision` excluding ``node_name``.

        Returns the created node names (empty: the pods fit existing or in-flight capacity).
        Raises :class:`ReplacementError` when some pod could not be placed or its launch failed
        (limits, back-off, no offering), so the caller keeps the node and retries later.
        """
        result = self.provision(pods, exclude_nodes={node_name})
        problems = {**result.unschedulable, **result.failed}
        if problems:
            first = sorted(problems.items())[0]
            raise ReplacementError(
                f"no replacement capacity for {len(problems)} pod(s) of node {node_name}: {first[0]}: {first[1]}"
            )
        self._promise(node_name, pods, result)
        return list(result.nodes)

    def _promise(self, node_name: str, pods: Sequence[Object], result: ProvisionResult) -> None:
        """Hold the room each target node was chosen for until ``node_name`` is gone.

        The old pods stay bound to the expiring node while it drains, and the replacement
        carries no nominations for them (their ReplicaSet recreates them with new UIDs), so
        without this the next expiring node's pods would be planned into the same free room.
        """
        requests: dict[str, Resources] = {}
        for pod in pods:
            try:
                requests[_uid(pod)] = pod_requests(pod)
            except (ValueError, TypeError, AttributeError):
                continue
        targets: dict[str, tuple[str, ...]] = {n.name: n.pod_uids for n in result.launched}
        for target, uids in result.placed_existing.items():
            targets[target] = (*targets.get(target, ()), *uids)
        with self._lock:
            for target, uids in targets.items():
                total = Resources()
                for uid in uids:
                    if uid in requests:
                        total = total + requests[uid]
                if total:
                    self._promised.setdefault(target, {})[node_name] = total

    def _reserved(self, nodes: Mapping[str, Object]) -> dict[str, Resources]:
        """Per target node, the room promised to expiring nodes that still exist (forgets the rest).

        Conservative while a drain runs: a recreated pod already bound to the target counts
        both as bound and as promised until the expiring node is gone.
        """
        reserved: dict[str, Resources] = {}
        with self._lock:
            for target in list(self._promised):
                holders = {old: r for old, r in self._promised[target].items() if old in nodes}
                if not holders:
                    del self._promised[target]  # every expiring node it was promised to is gone
                    continue
                self._promised[target] = holders
                if target not in nodes:
                    continue  # not in this snapshot (yet): kept for the next round
                total = Resources()
                for amount in holders.values():
                    total = total + amount
                reserved[target] = total
        return reserved

    # ------------------------------------------------------------------ nominations
    def _nodes(self, snapshot: Snapshot) -> dict[str, Object]:
        """The snapshot's Nodes, with our own writes it does not show yet in their place (or added)."""
        nodes = dict(snapshot.nodes)
        with self._lock:
            written = dict(self._written)
        for name, node in written.items():
            cached = nodes.get(name)
            if cached is not None and (cached.get("metadata") or {}).get("deletionTimestamp"):
                continue  # being deleted: newer than anything we wrote, and it must not get pods
            nodes[name] = node
        return nodes

    def _nominated_uids(self, snapshot: Snapshot) -> set[str]:
        """Pods covered by capacity on its way: in flight (ours) or holding a valid nomination."""
        now = self.clock.now()
        with self._lock:
            result = set(self._in_flight)
        for node in self._nodes(snapshot).values():
            raw = ((node.get("metadata") or {}).get("annotations") or {}).get(wk.NOMINATIONS_ANNOTATION)
            if not raw:
                continue
            current = nom.active(nom.decode(raw), now, snapshot.bound_pod_uids)
            name = (node.get("metadata") or {}).get("name") or ""
            result.update(set(current.pods) - _displaced(node, current, snapshot.pods_on(name)))
        return result

    def _release_in_flight(self, snapshot: Snapshot) -> None:
        """Forget what ``snapshot`` (taken at the start of a round) shows on its own.

        A pod in flight is released when the snapshot's Node carries its nomination, when the
        pod is bound or gone, when its Node is gone (deleted: the pod needs capacity again), or
        at its deadline. A written Node is released when the snapshot shows it and no pod in
        flight still needs our copy. Only a snapshot can release: a watch event arriving after
        the round's snapshot was taken must not make the round forget a launch (that gap let
        a burst launch twice for the same pods).
        """
        now = self.clock.now()
        with self._lock:
            for uid, entry in list(self._in_flight.items()):
                if not entry.node:
                    continue  # its launch is running; the launching round decides
                node = snapshot.nodes.get(entry.node)
                if uid not in snapshot.pods or uid in snapshot.bound_pod_uids or now >= entry.until:
                    del self._in_flight[uid]
                elif node is None:
                    if entry.node not in self._written:  # deleted before the cache showed it
                        del self._in_flight[uid]
                elif uid in _nominated_on(node):
                    del self._in_flight[uid]
            needed = {entry.node for entry in self._in_flight.values()}
            for name in list(self._written):
                if name in snapshot.nodes and name not in needed:
                    del self._written[name]

    def _prune_nominations(self, snapshot: Snapshot) -> None:
        """Drop ended reservations (pod bound, deleted, deadline passed) from our nodes' annotations.

        Reads our own latest write of a node when the snapshot does not show it yet, so that
        the ``test`` op of the patch holds the value the API server has.
        """
        now = self.clock.now()
        present = set(snapshot.pods)
        with self._lock:
            for uid in list(self._displaced_from):
                if uid not in present or uid in snapshot.bound_pod_uids:
                    del self._displaced_from[uid]
        for name, node in self._nodes(snapshot).items():
            meta = node.get("metadata") or {}
            raw = (meta.get("annotations") or {}).get(wk.NOMINATIONS_ANNOTATION)
            if raw is None:
                continue
            decoded = nom.decode(raw)
            bound = snapshot.bound_pod_uids
            ended = {
                uid for uid in decoded.pods
                if uid not in present or (uid in bound and _bound_for(snapshot.pods[uid], now) >= BIND_GRACE_SECONDS)
            }
            current = nom.active(decoded, now, ended)
            # the displacement check counts each bound pod once, as bound
            displaced = _displaced(node, nom.active(current, now, bound), snapshot.pods_on(name))
            if displaced:
                log.info("Nominated pod(s) %s no longer fit on node %s beside its bound pods; provisioning again",
                         ", ".join(sorted(current.pods[u].pod for u in displaced)), name)
                current = nom.active(current, now, displaced)
                with self._lock:
                    for uid in displaced:
                        self._displaced_from[uid] = self._displaced_from.get(uid, frozenset()) | {name}
            if current == decoded and not decoded.malformed:
                continue
            patched = self._patch_nominations(name, raw, nom.encode(current) if current.pods else None)
            if patched is not None:
                with self._lock:
                    if name in self._written:
                        self._written[name] = patched

    def _patch_nominations(self, node_name: str, old: str | None, new: str | None) -> Object | None:
        """Replace the nominations annotation only if it still reads ``old`` (a JSON patch ``test``).

        The initialization controller moves the deadline of the same annotation; the test op
        makes a concurrent change fail (422) instead of being overwritten, and the next round
        starts from the new value. Without an ``old`` value there is nothing to race with and a
        merge patch adds the annotation (the annotations map itself may be absent). Returns the
        patched Node, None when the write failed (logged).
        """
        try:
            if old is None:
                return self.api.patch(
                    "Node", node_name, {"metadata": {"annotations": {wk.NOMINATIONS_ANNOTATION: new}}}
                )
            path = "/metadata/annotations/" + wk.NOMINATIONS_ANNOTATION.replace("~", "~0").replace("/", "~1")
            ops: list[dict[str, Any]] = [{"op": "test", "path": path, "value": old}]
            ops.append(
                {"op": "remove", "path": path}
                if new is None
                else {"op": "replace", "path": path, "value": new}
            )
            return self.api.patch("Node", node_name, ops)
        except NotFoundError:
            log.debug("Node %s is gone; its nominations went with it", node_name)
            return None
        except ApiError as exc:
            log.info(
                "Nominations of node %s changed meanwhile or could not be written (%s); retrying next round",
                node_name,
                exc,
            )
            return None

    # ------------------------------------------------------------------ the round
    def _provision(
        self,
        snapshot: Snapshot,
        pod_objects: Sequence[Object],
        exclude: frozenset[str],
        *,
        warn_unschedulable: bool,
        nominate: bool,
    ) -> ProvisionResult:
        round_ = _Round(
            snapshot=snapshot,
            usage=self._usage(snapshot),
            exclude=exclude,
            pod_objects={_uid(p): p for p in pod_objects},
            nominate=nominate,
        )
        pods = self._pods(snapshot, pod_objects, round_)
        provisioners = {
            name: p
            for name, p in snapshot.provisioners.items()
            if not (snapshot.provisioner_objects.get(name, {}).get("metadata") or {}).get("deletionTimestamp")
        }
        if not pods:
            return self._result(round_, 0)
        if not provisioners:
            for pod in pods:
                round_.unschedulable[pod.key] = "no Provisioner exists"
            if warn_unschedulable:
                self._warn_unschedulable(round_)
            return self._result(round_, len(pods))
        instance_types = self._instance_types(provisioners, round_)
        nodes = self._candidate_nodes(self._cluster_nodes(snapshot, exclude), pods)
        daemonsets = self._daemonsets(snapshot)
        try:
            self._solve_and_launch(pods, provisioners, instance_types, nodes, daemonsets, round_, attempt=0)
        finally:
            # launches that ended without a node for their pods (errors, limits): not covered
            with self._lock:
                for pod in pods:
                    entry = self._in_flight.get(pod.uid)
                    if entry is not None and not entry.node:
                        del self._in_flight[pod.uid]
        if warn_unschedulable:
            self._warn_unschedulable(round_)
        return self._result(round_, len(pods))

    def _result(self, round_: _Round, n: int) -> ProvisionResult:
        return ProvisionResult(
            nodes=tuple(node.name for node in round_.launched),
            launched=tuple(round_.launched),
            nominated_existing={k: tuple(v) for k, v in round_.nominated_existing.items()},
            placed_existing={k: tuple(v) for k, v in round_.placed_existing.items()},
            unschedulable=dict(round_.unschedulable),
            failed=dict(round_.failed),
            pods=n,
        )

    def _pods(self, snapshot: Snapshot, objects: Sequence[Object], round_: _Round) -> list[Pod]:
        pods = []
        for obj in objects:
            try:
                volumes = volume_requirements(
                    obj,
                    snapshot.persistent_volume_claims,
                    snapshot.persistent_volumes,
                    snapshot.storage_classes,
                )
                pods.append(pod_from_manifest(obj, volumes))
            except _RESOURCE_PARSE_ERRORS as exc:
                round_.unschedulable[_key(obj)] = f"the pod cannot be read: {exc}"
        return pods

    def _usage(self, snapshot: Snapshot) -> dict[str, Resources]:
        """Capacity of each Provisioner's nodes (existing and in flight), against its limits."""
        usage: dict[str, Resources] = {}
        for node in self._nodes(snapshot).values():
            owner = ((node.get("metadata") or {}).get("labels") or {}).get(wk.PROVISIONER_NAME)
            if owner:
                usage[owner] = usage.get(owner, Resources()) + _capacity(node)
        return usage

    def _instance_types(
        self, provisioners: Mapping[str, Provisioner], round_: _Round
    ) -> dict[str, list[InstanceType]]:
        result: dict[str, list[InstanceType]] = {}
        for name, p in provisioners.items():
            try:
                with metrics.time_call(metrics.CLOUDPROVIDER_DURATION, method="get_instance_types"):
                    types = list(self.cloud.get_instance_types(p))
            except CloudProviderError as exc:
                log.warning("Could not get instance types for Provisioner %s: %s", name, exc)
                self._provisioner_event(
                    name, round_.snapshot, "Warning", "InstanceTypesUnavailable", str(exc)
                )
                continue
            result[name] = [self._without_unavailable(t, round_.unavailable) for t in types]
        return result

    @staticmethod
    def _without_unavailable(it: InstanceType, unavailable: set[tuple[str, str, str]]) -> InstanceType:
        if not unavailable or not any(key[0] == it.name for key in unavailable):
            return it
        offerings = tuple(
            replace(o, available=False) if (it.name, o.zone, o.capacity_type) in unavailable else o
            for o in it.offerings
        )
        return replace(it, offerings=offerings)

    def _cluster_nodes(self, snapshot: Snapshot, exclude: frozenset[str]) -> list[ClusterNode]:
        """Existing and in-flight nodes for the solver, cached per (node, pods) resourceVersions.

        Decoding every bound pod of a large cluster costs most of a round, and nearly all nodes
        are unchanged between rounds; a node with nominations is rebuilt each time (its
        reservations end with the clock).
        """
        now = datetime.fromtimestamp(self.clock.now(), tz=UTC)
        nodes = []
        objects = self._nodes(snapshot)
        cache: dict[str, tuple[tuple[Any, ...], ClusterNode]] = {}
        reserved = self._reserved(objects)
        for name, node in objects.items():
            if name in exclude or _disrupted(node):
                continue  # a disrupted node is going away: nothing is placed on it
            pods = snapshot.pods_on(name)
            meta = node.get("metadata") or {}
            key: tuple[Any, ...] | None = None
            if name in reserved:
                key = None  # rebuilt each round while it holds promised room
            elif wk.NOMINATIONS_ANNOTATION not in (meta.get("annotations") or {}):
                key = (
                    meta.get("resourceVersion"),
                    tuple(
                        (
                            (p.get("metadata") or {}).get("uid"),
                            (p.get("metadata") or {}).get("resourceVersion"),
                        )
                        for p in pods
                    ),
                )
            cached = self._node_cache.get(name)
            if key is not None and cached is not None and cached[0] == key:
                cluster_node = cached[1]
            else:
                try:
                    cluster_node = node_from_manifest(
                        _without_ended_nominations(node, snapshot, self.clock.now()),
                        pods, reserved=reserved.get(name, Resources()), now=now,
                    )
                except _RESOURCE_PARSE_ERRORS as exc:
                    log.warning("Ignoring node %s in the solve: %s", name, exc)
                    continue
            if key is not None:
                cache[name] = (key, cluster_node)
            if cluster_node.in_flight and cluster_node.provisioner:
                cluster_node = self._without_startup_taints(cluster_node, snapshot)
            nodes.append(cluster_node)
        self._node_cache = cache
        return nodes

    @staticmethod
    def _candidate_nodes(nodes: list[ClusterNode], pods: Sequence[Pod]) -> list[ClusterNode]:
        """Leave out nodes too full for the smallest pod, when no pod counts pods on other nodes.

        A node where none of the pods fits cannot take any of them; it only matters to the
        solver for topology spread and pod (anti-)affinity counting, so it is kept whenever a
        pod has such a constraint. Spares the solver a pods x nodes scan of a full cluster.
        """
        if any(
            p.topology_spread
            or p.pod_affinity
            or p.pod_anti_affinity
            or p.preferred_pod_affinity
            or p.preferred_pod_anti_affinity
            for p in pods
        ):
            return nodes
        smallest: dict[str, int] = {}
        for pod in pods:
            for name in (CPU, MEMORY, PODS):
                value = pod.requests.get(name)
                smallest[name] = min(smallest.get(name, value), value)
        kept = []
        for node in nodes:
            available = node.available
            if node.marked_for_deletion:
                continue
            if any(
                available.get(name) < value for name, value in smallest.items() if name in node.allocatable
            ):
                continue
            kept.append(node)
        return kept

    @staticmethod
    def _without_startup_taints(node: ClusterNode, snapshot: Snapshot) -> ClusterNode:
        """An in-flight node as it will be once initialised: its startup taints gone.

        ``karpenter.sh/not-ready``, the Provisioner's ``startupTaints`` and the node lifecycle
        controller's ``node.kubernetes.io/not-ready``/``unreachable`` only last until the node is
        Ready; a pod that does not tolerate them will still land there (Karpenter's in-flight
        node handling), so the solver must not count them.
        """
        provisioner = snapshot.provisioners.get(node.provisioner or "")
        startup = {(t.key, t.effect) for t in provisioner.spec.startup_taints} if provisioner else set()
        keep = tuple(
            t for t in node.taints if t.key not in _TRANSIENT_TAINTS and (t.key, t.effect) not in startup
        )
        return node if keep == node.taints else replace(node, taints=keep)

    def _daemonsets(self, snapshot: Snapshot) -> list[Pod]:
        result = []
        for ds in snapshot.daemonsets:
            try:
                result.append(daemonset_pod(ds))
            except _RESOURCE_PARSE_ERRORS as exc:
                log.warning("Ignoring DaemonSet %s: %s", _key(ds), exc)
        return result

    def _solve_and_launch(
        self,
        pods: list[Pod],
        provisioners: Mapping[str, Provisioner],
        instance_types: Mapping[str, list[InstanceType]],
        nodes: list[ClusterNode],
        daemonsets: list[Pod],
        round_: _Round,
        attempt: int,
    ) -> None:
        usable = [p for name, p in provisioners.items() if name in instance_types]
        with metrics.time_call(metrics.SOLVE_DURATION):
            plan = self.solver(
                SolverInput(
                    pods=pods,
                    provisioners=usable,
                    instance_types=instance_types,
                    nodes=nodes,
                    daemonsets=daemonsets,
                    provisioner_usage=round_.usage,
                )
            )
        for error in plan.unschedulable:
            round_.unschedulable[error.pod.key] = error.reason
        by_name = {n.name: n for n in nodes}
        for placement in plan.existing:
            uids = [p.uid for p in placement.pods]
            round_.placed_existing.setdefault(placement.node, []).extend(uids)
            node = by_name.get(placement.node)
            if round_.nominate and node is not None and node.in_flight and node.provisioner:
                self._nominate_existing(placement.node, placement.pods, round_)
        if not plan.new_nodes:
            return
        self._log_packing(plan.new_nodes)
        retry: list[Pod] = []
        jobs = []
        for planned in plan.new_nodes:
            request = self._request(planned, provisioners[planned.provisioner], round_, attempt)
            if request is None:
                continue
            if round_.nominate:  # covered from now on: the launch is in flight
                until = self._nomination_deadline()
                with self._lock:
                    for pod in planned.pods:
                        self._in_flight[pod.uid] = _InFlight("", until)
            jobs.append((planned, request, self._pool.submit(self._launch, planned, request, round_)))
        for planned, request, future in jobs:
            outcome = future.result()
            if isinstance(outcome, InsufficientCapacityError):
                retry.extend(planned.pods)
                for type_name, zone, capacity_type in outcome.offerings:
                    round_.unavailable.add((type_name, zone, capacity_type))
                if not outcome.offerings:
                    for it in request.instance_type_options:
                        for o in it.available_offerings(request.requirements):
                            round_.unavailable.add((it.name, o.zone, o.capacity_type))
        if retry:
            if attempt >= self.settings.ice_retries:
                for pod in retry:
                    round_.failed[pod.key] = "insufficient capacity in every allowed offering"
                return
            log.info(
                "Retrying %d pod(s) with the remaining offerings after insufficient capacity", len(retry)
            )
            fresh = self._instance_types({p: provisioners[p] for p in instance_types}, round_)
            nodes_now = self._candidate_nodes(self._cluster_nodes(round_.snapshot, round_.exclude), retry)
            self._solve_and_launch(retry, provisioners, fresh, nodes_now, daemonsets, round_, attempt + 1)

    def _log_packing(self, planned: Sequence[PlannedNode]) -> None:
        groups: dict[tuple[str, tuple[str, ...]], list[PlannedNode]] = {}
        for node in planned:
            groups.setdefault(
                (node.provisioner, tuple(t.name for t in node.instance_type_options)), []
            ).append(node)
        for (provisioner, options), members in groups.items():
            log.info(
                "Computed packing of %d node(s) for %d pod(s) with instance type option(s) [%s]",
                len(members),
                sum(len(m.pods) for m in members),
                " ".join(options),
                extra={"provisioner": provisioner},
            )

    # ------------------------------------------------------------------ launch
    def _request(
        self, planned: PlannedNode, provisioner: Provisioner, round_: _Round, attempt: int
    ) -> NodeRequest | None:
        """The node request, after the back-off and limits checks (None: not launched now)."""
        now = self.clock.monotonic()
        backoff = self._backoff.get(provisioner.name)
        if backoff is not None and backoff.until > now:
            reason = f"Provisioner {provisioner.name} is backing off after launch errors for {backoff.until - now:.0f}s"
            for pod in planned.pods:
                round_.failed[pod.key] = reason
            return None
        options = list(planned.instance_type_options)
        try:
            limits = provisioner_limits(provisioner)
        except ValueError as exc:
            limits = None
            log.warning("%s", exc)
        if limits is not None:
            usage = round_.usage.get(provisioner.name, Resources())
            over = [r for r in limits if usage.get(r) >= limits.get(r)]
            if over:
                r = over[0]
                reason = (
                    f"{r} resource usage of {quantity_string(r, usage.get(r))} "
                    f"exceeds limit of {quantity_string(r, limits.get(r))}"
                )
                self._limit_exceeded(provisioner, planned, reason, round_)
                return None
            headroom = {r: limits.get(r) - usage.get(r) for r in limits}
            options = [t for t in options if all(t.capacity.get(r) <= headroom[r] for r in limits)]
            if not options:
                reason = "every instance type option would exceed the limits " + ", ".join(
                    f"{r}={quantity_string(r, limits.get(r))}" for r in limits
                )
                self._limit_exceeded(provisioner, planned, reason, round_)
                return None
            # reserve the largest remaining option until the launch says which one it was
            largest = Resources({r: max(t.capacity.get(r) for t in options) for r in limits})
            round_.usage[provisioner.name] = usage + largest
        labels = dict(self.settings.nodes.labels)
        labels.update(planned.labels)
        labels.update(provisioner.labels_with_name)
        salt = "replace:" + ",".join(sorted(round_.exclude)) if round_.exclude else ""
        with self._lock:
            displaced_from = sorted(set().union(*(self._displaced_from.get(p.uid, ()) for p in planned.pods)))
        if displaced_from:  # a new node, not the full one launched for these pods before
            salt += "|displaced:" + ",".join(displaced_from)
        return NodeRequest(
            id=node_request_id(provisioner, (p.uid for p in planned.pods), attempt, salt=salt),
            provisioner=provisioner,
            instance_type_options=tuple(options),
            requirements=planned.requirements,
            labels=labels,
            taints=tuple(taint_dicts([*planned.taints, *provisioner.spec.startup_taints])),
        )

    def _limit_exceeded(
        self, provisioner: Provisioner, planned: PlannedNode, reason: str, round_: _Round
    ) -> None:
        message = f"Could not launch node, {reason}"
        log.warning("%s", message, extra={"provisioner": provisioner.name})
        metrics.LAUNCH_ERRORS.labels(provisioner=provisioner.name, type="limits_exceeded").inc()
        self._provisioner_event(provisioner.name, round_.snapshot, "Warning", "LimitExceeded", message)
        for pod in planned.pods:
            round_.failed[pod.key] = message

    def _launch(
        self, planned: PlannedNode, request: NodeRequest, round_: _Round
    ) -> InsufficientCapacityError | None:
        """Launch one planned node and create its Node. Returns the ICE error to retry, else None."""
        provisioner = request.provisioner
        try:
            with metrics.time_call(metrics.CLOUDPROVIDER_DURATION, method="create"):
                machine = self.cloud.create(request)
        except InsufficientCapacityError as exc:
            metrics.LAUNCH_ERRORS.labels(provisioner=provisioner.name, type="insufficient_capacity").inc()
            log.warning(
                "Insufficient capacity for %s: %s",
                provisioner.name,
                exc,
                extra={"provisioner": provisioner.name},
            )
            self._provisioner_event(
                provisioner.name, round_.snapshot, "Warning", "InsufficientCapacity", str(exc)
            )
            return exc
        except CloudProviderError as exc:
            self._launch_failed(provisioner, planned, exc, round_)
            return None
        except Exception as exc:  # an unexpected provider bug must not kill the loop
            log.exception("Launch failed unexpectedly")
            self._launch_failed(provisioner, planned, exc, round_)
            return None
        with self._lock:
            self._backoff.pop(provisioner.name, None)
            launched_type = next(
                (t for t in request.instance_type_options if t.name == machine.instance_type), None
            )
            self._settle_usage(provisioner, request, launched_type, round_)
        node = self._create_node(planned, provisioner, machine, launched_type, round_)
        if node is None:
            return None
        uids = tuple(p.uid for p in planned.pods)
        until = self._nomination_deadline()
        with self._lock:
            self._written[machine.name] = node
            if round_.nominate:
                for uid in uids:
                    self._in_flight[uid] = _InFlight(machine.name, until)
            round_.launched.append(LaunchedNode(machine.name, provisioner.name, machine, uids))
        metrics.NODES_LAUNCHED.labels(
            provisioner=provisioner.name, capacity_type=machine.capacity_type, zone=machine.zone
        ).inc()
        where = f"{machine.instance_type}, {machine.zone}"
        if round_.nominate:
            metrics.PODS_NOMINATED.labels(provisioner=provisioner.name).inc(len(uids))
            for pod in planned.pods:
                obj = round_.pod_objects.get(pod.uid)
                if obj is not None:
                    self.recorder.normal(
                        obj, "Nominated", f"Pod should schedule on node {machine.name} ({where})"
                    )
        self._provisioner_event(
            provisioner.name,
            round_.snapshot,
            "Normal",
            "Launched",
            f"Launched node {machine.name} ({where}, {machine.capacity_type}) for {len(uids)} pod(s)",
        )
        return None

    def _settle_usage(
        self, provisioner: Provisioner, request: NodeRequest, launched: InstanceType | None, round_: _Round
    ) -> None:
        """Replace the reservation of the largest option by the launched type's capacity."""
        try:
            limits = provisioner_limits(provisioner)
        except ValueError:
            return
        if limits is None or launched is None:
            return
        largest = Resources(
            {r: max(t.capacity.get(r) for t in request.instance_type_options) for r in limits}
        )
        usage = (
            round_.usage.get(provisioner.name, Resources())
            - largest
            + Resources({r: launched.capacity.get(r) for r in limits})
        )
        round_.usage[provisioner.name] = usage

    def _nomination_deadline(self) -> float:
        """Clock wall time a new node's nominations hold until: registration timeout + nomination TTL."""
        return (
            self.clock.now()
            + self.settings.nodes.registration_timeout_seconds
            + self.settings.nodes.nomination_ttl_seconds
        )

    def _launch_failed(
        self, provisioner: Provisioner, planned: PlannedNode, exc: BaseException, round_: _Round
    ) -> None:
        with self._lock:
            state = self._backoff.setdefault(provisioner.name, _Backoff())
            state.failures += 1
            delay = min(
                self.settings.backoff_max_seconds,
                self.settings.backoff_base_seconds * 2 ** min(state.failures - 1, 20),
            )
            state.until = self.clock.monotonic() + delay
        metrics.LAUNCH_ERRORS.labels(provisioner=provisioner.name, type=metrics.outcome_of(exc)).inc()
        message = f"Could not launch node for {len(planned.pods)} pod(s): {exc}; retrying in {delay:.0f}s"
        log.error("%s", message, extra={"provisioner": provisioner.name})
        self._provisioner_event(provisioner.name, round_.snapshot, "Warning", "LaunchFailed", message)
        for pod in planned.pods:
            round_.failed[pod.key] = message

    def _create_node(
        self,
        planned: PlannedNode,
        provisioner: Provisioner,
        machine: Machine,
        launched_type: InstanceType | None,
        round_: _Round,
    ) -> Object | None:
        deadline = self._nomination_deadline()
        nominations = nom.EMPTY
        if round_.nominate:
            for pod in planned.pods:
                nominations = nom.nominate(nominations, pod.uid, pod.key, pod.requests, deadline)
        prov_obj = round_.snapshot.provisioner_objects.get(provisioner.name) or {}
        manifest = node_manifest(
            provisioner=provisioner,
            provisioner_uid=str((prov_obj.get("metadata") or {}).get("uid") or provisioner.uid or ""),
            machine=machine,
            instance_type=launched_type,
            planned_labels=planned.labels,
            planned_taints=planned.taints,
            nominations=nom.encode(nominations) if nominations.pods else None,
            extra_labels=self.settings.nodes.labels,
            extra_annotations=self.settings.nodes.annotations,
        )
        try:
            return self.api.create("Node", manifest)
        except AlreadyExistsError:
            # a retried request returned the instance we launched before: the Node is ours
            try:
                existing = self.api.get("Node", machine.name)
            except ApiError:
                existing = None
            if existing is not None and (existing.get("spec") or {}).get("providerID") == machine.provider_id:
                return existing
            error: BaseException = AlreadyExistsError(f"node {machine.name} exists with another providerID")
        except ApiError as exc:
            error = exc
        log.error(
            "Could not create node %s for instance %s: %s; terminating the instance",
            machine.name,
            machine.instance_id,
            error,
            extra={"provisioner": provisioner.name},
        )
        try:
            self.cloud.delete(machine.provider_id)
        except CloudProviderError as exc:
            log.error(
                "Could not terminate instance %s (garbage collection will): %s", machine.instance_id, exc
            )
        self._launch_failed(provisioner, planned, error, round_)
        return None

    def _nominate_existing(self, node_name: str, pods: Sequence[Pod], round_: _Round) -> None:
        """Add pods the solver placed on an in-flight node of ours to its nominations (one patch)."""
        node = self._nodes(round_.snapshot).get(node_name)
        if node is None:
            return
        patched: Object | None = None
        for attempt in range(2):
            if attempt:  # the cached node was stale: read the current one
                try:
                    node = self.api.get("Node", node_name)
                except ApiError as exc:
                    log.warning("Could not nominate %d pod(s) to node %s: %s", len(pods), node_name, exc)
                    return
            raw = ((node.get("metadata") or {}).get("annotations") or {}).get(wk.NOMINATIONS_ANNOTATION)
            current = nom.active(nom.decode(raw), self.clock.now(), round_.snapshot.bound_pod_uids)
            now = self.clock.now()
            deadline = current.deadline if current.deadline > now else self._nomination_deadline()
            updated = current
            for pod in pods:
                updated = nom.nominate(updated, pod.uid, pod.key, pod.requests, deadline)
            patched = self._patch_nominations(node_name, raw, nom.encode(updated))
            if patched is not None:
                break
        if patched is None:
            return
        with self._lock:
            self._written[node_name] = patched  # until a snapshot shows these nominations
            for pod in pods:
                self._in_flight[pod.uid] = _InFlight(node_name, deadline)
        for pod in pods:
            round_.nominated_existing.setdefault(node_name, []).append(pod.uid)
            obj = round_.pod_objects.get(pod.uid)
            if obj is not None:
                labels = (node.get("metadata") or {}).get("labels") or {}
                where = f"{labels.get(wk.INSTANCE_TYPE, '?')}, {labels.get(wk.ZONE, '?')}"
                self.recorder.normal(obj, "Nominated", f"Pod should schedule on node {node_name} ({where})")
        metrics.PODS_NOMINATED.labels(
            provisioner=str(((node.get("metadata") or {}).get("labels") or {}).get(wk.PROVISIONER_NAME, ""))
        ).inc(len(pods))

    # ------------------------------------------------------------------ events
    def _warn_unschedulable(self, round_: _Round) -> None:
        by_key = {_key(obj): obj for obj in round_.pod_objects.values()}
        for key, reason in round_.unschedulable.items():
            obj = by_key.get(key)
            log.info("Unable to provision pod %s: %s", key, reason)
            if obj is not None:
                self.recorder.warning(
                    obj, "FailedProvisioning", f"No Provisioner can serve the pod: {reason}"
                )

    def _provisioner_event(
        self, name: str, snapshot: Snapshot, type_: str, reason: str, message: str
    ) -> None:
        obj = snapshot.provisioner_objects.get(name) or {
            "apiVersion": wk.API_VERSION,
            "kind": wk.KIND,
            "metadata": {"name": name},
        }
        self.recorder.event(obj, type_, reason, message)
