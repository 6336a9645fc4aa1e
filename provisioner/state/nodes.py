"""One view of each node per snapshot, shared by the extender, the metrics and the solver input.

What a node is (launching, marked for deletion, nominated, how full) is worked out here once,
after Karpenter's ``StateNode`` (``pkg/controllers/state/statenode.go``): a :class:`StateNode`
holds the Node's facts (labels, the Provisioner it belongs to, taints and the taints pods must
tolerate, readiness, allocatable and capacity, the pods bound to it and what they request, its
nominations, price, creation and expiry time), decoded from the wire objects by the rules of
:mod:`provisioner.model`.

Rules (and their sources):

* managed: labelled ``karpenter.sh/provisioner-name``; **launching** while managed and not Ready
  (Karpenter: managed and not initialised), when its ephemeral taints and its Provisioner's
  ``startupTaints`` are hidden from :attr:`StateNode.scheduling_taints` (``StateNode.Taints()``);
  a cordoned node (``spec.unschedulable``) gets ``node.kubernetes.io/unschedulable:NoSchedule``
  there too, as the node lifecycle controller adds it; **starting** while it still carries
  ``karpenter.sh/not-ready``, or is Ready with an ephemeral or startup taint left
  (:attr:`StateNode.starting`: the pods nominated to it wait for it);
* **marked for deletion**: being deleted, or tainted ``karpenter.sh/disrupted`` (``MarkedForDeletion()``);
* allocatable is ``status.allocatable``, else ``status.capacity`` (before kubelet reports, the
  Node the controller created carries both); capacity the other way round. A list with an
  unreadable quantity reads as empty, the reason kept (:attr:`StateNode.allocatable_error`);
* requested: kube-scheduler's effective requests (:func:`provisioner.scheduling.pods.pod_requests`)
  of the bound pods that have not finished; a pod whose requests cannot be read holds one
  ``pods`` slot (kube-scheduler counts every pod against the node's pod limit:
  :func:`provisioner.scheduling.pods.effective_requests`);
* price: the ``groupless.dev/price-per-hour`` annotation, else (managed nodes) a price lookup;
  expiry: its instance's launch (:func:`provisioner.model.objects.launched_at`) + the
  Provisioner's ``ttlSecondsUntilExpired``.

:class:`NodeViews` builds the views of a whole :class:`~provisioner.state.cluster.Snapshot`,
reusing the view of every node whose Node object, pod objects and Provisioner are the very
same objects as last time. The cluster state cache replaces an object on every change and
never mutates one, so identity is change: a rebuild after one pod binds re-reads one node,
not 5,000. A :class:`StateNode` is never changed after it is built; what depends on the time
(which nominations still hold) is asked of it with the time.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

from provisioner.model import labels as wk
from provisioner.model import nominations as nom
from provisioner.model import objects
from provisioner.model.pods import is_terminal
from provisioner.model.quantity import QuantityError, parse_resource_list
from provisioner.model.resources import EMPTY, Resources
from provisioner.model.taints import (
    EPHEMERAL_TAINT_KEYS,
    Taint,
    decode_taints,
    has_taint,
    is_disrupted,
    readable_taints,
    scheduling_taints,
    with_cordon,
)
from provisioner.scheduling.nodes import ClusterNode
from provisioner.scheduling.pods import HostPort, Pod, effective_requests, pod_from_manifest

if TYPE_CHECKING:
    from provisioner.api.types import Provisioner
    from provisioner.state.cluster import Snapshot

#: ``(instance type, capacity type, zone) -> USD per hour or None``: a price lookup (an
#: instance-type catalog) for managed nodes without the price annotation.
PriceLookup = Callable[[str, str, str], float | None]
#: A Kubernetes object in wire form (read only here).
WireObject = Mapping[str, Any]
#: A pod's requests in core units (see :func:`provisioner.scheduling.pods.effective_requests`).
RequestsOf = Callable[[Mapping[str, Any]], Resources]

def _price(value: Any) -> float | None:
    """A USD-per-hour annotation value; None unless a finite number >= 0."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if number >= 0 and math.isfinite(number) else None


@dataclass(frozen=True, eq=False)
class StateNode:
    """One node of one snapshot, as every part sees it (see the module docstring for each rule).

    ``provisioner``: the ``karpenter.sh/provisioner-name`` label, None for a node Groupless does
    not manage. ``instance_type``, ``capacity_type``, ``zone``: the well-known labels (``""``
    when unlabelled). ``taints``: every readable taint of ``spec.taints``; ``scheduling_taints``:
    those a pod must tolerate to be planned here. ``allocatable``, ``capacity``, ``requested``:
    core units (milli-CPU, bytes, counts). ``pods``: the bound pods that have not finished (wire
    objects), ``pod_requests`` their requests in the same order. ``nominations``: the decoded
    ``groupless.dev/nominations`` annotation (which still hold depends on the time:
    :meth:`held`). ``price``: USD per hour, if known. ``created_at`` (the Node's),
    ``expires_at`` (its instance's launch + ``ttlSecondsUntilExpired``:
    :func:`provisioner.model.objects.launched_at`): epoch seconds, None when unknown
    (``expires_at`` also when the Provisioner sets no ``ttlSecondsUntilExpired``).
    ``taint_error`` / ``allocatable_error``: why ``spec.taints`` / the allocatable could not be
    read (the solver leaves such a node out). ``node``: the Node.
    """

    name: str
    node: WireObject
    labels: Mapping[str, str]
    provisioner: str | None
    instance_type: str
    capacity_type: str
    zone: str
    provider_id: str
    taints: tuple[Taint, ...]
    scheduling_taints: tuple[Taint, ...]
    ready: bool
    deleting: bool
    disrupted: bool
    cordoned: bool
    allocatable: Resources
    capacity: Resources
    pods: tuple[WireObject, ...]
    pod_requests: tuple[Resources, ...]
    requested: Resources
    nominations: nom.Nominations
    price: float | None
    created_at: float | None
    expires_at: float | None
    taint_error: str | None = None
    allocatable_error: str | None = None
    #: The Provisioner's ``startupTaints`` (hidden from ``scheduling_taints`` while launching).
    startup_taints: tuple[Taint, ...] = field(default=())

    @property
    def managed(self) -> bool:
        """Launched by Groupless (labelled with its Provisioner)."""
        return self.provisioner is not None

    @property
    def initialized(self) -> bool:
        """An unmanaged node always is; a managed one once Ready (Karpenter ``Initialized()``)."""
        return _initialized(self.provisioner, self.ready)

    @property
    def launching(self) -> bool:
        """Managed and not yet initialised: capacity on its way."""
        return not self.initialized

    @property
    def starting(self) -> bool:
        """Managed and coming up: kube-scheduler cannot place pods here yet, for reasons that end by themselves.

        True while the node still carries ``karpenter.sh/not-ready`` (every node Groupless creates
        does, until the initialization controller sees it Ready), or while it is Ready but still
        carries a taint that goes once a node is up: an ephemeral one (the node lifecycle
        controller's ``not-ready``/``unreachable``, the cloud's ``uninitialized``:
        :data:`~provisioner.model.taints.EPHEMERAL_TAINT_KEYS`) or one of its Provisioner's
        ``startupTaints``. A node that was initialised and then lost readiness is failing, not
        starting. Karpenter's counterpart: a NodeClaim launched and not yet initialised.
        """
        if self.provisioner is None:
            return False
        if has_taint(self.taints, wk.NOT_READY_TAINT_KEY):
            return True
        return self.ready and any(
            t.key in EPHEMERAL_TAINT_KEYS or any(s.matches(t) for s in self.startup_taints) for t in self.taints
        )

    @property
    def marked_for_deletion(self) -> bool:
        """Being deleted, or tainted ``karpenter.sh/disrupted``: no pod is planned here (``MarkedForDeletion()``)."""
        return self.deleting or self.disrupted

    @property
    def available(self) -> Resources:
        """Allocatable minus what the bound pods request (negative when over-committed)."""
        return self.allocatable - self.requested

    def held(self, pods: nom.PodsByUID, now: float) -> nom.Nominations:
        """The nominations holding room at ``now`` (:func:`provisioner.model.nominations.held`).

        None on a node marked for deletion: it will never run its nominated pods, so they need
        capacity again at once (as the extender lets them go anywhere), not when the Node is gone.
        """
        if self.marked_for_deletion:
            return nom.Nominations(deadline=self.nominations.deadline)
        return nom.held(self.nominations, pods, now)

    def displaced(self, nominations: nom.Nominations) -> frozenset[str]:
        """Nominated pods (of ``nominations``, those that hold) no longer fitting beside the bound pods.

        :func:`provisioner.model.nominations.displaced` over this node's allocatable and requests;
        nothing while the allocatable cannot be read.
        """
        if self.allocatable_error is not None:
            return frozenset()
        return nom.displaced(nominations, self.allocatable, self.requested)

    @cached_property
    def bound_pods(self) -> tuple[Pod, ...]:
        """The bound pods as the solver reads them (decoded once per view, on first use).

        A pod the solver's reader refuses still counts, by its requests alone.
        """
        result = []
        for obj, requests in zip(self.pods, self.pod_requests, strict=True):
            try:
                result.append(pod_from_manifest(obj))
            except ValueError:
                result.append(Pod(uid=objects.uid(obj) or objects.name(obj), namespace=objects.namespace(obj) or "default",
                                  name=objects.name(obj), requests=requests, node_name=self.name))
        return tuple(result)

    @cached_property
    def host_ports(self) -> tuple[HostPort, ...]:
        """The host ports the bound pods use."""
        return tuple(port for pod in self.bound_pods for port in pod.host_ports)

    @cached_property
    def solver_node(self) -> ClusterNode:
        """The node as the solver sees it, before nominations and reserved room are added.

        Labels with ``kubernetes.io/hostname`` (the name when unlabelled), the scheduling taints,
        ``in_flight`` while not Ready (existing nodes are tried first), the decoded bound pods.
        Built once per view (:mod:`provisioner.state.solverinput` adds what depends on the round).
        """
        labels = dict(self.labels)
        labels.setdefault(wk.HOSTNAME, self.name)
        return ClusterNode(
            name=self.name,
            labels=labels,
            taints=self.scheduling_taints,
            allocatable=self.allocatable,
            requested=Resources.sum(p.requests for p in self.bound_pods),
            provisioner=self.provisioner,
            in_flight=not self.ready,
            marked_for_deletion=self.marked_for_deletion,
            host_ports=self.host_ports,
            pods=self.bound_pods,
        )


def _initialized(provisioner: str | None, ready: bool) -> bool:
    return provisioner is None or ready


def _resource_list(status: Mapping[str, Any], first: str, second: str, name: str) -> tuple[Resources, str | None]:
    try:
        return parse_resource_list(status.get(first) or status.get(second), f"node {name}: status.{first}"), None
    except QuantityError as error:
        return EMPTY, str(error)


def state_node(
    node: WireObject,
    pods: Iterable[WireObject] = (),
    *,
    startup_taints: Iterable[Taint] = (),
    ttl_seconds_until_expired: int | None = None,
    price_of: PriceLookup | None = None,
    requests_of: RequestsOf = effective_requests,
) -> StateNode | None:
    """The :class:`StateNode` of a Node object and the pods bound to it; None for a Node without a name.

    ``pods``: the pods bound to the node (finished ones are left out). ``startup_taints`` and
    ``ttl_seconds_until_expired``: its Provisioner's. ``requests_of``: a pod's requests (a
    cache may stand in for :func:`~provisioner.scheduling.pods.effective_requests`). Never raises on an odd object.
    """
    name = objects.name(node)
    if not name:
        return None
    labels = {str(k): str(v) for k, v in objects.labels(node).items()}
    annotations = objects.annotations_of(node)
    spec = objects.spec(node)
    status = objects.status(node)
    raw_taints = spec.get("taints")
    taint_error: str | None = None
    try:
        decode_taints(raw_taints, f"node {name}: spec.taints")
    except ValueError as error:
        taint_error = str(error)
    taints = readable_taints(raw_taints)
    cordoned = spec.get("unschedulable") is True
    provisioner = labels.get(wk.PROVISIONER_NAME) or None
    ready = objects.is_ready(node)
    startup = tuple(startup_taints)
    allocatable, allocatable_error = _resource_list(status, "allocatable", "capacity", name)
    capacity, _ = _resource_list(status, "capacity", "allocatable", name)
    bound = tuple(p for p in pods if not is_terminal(p))
    requests = tuple(requests_of(p) for p in bound)
    price = _price(annotations.get(wk.PRICE_ANNOTATION))
    instance_type = labels.get(wk.INSTANCE_TYPE, "")
    capacity_type = labels.get(wk.CAPACITY_TYPE, "")
    zone = labels.get(wk.ZONE, "")
    if price is None and price_of is not None and provisioner is not None:
        price = price_of(instance_type, capacity_type, zone)
    created = objects.created_at(node)
    launched = objects.launched_at(node)
    raw_nominations = annotations.get(wk.NOMINATIONS_ANNOTATION)
    return StateNode(
        name=name,
        node=node,
        labels=labels,
        provisioner=provisioner,
        instance_type=instance_type,
        capacity_type=capacity_type,
        zone=zone,
        provider_id=objects.provider_id(node),
        taints=taints,
        scheduling_taints=scheduling_taints(
            with_cordon(taints, cordoned), initialized=_initialized(provisioner, ready), startup_taints=startup),
        ready=ready,
        deleting=objects.deleting(node),
        disrupted=is_disrupted(taints),
        cordoned=cordoned,
        allocatable=allocatable,
        capacity=capacity,
        pods=bound,
        pod_requests=requests,
        requested=Resources.sum(requests),
        nominations=nom.decode(raw_nominations if isinstance(raw_nominations, str) else None),
        price=price,
        created_at=created,
        expires_at=launched + ttl_seconds_until_expired
        if launched is not None and ttl_seconds_until_expired is not None else None,
        taint_error=taint_error,
        allocatable_error=allocatable_error,
        startup_taints=startup,
    )


def state_node_of(
    node: WireObject,
    pods: Iterable[WireObject],
    provisioner: Provisioner | None,
    *,
    price_of: PriceLookup | None = None,
    requests_of: RequestsOf = effective_requests,
) -> StateNode | None:
    """:func:`state_node` with the facts of the node's decoded ``provisioner`` (startup taints, expiry TTL)."""
    return state_node(
        node, pods,
        startup_taints=provisioner.spec.startup_taints if provisioner is not None else (),
        ttl_seconds_until_expired=provisioner.spec.ttl_seconds_until_expired if provisioner is not None else None,
        price_of=price_of,
        requests_of=requests_of,
    )


@dataclass(frozen=True)
class _Entry:
    node: WireObject
    pods: tuple[WireObject, ...]
    provisioner: object
    view: StateNode


class NodeViews:
    """The cache of :class:`StateNode` views every reader of one cluster state cache shares.

    :meth:`nodes` answers the views of a whole :class:`~provisioner.state.cluster.Snapshot`
    (name -> view), rebuilding only nodes whose Node, pods or Provisioner object changed
    (see the module docstring); the same snapshot asked twice gets the same mapping. Pods'
    requests are cached by pod object too, so a node that gains one pod re-reads one pod.
    Safe to call from several threads (the extender's rebuild thread, the metrics scrape, the
    provisioning loop): callers never see a half-built mapping, and a view is valid for any
    snapshot holding the same objects.
    """

    def __init__(self, price_of: PriceLookup | None = None) -> None:
        self.price_of = price_of
        self._lock = threading.Lock()
        self._entries: dict[str, _Entry] = {}
        self._requests: dict[str, tuple[object, Resources]] = {}
        self._last: tuple[object, Mapping[str, StateNode]] | None = None

    def __len__(self) -> int:
        """How many node views are cached (those of the latest snapshot asked for)."""
        return len(self._entries)

    def _requests_of(self, pod: Mapping[str, Any]) -> Resources:
        uid = objects.uid(pod)
        cached = self._requests.get(uid)
        if cached is not None and cached[0] is pod:
            return cached[1]
        requests = effective_requests(pod)
        self._requests[uid] = (pod, requests)
        return requests

    def view(self, node: WireObject, snapshot: Snapshot) -> StateNode | None:
        """The view of a Node object that is not (or not so) in ``snapshot``, not cached (a write not seen yet)."""
        provisioner = snapshot.provisioners.get(objects.labels(node).get(wk.PROVISIONER_NAME) or "")
        return state_node_of(node, snapshot.pods_on(objects.name(node)), provisioner,
                             price_of=self.price_of, requests_of=self._requests_of)

    def nodes(self, snapshot: Snapshot) -> Mapping[str, StateNode]:
        """Node name -> :class:`StateNode` for every named Node of ``snapshot``."""
        last = self._last
        if last is not None and last[0] is snapshot:
            return last[1]
        entries = self._entries
        kept: dict[str, _Entry] = {}
        views: dict[str, StateNode] = {}
        provisioners = snapshot.provisioners
        for name, node in snapshot.nodes.items():
            pods = tuple(snapshot.pods_on(name))
            previous = entries.get(name)
            if previous is not None and previous.node is node:  # same object: same label
                provisioner = provisioners.get(previous.view.provisioner or "")
            else:
                provisioner = provisioners.get(objects.labels(node).get(wk.PROVISIONER_NAME) or "")
            if (previous is not None and previous.node is node and previous.provisioner is provisioner
                    and len(previous.pods) == len(pods) and all(a is b for a, b in zip(previous.pods, pods, strict=True))):
                view: StateNode | None = previous.view
            else:
                view = state_node_of(node, pods, provisioner, price_of=self.price_of, requests_of=self._requests_of)
            if view is None:
                continue
            kept[name] = _Entry(node, pods, provisioner, view)
            views[view.name] = view
        with self._lock:
            self._entries = kept
            self._requests = {uid: entry for uid, entry in self._requests.items() if uid in snapshot.pods}
            self._last = (snapshot, views)
        return views
